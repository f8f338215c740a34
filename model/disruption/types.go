package disruption

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// Reason is why a command disrupts its candidates. Empty, Underutilized
// and Drifted are the NodePool budget reasons (apisv1.DisruptionReason);
// Unhealthy is repair, which budgets do not govern (it has its own cap,
// Options.RepairMaxFraction).
type Reason string

const (
	ReasonEmpty         Reason = Reason(apisv1.DisruptionReasonEmpty)
	ReasonUnderutilized Reason = Reason(apisv1.DisruptionReasonUnderutilized)
	ReasonDrifted       Reason = Reason(apisv1.DisruptionReasonDrifted)
	ReasonUnhealthy     Reason = "Unhealthy"
)

// Kind is what a command does to its candidates.
type Kind string

const (
	// KindDelete drains and terminates the candidates; their pods fit on
	// the remaining initialized nodes.
	KindDelete Kind = "delete"
	// KindReplace launches Command.Replacements first, waits until they are
	// initialized, then drains and terminates the candidates.
	KindReplace Kind = "replace"
)

// Input is one snapshot of the cluster. Compute reads it only; slices and
// maps are shared with the caller and must not change during the call.
type Input struct {
	// Now is the time of the snapshot: every timer (consolidateAfter,
	// nomination, do-not-disrupt durations, repair toleration, budget
	// windows) is measured against it.
	Now time.Time
	// Nodes are the cluster's registered Nodes. Nodes without a NodePool
	// (not Millwright's) are never candidates but their free capacity takes
	// pods in simulations, as does every non-candidate node's.
	Nodes []Node
	// PendingPods are provisionable pods not bound yet: a simulation must
	// place them too (they compete for the room candidates' pods need).
	PendingPods []*corev1.Pod
	// InFlight are nodes launched (or launching) whose Node has not
	// registered: capacity the pods that come first (pending, or from
	// nodes leaving) may be simulated onto, not the pods a decision moves
	// (packer.Node with InFlight set, its pods already out of Available).
	InFlight []packer.Node
	// DaemonSetPods are one pod per DaemonSet (as the planner builds them):
	// their requests count against a replacement's allocatable.
	DaemonSetPods []*corev1.Pod
	// NodePools are the pools, usable or not (a deleted or invalid pool's
	// nodes are still nodes; see NodePool.Launchable).
	NodePools []NodePool
	// Storage holds the pods' claims, volumes and classes: a pod moved off
	// a candidate stays in its volume's zone (a zonal EBS volume), and a pod
	// whose claim does not exist fits nowhere, as in provisioning.
	Storage packer.Storage
	// Namespaces are the namespaces' labels, which pod affinity's
	// namespaceSelector reads.
	Namespaces map[string]map[string]string
	// Options tune the decision; the zero value means Karpenter's defaults.
	Options Options
	// Only, when not empty, names the node claims that may be candidates
	// (an admission checks one command's decision: the other nodes stay
	// and take pods, but no decision is made for them).
	Only []string
	// Validation: a command asks whether its decision still holds (with
	// or without Only). Its candidates carry the candidate taint, which
	// steers kube-scheduler away from them, so the pods of nodes being
	// taken apart nominate no node: only pending pods do (see
	// nominateLeaving).
	Validation bool
}

// Node is a registered Node as disruption sees it.
type Node struct {
	// ClaimName is the node claim (the node workflow's id suffix); empty for
	// Nodes Millwright does not manage.
	ClaimName string
	// Name is the Node's name.
	Name string
	// NodePool that launched it; empty when Millwright does not manage it.
	NodePool     string
	InstanceType string
	Zone         string
	CapacityType string
	// Price is the hourly price of the node's offering (0 when unknown:
	// such a node is never replaced, only deleted).
	Price float64
	// Allocatable is the Node's status.allocatable.
	Allocatable scheduling.Resources
	Labels      map[string]string
	Annotations map[string]string
	Taints      []corev1.Taint
	// Pods bound to the node and not terminal, DaemonSet pods included.
	Pods []Pod

	// CreatedAt is the Node's creation (registration) time; with the pool's
	// expireAfter it gives the lifetime remaining that scales disruption cost.
	CreatedAt time.Time
	// Initialized is true once the node workflow saw the Node Ready with its
	// startup taints gone and requested resources allocatable.
	Initialized bool
	// NominatedUntil: the provisioner placed pending pods on this node and
	// expects them to bind before then; it is not a candidate until then.
	NominatedUntil time.Time
	// LastPodEventAt is the last time a pod was bound to or removed from
	// the node (its creation when none): consolidateAfter counts from it.
	LastPodEventAt time.Time
	// DriftedSince is when the disruption workflow first found the node
	// drifted (zero: not drifted, or found so by this computation): drift
	// takes the earliest drifted first, as Karpenter orders by its
	// Drifted condition's transition.
	DriftedSince time.Time
	// LaunchedByConsolidationAt is set when the node is the replacement of a
	// consolidation command: it is not consolidated again before its own
	// consolidateAfter has passed from then (anti-churn).
	LaunchedByConsolidationAt time.Time

	// Ready is the status of the Node's Ready condition ("" when absent)
	// and ReadySince its lastTransitionTime.
	Ready      corev1.ConditionStatus
	ReadySince time.Time
	// Conditions are the Node's conditions; repair reads those of
	// MonitoringRepairPolicies (the node monitoring agent's).
	Conditions []corev1.NodeCondition
	// Deleting: the Node has a deletion timestamp or its node workflow is
	// terminating it. Disrupting: a command or a drain holds it (reserved,
	// tainted millwright.dev/disrupted). Both count against budgets and
	// neither is ever a candidate.
	Deleting   bool
	Disrupting bool
	// Uncharged: the node is held like a disrupting one (never a
	// candidate, never a destination, its pods compete first) but uses no
	// budget in this computation, because its budget is accounted
	// elsewhere: a disruption pass does not charge the candidates of
	// commands already admitted (their budget was checked when they were
	// admitted), and an admission does not charge those of commands still
	// validating (they are checked when they are admitted in turn).
	Uncharged bool
	// Waiting: an Uncharged node held by a command waiting out its
	// validation delay. A pass lets a pool's validating commands hold at
	// most one budget's worth of nodes besides the disrupting ones: the
	// next decisions wait out their validation while the admitted ones
	// drain, and each still needs the budget when it is admitted.
	Waiting bool
	// DecidedAfter, in an admission (Input.Only): a node held by a
	// command decided after the one being admitted and still waiting out
	// its validation. Its pods do not compete first: when the admitted
	// command was decided they were still on this node (or, in the same
	// pass, were placed after its pods), and that command's own admission
	// counts the admitted one's pods first. With them first, two commands
	// waiting at once each saw the other's pods take its room and both
	// were refused (on mixed-600, whole passes of commands invalidated
	// together, decided again and invalidated again). Its pods stay on it,
	// counted for topology as kube-scheduler counts them until they go;
	// the node stays held: never a candidate, never a destination.
	DecidedAfter bool
	// ReplacementFor names the running disruption command that launched
	// the node to take its candidates' pods: it is no candidate until that
	// command ends, however empty it looks while they drain.
	ReplacementFor string

	// Drift stamps, read from the Node's annotations (see hash.go): the
	// hashes and hash versions of its NodePool template and EC2NodeClass
	// at launch. Empty stamps never drift (a node launched before stamping).
	NodePoolHash         string
	NodePoolHashVersion  string
	NodeClassHash        string
	NodeClassHashVersion string
	// ImageID, SubnetID and SecurityGroupIDs are what the instance was
	// launched with; empty when unknown (then that kind of drift is not
	// checked).
	ImageID          string
	SubnetID         string
	SecurityGroupIDs []string
}

// Pod is a pod bound to a node.
type Pod struct {
	Pod *corev1.Pod
	// PDBBlocked names the PodDisruptionBudgets that allow no eviction of
	// this pod now (Karpenter: "pdb prevents pod evictions"); more than one
	// matching PDB also blocks (eviction does not support multiple PDBs).
	PDBBlocked []string
	// PDBAlwaysBlocks: the budgets blocking the pod never allow its
	// eviction (several select it, or its one's spec allows none:
	// maxUnavailable 0 or "0%", minAvailable "100%"; Karpenter's fully
	// blocking PDBs). Drift under a terminationGracePeriod plans no room
	// for such a pod, nor for one with an active do-not-disrupt: it leaves
	// only when the grace period ends, as Karpenter's simulation leaves
	// out pods that are not currently reschedulable.
	PDBAlwaysBlocks bool
}

// NodePool is a NodePool with what disruption needs of it.
type NodePool struct {
	// Pool is the NodePool, defaulted (SetDefaults). Required.
	Pool *apisv1.NodePool
	// Launch is the packer's view of the pool (requirements, labels, taints,
	// instance types with offerings and prices, limits and usage), as the
	// planner builds it; replacements are planned with it. Launchable is
	// false when the pool cannot launch now (being deleted, invalid, its
	// class unresolved): its nodes are then only deleted, never replaced.
	Launch     packer.NodePool
	Launchable bool
	// NodePoolHash is NodePoolHash(Pool) now (the activity computes it once).
	NodePoolHash string
	// NodeClass is the pool's EC2NodeClass now; nil when missing.
	NodeClass *NodeClass
}

// NodeClass is the resolved state of an EC2NodeClass for drift.
type NodeClass struct {
	Name string
	// Hash is NodeClassHash of the class now.
	Hash string
	// AMIs, Subnets and SecurityGroups are the ids the class's status
	// resolves to now (status.amis, status.subnets, status.securityGroups).
	// An empty list means "not resolved": that kind of drift is not checked.
	AMIs           []string
	Subnets        []string
	SecurityGroups []string
}

// Options tune Compute. The zero value means the defaults below.
type Options struct {
	// BatchMaxDuration is the provisioner's batch max window; a node
	// nominated for pending pods is protected for max(2 × it, 10 s) from the
	// nomination (Karpenter's window). Callers that track NominatedUntil
	// themselves can leave it zero.
	BatchMaxDuration time.Duration
	// ConsolidationThreshold is Karpenter's Balanced k: a replacement is
	// taken only if (saving / pool cost) / (disruption / pool disruption)
	// ≥ 1/k. 0 means DefaultConsolidationThreshold; negative disables the
	// score (any saving is taken, Karpenter's pre-balanced behaviour).
	// Deletes are never scored: they save their nodes' whole price and
	// launch nothing that could be replaced again.
	ConsolidationThreshold int
	// ReplaceSavingsFraction lets a replacement in a pool that is not
	// Balanced through whatever its score when it saves at least this
	// fraction of what its candidates cost: the score weighs a move
	// against the whole pool, so on its own it keeps a dense node that
	// cheaper types would hold for a fraction of its price (a $0.10/h node
	// with 7 of 180 pods needs a $0.02/h replacement at k = 2). 0 means
	// DefaultReplaceSavingsFraction; negative, the score alone decides.
	// Every command it lets through lowers the pool's cost by at least
	// this fraction of what it replaces, so they cannot chain for long.
	ReplaceSavingsFraction float64
	// RepackSavingsFraction is ReplaceSavingsFraction for a repack of
	// two nodes single-node consolidation kept (repack.go). 0 means
	// DefaultRepackSavingsFraction; negative, the score alone decides.
	RepackSavingsFraction float64
	// MinSavingsPerHour is an absolute floor on a replace's saving in $/h
	// (0: none).
	MinSavingsPerHour float64
	// DisableSpotToSpot turns spot→spot replacement off (Karpenter's
	// feature gate off); by default it is allowed with at least
	// MinSpotToSpotOptions cheaper options.
	DisableSpotToSpot bool
	// DisableSplit turns splitting off: a node no single cheaper node can
	// replace is kept, as Karpenter keeps it ("Can't remove without
	// creating N candidates"). By default single-node consolidation then
	// tries replacing it by several nodes that together cost less
	// (split.go), and pairs of the nodes it kept are repacked (repack.go);
	// DisableSplit turns both off.
	DisableSplit bool
	// SkipSettlingDestinations keeps the pods consolidation moves off a
	// node still within its own pool's consolidateAfter since its last pod
	// event, as Karpenter does since v1.14 (kubernetes-sigs/karpenter
	// #3006); pending pods, those of nodes already leaving, drift and
	// repair may still use it. Off by default: on mixed-600 it kept the
	// nodes that had just taken evicted pods, which are where the next
	// moves put theirs, from taking more, so deletes became spot→spot
	// replacements: one run took 78 commands in the five minutes where the
	// run before took 35, 27 of them refused at admission, and ended at
	// 1.17× a fresh plan, over its 1.15×; the next got under 1.15× only
	// after 4 min 17 s (README, session 33).
	SkipSettlingDestinations bool
	// RepairToleration is how long Ready may be False/Unknown on an
	// initialized node before it is replaced. 0 means DefaultRepairToleration.
	RepairToleration time.Duration
	// RepairMaxFraction caps the share of a pool's nodes that may be
	// unhealthy for repair to act (above it nothing is repaired: the fault
	// is likely not the nodes'). 0 means DefaultRepairMaxFraction.
	RepairMaxFraction float64
	// MultiNodeMaxCandidates bounds the multi-node search (Karpenter: 100).
	// 0 means DefaultMultiNodeMaxCandidates.
	MultiNodeMaxCandidates int
	// MaxCommands bounds the commands of one Result (0: no bound).
	MaxCommands int
	// SingleNodeMaxSimulations bounds the scheduling simulations
	// single-node consolidation runs in one Compute (Karpenter bounds it by
	// a 3-minute timeout; a count keeps Compute deterministic). Half of
	// them go to the cheapest candidates to disrupt; the other half to the
	// rest in turns, pass after pass (by Input.Now), so every candidate is
	// simulated eventually. 0 means DefaultSingleNodeMaxSimulations;
	// negative, no bound.
	SingleNodeMaxSimulations int
	// ValidationLookahead, in budgets' worth, lets decisions be made ahead
	// of the budget in a pass that counts nodes waiting out a validation
	// delay (Node.Waiting): the waiting and the disrupting nodes together
	// may reach this many budgets, one budget's worth at most decided per
	// pass; a command still needs the budget itself when it is admitted,
	// so no more nodes than the budget allows are ever disrupted. Empty
	// decisions never go ahead (they wait out no validation: the pass that
	// decides them admits them). 0 keeps one budget's worth waiting beside
	// one disrupting.
	ValidationLookahead int
}

// Defaults of Options.
const (
	DefaultConsolidationThreshold = 2
	DefaultReplaceSavingsFraction = 0.3
	// DefaultRepackSavingsFraction is 10%: on the consolidation
	// benchmark at the local stack's prices the pairs left after a
	// scale-down save 10–25% of what they cost (two spot m7i-flex.4xlarge
	// whose pods m6a.4xlarge nodes hold: 15%); TestConsolidationSettles.
	DefaultRepackSavingsFraction  = 0.1
	DefaultRepairToleration       = 30 * time.Minute
	DefaultRepairMaxFraction      = 0.2
	DefaultMultiNodeMaxCandidates = 100
	// DefaultSingleNodeMaxSimulations keeps a pass over 500 nodes and
	// 5,000 pods with zone spread under a second (BenchmarkCompute).
	DefaultSingleNodeMaxSimulations = 30
	// MinSpotToSpotOptions is how many cheaper spot instance types a
	// single spot node's replacement needs, so the replacement cannot be
	// replaced again at once (Karpenter: 15).
	MinSpotToSpotOptions = 15
	// MinNominationWindow is the least time a nominated node is protected.
	MinNominationWindow = 10 * time.Second
)

// Result is Compute's answer.
type Result struct {
	// Commands to run, in order; their candidates are disjoint, and
	// together they stay within every pool's budget for each reason.
	Commands []Command
	// Verdicts has one entry per managed node, in Input.Nodes order.
	Verdicts []Verdict
	// Budgets are the disruptions each pool allows now per reason, before
	// the Commands (for status, the CLI and metrics).
	Budgets []PoolBudget
	// RecheckAt is the earliest time a node held back only by its pool's
	// consolidateAfter (since its last pod event, or since consolidation
	// launched it) may be consolidated; zero when none is. A caller that
	// polls looks again then: emptied nodes go at consolidateAfter, not up
	// to a poll interval later.
	RecheckAt time.Time
}

// Command is one decision: disrupt Candidates for Reason, by Kind.
type Command struct {
	Reason     Reason
	Kind       Kind
	Candidates []Candidate
	// Replacements are the nodes to launch before the candidates drain
	// (KindReplace), as the packer plans them; their Options are already
	// filtered to what keeps the command worth it (cheaper than the
	// candidates; for spot→spot the cheapest MinSpotToSpotOptions).
	Replacements []packer.NodePlan
	// SavingsPerHour is the candidates' price minus the replacements'.
	SavingsPerHour float64
	// Message says it in one line, e.g. "Underutilized: 3 nodes → 1
	// c6i.2xlarge saves $0.41/h" or "Drifted: AMI ami-a → ami-b".
	Message string
}

// Candidate is one node a command disrupts.
type Candidate struct {
	ClaimName    string
	NodeName     string
	NodePool     string
	InstanceType string
	CapacityType string
	Price        float64
	// Pods are the keys (namespace/name) of the pods that must move.
	Pods []string
	// DisruptionCost is Karpenter's: the pods' eviction cost scaled by the
	// node's lifetime remaining; the cheapest are disrupted first.
	DisruptionCost float64
	// Why is the reason of this node (e.g. the drift found).
	Why string
}

// Verdict says what Compute thinks of one node.
type Verdict struct {
	ClaimName string
	NodeName  string
	NodePool  string
	// Candidate is true when the node passed candidate filtering; Command
	// is the index of the command that takes it, -1 when none.
	Candidate bool
	Command   int
	// Event is the Karpenter event reason to publish: "DisruptionBlocked"
	// when the node is not a candidate, "Unconsolidatable" when it is but
	// no command takes it, "" otherwise.
	Event string
	// Message says why, in Karpenter's words where it has them ("node is
	// nominated for a pending pod", "pdb \"default/web\" prevents pod
	// evictions", "Can't replace with a cheaper node", ...).
	Message string
	// Drifted is the node's drift ("" when none), DriftKind what drifted;
	// Unhealthy the repair finding ("" when none).
	Drifted   string
	DriftKind DriftKind
	Unhealthy string
	// Outlier: consolidation means to take the node before Karpenter's
	// order (waste.go) and no decision moves pods onto it meanwhile; the
	// caller keeps kube-scheduler's pods off it too (a PreferNoSchedule
	// taint), so that it is not filled and its consolidateAfter restarted.
	Outlier bool
}

// Events Verdict.Event takes.
const (
	EventDisruptionBlocked = "DisruptionBlocked"
	EventUnconsolidatable  = "Unconsolidatable"
)

// PoolBudget is how many more nodes of a pool may be disrupted now, per
// reason: the pool's budget for the reason minus its nodes already
// disrupting (deleting, reserved or not Ready).
type PoolBudget struct {
	NodePool string
	// Nodes counts the pool's initialized nodes (the budget's base).
	Nodes int
	// Disrupting counts those deleting, disrupting or not Ready.
	Disrupting int
	Allowed    map[Reason]int
	// Limit is the pool's budget per reason before the disrupting nodes
	// are taken off (what Allowed would be with none disrupting).
	Limit map[Reason]int
	// Errors name budgets that could not be read (they allow 0).
	Errors []string
}
