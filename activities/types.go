package activities

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Keys Millwright puts on the Nodes it manages. They are the lifecycle
// contract with the cluster: the worker's watchers and the activities agree on
// them.
const (
	// TerminationFinalizer keeps a deleted Node around until its node
	// workflow has drained it and terminated its instance.
	TerminationFinalizer = "millwright.dev/termination"
	// UnregisteredTaintKey is put on the Node by userData at boot
	// (NoExecute) and removed by RegisterNode, so nothing schedules on a
	// Node Millwright has not adopted yet.
	UnregisteredTaintKey = "millwright.dev/unregistered"
	// DisruptedTaintKey (NoSchedule) marks a Node being drained.
	DisruptedTaintKey = "millwright.dev/disrupted"
	// CandidateTaintKey (PreferNoSchedule) marks a Node a disruption
	// command holds while it waits to be admitted: kube-scheduler places
	// new pods elsewhere when it can, so the pods of the nodes draining
	// meanwhile do not land on the candidate and invalidate the decision
	// (its default scoring prefers the least allocated nodes, which
	// underutilized candidates are). It never blocks a pod.
	CandidateTaintKey = "millwright.dev/disruption-candidate"
	// OutlierTaintKey (PreferNoSchedule) marks a Node consolidation means
	// to take before the others (an outlier: priced far above its pool's
	// median node and mostly unused; model/disruption waste.go): the pods
	// evicted from the other nodes meanwhile land elsewhere, rather than
	// fill it and restart its consolidateAfter. The disruption workflow
	// sets it on the outliers of each pass and takes it off the rest. It
	// never blocks a pod.
	OutlierTaintKey = "millwright.dev/consolidation-outlier"
	// DoNotDisruptAnnotation on a pod blocks voluntary drains of its Node.
	DoNotDisruptAnnotation = "millwright.dev/do-not-disrupt"
	// NodeClaimLabel names the node claim (and so the node workflow) a Node
	// belongs to; the worker maps Node events to workflow ids with it.
	NodeClaimLabel = "millwright.dev/nodeclaim"
)

// Capacity types of an offering.
const (
	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
)

// UnavailableOfferingTTL is how long an offering that returned
// InsufficientInstanceCapacity is treated as unavailable.
const UnavailableOfferingTTL = 3 * time.Minute

// DefaultRegistrationTimeout bounds how long a launched instance may take to
// register its Node before it is terminated.
const DefaultRegistrationTimeout = 15 * time.Minute

// OptionalDuration is a NodePool duration that may be `Never`. The zero value
// is Never, so a field a planner forgot to fill disables the behaviour
// (never expire, never consolidate, never force-delete pods) instead of
// triggering it at once. It encodes in JSON as a Go duration string or
// "Never", so it reads well in the Temporal UI.
type OptionalDuration struct {
	duration time.Duration
	set      bool
}

// Never is the disabled duration.
func Never() OptionalDuration { return OptionalDuration{} }

// After is an enabled duration d.
func After(d time.Duration) OptionalDuration { return OptionalDuration{duration: d, set: true} }

// Get returns the duration and whether it is enabled.
func (o OptionalDuration) Get() (time.Duration, bool) { return o.duration, o.set }

// IsNever reports whether the duration is disabled.
func (o OptionalDuration) IsNever() bool { return !o.set }

func (o OptionalDuration) String() string {
	if !o.set {
		return "Never"
	}
	return o.duration.String()
}

// MarshalJSON encodes "Never" or a Go duration string.
func (o OptionalDuration) MarshalJSON() ([]byte, error) { return json.Marshal(o.String()) }

// UnmarshalJSON accepts "Never", "" (Never) or a Go duration string.
func (o *OptionalDuration) UnmarshalJSON(data []byte) error {
	var text string
	if err := json.Unmarshal(data, &text); err != nil {
		return fmt.Errorf("optional duration: want a string like \"30s\" or \"Never\": %w", err)
	}
	if text == "" || text == "Never" {
		*o = Never()
		return nil
	}
	d, err := time.ParseDuration(text)
	if err != nil {
		return fmt.Errorf("optional duration %q: %w", text, err)
	}
	if d < 0 {
		return fmt.Errorf("optional duration %q: must not be negative", text)
	}
	*o = After(d)
	return nil
}

// Offering is one way to buy an instance type: a zone and capacity type at a
// price.
type Offering struct {
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	PricePerHour float64 `json:"pricePerHour"`
}

// InstanceTypeOption is an instance type a node plan may launch, with the
// offerings allowed for it, cheapest first.
type InstanceTypeOption struct {
	Name      string     `json:"name"`
	Offerings []Offering `json:"offerings"`
}

// OfferingKey identifies an offering across instance types.
type OfferingKey struct {
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
}

func (k OfferingKey) String() string {
	return k.InstanceType + "/" + k.Zone + "/" + k.CapacityType
}

// UnavailableOffering is an offering that had no capacity, unavailable until
// Until.
type UnavailableOffering struct {
	OfferingKey
	Until time.Time `json:"until"`
}

// NodeLaunchSpec is everything one node workflow needs to launch, adopt and
// retire one node. The Plan activity produces it from a packer node plan and
// the NodePool; the node workflow treats it as its immutable input.
type NodeLaunchSpec struct {
	Cluster       string `json:"cluster"`
	NodeClaimName string `json:"nodeClaimName"`
	NodePool      string `json:"nodePool"`
	NodeClassName string `json:"nodeClassName"`

	// InstanceTypeOptions are the instance types that fit the plan's pods,
	// cheapest first, each with its allowed offerings cheapest first.
	InstanceTypeOptions []InstanceTypeOption `json:"instanceTypeOptions"`

	Requirements  []corev1.NodeSelectorRequirement `json:"requirements,omitempty"`
	Labels        map[string]string                `json:"labels,omitempty"`
	Annotations   map[string]string                `json:"annotations,omitempty"`
	Taints        []corev1.Taint                   `json:"taints,omitempty"`
	StartupTaints []corev1.Taint                   `json:"startupTaints,omitempty"`
	// ExtendedResources are the extended resources (GPUs...) the plan's pods
	// request; the node is initialized only once they are allocatable.
	ExtendedResources corev1.ResourceList `json:"extendedResources,omitempty"`

	// PodKeys are the namespace/name of the pods that caused the launch.
	PodKeys []string `json:"podKeys,omitempty"`
	// LaunchReason summarises the planner's decision: why a node, which
	// options were considered and why others were rejected.
	LaunchReason string `json:"launchReason,omitempty"`

	ExpireAfter            OptionalDuration `json:"expireAfter"`
	ConsolidateAfter       OptionalDuration `json:"consolidateAfter"`
	TerminationGracePeriod OptionalDuration `json:"terminationGracePeriod"`
	// RegistrationTimeout bounds launch-to-registration; zero means
	// DefaultRegistrationTimeout.
	RegistrationTimeout time.Duration `json:"registrationTimeout,omitempty"`
	// NominationWindow is how long after initialization the node is
	// nominated for the pods it was launched for: it is not empty, it waits
	// for them to bind, and is not disrupted as empty meanwhile (Karpenter:
	// max(2 × the batch max window, 10s)). Zero means
	// DefaultNominationWindow.
	NominationWindow time.Duration `json:"nominationWindow,omitempty"`
	// ReplacementFor is the id of the disruption command workflow that
	// launched this node as a replacement: the node tells it when it is
	// initialized, or that it failed. Empty for nodes the provisioner
	// launched.
	ReplacementFor string `json:"replacementFor,omitempty"`
	// DisruptionDecidesEmpty: the cluster's disruption workflow decides
	// when this node, empty, goes (an Empty command, under the pool's
	// budget); the node workflow keeps no consolidateAfter timer of its own
	// and never asks AllowDisruption, so a node the budget refuses costs
	// no history.
	DisruptionDecidesEmpty bool `json:"disruptionDecidesEmpty,omitempty"`
}

// DefaultNominationWindow is the nomination window of a node whose spec
// names none: Karpenter's max(2 × 10s batch max window, 10s).
const DefaultNominationWindow = 20 * time.Second

// NominationWindowFor is Karpenter's nomination window for a provisioner
// whose batches close after batchMaxWindow at most.
func NominationWindowFor(batchMaxWindow time.Duration) time.Duration {
	return max(2*batchMaxWindow, 10*time.Second)
}

// Validate reports the first field that makes the spec unusable.
func (s NodeLaunchSpec) Validate() error {
	switch {
	case s.Cluster == "":
		return fmt.Errorf("node launch spec: cluster is empty")
	case s.NodeClaimName == "":
		return fmt.Errorf("node launch spec: nodeClaimName is empty")
	case s.NodePool == "":
		return fmt.Errorf("node launch spec %s: nodePool is empty", s.NodeClaimName)
	case s.NodeClassName == "":
		return fmt.Errorf("node launch spec %s: nodeClassName is empty", s.NodeClaimName)
	case len(s.InstanceTypeOptions) == 0:
		return fmt.Errorf("node launch spec %s: instanceTypeOptions is empty", s.NodeClaimName)
	case s.RegistrationTimeout < 0:
		return fmt.Errorf("node launch spec %s: registrationTimeout %s is negative", s.NodeClaimName, s.RegistrationTimeout)
	}
	for i, option := range s.InstanceTypeOptions {
		if option.Name == "" {
			return fmt.Errorf("node launch spec %s: instanceTypeOptions[%d].name is empty", s.NodeClaimName, i)
		}
		if len(option.Offerings) == 0 {
			return fmt.Errorf("node launch spec %s: instanceTypeOptions[%d] (%s) has no offerings", s.NodeClaimName, i, option.Name)
		}
	}
	return nil
}

// LaunchRequest asks for one instance from the first available of Options.
type LaunchRequest struct {
	Cluster       string `json:"cluster"`
	NodeClaimName string `json:"nodeClaimName"`
	NodePool      string `json:"nodePool"`
	NodeClassName string `json:"nodeClassName"`
	// WorkflowID is tagged on the instance so an instance can always be
	// traced to the workflow that owns it.
	WorkflowID string `json:"workflowID"`
	// ClientToken makes CreateFleet idempotent: see LaunchClientToken.
	ClientToken string `json:"clientToken"`
	// Options are the remaining instance type options, cheapest first
	// (offerings that had no capacity already removed).
	Options []InstanceTypeOption `json:"options"`

	Requirements  []corev1.NodeSelectorRequirement `json:"requirements,omitempty"`
	Labels        map[string]string                `json:"labels,omitempty"`
	Annotations   map[string]string                `json:"annotations,omitempty"`
	Taints        []corev1.Taint                   `json:"taints,omitempty"`
	StartupTaints []corev1.Taint                   `json:"startupTaints,omitempty"`
}

// LaunchClientToken derives CreateFleet's ClientToken from the owning
// workflow and the exact options offered, so retrying the same launch returns
// the instance the first call created, while a launch with different options
// (after an InsufficientCapacity) is a new request. EC2 accepts at most 64
// ASCII characters; a hex SHA-256 is exactly 64.
func LaunchClientToken(workflowID string, options []InstanceTypeOption) string {
	var b strings.Builder
	b.WriteString(workflowID)
	for _, option := range options {
		b.WriteString("|")
		b.WriteString(option.Name)
		for _, offering := range option.Offerings {
			b.WriteString(",")
			b.WriteString(offering.Zone)
			b.WriteString(":")
			b.WriteString(offering.CapacityType)
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// LaunchResponse describes the launched instance.
type LaunchResponse struct {
	InstanceID     string  `json:"instanceID"`
	InstanceType   string  `json:"instanceType"`
	Zone           string  `json:"zone"`
	CapacityType   string  `json:"capacityType"`
	PricePerHour   float64 `json:"pricePerHour"`
	Hostname       string  `json:"hostname"`
	PrivateDNSName string  `json:"privateDNSName"`
	ProviderID     string  `json:"providerID"`
	ImageID        string  `json:"imageID,omitempty"`
	// SubnetID and SecurityGroupIDs are the instance's network as EC2
	// reports it; with ImageID they are stamped on the Node at
	// registration, so drift can tell when the class no longer selects them.
	SubnetID         string    `json:"subnetID,omitempty"`
	SecurityGroupIDs []string  `json:"securityGroupIDs,omitempty"`
	LaunchTime       time.Time `json:"launchTime"`
	// Labels are the well-known labels of the launched offering: its
	// instance type's (family, size, cpu, memory, GPUs...) and capacity
	// type, under Millwright's keys and their accepted aliases. The kubelet
	// cannot know them, so RegisterNode puts them on the Node; without them
	// a pod the packer placed by, say, instance-family would never schedule.
	Labels map[string]string `json:"labels,omitempty"`
}

// WaitForRegistrationRequest waits for the Node of an instance.
type WaitForRegistrationRequest struct {
	NodeClaimName string    `json:"nodeClaimName"`
	InstanceID    string    `json:"instanceID"`
	ProviderID    string    `json:"providerID"`
	Deadline      time.Time `json:"deadline"`
}

// WaitForRegistrationResponse names the Node that registered.
type WaitForRegistrationResponse struct {
	NodeName string `json:"nodeName"`
}

// RegisterNodeRequest adopts a registered Node.
type RegisterNodeRequest struct {
	NodeName      string `json:"nodeName"`
	NodeClaimName string `json:"nodeClaimName"`
	NodePool      string `json:"nodePool"`
	// Labels and Annotations are merged into the Node's (NodeClaimLabel
	// included).
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// Taints and StartupTaints are added when missing, once, at
	// registration; later changes by other systems are left alone.
	Taints        []corev1.Taint `json:"taints,omitempty"`
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// NominatePods ("namespace/name") are the pods the node was launched
	// for: the first registration sets their status.nominatedNodeName to
	// the Node before it lifts the unregistered taint, so kube-scheduler
	// keeps their room for them. Bound pods are left alone.
	NominatePods []string `json:"nominatePods,omitempty"`
}

// RegisterNodeResponse is empty today; a struct keeps the contract
// extensible without breaking recorded histories.
type RegisterNodeResponse struct{}

// WaitForInitializationRequest waits for a Node to be usable.
type WaitForInitializationRequest struct {
	NodeName          string              `json:"nodeName"`
	StartupTaints     []corev1.Taint      `json:"startupTaints,omitempty"`
	ExtendedResources corev1.ResourceList `json:"extendedResources,omitempty"`
	Deadline          time.Time           `json:"deadline"`
}

// WaitForInitializationResponse reports the Node's pods at initialization, so
// the workflow knows whether it starts empty.
type WaitForInitializationResponse struct {
	NonDaemonSetPods int `json:"nonDaemonSetPods"`
}

// AllowDisruptionRequest asks whether a voluntary disruption may start.
type AllowDisruptionRequest struct {
	NodePool string `json:"nodePool"`
	NodeName string `json:"nodeName"`
	// Reason is the disruption reason as the NodePool's budgets name it
	// (Empty, Drifted, Underutilized...).
	Reason string `json:"reason"`
}

// AllowDisruptionResponse answers AllowDisruptionRequest.
type AllowDisruptionResponse struct {
	Allowed bool `json:"allowed"`
	// Why names the budget or minimum that blocked it.
	Why string `json:"why,omitempty"`
	// RetryAfter is when asking again makes sense; zero lets the workflow
	// choose.
	RetryAfter time.Duration `json:"retryAfter,omitempty"`
}

// DrainRequest drains one Node.
type DrainRequest struct {
	NodeName string `json:"nodeName"`
	// Reason is recorded on the disruption taint's events.
	Reason string `json:"reason"`
	// Voluntary drains respect do-not-disrupt pods; involuntary ones
	// (interruption, expiry) do not. Both respect PodDisruptionBudgets until
	// Deadline.
	Voluntary bool `json:"voluntary"`
	// Deadline, when set, is when remaining pods are deleted regardless of
	// PDBs and do-not-disrupt (the pool's terminationGracePeriod, or the
	// spot interruption time).
	Deadline time.Time `json:"deadline,omitzero"`
	// UnschedulableSince, when set, is when a disruption command put the
	// disrupted taint on the Node (MarkDisruptionResponse.DisruptedAt).
	// If the drain finds the taint already there, the look that confirms
	// an empty Node comes DrainConfirmation after this rather than after
	// the drain's own first look: the window is for pods kube-scheduler
	// placed before it saw the taint. Clocks of the workers are assumed
	// in step to well under DrainConfirmation.
	UnschedulableSince time.Time `json:"unschedulableSince,omitzero"`
}

// DrainStage is where a drain is; stages run in order.
type DrainStage string

// Drain stages in order.
const (
	DrainStageTaint                  DrainStage = "Taint"
	DrainStageEvictNonCritical       DrainStage = "EvictNonCritical"
	DrainStageEvictDaemonSet         DrainStage = "EvictNonCriticalDaemonSet"
	DrainStageEvictCritical          DrainStage = "EvictCritical"
	DrainStageWaitForPodsTerminating DrainStage = "WaitForPodsTerminating"
	DrainStageDone                   DrainStage = "Done"
)

// DrainProgress is the heartbeat detail of Drain; a retried Drain resumes
// from it.
type DrainProgress struct {
	Stage   DrainStage `json:"stage"`
	Evicted int        `json:"evicted"`
	Deleted int        `json:"deleted"`
	// Blocked names pods whose eviction is refused (PDB, do-not-disrupt).
	Blocked []string `json:"blocked,omitempty"`
}

// DrainResponse summarises a finished drain.
type DrainResponse struct {
	Evicted int `json:"evicted"`
	Deleted int `json:"deleted"`
}

// TerminateInstanceRequest terminates one instance, or, without an
// InstanceID, every instance of Cluster tagged for NodeClaimName: what a
// launch whose outcome the workflow never learnt (it timed out, the workflow
// was cancelled) may have created.
type TerminateInstanceRequest struct {
	InstanceID    string `json:"instanceID"`
	Cluster       string `json:"cluster,omitempty"`
	NodeClaimName string `json:"nodeClaimName,omitempty"`
}

// TerminateInstanceResponse reports the instance state after the call, and
// for a request by node claim the instances found and terminated.
type TerminateInstanceResponse struct {
	State     string               `json:"state"`
	Instances []TerminatedInstance `json:"instances,omitempty"`
}

// TerminatedInstance is an instance a TerminateInstance by node claim found
// and terminated.
type TerminatedInstance struct {
	InstanceID string `json:"instanceID"`
	ProviderID string `json:"providerID"`
	Zone       string `json:"zone"`
	State      string `json:"state"`
}

// WaitForInstanceTerminatedRequest waits for an instance to go away.
type WaitForInstanceTerminatedRequest struct {
	InstanceID string `json:"instanceID"`
}

// WaitForInstanceTerminatedResponse reports the final state observed.
type WaitForInstanceTerminatedResponse struct {
	State string `json:"state"`
}

// DeleteNodeRequest deletes a Node by name, or by provider ID when the name
// is unknown (an instance whose Node registered after the workflow gave up).
type DeleteNodeRequest struct {
	NodeName   string `json:"nodeName,omitempty"`
	ProviderID string `json:"providerID,omitempty"`
}

// DeleteNodeResponse tells whether a Node was found.
type DeleteNodeResponse struct {
	Deleted bool `json:"deleted"`
}

// InFlightNode is a node the provisioner started that has not registered
// yet; the planner counts its capacity so the next batch does not launch a
// second node for the same pods.
type InFlightNode struct {
	NodeClaimName string    `json:"nodeClaimName"`
	NodePool      string    `json:"nodePool"`
	InstanceTypes []string  `json:"instanceTypes"`
	PodKeys       []string  `json:"podKeys,omitempty"`
	StartedAt     time.Time `json:"startedAt"`
	// Until is when the node can no longer be registering (its launch and
	// registration timeouts have passed); zero on entries recorded before
	// it existed, which the provisioner keeps for its InFlightTTL.
	Until time.Time `json:"until,omitzero"`
}

// PlanRequest asks for node plans for a batch.
type PlanRequest struct {
	Cluster string `json:"cluster"`
	// PodKeys are the pods that triggered the batch (namespace/name); the
	// planner re-reads them and ignores those no longer provisionable.
	PodKeys []string `json:"podKeys,omitempty"`
	// DisruptedNodes are being drained (interruption): their pods are
	// planned as if the nodes were gone and the nodes offer no capacity.
	DisruptedNodes []string `json:"disruptedNodes,omitempty"`
	// AllPending plans every provisionable pod in the cluster, not only
	// PodKeys (periodic resync).
	AllPending           bool                  `json:"allPending,omitempty"`
	InFlight             []InFlightNode        `json:"inFlight,omitempty"`
	UnavailableOfferings []UnavailableOffering `json:"unavailableOfferings,omitempty"`
	// MaxNodePlans bounds the plans returned so one response stays well
	// under Temporal's payload size limit; pods of plans beyond it come back
	// in Deferred.
	MaxNodePlans int `json:"maxNodePlans"`
	// MaxPlannedPods bounds the pods the plans carry, so the
	// provisioner's in-flight state stays bounded however large the
	// backlog; zero: no bound; negative: no pods (pod-less minNodes plans
	// only). Pods of plans beyond it come back in Deferred.
	MaxPlannedPods int `json:"maxPlannedPods,omitempty"`
}

// Bounds of a PlanResponse, so it stays far below Temporal's payload limits
// (2 MiB per payload, warnings from 512 KiB) whatever the backlog.
const (
	// MaxUnschedulableReported bounds PlanResponse.Unschedulable.
	MaxUnschedulableReported = 100
	// MaxDeferredReported bounds PlanResponse.Deferred.
	MaxDeferredReported = 1000
	// MaxPlanBytes bounds the JSON size of PlanResponse.Plans (and so of
	// the StartNodeWorkflows request made from them); plans beyond it are
	// deferred like those beyond MaxNodePlans.
	MaxPlanBytes = 256 << 10
)

// UnschedulablePod is a pod no pool can take, with the constraint that
// failed.
type UnschedulablePod struct {
	PodKey string `json:"podKey"`
	Reason string `json:"reason"`
}

// PlanResponse is the planner's answer for a batch.
type PlanResponse struct {
	// Plans are new nodes to launch (including minNodes deficits), one node
	// workflow each. NodeClaimName may be empty: the provisioner then names
	// it deterministically.
	Plans []NodeLaunchSpec `json:"plans,omitempty"`
	// PodsConsidered counts the provisionable pods the planner found.
	PodsConsidered int `json:"podsConsidered"`
	// PlacedOnExisting counts pods that fit existing or in-flight nodes.
	PlacedOnExisting int `json:"placedOnExisting"`
	// PlacedInRoom counts the pods of PlacedOnExisting placed in the free
	// room of an existing or in-flight node (not pods awaiting the
	// in-flight node launched for them). kube-scheduler has yet to bind
	// them, and should that room go first, no event of theirs will say so:
	// the provisioner plans again soon while there are any.
	PlacedInRoom int `json:"placedInRoom,omitempty"`
	// Unschedulable lists at most MaxUnschedulableReported pods;
	// UnschedulableCount counts them all.
	Unschedulable      []UnschedulablePod `json:"unschedulable,omitempty"`
	UnschedulableCount int                `json:"unschedulableCount,omitempty"`
	// Deferred pods belong to plans beyond MaxNodePlans; plan them next.
	// Pods of disrupted nodes are not listed (they are bound, so a pod key
	// alone would not be planned again): their nodes are in
	// DeferredDisruptedNodes.
	Deferred []string `json:"deferred,omitempty"`
	// DeferredMore: more pods were deferred than Deferred lists (at most
	// MaxDeferredReported): plan every pending pod next.
	DeferredMore bool `json:"deferredMore,omitempty"`
	// DeferredDisruptedNodes are the request's disrupted nodes some of
	// whose pods belong to plans beyond MaxNodePlans: name the request's
	// disrupted nodes again in the next batch (the pods already planned
	// are in flight by then, so they are not planned twice).
	DeferredDisruptedNodes []string `json:"deferredDisruptedNodes,omitempty"`
	// Settled names in-flight node claims that are no longer in flight (their
	// Node registered or their workflow closed).
	Settled []string `json:"settled,omitempty"`
	// Skipped lists the NodePools and EC2NodeClasses the planner left out
	// (invalid, missing NodeClass, being deleted), each with why.
	Skipped []SkippedObject `json:"skipped,omitempty"`
}

// SkippedObject is a NodePool or EC2NodeClass planning could not use.
type SkippedObject struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Reason names the field and what is wrong with it, e.g.
	// `spec.disruption.budgets[0].schedule: Invalid value: ...`.
	Reason string `json:"reason"`
}

// NodeWorkflowStart is one node workflow to start.
type NodeWorkflowStart struct {
	WorkflowID string         `json:"workflowID"`
	Spec       NodeLaunchSpec `json:"spec"`
}

// StartNodeWorkflowsRequest starts node workflows. WorkflowType and TaskQueue
// come from the calling workflow so this package need not import it; the
// started workflow receives Spec as its only argument.
type StartNodeWorkflowsRequest struct {
	WorkflowType string              `json:"workflowType"`
	TaskQueue    string              `json:"taskQueue"`
	Nodes        []NodeWorkflowStart `json:"nodes"`
}

// StartNodeWorkflowsResponse lists workflow ids by outcome.
type StartNodeWorkflowsResponse struct {
	Started []string `json:"started,omitempty"`
	// AlreadyExisted were running or closed already (a retried batch): not
	// started again.
	AlreadyExisted []string `json:"alreadyExisted,omitempty"`
}
