package activities

import (
	"time"

	"github.com/millwright/millwright/model/disruption"
)

// ComputeCommandsRequest asks what the disruption workflow should do now.
// Everything the cluster shows (Nodes, pods, PDBs, NodePools,
// EC2NodeClasses and their status) is read live; the request carries only
// what the workflows know and the cluster does not.
type ComputeCommandsRequest struct {
	Cluster string `json:"cluster"`
	// InFlight are the provisioner's nodes launched but not registered:
	// pods may be moved onto their free capacity.
	InFlight []InFlightNode `json:"inFlight,omitempty"`
	// Nodes is what node workflows know of their nodes. A node claim
	// without an entry is judged from the Node alone (see
	// DisruptionNodeState).
	Nodes                []DisruptionNodeState `json:"nodes,omitempty"`
	UnavailableOfferings []UnavailableOffering `json:"unavailableOfferings,omitempty"`
	Options              DisruptionOptions     `json:"options"`
	// MaxCommands bounds the commands returned (0: no bound) so one
	// response stays well under Temporal's payload limit.
	MaxCommands int `json:"maxCommands,omitempty"`
	// Validation: a command asks whether its decision still holds (its
	// answer is not a new decision, for the metrics).
	Validation bool `json:"validation,omitempty"`
	// Admission: the disruption workflow asks whether a validated command
	// may commit now, within the budgets: committed nodes are charged,
	// validating ones are not (implies Validation).
	Admission bool `json:"admission,omitempty"`
	// Admitting, in an admission, are the node claims of the command asking
	// to be admitted: only they may be candidates of the fresh decision
	// (every other node stays where it is and takes pods). Sent since
	// change admit-own-candidates; before, the fresh decision considered
	// every node, and decisions it made for others first could take the
	// budget or place pods on the command's candidates, refusing it.
	Admitting []string `json:"admitting,omitempty"`
	// ValidatingWait: in a pass (not an admission), validating nodes use
	// no budget but wait in a second ledger of their own, at most one
	// budget's worth per pool (model/disruption Node.Waiting). Sent by
	// disruption workflows since change validating-wait; before, a pass
	// charged validating nodes like admitted ones.
	ValidatingWait bool `json:"validatingWait,omitempty"`
}

// DisruptionNodeState is a node workflow's view of its node. Zero fields
// fall back to what the Node shows: initialized once it is registered,
// Ready and free of startup taints (or older than the initialization
// timeout); nominated for the nomination window after it became Ready;
// the last pod event is the latest pod bound to it; reserved when tainted
// millwright.dev/disrupted or annotated as reserved.
type DisruptionNodeState struct {
	NodeClaimName string `json:"nodeClaimName"`
	// Initialized: the node workflow saw the node initialized (it stays so
	// when the node later goes NotReady).
	Initialized bool `json:"initialized,omitempty"`
	// NominatedUntil: pending pods are expected to bind to the node before
	// then.
	NominatedUntil time.Time `json:"nominatedUntil,omitempty"`
	// LastPodEventAt: the last pod bound to or removed from the node.
	LastPodEventAt time.Time `json:"lastPodEventAt,omitempty"`
	// LaunchedByConsolidationAt: the node replaced others in a
	// consolidation at this time.
	LaunchedByConsolidationAt time.Time `json:"launchedByConsolidationAt,omitempty"`
	// Reserved: a command or drain holds the node. Deleting: its workflow
	// is terminating it.
	Reserved bool `json:"reserved,omitempty"`
	Deleting bool `json:"deleting,omitempty"`
	// Validating: a command that is still validating holds the node (it is
	// held like a reserved one). Committed: a command admitted to disrupt
	// holds it. A pass charges the pool's budget for validating nodes and
	// not for committed ones (their command's budget was checked when it
	// was admitted); an admission charges it for committed nodes and not
	// for validating ones (see Admission).
	Validating bool `json:"validating,omitempty"`
	Committed  bool `json:"committed,omitempty"`
	// DecidedLater, in an admission: the validating command holding the
	// node was decided after the command being admitted, so the node's
	// pods stay on it in its fresh decision and do not compete for room
	// (model/disruption Node.DecidedAfter). Sent since change
	// admit-before-later.
	DecidedLater bool `json:"decidedLater,omitempty"`
	// DriftedSince: when the disruption workflow first found the node
	// drifted; drift takes the earliest first (model/disruption
	// Node.DriftedSince). Sent since change drift-order.
	DriftedSince time.Time `json:"driftedSince,omitempty"`
	// ReplacementFor: the node is a replacement launched by this running
	// disruption command; it is no candidate until the command ends (its
	// candidates' pods may still be on their way to it).
	ReplacementFor string `json:"replacementFor,omitempty"`
}

// DisruptionOptions tune the decision (model/disruption.Options); zero
// values take its defaults.
type DisruptionOptions struct {
	// ConsolidationThreshold is the Balanced score's k (default 2; negative
	// takes any saving).
	ConsolidationThreshold int `json:"consolidationThreshold,omitempty"`
	// ReplaceSavingsFraction lets a replacement that saves this fraction of
	// its candidates' price through whatever its score (default 0.3;
	// negative: the score alone).
	ReplaceSavingsFraction float64 `json:"replaceSavingsFraction,omitempty"`
	// RepackSavingsFraction is ReplaceSavingsFraction for a repack of two
	// nodes single-node consolidation keeps (0: the default, 10%).
	RepackSavingsFraction float64 `json:"repackSavingsFraction,omitempty"`
	// MinSavingsPerHour is a floor on a replacement's saving, $/h.
	MinSavingsPerHour float64 `json:"minSavingsPerHour,omitempty"`
	// DisableSpotToSpot turns spot→spot replacement off.
	DisableSpotToSpot bool `json:"disableSpotToSpot,omitempty"`
	// DisableSplit keeps a node no single cheaper node can replace, as
	// Karpenter does, instead of replacing it by several cheaper nodes,
	// and repacks no pairs of kept nodes.
	DisableSplit bool `json:"disableSplit,omitempty"`
	// SkipSettlingDestinations keeps the pods consolidation moves off a
	// node still within its pool's consolidateAfter, as Karpenter since
	// v1.14 (off by default; see disruption.Options).
	SkipSettlingDestinations bool `json:"skipSettlingDestinations,omitempty"`
	// RepairToleration is how long a node may be NotReady before it is
	// replaced (default 30m).
	RepairToleration time.Duration `json:"repairToleration,omitempty"`
	// BatchMaxDuration is the provisioner's batch max window: a node is
	// nominated for max(2 × it, 10s) after it became Ready (default 10s).
	BatchMaxDuration time.Duration `json:"batchMaxDuration,omitempty"`
	// ValidationLookahead is how many budgets' worth of nodes a pass may
	// hold in commands that wait out their validation delay or disrupt
	// (only with ValidatingWait; default DefaultValidationLookahead;
	// negative: one budget's worth waiting beside one disrupting, the rule
	// before). Admission still charges the budget itself.
	ValidationLookahead int `json:"validationLookahead,omitempty"`
}

// DefaultValidationLookahead lets the next decisions wait out their 15 s
// validation while earlier ones do, so that a budget-limited scale-down
// takes a round every few seconds (a drain and a termination) instead of
// one every validation delay plus drain: on mixed-600, ~20 s a round, 18
// rounds of 10% from 75 nodes to 11, longer than the five minutes.
const DefaultValidationLookahead = 3

// ComputeCommandsResponse is the decision.
type ComputeCommandsResponse struct {
	// Commands to run, in order, with disjoint candidates, together within
	// every pool's budget for each reason.
	Commands []DisruptionCommand `json:"commands,omitempty"`
	// Verdicts say, per managed node, why it is or is not a candidate.
	Verdicts []DisruptionVerdict `json:"verdicts,omitempty"`
	// Budgets are the disruptions each pool allows now, per reason.
	Budgets []DisruptionBudget `json:"budgets,omitempty"`
	// Skipped are NodePools and EC2NodeClasses that could not be used.
	Skipped         []SkippedObject `json:"skipped,omitempty"`
	NodesConsidered int             `json:"nodesConsidered"`
	PodsConsidered  int             `json:"podsConsidered"`
	// RecheckAfter is how long after the observation a node held back
	// only by consolidateAfter may be consolidated; zero when none is. A
	// duration, not a time: the caller's clock (a workflow's) need not be
	// the activity's.
	RecheckAfter time.Duration `json:"recheckAfter,omitempty"`
}

// DisruptionCommand is one decision: disrupt Candidates for Reason, by
// Kind; a replace launches Replacements first (through the provisioner's
// start path; NodeClaimName is left empty for the caller to name them).
type DisruptionCommand struct {
	Reason         disruption.Reason     `json:"reason"`
	Kind           disruption.Kind       `json:"kind"`
	Candidates     []DisruptionCandidate `json:"candidates"`
	Replacements   []NodeLaunchSpec      `json:"replacements,omitempty"`
	SavingsPerHour float64               `json:"savingsPerHour"`
	// Message says it in one line ("Underutilized: 3 nodes → 1
	// c6i.2xlarge saves $0.41/h", "Drifted: AMI ami-a → ami-b").
	Message string `json:"message"`
}

// DisruptionCandidate is one node a command disrupts.
type DisruptionCandidate struct {
	NodeClaimName string   `json:"nodeClaimName"`
	NodeName      string   `json:"nodeName"`
	NodePool      string   `json:"nodePool"`
	InstanceType  string   `json:"instanceType"`
	CapacityType  string   `json:"capacityType"`
	PricePerHour  float64  `json:"pricePerHour"`
	PodKeys       []string `json:"podKeys,omitempty"`
	// Why is this node's own reason (the drift found, the repair finding).
	Why string `json:"why,omitempty"`
}

// DisruptionVerdict is what the decision thinks of one node.
type DisruptionVerdict struct {
	NodeClaimName string `json:"nodeClaimName"`
	NodeName      string `json:"nodeName"`
	NodePool      string `json:"nodePool"`
	Candidate     bool   `json:"candidate"`
	// Command is the index of the command taking the node, -1 when none.
	Command int `json:"command"`
	// Event is the Karpenter event reason to publish (DisruptionBlocked,
	// Unconsolidatable) or "".
	Event   string `json:"event,omitempty"`
	Message string `json:"message,omitempty"`
	Drifted string `json:"drifted,omitempty"`
	// DriftKind is what drifted, in Karpenter's words (AMIDrift,
	// NodePoolDrifted, …); "" when the node has not drifted.
	DriftKind string `json:"driftKind,omitempty"`
	Unhealthy string `json:"unhealthy,omitempty"`
	// Outlier: consolidation means to take the node before the others and
	// moves no pods onto it meanwhile; the disruption workflow taints it
	// OutlierTaintKey so that kube-scheduler does not either.
	Outlier bool `json:"outlier,omitempty"`
}

// DisruptionBudget is how many more of a pool's nodes may be disrupted
// now, per reason.
type DisruptionBudget struct {
	NodePool   string                    `json:"nodePool"`
	Nodes      int                       `json:"nodes"`
	Disrupting int                       `json:"disrupting"`
	Allowed    map[disruption.Reason]int `json:"allowed"`
	// Limit is the budget per reason before the disrupting nodes are
	// taken off.
	Limit  map[disruption.Reason]int `json:"limit,omitempty"`
	Errors []string                  `json:"errors,omitempty"`
}
