package workflows

import (
	"time"

	"github.com/millwright/millwright/activities"
)

// Messages the node workflow accepts. Each name is paired with its payload
// type below. Names are recorded in histories and never change.
const (
	// SignalPodsChanged (PodsChanged): the worker's pod watcher reports the
	// node's non-DaemonSet pod count when a pod lands on or leaves it.
	SignalPodsChanged = "podsChanged"
	// SignalInterruption (Interruption): the worker's SQS poller reports an
	// EC2 interruption event for the node's instance.
	SignalInterruption = "interruption"
	// SignalDrain (DrainRequest): drain and terminate the node; fire and
	// forget. Prefer UpdateDrain, which answers.
	SignalDrain = "drain"
	// SignalNodeDeleted (NodeDeleted): the Node has a deletionTimestamp (held
	// by the termination finalizer).
	SignalNodeDeleted = "nodeDeleted"

	// UpdateDrain (DrainRequest → DrainResult): drain and terminate the
	// node; rejected by its validator when the node is already on its way
	// out or the request is malformed.
	UpdateDrain = "drain"

	// QueryState (→ NodeStateView): phase, instance, node, pods, pending
	// timers and deadlines.
	QueryState = "state"
	// QueryHistory (→ NodeHistoryView): why the node was launched and why it
	// is (being) terminated, with every decision taken.
	QueryHistory = "history"
)

// Messages the provisioning workflow accepts.
const (
	// SignalPodsPending (PodsPending): pods became provisionable.
	SignalPodsPending = "podsPending"
	// SignalReplan (ReplanRequest): a node workflow gave up on its pods
	// (insufficient capacity, launch failure), is being interrupted, or
	// ended; plan again.
	SignalReplan = "replan"
	// SignalReconcile (ReconcileRequest): something changed that may need
	// nodes without any pod pending (a NodePool's minNodes, a NodePool
	// created).
	SignalReconcile = "reconcile"

	// QueryProvisionerState (→ ProvisionerStateView).
	QueryProvisionerState = "state"
)

// PodsChanged carries a node's pod count as the watcher saw it.
type PodsChanged struct {
	NonDaemonSetPods int `json:"nonDaemonSetPods"`
	// ObservedAt orders reports from several workers; an older report than
	// the last applied one is ignored.
	ObservedAt time.Time `json:"observedAt"`
}

// InterruptionKind classifies EC2 interruption events.
type InterruptionKind string

// Interruption kinds, as the worker's SQS poller maps EventBridge events.
const (
	// InterruptionSpotWarning: the two-minute spot interruption notice.
	InterruptionSpotWarning InterruptionKind = "spot-warning"
	// InterruptionScheduledChange: an AWS Health scheduled change (e.g.
	// instance retirement).
	InterruptionScheduledChange InterruptionKind = "scheduled-change"
	// InterruptionStateChange: the instance is stopping, stopped,
	// shutting-down or terminated.
	InterruptionStateChange InterruptionKind = "state-change"
	// InterruptionRebalance: a rebalance recommendation; only recorded.
	InterruptionRebalance InterruptionKind = "rebalance"
)

// Interruption is one interruption event for the node's instance.
type Interruption struct {
	Kind InterruptionKind `json:"kind"`
	// EventID deduplicates the same event delivered by several pollers.
	EventID   string    `json:"eventID"`
	EventTime time.Time `json:"eventTime"`
	// Deadline is when the instance goes away (spot: event time + 2
	// minutes); zero when unknown. Drains finish by then.
	Deadline time.Time `json:"deadline,omitzero"`
	// Detail is the event's own description, e.g. the new instance state.
	Detail string `json:"detail,omitempty"`
}

// DrainRequest asks for the node to be drained and terminated.
type DrainRequest struct {
	Reason    string `json:"reason"`
	Requester string `json:"requester"`
}

// DrainResult answers UpdateDrain.
type DrainResult struct {
	Accepted bool `json:"accepted"`
	// Phase is the node's phase when the request was accepted.
	Phase Phase `json:"phase"`
}

// NodeDeleted reports the Node's deletion.
type NodeDeleted struct {
	// DeletionTimestamp is when the Node was deleted; the pool's
	// terminationGracePeriod counts from it. Zero means "now".
	DeletionTimestamp time.Time `json:"deletionTimestamp,omitzero"`
}

// PodsPending carries pods that became provisionable, by key, never spec.
type PodsPending struct {
	PodKeys []string `json:"podKeys"`
}

// ReplanRequest is a node workflow asking the provisioner to plan again.
type ReplanRequest struct {
	// NodeClaimName is the sender; the provisioner stops counting it as
	// in flight.
	NodeClaimName string `json:"nodeClaimName"`
	// PodKeys are pods the sender will not run after all.
	PodKeys []string `json:"podKeys,omitempty"`
	// DisruptedNodes are Nodes about to go away whose pods need new homes.
	DisruptedNodes []string `json:"disruptedNodes,omitempty"`
	// UnavailableOfferings had no capacity; the planner avoids them until
	// they expire.
	UnavailableOfferings []activities.UnavailableOffering `json:"unavailableOfferings,omitempty"`
	Reason               string                           `json:"reason"`
}

// ReconcileRequest asks the provisioner for a planning pass without pods.
type ReconcileRequest struct {
	Reason string `json:"reason"`
}
