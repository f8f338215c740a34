package workflows

import (
	"fmt"
	"time"

	"github.com/millwright/millwright/activities"
)

// Phase is where a node is in its lifecycle; it is the MillwrightPhase search
// attribute.
type Phase string

// Node phases, in lifecycle order.
const (
	PhaseLaunching    Phase = "Launching"
	PhaseRegistering  Phase = "Registering"
	PhaseInitializing Phase = "Initializing"
	PhaseReady        Phase = "Ready"
	PhaseDraining     Phase = "Draining"
	PhaseTerminating  Phase = "Terminating"
	PhaseTerminated   Phase = "Terminated"
)

// leaving reports whether the node is already on its way out.
func (p Phase) leaving() bool {
	return p == PhaseDraining || p == PhaseTerminating || p == PhaseTerminated
}

// TerminationReason says why a node ended; it is the
// MillwrightTerminationReason search attribute.
type TerminationReason string

// Termination reasons.
const (
	ReasonEmpty                 TerminationReason = "Empty"
	ReasonExpired               TerminationReason = "Expired"
	ReasonInterrupted           TerminationReason = "Interrupted"
	ReasonDrained               TerminationReason = "Drained"
	ReasonDeleted               TerminationReason = "Deleted"
	ReasonRegistrationTimeout   TerminationReason = "RegistrationTimeout"
	ReasonInitializationTimeout TerminationReason = "InitializationTimeout"
	ReasonInsufficientCapacity  TerminationReason = "InsufficientCapacity"
	ReasonLaunchFailed          TerminationReason = "LaunchFailed"
	ReasonFailed                TerminationReason = "Failed"
	// ReasonCancelled: the workflow itself was cancelled; it still drains
	// and terminates what it launched before reporting Canceled.
	ReasonCancelled TerminationReason = "Cancelled"
	// Disruption commands' reasons (the NodePool budget reasons, and
	// repair's Unhealthy); ReasonEmpty is one of them too.
	ReasonUnderutilized TerminationReason = "Underutilized"
	ReasonDrifted       TerminationReason = "Drifted"
	ReasonUnhealthy     TerminationReason = "Unhealthy"
)

// Termination records why and how a node is leaving.
type Termination struct {
	Reason TerminationReason `json:"reason"`
	// Detail is the human explanation: the drain reason, the interruption
	// event, the error.
	Detail string `json:"detail,omitempty"`
	// Requester is who asked (manual drains, the worker for deletions).
	Requester   string    `json:"requester,omitempty"`
	RequestedAt time.Time `json:"requestedAt"`
	// Voluntary terminations respect do-not-disrupt pods.
	Voluntary bool `json:"voluntary"`
	// Deadline, when set, is when the drain must be over regardless of PDBs
	// (the pool's terminationGracePeriod, or the instance's interruption).
	Deadline time.Time `json:"deadline,omitzero"`
	// UnschedulableSince is when the committing command tainted the node
	// (CommandSignal.DisruptedAt), for the drain's confirmation window.
	UnschedulableSince time.Time `json:"unschedulableSince,omitzero"`
}

// Decision is one thing the workflow decided, in order.
type Decision struct {
	At      time.Time `json:"at"`
	Phase   Phase     `json:"phase"`
	Message string    `json:"message"`
}

// RejectedOffering is an offering the launch gave up on, and why.
type RejectedOffering struct {
	activities.OfferingKey
	Reason string `json:"reason"`
}

// PodCount is the node's non-DaemonSet pod count as last reported.
type PodCount struct {
	NonDaemonSet int       `json:"nonDaemonSet"`
	ObservedAt   time.Time `json:"observedAt"`
}

// nodeStateVersion is the NodeState shape this code writes; readNodeState
// reads every older one. Version 1 (v0.2) is the first; a state without a
// version (0) predates the field and reads as version 1.
const nodeStateVersion = 1

// maxDecisions bounds the decision log carried across continue-as-new.
const maxDecisions = 100

// maxRememberedInterruptions bounds the interruption event ids kept for
// deduplication.
const maxRememberedInterruptions = 20

// NodeState is everything a node workflow knows beyond its spec. It is
// carried across continue-as-new, so every deadline in it is absolute: a new
// run recomputes its timers from them and never restarts a countdown.
type NodeState struct {
	Version   int       `json:"version"`
	Phase     Phase     `json:"phase"`
	CreatedAt time.Time `json:"createdAt"`

	Instance      *activities.LaunchResponse `json:"instance,omitempty"`
	NodeName      string                     `json:"nodeName,omitempty"`
	RegisteredAt  time.Time                  `json:"registeredAt,omitzero"`
	InitializedAt time.Time                  `json:"initializedAt,omitzero"`

	// RegistrationDeadline is when an unregistered instance is given up on.
	RegistrationDeadline time.Time `json:"registrationDeadline,omitzero"`
	// LaunchUnconfirmed: the launch ended without saying whether it created
	// an instance (it timed out, it was cancelled); Terminating looks for
	// one by the node claim's tags. Never carried across continue-as-new
	// (only Ready continues as new).
	LaunchUnconfirmed bool `json:"launchUnconfirmed,omitempty"`

	Pods PodCount `json:"pods"`
	// EmptySince is when the node last became empty while Ready; the
	// consolidateAfter countdown runs from it. Zero when not empty.
	EmptySince time.Time `json:"emptySince,omitzero"`
	// DisruptionRetryAt postpones an empty-node termination a disruption
	// budget refused.
	DisruptionRetryAt time.Time `json:"disruptionRetryAt,omitzero"`
	// EmptyHandedOver: a budget refused this node's own empty-node
	// termination, so the disruption workflow decides its emptiness from
	// then on (changeRefusedEmptyWaits); no timer polls the budget.
	EmptyHandedOver bool `json:"emptyHandedOver,omitempty"`

	Termination *Termination `json:"termination,omitempty"`
	// Reservation is the disruption command holding the node; nil when
	// none.
	Reservation *Reservation `json:"reservation,omitempty"`
	// Drift is what the disruption workflow last found drifted about the
	// node; nil when it has not drifted.
	Drift *DriftNotice `json:"drift,omitempty"`
	// ReplacementFailureReported: the command this node replaces for was
	// told it failed.
	ReplacementFailureReported bool `json:"replacementFailureReported,omitempty"`

	// Launch bookkeeping, kept for the history query.
	RejectedOfferings []RejectedOffering `json:"rejectedOfferings,omitempty"`
	Interruptions     []Interruption     `json:"interruptions,omitempty"`
	Decisions         []Decision         `json:"decisions,omitempty"`
	DroppedDecisions  int                `json:"droppedDecisions,omitempty"`
}

// NodeResult is what a node workflow returns when the node is gone.
type NodeResult struct {
	NodeClaimName string                     `json:"nodeClaimName"`
	Instance      *activities.LaunchResponse `json:"instance,omitempty"`
	NodeName      string                     `json:"nodeName,omitempty"`
	Termination   Termination                `json:"termination"`
}

// PendingTimer is a durable timer the workflow is waiting on.
type PendingTimer struct {
	Name    string    `json:"name"`
	FiresAt time.Time `json:"firesAt"`
}

// NodeStateView answers QueryState.
type NodeStateView struct {
	NodeClaimName    string                     `json:"nodeClaimName"`
	NodePool         string                     `json:"nodePool"`
	Phase            Phase                      `json:"phase"`
	Instance         *activities.LaunchResponse `json:"instance,omitempty"`
	NodeName         string                     `json:"nodeName,omitempty"`
	NonDaemonSetPods int                        `json:"nonDaemonSetPods"`
	CreatedAt        time.Time                  `json:"createdAt"`
	// Deadlines that apply now; zero when not applicable.
	ExpiresAt            time.Time      `json:"expiresAt,omitzero"`
	EmptyTTLAt           time.Time      `json:"emptyTTLAt,omitzero"`
	RegistrationDeadline time.Time      `json:"registrationDeadline,omitzero"`
	DrainDeadline        time.Time      `json:"drainDeadline,omitzero"`
	Timers               []PendingTimer `json:"timers,omitempty"`
	Termination          *Termination   `json:"termination,omitempty"`
	// Reservation is the disruption command holding the node.
	Reservation *Reservation `json:"reservation,omitempty"`
	// Drift is what the disruption workflow last found drifted; nil when
	// the node has not drifted.
	Drift *DriftNotice `json:"drift,omitempty"`
}

// LaunchRecord is why the node exists.
type LaunchRecord struct {
	// Summary is the planner's explanation.
	Summary string   `json:"summary,omitempty"`
	PodKeys []string `json:"podKeys,omitempty"`
	// OptionsConsidered are the instance types offered, cheapest first.
	OptionsConsidered []string `json:"optionsConsidered"`
	// Chosen is what EC2 launched; nil until launched.
	Chosen *ChosenOffering `json:"chosen,omitempty"`
	// Rejected are offerings given up on before the launch succeeded.
	Rejected []RejectedOffering `json:"rejected,omitempty"`
}

// ChosenOffering is the offering a launch got.
type ChosenOffering struct {
	activities.OfferingKey
	PricePerHour float64 `json:"pricePerHour"`
}

// NodeHistoryView answers QueryHistory.
type NodeHistoryView struct {
	Launch           LaunchRecord   `json:"launch"`
	Termination      *Termination   `json:"termination,omitempty"`
	Interruptions    []Interruption `json:"interruptions,omitempty"`
	Decisions        []Decision     `json:"decisions"`
	DroppedDecisions int            `json:"droppedDecisions,omitempty"`
}

// readNodeState is how a run resumed by continue-as-new takes the state the
// last run carried: an older version is brought to today's shape; a newer
// one fails the workflow task (see refuseNewerState).
func readNodeState(carried *NodeState) *NodeState {
	state := *carried
	refuseNewerState("node", state.Version, nodeStateVersion)
	// Versions 0 (before the field) and 1 are today's shape.
	state.Version = nodeStateVersion
	return &state
}

// refuseNewerState panics on carried state of a version newer than this
// code writes (a worker rolled back under a newer run): the workflow task
// fails and Temporal retries it until a worker that knows the version takes
// it, instead of this one misreading the state.
func refuseNewerState(what string, version, current int) {
	if version > current {
		panic(fmt.Sprintf("%s state version %d is newer than this worker's %d: leaving the workflow to a newer worker", what, version, current))
	}
}
