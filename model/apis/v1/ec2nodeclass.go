package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// EC2NodeClass says how to launch a node on EC2: which subnets, security
// groups and AMI, which IAM identity, user data, disks, tags, instance
// metadata options and kubelet settings. NodePools reference it by name.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ec2nodeclasses,scope=Cluster,categories=millwright,shortName={ec2nc,ec2ncs}
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="Role",type="string",JSONPath=".spec.role",priority=1,description=""
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   EC2NodeClassSpec   `json:"spec"`
	Status EC2NodeClassStatus `json:"status,omitempty"`
}

// EC2NodeClassList is a list of EC2NodeClasses.
// +kubebuilder:object:root=true
type EC2NodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EC2NodeClass `json:"items"`
}

// EC2NodeClassSpec is the launch configuration of an EC2NodeClass.
// +kubebuilder:validation:XValidation:message="must specify exactly one of ['role', 'instanceProfile']",rule="has(self.role) != has(self.instanceProfile)"
// +kubebuilder:validation:XValidation:message="must specify amiFamily if amiSelectorTerms does not contain an alias",rule="self.amiSelectorTerms.exists(x, has(x.alias)) || has(self.amiFamily)",fieldPath=".amiFamily"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Custom' or the family of the alias",rule="!has(self.amiFamily) || self.amiFamily == 'Custom' || !self.amiSelectorTerms.exists(x, has(x.alias)) || self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.split('@')[0] == self.amiFamily.lowerAscii())",fieldPath=".amiFamily"
// +kubebuilder:validation:XValidation:message="capacityReservationSelectorTerms is not supported: Millwright launches no capacity reservations",rule="!has(self.capacityReservationSelectorTerms)",fieldPath=".capacityReservationSelectorTerms"
// +kubebuilder:validation:XValidation:message="placementGroupSelector is not supported: Millwright launches into no placement group",rule="!has(self.placementGroupSelector)",fieldPath=".placementGroupSelector"
// +kubebuilder:validation:XValidation:message="ipPrefixCount is not supported: Millwright assigns no IP prefixes",rule="!has(self.ipPrefixCount)",fieldPath=".ipPrefixCount"
// +kubebuilder:validation:XValidation:message="networkInterfaces is not supported: Millwright launches with the subnet's default network interface",rule="!has(self.networkInterfaces)",fieldPath=".networkInterfaces"
// +kubebuilder:validation:XValidation:message="connectionTracking is not supported: Millwright sets no connection tracking timeouts",rule="!has(self.connectionTracking)",fieldPath=".connectionTracking"
// +kubebuilder:validation:XValidation:message="context is not supported: Millwright passes no EC2 Fleet context",rule="!has(self.context)",fieldPath=".context"
// +kubebuilder:validation:XValidation:message="cpuOptions is not supported: Millwright launches with the instance type's default CPU options",rule="!has(self.cpuOptions)",fieldPath=".cpuOptions"
type EC2NodeClassSpec struct {
	// SubnetSelectorTerms select the subnets nodes launch into. Terms are
	// ORed; the fields of one term are ANDed.
	// +kubebuilder:validation:MinItems:=1
	// +kubebuilder:validation:MaxItems:=30
	// +required
	SubnetSelectorTerms []SubnetSelectorTerm `json:"subnetSelectorTerms"`
	// SecurityGroupSelectorTerms select the security groups of the nodes.
	// Terms are ORed.
	// +kubebuilder:validation:MinItems:=1
	// +kubebuilder:validation:MaxItems:=30
	// +required
	SecurityGroupSelectorTerms []SecurityGroupSelectorTerm `json:"securityGroupSelectorTerms"`
	// AMISelectorTerms select the AMIs. Terms are ORed. An alias term
	// ("al2023@latest") must be the only term.
	// +kubebuilder:validation:XValidation:message="'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",rule="!(self.exists(x, has(x.alias)) && self.size() != 1)"
	// +kubebuilder:validation:MinItems:=1
	// +kubebuilder:validation:MaxItems:=30
	// +required
	AMISelectorTerms []AMISelectorTerm `json:"amiSelectorTerms"`
	// AMIFamily selects the user-data format and default block devices. It
	// may be left out with an alias term (the alias names the family); set
	// with an alias it must match it or be Custom.
	// +kubebuilder:validation:Enum:={AL2,AL2023,Bottlerocket,Custom,Windows2019,Windows2022,Windows2025}
	// +optional
	AMIFamily *string `json:"amiFamily,omitempty"`
	// UserData is merged with what Millwright needs to join the node to the
	// cluster; its format follows the AMI family.
	// +optional
	UserData *string `json:"userData,omitempty"`
	// Role is the IAM role of the nodes; Millwright manages an instance
	// profile for it. Exactly one of role and instanceProfile is set.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="role cannot be empty"
	// +optional
	Role string `json:"role,omitempty"`
	// InstanceProfile is an existing instance profile to launch with instead
	// of a role.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="instanceProfile cannot be empty"
	// +optional
	InstanceProfile *string `json:"instanceProfile,omitempty"`
	// Tags are put on the instances, volumes and launch templates Millwright
	// creates. Keys Millwright or EKS own are rejected.
	// +kubebuilder:validation:MaxProperties=50
	// +kubebuilder:validation:XValidation:message="empty tag keys aren't supported",rule="self.all(k, k != '')"
	// +kubebuilder:validation:XValidation:message="tag keys must be at most 128 characters and values at most 256",rule="self.all(k, size(k) <= 128 && size(self[k]) <= 256)"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching kubernetes.io/cluster/",rule="self.all(k, !k.startsWith('kubernetes.io/cluster/'))"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag: millwright.dev/nodepool, millwright.dev/nodeclaim, millwright.dev/ec2nodeclass and eks:eks-cluster-name are set by Millwright or EKS",rule="self.all(k, !(k in ['millwright.dev/nodepool', 'millwright.dev/nodeclaim', 'millwright.dev/ec2nodeclass', 'eks:eks-cluster-name']))"
	// +kubebuilder:validation:XValidation:message="tag keys starting with 'aws:' are reserved by AWS",rule="self.all(k, !k.startsWith('aws:'))"
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// Kubelet tunes the kubelet of the nodes (every field is written to the
	// family's user data); maxPods, podsPerCore, kubeReserved,
	// systemReserved, evictionHard and evictionSoft also change the
	// allocatable Millwright plans with. Karpenter's other kubelet keys are
	// unknown fields.
	// +kubebuilder:validation:XValidation:message="imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",rule="has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ? self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent : true"
	// +kubebuilder:validation:XValidation:message="evictionSoft key does not have a matching evictionSoftGracePeriod",rule="has(self.evictionSoft) ? self.evictionSoft.all(e, has(self.evictionSoftGracePeriod) && e in self.evictionSoftGracePeriod) : true"
	// +kubebuilder:validation:XValidation:message="evictionSoftGracePeriod key does not have a matching evictionSoft",rule="has(self.evictionSoftGracePeriod) ? self.evictionSoftGracePeriod.all(e, has(self.evictionSoft) && e in self.evictionSoft) : true"
	// +optional
	Kubelet *KubeletConfiguration `json:"kubelet,omitempty"`
	// BlockDeviceMappings are the disks of the nodes; unset means the AMI
	// family's default root volume.
	// +kubebuilder:validation:MaxItems:=50
	// +optional
	BlockDeviceMappings []BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
	// InstanceStorePolicy says what to do with instance-store disks: RAID0
	// stripes them and puts the kubelet and container runtime state on the
	// array (nodeadm's localStorage strategy on AL2023, bootstrap.sh
	// --local-disks raid0 on AL2, the ephemeral-storage bootstrap command
	// on Bottlerocket; refused for Windows). Unset leaves them alone.
	// +optional
	InstanceStorePolicy *InstanceStorePolicy `json:"instanceStorePolicy,omitempty"`
	// AssociatePublicIPAddress overrides the subnet's public-IP setting.
	// +optional
	AssociatePublicIPAddress *bool `json:"associatePublicIPAddress,omitempty"`
	// DetailedMonitoring turns on 1-minute CloudWatch metrics.
	// +optional
	DetailedMonitoring *bool `json:"detailedMonitoring,omitempty"`
	// MetadataOptions configure the instance metadata service. The default
	// requires IMDSv2 tokens with a hop limit of 1, so pods cannot reach the
	// node's credentials.
	// +kubebuilder:default={"httpEndpoint":"enabled","httpProtocolIPv6":"disabled","httpPutResponseHopLimit":1,"httpTokens":"required"}
	// +optional
	MetadataOptions *MetadataOptions `json:"metadataOptions,omitempty"`

	// Karpenter's fields Millwright does not implement, declared only to
	// be refused (UnsupportedEC2NodeClassFields).

	// CapacityReservationSelectorTerms is Karpenter's; a class that sets it is refused.
	// +kubebuilder:validation:items:Type=object
	// +optional
	CapacityReservationSelectorTerms []runtime.RawExtension `json:"capacityReservationSelectorTerms,omitempty"`
	// PlacementGroupSelector is Karpenter's; a class that sets it is refused.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	PlacementGroupSelector *runtime.RawExtension `json:"placementGroupSelector,omitempty"`
	// IPPrefixCount is Karpenter's; a class that sets it is refused.
	// +optional
	IPPrefixCount *int32 `json:"ipPrefixCount,omitempty"`
	// NetworkInterfaces is Karpenter's; a class that sets it is refused.
	// +kubebuilder:validation:items:Type=object
	// +optional
	NetworkInterfaces []runtime.RawExtension `json:"networkInterfaces,omitempty"`
	// ConnectionTracking is Karpenter's; a class that sets it is refused.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	ConnectionTracking *runtime.RawExtension `json:"connectionTracking,omitempty"`
	// Context is Karpenter's; a class that sets it is refused.
	// +optional
	Context *string `json:"context,omitempty"`
	// CPUOptions is Karpenter's; a class that sets it is refused.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	CPUOptions *runtime.RawExtension `json:"cpuOptions,omitempty"`
}

// SubnetSelectorTerm selects subnets by tags or by id.
// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id']",rule="has(self.tags) || has(self.id)"
// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term",rule="!(has(self.id) && has(self.tags))"
type SubnetSelectorTerm struct {
	// Tags select subnets carrying all of them; "*" matches any value.
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties:=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID is a subnet id.
	// +kubebuilder:validation:Pattern:="^subnet-[0-9a-z]+$"
	// +optional
	ID string `json:"id,omitempty"`
}

// SecurityGroupSelectorTerm selects security groups by tags, id or name.
// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'name']",rule="has(self.tags) || has(self.id) || has(self.name)"
// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",rule="!(has(self.id) && (has(self.tags) || has(self.name)))"
// +kubebuilder:validation:XValidation:message="'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",rule="!(has(self.name) && (has(self.tags) || has(self.id)))"
type SecurityGroupSelectorTerm struct {
	// Tags select groups carrying all of them; "*" matches any value.
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties:=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID is a security group id.
	// +kubebuilder:validation:Pattern:="^sg-[0-9a-z]+$"
	// +optional
	ID string `json:"id,omitempty"`
	// Name is the group's name (the GroupName field, not the Name tag).
	// +optional
	Name string `json:"name,omitempty"`
}

// AMISelectorTerm selects AMIs by alias, id, name (with owner), tags or an
// SSM parameter holding an AMI id.
// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",rule="has(self.tags) || has(self.id) || has(self.name) || has(self.alias) || has(self.ssmParameter)"
// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",rule="!(has(self.id) && (has(self.alias) || has(self.tags) || has(self.name) || has(self.owner) || has(self.ssmParameter)))"
// +kubebuilder:validation:XValidation:message="'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",rule="!(has(self.alias) && (has(self.id) || has(self.tags) || has(self.name) || has(self.owner) || has(self.ssmParameter)))"
// +kubebuilder:validation:XValidation:message="'ssmParameter' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",rule="!(has(self.ssmParameter) && (has(self.id) || has(self.alias) || has(self.tags) || has(self.name) || has(self.owner)))"
type AMISelectorTerm struct {
	// Alias selects an EKS-optimized AMI as "family@version": family is one
	// of al2, al2023, bottlerocket, windows2019, windows2022, windows2025;
	// version is "latest" or a release: al2023@v20240807, al2@v20240807,
	// bottlerocket@v1.20.3, windows2022@v20250613 (the release date in the
	// Windows AMI's name, Windows_Server-2022-English-Core-EKS_Optimized-1.33-2025.06.13).
	// +kubebuilder:validation:MaxLength=30
	// +kubebuilder:validation:XValidation:message="'alias' is improperly formatted, must match the format 'family@version'",rule="self.matches('^[a-zA-Z0-9]+@.+$')"
	// +kubebuilder:validation:XValidation:message="family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'",rule="self.split('@')[0] in ['al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025']"
	// +kubebuilder:validation:XValidation:message="windows versions must be 'latest' or a release date 'vYYYYMMDD'",rule="self.split('@')[0] in ['windows2019', 'windows2022', 'windows2025'] ? (self.split('@')[1] == 'latest' || self.split('@')[1].matches('^v[0-9]{8}$')) : true"
	// +optional
	Alias string `json:"alias,omitempty"`
	// Tags select AMIs carrying all of them; "*" matches any value.
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties:=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID is an AMI id.
	// +kubebuilder:validation:Pattern:="^ami-[0-9a-z]+$"
	// +optional
	ID string `json:"id,omitempty"`
	// Name is the AMI name (the Name field, not the Name tag); may contain
	// wildcards.
	// +optional
	Name string `json:"name,omitempty"`
	// Owner is an AWS account id, "self", "amazon" or "aws-marketplace";
	// it narrows a name or tags term.
	// +optional
	Owner string `json:"owner,omitempty"`
	// SSMParameter is the name (or ARN) of an SSM parameter whose value is
	// an AMI id, e.g. the public
	// /aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	SSMParameter string `json:"ssmParameter,omitempty"`
}

// AMI families.
const (
	AMIFamilyAL2          = "AL2"
	AMIFamilyAL2023       = "AL2023"
	AMIFamilyBottlerocket = "Bottlerocket"
	AMIFamilyCustom       = "Custom"
	AMIFamilyWindows2019  = "Windows2019"
	AMIFamilyWindows2022  = "Windows2022"
	AMIFamilyWindows2025  = "Windows2025"
)

// SupportedAMIFamilies lists every AMIFamily value.
var SupportedAMIFamilies = []string{
	AMIFamilyAL2, AMIFamilyAL2023, AMIFamilyBottlerocket, AMIFamilyCustom,
	AMIFamilyWindows2019, AMIFamilyWindows2022, AMIFamilyWindows2025,
}

// KubeletConfiguration is the subset of the kubelet's configuration an
// EC2NodeClass may set. Names and meanings follow
// k8s.io/kubelet/config/v1beta1.
type KubeletConfiguration struct {
	// ClusterDNS lists the cluster DNS server addresses.
	// +optional
	ClusterDNS []string `json:"clusterDNS,omitempty"`
	// MaxPods overrides the pods-per-node limit the instance type implies.
	// +kubebuilder:validation:Minimum:=0
	// +optional
	MaxPods *int32 `json:"maxPods,omitempty"`
	// PodsPerCore caps pods at this many per vCPU (and never above maxPods).
	// +kubebuilder:validation:Minimum:=0
	// +optional
	PodsPerCore *int32 `json:"podsPerCore,omitempty"`
	// SystemReserved is held back for OS daemons: cpu, memory,
	// ephemeral-storage, pid.
	// +kubebuilder:validation:XValidation:message="valid keys for systemReserved are ['cpu','memory','ephemeral-storage','pid']",rule="self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')"
	// +kubebuilder:validation:XValidation:message="systemReserved values must be non-negative resource quantities",rule="self.all(x, isQuantity(self[x]) && !quantity(self[x]).isLessThan(quantity('0')))"
	// +optional
	SystemReserved map[string]string `json:"systemReserved,omitempty"`
	// KubeReserved is held back for Kubernetes daemons: cpu, memory,
	// ephemeral-storage, pid. Unset means the kubelet's defaults for the
	// instance type.
	// +kubebuilder:validation:XValidation:message="valid keys for kubeReserved are ['cpu','memory','ephemeral-storage','pid']",rule="self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')"
	// +kubebuilder:validation:XValidation:message="kubeReserved values must be non-negative resource quantities",rule="self.all(x, isQuantity(self[x]) && !quantity(self[x]).isLessThan(quantity('0')))"
	// +optional
	KubeReserved map[string]string `json:"kubeReserved,omitempty"`
	// EvictionHard are the hard eviction thresholds, per signal, as a
	// quantity ("100Mi") or a percentage ("10%").
	// +kubebuilder:validation:XValidation:message="valid keys for evictionHard are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"
	// +kubebuilder:validation:XValidation:message="evictionHard values must be a percentage or a non-negative quantity",rule="self.all(x, self[x].matches('^[0-9]+([.][0-9]+)?%$') || (isQuantity(self[x]) && !quantity(self[x]).isLessThan(quantity('0'))))"
	// +optional
	EvictionHard map[string]string `json:"evictionHard,omitempty"`
	// EvictionSoft are the soft eviction thresholds; each needs a grace
	// period in evictionSoftGracePeriod.
	// +kubebuilder:validation:XValidation:message="valid keys for evictionSoft are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"
	// +kubebuilder:validation:XValidation:message="evictionSoft values must be a percentage or a non-negative quantity",rule="self.all(x, self[x].matches('^[0-9]+([.][0-9]+)?%$') || (isQuantity(self[x]) && !quantity(self[x]).isLessThan(quantity('0'))))"
	// +optional
	EvictionSoft map[string]string `json:"evictionSoft,omitempty"`
	// EvictionSoftGracePeriod is how long each soft threshold must be
	// crossed before the kubelet evicts ("1m30s").
	// +kubebuilder:validation:XValidation:message="valid keys for evictionSoftGracePeriod are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"
	// +kubebuilder:validation:XValidation:message="evictionSoftGracePeriod values must be durations in h, m and s units",rule="self.all(x, self[x].matches('^([0-9]+(s|m|h))+$'))"
	// +optional
	EvictionSoftGracePeriod map[string]Duration `json:"evictionSoftGracePeriod,omitempty"`
	// EvictionMaxPodGracePeriod caps, in seconds, the grace period pods get
	// when evicted for a soft threshold.
	// +kubebuilder:validation:Minimum:=0
	// +optional
	EvictionMaxPodGracePeriod *int32 `json:"evictionMaxPodGracePeriod,omitempty"`
	// ImageGCHighThresholdPercent is the disk usage above which image
	// garbage collection always runs; above imageGCLowThresholdPercent.
	// +kubebuilder:validation:Minimum:=0
	// +kubebuilder:validation:Maximum:=100
	// +optional
	ImageGCHighThresholdPercent *int32 `json:"imageGCHighThresholdPercent,omitempty"`
	// ImageGCLowThresholdPercent is the disk usage garbage collection frees
	// down to.
	// +kubebuilder:validation:Minimum:=0
	// +kubebuilder:validation:Maximum:=100
	// +optional
	ImageGCLowThresholdPercent *int32 `json:"imageGCLowThresholdPercent,omitempty"`
	// CPUCFSQuota enforces CPU limits with CFS quota.
	// +optional
	CPUCFSQuota *bool `json:"cpuCFSQuota,omitempty"`
}

// Kubelet map keys the API accepts.
var (
	SupportedReservedResources = []string{"cpu", "memory", "ephemeral-storage", "pid"}
	SupportedEvictionSignals   = []string{"memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "pid.available"}
)

// MetadataOptions configure the EC2 instance metadata service of the nodes.
type MetadataOptions struct {
	// HTTPEndpoint turns the metadata endpoint on ("enabled") or off.
	// +kubebuilder:default=enabled
	// +kubebuilder:validation:Enum:={enabled,disabled}
	// +optional
	HTTPEndpoint *string `json:"httpEndpoint,omitempty"`
	// HTTPProtocolIPv6 turns the IPv6 metadata endpoint on or off
	// ("disabled").
	// +kubebuilder:default=disabled
	// +kubebuilder:validation:Enum:={enabled,disabled}
	// +optional
	HTTPProtocolIPv6 *string `json:"httpProtocolIPv6,omitempty"`
	// HTTPPutResponseHopLimit is how many network hops the token response may
	// travel, 1-64. The default 1 keeps it from reaching pods on an overlay
	// network.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=64
	// +optional
	HTTPPutResponseHopLimit *int64 `json:"httpPutResponseHopLimit,omitempty"`
	// HTTPTokens "required" (the default) enforces IMDSv2 session tokens;
	// "optional" also allows IMDSv1.
	// +kubebuilder:default=required
	// +kubebuilder:validation:Enum:={required,optional}
	// +optional
	HTTPTokens *string `json:"httpTokens,omitempty"`
}

// Metadata option values.
const (
	MetadataEndpointEnabled  = "enabled"
	MetadataEndpointDisabled = "disabled"
	MetadataTokensRequired   = "required"
	MetadataTokensOptional   = "optional"
	// DefaultHopLimit keeps the IMDS token response on the node itself.
	DefaultHopLimit int64 = 1
)

// BlockDeviceMapping is one disk of a node.
type BlockDeviceMapping struct {
	// DeviceName is the device path, e.g. /dev/xvda.
	// +optional
	DeviceName *string `json:"deviceName,omitempty"`
	// EBS describes the volume.
	// +kubebuilder:validation:XValidation:message="snapshotID or volumeSize must be defined",rule="has(self.snapshotID) || has(self.volumeSize)"
	// +optional
	EBS *BlockDevice `json:"ebs,omitempty"`
	// RootVolume is Karpenter's mark of the disk that holds the kubelet's
	// root directory (its size becomes the node's ephemeral storage).
	// Millwright does not size ephemeral storage from the mappings, so
	// true is refused (UnsupportedEC2NodeClassFields).
	// +kubebuilder:validation:XValidation:message="rootVolume is not supported: Millwright plans and registers every node with the default 20Gi of ephemeral storage, whatever the block device mappings; remove it",rule="!self"
	// +optional
	RootVolume bool `json:"rootVolume,omitempty"`
}

// BlockDevice is an EBS volume.
// +kubebuilder:validation:XValidation:message="volumeInitializationRate is not supported: Millwright sets no EBS volume initialization rate",rule="!has(self.volumeInitializationRate)",fieldPath=".volumeInitializationRate"
type BlockDevice struct {
	// DeleteOnTermination deletes the volume with the instance.
	// +optional
	DeleteOnTermination *bool `json:"deleteOnTermination,omitempty"`
	// Encrypted encrypts the volume.
	// +optional
	Encrypted *bool `json:"encrypted,omitempty"`
	// IOPS provisioned for io1, io2 and gp3 volumes.
	// +optional
	IOPS *int64 `json:"iops,omitempty"`
	// KMSKeyID is the KMS key (id, alias or ARN) that encrypts the volume.
	// +optional
	KMSKeyID *string `json:"kmsKeyID,omitempty"`
	// SnapshotID is the EBS snapshot the volume starts from.
	// +optional
	SnapshotID *string `json:"snapshotID,omitempty"`
	// Throughput in MiB/s for gp3 volumes.
	// +optional
	Throughput *int64 `json:"throughput,omitempty"`
	// Karpenter spells the size range as one long pattern; ours is a unit
	// pattern plus a bound, which the Go check can state identically.

	// VolumeSize in whole Gi, G, Ti or T ("100Gi"), at most 64Ti (the EBS
	// maximum).
	// +kubebuilder:validation:Pattern:="^[1-9][0-9]{0,5}(Gi|G|Ti|T)$"
	// +kubebuilder:validation:XValidation:message="volumeSize must be at most 64Ti",rule="!isQuantity(self) || quantity(self).compareTo(quantity('64Ti')) <= 0"
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type:=string
	// +optional
	VolumeSize *resource.Quantity `json:"volumeSize,omitempty"`
	// VolumeType is the EBS volume type.
	// +kubebuilder:validation:Enum:={standard,io1,io2,gp2,sc1,st1,gp3}
	// +optional
	VolumeType *string `json:"volumeType,omitempty"`
	// VolumeInitializationRate is Karpenter's, declared only to be refused
	// (UnsupportedEC2NodeClassFields).
	// +optional
	VolumeInitializationRate *int32 `json:"volumeInitializationRate,omitempty"`
}

// SupportedVolumeTypes lists every BlockDevice.VolumeType value.
var SupportedVolumeTypes = []string{"standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"}

// InstanceStorePolicy says what to do with instance-store disks.
// +kubebuilder:validation:Enum:={RAID0}
type InstanceStorePolicy string

// InstanceStorePolicyRAID0 stripes all instance-store NVMe disks into one
// array used for the kubelet and container runtime state.
const InstanceStorePolicyRAID0 InstanceStorePolicy = "RAID0"
