package workflows

import "go.temporal.io/sdk/workflow"

// changeID names one change of workflow behaviour, for workflow.GetVersion
// (the policy is in doc.go). Its value is recorded in the histories of runs
// that took the new path, so it never changes once released.
type changeID string

// Every change of workflow behaviour since v0.2, oldest first. Each id says
// in its comment what the new path does and where; a new change appends its
// id here and branches on changed(ctx, id). TestChangeIDs checks that every
// id is documented and unique.
const (
	// changeRetryStartsWithSameNames (provisioner_batch.go): a failed
	// StartNodeWorkflows batch is retried with the same node claim names
	// and its nodes count as in flight meanwhile, instead of re-planning
	// its pods under new names.
	changeRetryStartsWithSameNames changeID = "provisioner-retry-starts-same-names"
	// changeKeepReasonsOnFailedPlan (provisioner_batch.go): a failed
	// planning batch keeps its resync and reconcile reasons for the retry.
	changeKeepReasonsOnFailedPlan changeID = "provisioner-keep-reasons-on-failed-plan"
	// changeInFlightUntilRegistration (provisioner_batch.go): an in-flight
	// node is kept until its launch bound and registration timeout have
	// passed (InFlightNode.Until), not for a fixed InFlightTTL.
	changeInFlightUntilRegistration changeID = "provisioner-in-flight-until-registration"
	// changeWaitHeartbeatTimeout: the waits for registration,
	// initialization and instance termination have a 30 s heartbeat
	// timeout (was 1 minute), so a killed worker stalls a node half as
	// long (node_register.go, node_initialize.go, node_terminate.go).
	changeWaitHeartbeatTimeout changeID = "wait-heartbeat-timeout-30s"
	// changeNominationWindow (node_ready.go syncEmptyTTL): an empty node
	// is not terminated inside its nomination window
	// (spec.NominationWindow after initialization, for the pods it was
	// launched for), and consolidateAfter counts from the pod event that
	// emptied it, not from when the workflow noticed.
	changeNominationWindow changeID = "nomination-window"
	// changeLaunchOutlivesCancel (node_launch.go): Launch runs on a context
	// the workflow's cancellation does not cancel, so a node cancelled
	// mid-launch learns the instance it launched and terminates it (it
	// ended Terminated without terminating anything).
	changeLaunchOutlivesCancel changeID = "launch-outlives-cancel"
	// changeTerminateOutlivesCancel (node_terminate.go): the Terminating
	// phase's activities run on a context the cancellation does not
	// cancel, so a node cancelled mid-termination still waits for EC2 and
	// deletes its Node (the cancelled TerminateInstance read as a failure
	// and the wait was skipped).
	changeTerminateOutlivesCancel changeID = "terminate-outlives-cancel"
	// changeTerminateUnconfirmedLaunch (node_launch.go, node_terminate.go):
	// a Launch that ended without the activity's own answer (it timed out
	// after an attempt may have created the instance, or was cancelled)
	// goes to Terminating, which terminates any instance tagged for the
	// node claim, instead of ending Terminated with the instance running.
	changeTerminateUnconfirmedLaunch changeID = "terminate-unconfirmed-launch"
	// changeOwnTerminationIsNoInterruption (node_messages.go): an instance
	// state-change event arriving while the node is Terminating (the echo
	// of Millwright's own TerminateInstances) is not an interruption: no
	// replan for replacements, not listed among the interruptions.
	changeOwnTerminationIsNoInterruption changeID = "own-termination-is-no-interruption"
	// changeLaunchRejectionBackoff (node_launch.go): a launch EC2 rejected
	// for a reason other than capacity re-plans its pods with the rejected
	// offerings and their backoff as unavailable, instead of letting the
	// provisioner plan the same offering again at once, in a loop.
	changeLaunchRejectionBackoff changeID = "launch-rejection-backoff"
	// changeDisruptionCommands (node_disruption.go notifyCommand): a node
	// reserved by a disruption command, or launched as its replacement,
	// signals the command (SignalCommandNodeEvent) when it is initialized,
	// fails, is taken over or is gone.
	changeDisruptionCommands changeID = "disruption-commands"
	// changeEmptyByDisruption (node_ready.go armEmptyTTL): a node whose
	// spec says DisruptionDecidesEmpty arms no consolidateAfter timer and
	// never asks AllowDisruption; the disruption workflow's Empty commands
	// take it.
	changeEmptyByDisruption changeID = "empty-by-disruption"
	// changeReservedArmsNoEmptyTTL (node_ready.go armEmptyTTL): a node
	// reserved by a disruption command arms no consolidateAfter timer; the
	// command commits or releases it. Before, a timer that fired while
	// reserved was re-armed at its past deadline on every pass and the
	// workflow spun without yielding.
	changeReservedArmsNoEmptyTTL changeID = "reserved-arms-no-empty-ttl"
	// changeNodeClaimMirror (node_claim.go): the node workflow writes its
	// NodeClaim (UpsertNodeClaim) when it starts and at every phase it
	// enters.
	changeNodeClaimMirror changeID = "node-claim-mirror"
	// changeKeepDeferredDisruptedNodes (provisioner_batch.go): when the
	// planner deferred pods of disrupted nodes past MaxNodePlans, the
	// batch's disrupted nodes are planned again in the next batch, instead
	// of the rest of their replacement capacity being dropped.
	changeKeepDeferredDisruptedNodes changeID = "provisioner-keep-deferred-disrupted-nodes"
	// changeBoundedPayloads (provisioner_batch.go): the provisioner keeps
	// at most maxPendingPodKeys pending pod keys (then plans every pending
	// pod), bounds the in-flight state (maxInFlightPodKeys,
	// maxInFlightNodes, maxInFlightInstanceTypes) by what it lets a batch
	// plan, and plans every pending pod when the planner deferred more than
	// it listed.
	changeBoundedPayloads changeID = "provisioner-bounded-payloads"
	// changeNodeGoneLeaves (node_register.go): a Node deleted before or
	// while it registered (RegisterNode's NodeGone) ends the node: its
	// pods are re-planned at once and the instance is terminated
	// (Terminating, reason Deleted, no drain). Before, RegisterNode
	// retried the gone Node for up to 10 minutes while its instance counted
	// as in-flight capacity, then the node drained a Node that did not
	// exist.
	changeNodeGoneLeaves changeID = "node-gone-before-registration-leaves"
	// changeEmptyByDisruptionDefault (provisioner_batch.go completeSpec):
	// every node the provisioner starts says DisruptionDecidesEmpty, so
	// the disruption workflow's Empty commands take a pool's empty nodes
	// together up to its budget (was: each node's own consolidateAfter
	// timer and a turn on the pool's Lease, unless the worker opted in).
	changeEmptyByDisruptionDefault changeID = "empty-by-disruption-default"
	// changeRefusedEmptyWaits (node_ready.go considerEmptyTermination): an
	// empty node (of the older, timer-driven kind) whose budget refused
	// hands its emptiness to the disruption workflow and arms no retry
	// timer, instead of asking AllowDisruption again every 10 s (~4k
	// history events per node-hour while the budget said no).
	changeRefusedEmptyWaits changeID = "refused-empty-waits"
	// changeEmptyValidatesAtOnce (disruption_workflow.go startCommand): an
	// Empty command validates as soon as it holds its candidates
	// (EmptyValidationDelay, default 0) rather than after the 15 s
	// consolidation delay: the nodes were empty for consolidateAfter and
	// pending pods that would land on them already block them, so each
	// wave of a scale-down costs the termination, not 15 s more.
	changeEmptyValidatesAtOnce changeID = "empty-validates-at-once"
	// changeCommandEndPassesAtOnce (disruption_workflow.go commandDone): a
	// command's end brings the next pass now, not triggerDebounce later:
	// the budget it freed is used at once.
	changeCommandEndPassesAtOnce changeID = "command-end-passes-at-once"
	// changeDisruptionEndsWhenCancelled (disruption_workflow.go run,
	// waitForPass): a cancelled disruption workflow ends (Canceled); before,
	// its pass timer, started on the cancelled context, fired at once on
	// every loop and the workflow spun.
	changeDisruptionEndsWhenCancelled changeID = "disruption-ends-when-cancelled"
	// changeDriftStamps (node_register.go, node_claim.go): RegisterNode
	// and UpsertNodeClaim get the launch spec's annotations plus the
	// instance's AMI, subnet and security groups (nodeAnnotations), so
	// drift can compare them with what the EC2NodeClass resolves to now.
	changeDriftStamps changeID = "drift-stamps"
	// changeDriftNotices (disruption_workflow.go noticeDrift): after each
	// pass the disruption workflow signals SignalDrifted to the node
	// workflows whose drift changed, so MillwrightDrifted and the node's
	// history say which nodes are drifted and why.
	changeDriftNotices changeID = "drift-notices"
	// changeNodeClaimMirrorAsync (node_claim.go mirrorNodeClaim): the
	// NodeClaim write of a phase runs beside the lifecycle (one at a time,
	// in phase order, awaited before the run ends or continues as new)
	// instead of the lifecycle waiting for it at every phase.
	changeNodeClaimMirrorAsync changeID = "node-claim-mirror-async"
	// changeNodeClaimConditions (node_claim.go flushNodeClaimConditions):
	// a drift notice, a reservation by a disruption command and its
	// release write the NodeClaim at once (its Drifted and
	// DisruptionReason conditions), in the phase the node is in, instead
	// of waiting for the next phase's write.
	changeNodeClaimConditions changeID = "node-claim-conditions"
	// changeDeferredPlannedAtOnce (provisioner_workflow.go run): the batch
	// after one whose plan deferred work (past MaxNodePlansPerBatch) starts
	// at once, without a new batching window.
	changeDeferredPlannedAtOnce changeID = "deferred-planned-at-once"
	// changeReplacementsHeld (disruption_workflow.go computeRequest): the
	// replacements of running commands go to ComputeCommands with
	// ReplacementFor, so none is a candidate while its command runs. Before,
	// a replacement initialized and still empty while its candidate drained
	// (held by a PodDisruptionBudget) was deleted as Empty once its
	// nomination window passed, and the candidate's pods needed a new node.
	changeReplacementsHeld changeID = "replacements-held"
	// changeRefusedCommandWaitsForPoll (disruption_workflow.go commandDone):
	// a command that ended Rejected or Invalidated brings no pass of its
	// own; the next one comes at the poll interval or with a trigger.
	// Before, it passed again at once, decided the same command, was
	// refused again, and so on: 19 rejected Empty commands in 3 s on a Node
	// that looked initialized while its workflow was still Initializing.
	changeRefusedCommandWaitsForPoll changeID = "refused-command-waits-for-poll"
	// changeIdleWindowOnNews (provisioner_workflow.go collectBatch): only a
	// signal bringing work not already pending or in flight restarts the
	// batch's idle window; repeats of known pods do not.
	changeIdleWindowOnNews changeID = "idle-window-on-news"
	// changePassAfterStart (disruption_workflow.go pass, waitForPass): a
	// pass that started a command is followed by another at once, as
	// Karpenter's disruption loop requeues at once after a command, so
	// the budget the running commands leave is used without waiting out
	// the poll interval; not when a command was refused since (the same
	// decision would be refused again). Before, mixed-600 started one
	// command every ~10 s and held at most 4 of the 8 nodes its budget
	// allowed.
	changePassAfterStart changeID = "pass-after-start"
	// changeAdmitAtCommit (disruption_workflow.go startCommand,
	// handleAdmit; disruption_command.go admit): a command waits out its
	// validation delay without using budget, then asks the disruption
	// workflow to admit it (UpdateAdmitCommand): the workflow validates
	// the decision against its whole ledger (other commands' candidates
	// held, not free) and the budgets with the admitted commands'
	// candidates charged, one admission or pass at a time, and a command
	// that does not fit yet asks again as nodes go. Passes charge the
	// candidates of validating and admitted commands alike. Before, a
	// command validated alone, saw the candidates of the others as free,
	// and decided differently.
	changeAdmitAtCommit changeID = "admit-at-commit"
	// changeRecheckAtConsolidateAfter (disruption_workflow.go pass): when
	// ComputeCommands says a node held back only by consolidateAfter may
	// go sooner than the next poll (RecheckAfter), the next pass is then
	// (at least triggerDebounce away), not up to a poll interval later: a
	// scale-down's empty nodes go at consolidateAfter.
	changeRecheckAtConsolidateAfter changeID = "recheck-at-consolidate-after"
	// changeValidatingWait (disruption_workflow.go ledgerRequest): a pass
	// no longer charges the candidates of commands waiting out their
	// validation delay against the budget; they wait in a second ledger,
	// at most one budget's worth per pool (ComputeCommandsRequest
	// ValidatingWait), and each command still needs the budget when it is
	// admitted. Before, a node used budget for its validation delay (15 s)
	// and its drain (~5 s on the local stack) alike, so on mixed-600 three
	// quarters of the budget waited out validations.
	changeValidatingWait changeID = "validating-wait"
	// changeNominatePods (node_register.go): RegisterNode nominates the
	// pods the node was launched for (status.nominatedNodeName) before it
	// lifts the unregistered taint, so kube-scheduler keeps their room
	// instead of spreading the first pods it takes over every new node
	// (on Karpenter's basic 1,000 pods, 61 pods were displaced that way
	// and waited for a second batch and launch).
	changeNominatePods changeID = "nominate-pods"
	// changeAbsorbSignalsAfterHandlers (disruption_workflow.go and
	// node_ready.go continueAsNew): the signals delivered while
	// continue-as-new waited for update handlers (and, in a node
	// workflow, its NodeClaim write) to finish are taken into the state
	// too; a node told to go meanwhile drains instead of continuing. They
	// were dropped ("Workflow has unhandled signals"): a command's end
	// signalled while an admission ran stayed in the disruption ledger,
	// its nodes charged to the budget, and at 5,000 pods two lost ends
	// held a 27-node pool's Empty budget at 0 until the commands aged out
	// (12 h). The provisioner has no update handler, so no such wait.
	changeAbsorbSignalsAfterHandlers changeID = "absorb-signals-after-handlers"
	// changeCommitTogether (disruption_command.go commit): a command
	// signals SignalDisruptionCommit to all its candidates at once and
	// then waits for the answers, instead of one candidate after the
	// other (~100 ms each: a 7-node command's last node started draining
	// 0.6 s after its first, and the budget it held waited for it).
	changeCommitTogether changeID = "commit-together"
	// changeEmptyAdmittedAtStart (disruption_workflow.go startCommand): an
	// Empty command with no validation delay is admitted by the pass that
	// decided it (CommandInput.Admitted; charged to the budget at once,
	// as the pass's budget allowed it), instead of asking for admission
	// (UpdateAdmitCommand and a second ComputeCommands) a moment later.
	// Before, each wave of a scale-down waited for that round trip, and a
	// pass could decide Empty commands for budget still held by commands
	// waiting to be admitted, which its admission then refused.
	changeEmptyAdmittedAtStart changeID = "empty-admitted-at-start"
	// changeReleaseEachNode: a committed command tells the disruption
	// workflow each candidate that is gone while others still drain
	// (disruption_command.go commit, SignalCommandNodeGone), and a
	// disruption run that started on this code takes the node off its
	// ledger and passes at once (disruption_workflow.go nodeGone), so the
	// budget a node held is used as soon as it is gone, not when the
	// command's last node is. The disruption workflow decides whether it
	// listens once, when its run starts: a run recorded before the change
	// never reads the signal, so a signal that a newer command sent to it
	// replays as it ran.
	changeReleaseEachNode changeID = "release-each-node"
	// changeReplanPlacedPods (provisioner_batch.go): a batch that placed
	// pods in the free room of existing or in-flight nodes plans every
	// pending pod again within placedPodsRecheck, and so on while any are
	// placed, as Karpenter's provisioner runs again every 10 s while a pod
	// is provisionable. Before, nothing re-planned a pod whose room went
	// away (its in-flight node failed or was consolidated before
	// kube-scheduler bound the pod) until the 5-minute resync.
	changeReplanPlacedPods changeID = "replan-placed-pods"
	// changeAdmitOwnCandidates (disruption_admission.go handleAdmit): an
	// admission's fresh decision may take only the admitted command's own
	// candidates (ComputeCommandsRequest.Admitting). Before, it decided
	// for every node, and its decisions for others came first when they
	// were cheaper to disrupt: they took the budget or moved pods onto the
	// command's candidates, and the command was refused as no longer
	// valid ("blocking budget", "Receives the pods of a disruption"), a
	// quarter of the commands on mixed-600 once decisions were made ahead
	// of the budget.
	changeAdmitOwnCandidates changeID = "admit-own-candidates"
	// changeMarkOutliers (disruption_workflow.go markOutliers): after a
	// pass, the nodes its answer calls outliers (Verdict.Outlier) are
	// tainted activities.OutlierTaintKey:PreferNoSchedule and the others
	// untainted (MarkOutliers), and a pause takes every mark off, so that
	// kube-scheduler sends the pods evicted from the other nodes elsewhere
	// while consolidation waits to take the outlier.
	changeMarkOutliers changeID = "mark-outliers"
	// changeAdmitBeforeLater (disruption_admission.go handleAdmit): an
	// admission marks the candidates of the commands started after the
	// admitted one and still validating DecidedLater, so their pods do
	// not compete first in its fresh decision, as they did not when it
	// was decided. Before, two commands validating at once each counted
	// the other's pods first, and both could be refused.
	changeAdmitBeforeLater changeID = "admit-before-later"
	// changeReplacementsStillFit (disruption_validation.go freshHolds;
	// disruption_admission.go handleAdmit, disruption_command.go
	// validate): a validated delete must still need no new node, and a
	// replace by one node at most one, which it launches with only the
	// offerings the fresh decision still offers for it (the fresh
	// decision's replacement when it offers none of them). Before, a
	// delete whose pods now needed a new node was valid (the rule counted
	// only fresh deletes' replacements), its pods went Pending after the
	// drain and the provisioner launched for them; and a replacement could
	// launch a type its pods had outgrown.
	changeReplacementsStillFit changeID = "replacements-still-fit"
	// changeRepairForced (node_disruption.go applyDisruptionCommit): a
	// node committed to an Unhealthy (repair) command drains with its
	// deadline at the commit, past its pods' PodDisruptionBudgets, as
	// Karpenter's health controller forces the termination. Before, the
	// drain waited on budgets until the pool's terminationGracePeriod, or
	// for ever without one.
	changeRepairForced changeID = "repair-forced"
	// changeDriftOrder (disruption_workflow.go noticeDrift, ledgerRequest):
	// the disruption workflow keeps when each node was first found drifted
	// (DisruptionState.DriftedSince) and tells every ComputeCommands, so
	// drift takes the earliest drifted first, as Karpenter does. Before,
	// drifted nodes went cheapest to disrupt first.
	changeDriftOrder changeID = "drift-order"
)

// changed reports whether this run takes id's new path. It is true when the
// workflow reaches this point for the first time on code that knows id, and
// false when a worker replays a history recorded before the change, so the
// old path stays for runs that already took it. A run that has taken one
// path takes it every time the same point is reached again (the recorded
// marker is reused).
func changed(ctx workflow.Context, id changeID) bool {
	return workflow.GetVersion(ctx, string(id), workflow.DefaultVersion, 1) == 1
}
