package packer

import (
	"errors"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/scheduling"
)

// MaxInstanceTypeOptions caps the instance types a NodePlan offers the launcher.
const MaxInstanceTypeOptions = 60

// Input is one provisioning problem.
type Input struct {
	// Pods are the pending pods to place.
	Pods []*corev1.Pod
	// DaemonSetPods run on every node whose labels and taints they match;
	// their requests count against each new node's allocatable.
	DaemonSetPods []*corev1.Pod
	// NodePools constrain what may be launched.
	NodePools []NodePool
	// Nodes are existing and in-flight nodes pods may be placed on first.
	Nodes []Node
	// Namespaces are the labels of each namespace, by name, which pod
	// (anti-)affinity terms' namespaceSelector select on. A namespace
	// missing here has no labels.
	Namespaces map[string]map[string]string
	// Storage holds the claims, volumes and classes of the pods' volumes,
	// whose topology limits where the pods may go.
	Storage Storage
	// Volumes, when set, is Storage already indexed (NewVolumeConstraints)
	// and is read instead of it: a caller that packs many times over one
	// cluster (a disruption pass simulates once per candidate) indexes its
	// claims, volumes and classes once rather than once per Pack.
	Volumes *VolumeConstraints
}

// storageIndex is the index of the input's storage: Volumes' when given.
func (in *Input) storageIndex() *storageIndex {
	if in.Volumes != nil {
		return in.Volumes.ix
	}
	return newStorageIndex(in.Storage)
}

// NodePool is the packer's view of a NodePool (plain fields, so the packer
// does not depend on the CRD types; a converter builds it from them).
type NodePool struct {
	Name string
	// Weight orders NodePools: a pod goes to the highest-weight pool that can
	// take it; lower weights are tried only when higher ones cannot.
	Weight int32
	// Requirements constrain the nodes' labels (instance type labels, zone,
	// capacity type, custom labels). Alias keys are accepted.
	Requirements []corev1.NodeSelectorRequirement
	// MinValues, per requirement key (alias keys accepted), is the least
	// number of distinct values of that key the launch options of each of
	// the pool's nodes must span (a requirement's minValues). A node whose
	// pods leave fewer is split, and a pod that alone leaves fewer is
	// unschedulable in the pool.
	MinValues map[string]int
	// Labels are added to every node (the template's metadata.labels).
	Labels map[string]string
	// Taints must be tolerated by pods placed on the pool's nodes.
	Taints []corev1.Taint
	// StartupTaints are removed once the node is ready; pods need not tolerate them.
	StartupTaints []corev1.Taint
	// CapacityTypes restricts offerings (spot, on-demand); empty allows all
	// capacity types the requirements allow.
	CapacityTypes []string
	// Limits cap the summed capacity of the pool's nodes; keys are resource
	// names (cpu, memory, nvidia.com/gpu, ...) and "nodes".
	Limits corev1.ResourceList
	// Used is what the pool's existing nodes already count against Limits
	// (same keys; "nodes" is the node count).
	Used corev1.ResourceList
	// InstanceTypes the pool may launch; the packer filters them by Requirements.
	InstanceTypes []*catalog.InstanceType
}

// Node is an existing or in-flight (launched, not yet registered) node.
type Node struct {
	Name string
	// NodePool that launched it ("" if Millwright does not manage it).
	NodePool string
	InFlight bool
	Labels   map[string]string
	Taints   []corev1.Taint
	// Available is the node's free capacity: allocatable minus the requests
	// of the pods (DaemonSets included) already bound or nominated to it.
	Available scheduling.Resources
	// Pods already on the node; they count for topology spread and pod
	// (anti-)affinity. Their requests are already out of Available.
	Pods []*corev1.Pod
}

// Result is a plan.
type Result struct {
	// Placements put pods on existing or in-flight nodes.
	Placements []Placement
	// NewNodes are the nodes to launch, each with its pods.
	NewNodes []NodePlan
	// Unschedulable pods, each with the reason.
	Unschedulable []Unschedulable
}

// Placement binds a pod to an existing or in-flight node.
type Placement struct {
	Pod  *corev1.Pod
	Node string
}

// Unschedulable is a pod no node can take, with the constraint that failed.
type Unschedulable struct {
	Pod    *corev1.Pod
	Reason string
}

// NodePlan is one node to launch.
type NodePlan struct {
	// Name is a placeholder hostname, unique within the plan ("new-node-1").
	Name     string
	NodePool string
	// The chosen launch: the cheapest option.
	InstanceType string
	Zone         string
	CapacityType string
	Price        float64
	// Options are the offerings that could host the same pods, cheapest
	// first, each at the capacity type the capacity-type rule picks, over
	// at most MaxInstanceTypeOptions instance types; Options[0] is the
	// chosen one. They are in the chosen zone, or, when no pod on the node
	// depends on its zone (zoneFree), in every zone the pods and the pool
	// allow, priced at most the dearest option of the chosen zone: then
	// CreateFleet's allocation strategy chooses among the pools of every
	// zone (price-capacity-optimized weighs their depth), as Karpenter's
	// NodeClaims do, instead of among one zone's.
	Options []InstanceTypeOption
	// Zones and CapacityTypes the launch may use: those of Options.
	Zones         []string
	CapacityTypes []string
	// Labels the node will carry (canonical keys plus Karpenter aliases),
	// hostname excluded. Plans of the same launch share one map: treat it
	// as read-only (copy before adding labels).
	Labels        map[string]string
	Taints        []corev1.Taint
	StartupTaints []corev1.Taint
	// Pods to bind once the node registers.
	Pods []*corev1.Pod
	// DaemonSetPods expected to run on the node.
	DaemonSetPods []*corev1.Pod
	// Requests is what Pods and DaemonSetPods request together.
	Requests scheduling.Resources
}

// InstanceTypeOption is one offering a NodePlan may launch: an instance
// type in a zone at a capacity type.
type InstanceTypeOption struct {
	InstanceType string
	CapacityType string
	// Zone is the offering's zone; empty means the plan's Zone.
	Zone  string
	Price float64
}

// ZoneOf is the zone of option o of plan.
func (plan *NodePlan) ZoneOf(o InstanceTypeOption) string {
	if o.Zone != "" {
		return o.Zone
	}
	return plan.Zone
}

// OptionTypes is how many distinct instance types opts offer.
func OptionTypes(opts []InstanceTypeOption) int {
	seen := make(map[string]bool, len(opts))
	for _, o := range opts {
		seen[o.InstanceType] = true
	}
	return len(seen)
}

// TotalPrice is the summed hourly price of the new nodes.
func (r Result) TotalPrice() float64 {
	total := 0.0
	for _, n := range r.NewNodes {
		total += n.Price
	}
	return total
}

// InvalidInputError says the input cannot be planned at all (a malformed
// NodePool or DaemonSet pod); the wrapped error names the field. Pods that
// merely cannot be placed are not errors: they are reported in the Result.
type InvalidInputError struct{ Err error }

func (e *InvalidInputError) Error() string { return "invalid packer input: " + e.Err.Error() }
func (e *InvalidInputError) Unwrap() error { return e.Err }

// IsInvalidInput reports whether err is an InvalidInputError.
func IsInvalidInput(err error) bool {
	var target *InvalidInputError
	return errors.As(err, &target)
}
