package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeClaim is one node Millwright launched, as `kubectl get nodeclaims`
// shows it: what it was asked to be (spec), what it is (status: instance,
// Node, image, capacity, lifecycle conditions). Each NodeClaim mirrors one
// node workflow (node/<cluster>/<name>), which owns the node's lifecycle:
// the workflow's activities write the NodeClaim at each phase, a NodeClaim
// deleted by hand while its node lives is written again, and nothing reads
// it to decide anything. Deleting it (`kubectl delete nodeclaim NAME`)
// drains and terminates the node, as deleting its Node does; its finalizer
// holds it until the instance is gone.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodeclaims,scope=Cluster,categories=millwright,shortName=nc
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".metadata.labels.node\\.kubernetes\\.io/instance-type",description=""
// +kubebuilder:printcolumn:name="Capacity",type="string",JSONPath=".metadata.labels.millwright\\.dev/capacity-type",description=""
// +kubebuilder:printcolumn:name="Zone",type="string",JSONPath=".metadata.labels.topology\\.kubernetes\\.io/zone",description=""
// +kubebuilder:printcolumn:name="Node",type="string",JSONPath=".status.nodeName",description=""
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="ImageID",type="string",JSONPath=".status.imageID",priority=1,description=""
// +kubebuilder:printcolumn:name="ID",type="string",JSONPath=".status.providerID",priority=1,description=""
// +kubebuilder:printcolumn:name="NodePool",type="string",JSONPath=".metadata.labels.millwright\\.dev/nodepool",priority=1,description=""
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.nodeClassRef.name",priority=1,description=""
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase",priority=1,description=""
// +kubebuilder:printcolumn:name="Drifted",type="string",JSONPath=".status.conditions[?(@.type==\"Drifted\")].status",priority=1,description=""
type NodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec NodeClaimSpec `json:"spec,omitempty"`
	// +optional
	Status NodeClaimStatus `json:"status,omitempty"`
}

// NodeClaimList is a list of NodeClaims.
// +kubebuilder:object:root=true
type NodeClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeClaim `json:"items"`
}

// NodeClaimSpec is what the node was launched to be: the pool template's
// taints and the requirements the planner narrowed it to.
type NodeClaimSpec struct {
	// Taints are put on the node.
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// StartupTaints were put on the node at launch, for something on the
	// node to remove.
	// +kubebuilder:validation:MaxItems=50
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements the instance satisfies (instance types, zones, capacity
	// types, the pool's own). Written by Millwright only, so they carry
	// none of the NodePool's rules on requirement keys.
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Requirements []corev1.NodeSelectorRequirement `json:"requirements,omitempty"`
	// Resources is Karpenter's field for the summed requests of the pods
	// the node was launched for. Millwright does not write it (a value
	// written by someone else is kept).
	// +optional
	Resources NodeClaimResources `json:"resources,omitempty"`
	// NodeClassRef is the EC2NodeClass the instance was launched with.
	// +optional
	NodeClassRef *NodeClassReference `json:"nodeClassRef,omitempty"`
	// ExpireAfter is the node's lifetime, from the pool's template.
	// +optional
	ExpireAfter DurationOrNever `json:"expireAfter,omitempty"`
}

// NodeClaimResources are the resources a node claim asked for.
type NodeClaimResources struct {
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// Condition types of a NodeClaim's status (Karpenter's, plus Disrupted;
// Ready is ConditionTypeReady).
const (
	// ConditionTypeLaunched: the instance exists.
	ConditionTypeLaunched = "Launched"
	// ConditionTypeRegistered: its Node joined and was adopted.
	ConditionTypeRegistered = "Registered"
	// ConditionTypeInitialized: the Node is Ready, its startup taints are
	// gone and its extended resources allocatable.
	ConditionTypeInitialized = "Initialized"
	// ConditionTypeDrifted: the node no longer matches its pool or class
	// (the reason is the drift kind, AMIDrift...; removed when it matches
	// again).
	ConditionTypeDrifted = "Drifted"
	// ConditionTypeDisruptionReason: a disruption command holds the node
	// and has tainted it (the reason is the command's: Empty,
	// Underutilized, Drifted, Unhealthy; removed when the command releases
	// it).
	ConditionTypeDisruptionReason = "DisruptionReason"
	// ConditionTypeDrained: its pods were evicted.
	ConditionTypeDrained = "Drained"
	// ConditionTypeInstanceTerminating: the instance is being terminated.
	ConditionTypeInstanceTerminating = "InstanceTerminating"
	// ConditionTypeDisrupted: the node is leaving (the reason says why).
	ConditionTypeDisrupted = "Disrupted"
)

// NodeClaimStatus is what the node workflow knows about the node.
type NodeClaimStatus struct {
	// Phase is the node workflow's phase (Launching, Registering,
	// Initializing, Ready, Draining, Terminating, Terminated).
	// +optional
	Phase string `json:"phase,omitempty"`
	// PhaseSince is when the node entered Phase (workflow time): how long
	// it has been there, and what a phase's duration is measured from. It
	// is status, not an annotation, so that recording a new phase is one
	// status write.
	// +optional
	PhaseSince *metav1.MicroTime `json:"phaseSince,omitempty"`
	// NodeName is the name of the node's Node.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// ProviderID is the instance's provider ID (aws:///zone/instance-id).
	// +optional
	ProviderID string `json:"providerID,omitempty"`
	// ImageID is the AMI the instance runs.
	// +optional
	ImageID string `json:"imageID,omitempty"`
	// Capacity is the instance type's capacity.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Allocatable is what pods may use: the Node's once registered, the
	// instance type's estimate before.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// Conditions are the lifecycle steps reached (Launched, Registered,
	// Initialized, Drained, InstanceTerminating, Disrupted), Ready (True
	// when every step up to Initialized is and the node is not leaving),
	// and while they hold Drifted (reason: what drifted) and
	// DisruptionReason (a disruption command holds the node).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
