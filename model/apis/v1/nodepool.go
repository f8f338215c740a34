package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePool describes a family of nodes Millwright may launch for pending
// pods: what they may look like (template), how they may be taken away again
// (disruption), how many resources the pool may hold (limits), a warm minimum
// (minNodes) and its priority among pools (weight). Its name becomes the
// value of the millwright.dev/nodepool node label, so it is at most 63
// characters.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodepools,scope=Cluster,categories=millwright
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.template.spec.nodeClassRef.name",description=""
// +kubebuilder:printcolumn:name="Nodes",type="string",JSONPath=".status.nodes",description=""
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="Weight",type="integer",JSONPath=".spec.weight",priority=1,description=""
// +kubebuilder:printcolumn:name="MinNodes",type="integer",JSONPath=".spec.minNodes",priority=1,description=""
// +kubebuilder:printcolumn:name="CPU",type="string",JSONPath=".status.resources.cpu",priority=1,description=""
// +kubebuilder:printcolumn:name="Memory",type="string",JSONPath=".status.resources.memory",priority=1,description=""
// +kubebuilder:validation:XValidation:message="metadata.name must be at most 63 characters: it becomes the millwright.dev/nodepool label value",rule="size(self.metadata.name) <= 63"
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   NodePoolSpec   `json:"spec"`
	Status NodePoolStatus `json:"status,omitempty"`
}

// NodePoolList is a list of NodePools.
// +kubebuilder:object:root=true
type NodePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePool `json:"items"`
}

// NodePoolSpec is the desired state of a NodePool.
// +kubebuilder:validation:XValidation:message="replicas is not supported: Millwright has no static-capacity NodePools (spec.minNodes keeps a warm minimum)",rule="!has(self.replicas)",fieldPath=".replicas"
// +kubebuilder:validation:XValidation:message="minNodes must not exceed limits.nodes",rule="!has(self.minNodes) || !has(self.limits) || !('nodes' in self.limits) || !quantity(string(self.limits['nodes'])).isLessThan(quantity('0').add(self.minNodes))",fieldPath=".minNodes"
type NodePoolSpec struct {
	// Template describes the nodes this pool launches. Nodes are usually
	// narrower than the template: a pod's own constraints pick among the
	// possibilities the template allows.
	// +required
	Template NodeClaimTemplate `json:"template"`
	// Disruption says when Millwright may take this pool's nodes away.
	// +kubebuilder:default:={consolidateAfter: "0s"}
	// +optional
	Disruption Disruption `json:"disruption"`
	// Limits cap the sum of the capacity of the pool's nodes, per resource
	// (cpu, memory, nvidia.com/gpu, ... and "nodes" for the node count).
	// Millwright launches nothing that would cross a limit.
	// +optional
	Limits Limits `json:"limits,omitempty"`
	// Weight orders pools: a higher weight is tried first. Unset counts as 0.
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=100
	// +optional
	Weight *int32 `json:"weight,omitempty"`
	// MinNodes is a warm minimum: Millwright keeps at least this many nodes
	// in the pool even with nothing pending, and consolidation does not take
	// it below. It must not exceed limits.nodes when both are set.
	// +kubebuilder:validation:Minimum:=0
	// +optional
	MinNodes *int32 `json:"minNodes,omitempty"`
	// Replicas is Karpenter's static-capacity mode, declared only to be
	// refused (UnsupportedNodePoolFields).
	// +optional
	Replicas *int64 `json:"replicas,omitempty"`
}

// NodeClaimTemplate is the shape of every node the pool launches.
type NodeClaimTemplate struct {
	// Labels and annotations for the nodes.
	TemplateMetadata `json:"metadata,omitempty"`
	// +required
	Spec NodeClaimTemplateSpec `json:"spec"`
}

// TemplateMetadata is the part of object metadata a template may set.
type TemplateMetadata struct {
	// Label values are checked by a schema pattern crdpatch adds: markers
	// cannot reach map values.

	// Labels are put on every node the pool launches. Keys in the
	// millwright.dev domain are reserved except the well-known ones, and
	// kubernetes.io/hostname and millwright.dev/nodepool are never allowed.
	// +kubebuilder:validation:MaxProperties=100
	// +kubebuilder:validation:XValidation:message="label keys must be qualified names: an optional DNS subdomain prefix and '/', then at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric",rule="self.all(k, !format.qualifiedName().validate(k).hasValue())"
	// +kubebuilder:validation:XValidation:message="label domain 'millwright.dev' is restricted",rule="self.all(k, !k.matches('^([^/]*[.])?millwright[.]dev/') || k in ['millwright.dev/nodepool', 'millwright.dev/capacity-type', 'millwright.dev/ec2nodeclass', 'millwright.dev/instance-category', 'millwright.dev/instance-family', 'millwright.dev/instance-generation', 'millwright.dev/instance-size', 'millwright.dev/instance-cpu', 'millwright.dev/instance-cpu-manufacturer', 'millwright.dev/instance-memory', 'millwright.dev/instance-hypervisor', 'millwright.dev/instance-encryption-in-transit-supported', 'millwright.dev/instance-capability-flex', 'millwright.dev/instance-cpu-sustained-clock-speed-mhz', 'millwright.dev/instance-local-nvme', 'millwright.dev/instance-network-bandwidth', 'millwright.dev/instance-ebs-bandwidth', 'millwright.dev/instance-gpu-name', 'millwright.dev/instance-gpu-manufacturer', 'millwright.dev/instance-gpu-count', 'millwright.dev/instance-gpu-memory', 'millwright.dev/instance-accelerator-name', 'millwright.dev/instance-accelerator-manufacturer', 'millwright.dev/instance-accelerator-count'])"
	// +kubebuilder:validation:XValidation:message="label 'millwright.dev/nodepool' is restricted",rule="self.all(k, k != 'millwright.dev/nodepool')"
	// +kubebuilder:validation:XValidation:message="label 'kubernetes.io/hostname' is restricted",rule="self.all(k, k != 'kubernetes.io/hostname')"
	// +optional
	// +mapType=atomic
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are put on every node the pool launches.
	// +optional
	// +mapType=granular
	Annotations map[string]string `json:"annotations,omitempty"`
}

// NodeClaimTemplateSpec is what a node of the pool must be and carry.
// +kubebuilder:validation:XValidation:message="taints must not repeat a key and effect pair",rule="!has(self.taints) || self.taints.all(x, self.taints.exists_one(y, y.key == x.key && y.effect == x.effect))",fieldPath=".taints"
// +kubebuilder:validation:XValidation:message="startupTaints must not repeat a key and effect pair",rule="!has(self.startupTaints) || self.startupTaints.all(x, self.startupTaints.exists_one(y, y.key == x.key && y.effect == x.effect))",fieldPath=".startupTaints"
// +kubebuilder:validation:XValidation:message="startupTaints must not repeat a key and effect pair of taints",rule="!has(self.taints) || !has(self.startupTaints) || !self.startupTaints.exists(x, self.taints.exists(y, y.key == x.key && y.effect == x.effect))",fieldPath=".startupTaints"
type NodeClaimTemplateSpec struct {
	// Taints are put on every node; pods must tolerate them to land there.
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:XValidation:message="taint keys must be qualified names",rule="self.all(t, !format.qualifiedName().validate(t.key).hasValue())"
	// +kubebuilder:validation:XValidation:message="taint values must be valid label values",rule="self.all(t, !has(t.value) || !format.labelValue().validate(t.value).hasValue())"
	// +kubebuilder:validation:XValidation:message="taint effect must be one of NoSchedule, PreferNoSchedule, NoExecute",rule="self.all(t, t.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])"
	// +optional
	// +listType=atomic
	Taints []corev1.Taint `json:"taints,omitempty"`
	// StartupTaints are put on every node at launch and are expected to be
	// removed soon after by something on the node (typically a DaemonSet).
	// Pods need not tolerate them for Millwright to provision for them.
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:XValidation:message="taint keys must be qualified names",rule="self.all(t, !format.qualifiedName().validate(t.key).hasValue())"
	// +kubebuilder:validation:XValidation:message="taint values must be valid label values",rule="self.all(t, !has(t.value) || !format.labelValue().validate(t.value).hasValue())"
	// +kubebuilder:validation:XValidation:message="taint effect must be one of NoSchedule, PreferNoSchedule, NoExecute",rule="self.all(t, t.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])"
	// +optional
	// +listType=atomic
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements constrain the labels of the nodes (instance type, zone,
	// architecture, capacity type, ...). They are ANDed.
	// +kubebuilder:validation:MaxItems:=100
	// +required
	// +listType=atomic
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`
	// NodeClassRef points at the EC2NodeClass that says how to launch the
	// nodes (AMI, subnets, security groups, IAM role...).
	// +kubebuilder:validation:XValidation:rule="self.group == oldSelf.group",message="nodeClassRef.group is immutable"
	// +kubebuilder:validation:XValidation:rule="self.kind == oldSelf.kind",message="nodeClassRef.kind is immutable"
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`
	// TerminationGracePeriod bounds how long draining a node may take, from
	// the start of its deletion. Past it, remaining pods are deleted even if
	// PDBs or the do-not-disrupt annotation block eviction. Unset means wait
	// for ever.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +optional
	TerminationGracePeriod *Duration `json:"terminationGracePeriod,omitempty"`
	// ExpireAfter is how long a node may live, from its launch, before
	// Millwright replaces it. "Never" switches expiry off.
	// +kubebuilder:default:="720h"
	// +optional
	ExpireAfter DurationOrNever `json:"expireAfter,omitempty"`
}

// Operators a requirement may use.
var SupportedRequirementOperators = []corev1.NodeSelectorOperator{
	corev1.NodeSelectorOpIn,
	corev1.NodeSelectorOpNotIn,
	corev1.NodeSelectorOpExists,
	corev1.NodeSelectorOpDoesNotExist,
	corev1.NodeSelectorOpGt,
	corev1.NodeSelectorOpLt,
}

// NodeSelectorRequirementWithMinValues is a Kubernetes node selector
// requirement (key, operator, values) with an optional minValues: the least
// number of distinct values of the key the launch options must span, so a
// pool keeps e.g. at least 5 instance types to fall back on.
// +kubebuilder:validation:XValidation:message="requirements with operator 'In' must have a value defined",rule="self.operator != 'In' || (has(self.values) && size(self.values) > 0)",fieldPath=".values"
// +kubebuilder:validation:XValidation:message="requirements with operator 'Gt' or 'Lt' must have a single non-negative integer value",rule="!(self.operator in ['Gt', 'Lt']) || (has(self.values) && size(self.values) == 1 && self.values[0].matches('^[0-9]{1,18}$'))",fieldPath=".values"
// +kubebuilder:validation:XValidation:message="requirements with 'minValues' must have at least that many values specified in the 'values' field",rule="!has(self.minValues) || self.operator != 'In' || (has(self.values) && size(self.values) >= self.minValues)",fieldPath=".minValues"
// +kubebuilder:validation:XValidation:message="a requirement on millwright.dev/capacity-type with operator 'In' must allow 'spot' or 'on-demand'",rule="self.key != 'millwright.dev/capacity-type' || self.operator != 'In' || !has(self.values) || self.values.exists(v, v in ['spot', 'on-demand'])",fieldPath=".values"
type NodeSelectorRequirementWithMinValues struct {
	// Key is the node label the requirement is about.
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:message="key must be a qualified name: an optional DNS subdomain prefix and '/', then at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric",rule="!format.qualifiedName().validate(self).hasValue()"
	// +kubebuilder:validation:XValidation:message="label domain 'millwright.dev' is restricted",rule="!self.matches('^([^/]*[.])?millwright[.]dev/') || self in ['millwright.dev/nodepool', 'millwright.dev/capacity-type', 'millwright.dev/ec2nodeclass', 'millwright.dev/instance-category', 'millwright.dev/instance-family', 'millwright.dev/instance-generation', 'millwright.dev/instance-size', 'millwright.dev/instance-cpu', 'millwright.dev/instance-cpu-manufacturer', 'millwright.dev/instance-memory', 'millwright.dev/instance-hypervisor', 'millwright.dev/instance-encryption-in-transit-supported', 'millwright.dev/instance-capability-flex', 'millwright.dev/instance-cpu-sustained-clock-speed-mhz', 'millwright.dev/instance-local-nvme', 'millwright.dev/instance-network-bandwidth', 'millwright.dev/instance-ebs-bandwidth', 'millwright.dev/instance-gpu-name', 'millwright.dev/instance-gpu-manufacturer', 'millwright.dev/instance-gpu-count', 'millwright.dev/instance-gpu-memory', 'millwright.dev/instance-accelerator-name', 'millwright.dev/instance-accelerator-manufacturer', 'millwright.dev/instance-accelerator-count']"
	// +kubebuilder:validation:XValidation:message="label 'millwright.dev/nodepool' is restricted",rule="self != 'millwright.dev/nodepool'"
	// +kubebuilder:validation:XValidation:message="label 'kubernetes.io/hostname' is restricted",rule="self != 'kubernetes.io/hostname'"
	// +kubebuilder:validation:XValidation:message="label domain is restricted: no instance type or launch sets the key; use a well-known label or a custom label outside kubernetes.io, k8s.io, karpenter.sh, karpenter.k8s.aws",rule="!self.matches('^([^/]*[.])?(kubernetes[.]io|k8s[.]io|karpenter[.]sh|karpenter[.]k8s[.]aws)/') || self.matches('^([^/]*[.])?(kops[.]k8s[.]io|node[.]kubernetes[.]io|node-restriction[.]kubernetes[.]io)/') || self in ['kubernetes.io/hostname', 'topology.kubernetes.io/zone', 'failure-domain.beta.kubernetes.io/zone', 'topology.kubernetes.io/region', 'failure-domain.beta.kubernetes.io/region', 'beta.kubernetes.io/instance-type', 'kubernetes.io/arch', 'beta.kubernetes.io/arch', 'kubernetes.io/os', 'beta.kubernetes.io/os', 'karpenter.sh/capacity-type', 'karpenter.k8s.aws/ec2nodeclass', 'karpenter.k8s.aws/instance-category', 'karpenter.k8s.aws/instance-family', 'karpenter.k8s.aws/instance-generation', 'karpenter.k8s.aws/instance-size', 'karpenter.k8s.aws/instance-cpu', 'karpenter.k8s.aws/instance-cpu-manufacturer', 'karpenter.k8s.aws/instance-memory', 'karpenter.k8s.aws/instance-hypervisor', 'karpenter.k8s.aws/instance-encryption-in-transit-supported', 'karpenter.k8s.aws/instance-capability-flex', 'karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz', 'karpenter.k8s.aws/instance-local-nvme', 'karpenter.k8s.aws/instance-network-bandwidth', 'karpenter.k8s.aws/instance-ebs-bandwidth', 'karpenter.k8s.aws/instance-gpu-name', 'karpenter.k8s.aws/instance-gpu-manufacturer', 'karpenter.k8s.aws/instance-gpu-count', 'karpenter.k8s.aws/instance-gpu-memory', 'karpenter.k8s.aws/instance-accelerator-name', 'karpenter.k8s.aws/instance-accelerator-manufacturer', 'karpenter.k8s.aws/instance-accelerator-count']"
	// +required
	Key string `json:"key"`
	// Operator relates the key to the values: In, NotIn, Exists,
	// DoesNotExist, Gt or Lt.
	// +kubebuilder:validation:Enum:=In;NotIn;Exists;DoesNotExist;Gt;Lt
	// +required
	Operator corev1.NodeSelectorOperator `json:"operator"`
	// Values are label values. In needs at least one; Gt and Lt need exactly
	// one non-negative integer.
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +optional
	// +listType=atomic
	Values []string `json:"values,omitempty"`
	// MinValues is the least number of distinct values of this key the
	// launch options must span. With operator In, values must list at least
	// that many.
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=50
	// +optional
	MinValues *int `json:"minValues,omitempty"`
}

// NodeClassReference points at the node class of a pool. Millwright has one
// kind, EC2NodeClass in group millwright.dev; the fields are kept so
// Karpenter manifests keep their shape.
type NodeClassReference struct {
	// Kind of the node class: EC2NodeClass.
	// +kubebuilder:validation:Enum:=EC2NodeClass
	// +required
	Kind string `json:"kind"`
	// Name of the EC2NodeClass.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="name may not be empty"
	// +required
	Name string `json:"name"`
	// Group of the node class: millwright.dev.
	// +kubebuilder:validation:Enum:=millwright.dev
	// +required
	Group string `json:"group"`
}

// ConsolidationPolicy says which nodes consolidation may remove or replace.
// +kubebuilder:validation:Enum:=WhenEmpty;WhenEmptyOrUnderutilized;Balanced
type ConsolidationPolicy string

const (
	// ConsolidationPolicyWhenEmpty lets consolidation remove only nodes with
	// no workload pods.
	ConsolidationPolicyWhenEmpty ConsolidationPolicy = "WhenEmpty"
	// ConsolidationPolicyWhenEmptyOrUnderutilized also lets it move pods
	// off underused nodes to remove or replace them with cheaper ones.
	ConsolidationPolicyWhenEmptyOrUnderutilized ConsolidationPolicy = "WhenEmptyOrUnderutilized"
	// ConsolidationPolicyBalanced is WhenEmptyOrUnderutilized where every
	// move, deletes included, must score at least 1/BalancedK: the share of
	// the pool's cost it saves over the share of the pool's disruption it
	// causes (Karpenter's Balanced policy, same k).
	ConsolidationPolicyBalanced ConsolidationPolicy = "Balanced"
)

// BalancedK is the Balanced policy's k (Karpenter's v1.BalancedK): a move
// is taken when its score is at least 1/k.
const BalancedK = 2

// SupportedConsolidationPolicies lists every ConsolidationPolicy.
var SupportedConsolidationPolicies = []ConsolidationPolicy{
	ConsolidationPolicyWhenEmpty,
	ConsolidationPolicyWhenEmptyOrUnderutilized,
	ConsolidationPolicyBalanced,
}

// Disruption says when Millwright may voluntarily take a pool's nodes away.
type Disruption struct {
	// ConsolidateAfter is how long a node must have been a consolidation
	// candidate (empty, or underutilized under WhenEmptyOrUnderutilized)
	// before it is consolidated. "Never" switches consolidation off.
	// +kubebuilder:default:="0s"
	// +optional
	ConsolidateAfter DurationOrNever `json:"consolidateAfter,omitempty"`
	// ConsolidationPolicy: WhenEmpty, WhenEmptyOrUnderutilized (default)
	// or Balanced.
	// +kubebuilder:default:="WhenEmptyOrUnderutilized"
	// +optional
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`
	// Budgets cap how many of the pool's nodes may be disrupted at once. When
	// several are active the most restrictive wins. Unset means one budget of
	// 10%.
	// +kubebuilder:validation:XValidation:message="'schedule' must be set with 'duration'",rule="self.all(x, has(x.schedule) == has(x.duration))"
	// +kubebuilder:default:={{nodes: "10%"}}
	// +kubebuilder:validation:MaxItems=50
	// +optional
	// +listType=atomic
	Budgets []Budget `json:"budgets,omitempty"`
}

// DisruptionReason is why a node is disrupted; a budget may apply to some
// reasons only.
// +kubebuilder:validation:Enum:=Underutilized;Empty;Drifted
type DisruptionReason string

const (
	DisruptionReasonUnderutilized DisruptionReason = "Underutilized"
	DisruptionReasonEmpty         DisruptionReason = "Empty"
	DisruptionReasonDrifted       DisruptionReason = "Drifted"
)

// SupportedDisruptionReasons lists every DisruptionReason.
var SupportedDisruptionReasons = []DisruptionReason{
	DisruptionReasonUnderutilized, DisruptionReasonEmpty, DisruptionReasonDrifted,
}

// Budget caps the number of a pool's nodes that may be disrupted at once,
// always or during a cron window.
type Budget struct {
	// Reasons this budget applies to; unset means every reason.
	// +kubebuilder:validation:MaxItems=50
	// +optional
	// +listType=set
	Reasons []DisruptionReason `json:"reasons,omitempty"`
	// Nodes is the cap: a count ("5") or a percentage of the pool's nodes
	// ("10%", rounded up). Unset means 10%.
	// +kubebuilder:validation:Pattern:="^((100|[0-9]{1,2})%|[0-9]+)$"
	// +kubebuilder:default:="10%"
	// +optional
	Nodes string `json:"nodes,omitempty"`
	// Schedule is when the budget's window opens, in cron syntax (UTC, five
	// fields or a macro such as @daily). Unset means always active.
	// +kubebuilder:validation:Pattern:=`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`
	// +optional
	Schedule *string `json:"schedule,omitempty"`
	// Duration is how long the window stays open after each schedule hit, in
	// hours and minutes ("1h30m"); required with schedule.
	// +kubebuilder:validation:Pattern=`^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`
	// +optional
	Duration *Duration `json:"duration,omitempty"`
}

// Limits cap the sum of a pool's node capacity per resource; the "nodes"
// key caps the node count.
// +kubebuilder:validation:MaxProperties=64
// +kubebuilder:validation:XValidation:message="limits must not be negative",rule="self.all(k, !quantity(string(self[k])).isLessThan(quantity('0')))"
type Limits corev1.ResourceList

// ResourceNodes is the Limits key for the number of nodes.
const ResourceNodes corev1.ResourceName = "nodes"
