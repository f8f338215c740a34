package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of an EC2NodeClass's status, besides ConditionTypeReady
// and ConditionTypeValidationSucceeded.
const (
	ConditionTypeSubnetsReady         = "SubnetsReady"
	ConditionTypeSecurityGroupsReady  = "SecurityGroupsReady"
	ConditionTypeAMIsReady            = "AMIsReady"
	ConditionTypeInstanceProfileReady = "InstanceProfileReady"
)

// EC2NodeClassStatus is what the selectors resolved to.
type EC2NodeClassStatus struct {
	// Subnets the subnet selector terms currently match.
	// +optional
	Subnets []Subnet `json:"subnets,omitempty"`
	// SecurityGroups the security group selector terms currently match.
	// +optional
	SecurityGroups []SecurityGroup `json:"securityGroups,omitempty"`
	// AMIs the AMI selector terms currently match, with the instance-type
	// requirements each one fits (architecture, GPU...).
	// +optional
	AMIs []AMI `json:"amis,omitempty"`
	// InstanceProfile is the instance profile nodes launch with: the one
	// given, or the one Millwright manages for the role.
	// +optional
	InstanceProfile string `json:"instanceProfile,omitempty"`
	// Conditions are the class's health and readiness signals.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Subnet is a resolved subnet.
type Subnet struct {
	// ID of the subnet.
	// +required
	ID string `json:"id"`
	// Zone is the availability zone name, e.g. us-east-1a.
	// +required
	Zone string `json:"zone"`
	// ZoneID is the availability zone id, e.g. use1-az1.
	// +optional
	ZoneID string `json:"zoneID,omitempty"`
}

// SecurityGroup is a resolved security group.
type SecurityGroup struct {
	// ID of the security group.
	// +required
	ID string `json:"id"`
	// Name of the security group.
	// +optional
	Name string `json:"name,omitempty"`
}

// AMI is a resolved AMI.
type AMI struct {
	// ID of the AMI.
	// +required
	ID string `json:"id"`
	// Name of the AMI.
	// +optional
	Name string `json:"name,omitempty"`
	// Deprecated is true when AWS has deprecated the AMI; a deprecated AMI
	// is chosen only when no current AMI of the same architecture (and
	// variant) matches.
	// +optional
	Deprecated bool `json:"deprecated,omitempty"`
	// Requirements an instance type must meet to boot this AMI.
	// +required
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
}
