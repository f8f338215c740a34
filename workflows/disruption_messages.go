package workflows

import "time"

// Messages between the disruption workflow, its command workflows and the
// node workflows. Names are recorded in histories and never change.
const (
	// UpdateReserve (ReserveRequest → ReserveResult): a disruption command
	// asks a node workflow to hold its node for it. The validator rejects
	// the request when the node is not Ready, is already leaving, or is
	// held by another command; an accepted node refuses every other
	// command until released, and takes part in no empty-node decision of
	// its own.
	UpdateReserve = "reserve"
	// SignalDisruptionCommit (CommandSignal): the command holding the node
	// has its replacements initialized; the node drains and terminates for
	// the command's reason.
	SignalDisruptionCommit = "disruptionCommit"
	// SignalDisruptionRelease (CommandSignal): the command holding the
	// node gave up (rejected, invalidated, replacement failed); the node
	// is free again.
	SignalDisruptionRelease = "disruptionRelease"

	// SignalDrifted (DriftNotice): the disruption workflow found the node
	// drifted from its NodePool or EC2NodeClass, or no longer drifted; the
	// node workflow shows it (MillwrightDrifted, its history).
	SignalDrifted = "drifted"

	// SignalCommandNodeEvent (CommandNodeEvent): a node workflow tells the
	// command that reserved it, or that launched it as a replacement, what
	// happened to it.
	SignalCommandNodeEvent = "nodeEvent"

	// SignalDisruptionTrigger (DisruptionTrigger): something changed that
	// may make nodes disruptable (a pod deleted, a node added, a pool or
	// class edited); the disruption workflow looks again soon.
	SignalDisruptionTrigger = "trigger"
	// SignalCommandDone (CommandOutcome): a command workflow ended.
	SignalCommandDone = "commandDone"
	// SignalCommandNodeGone (CommandNodeGone): a committed command's
	// candidate is gone (its Node deleted) while others still drain; the
	// disruption workflow stops charging it to the budget
	// (changeReleaseEachNode). The command's end covers its last ones.
	SignalCommandNodeGone = "commandNodeGone"
	// SignalAdmissionRetry (AdmissionRetry): the disruption workflow tells a
	// command it answered busy that a command ended (budget may be free),
	// so it asks to be admitted again at once.
	SignalAdmissionRetry = "admissionRetry"
	// UpdatePauseDisruption (PauseRequest → DisruptionStateView) pauses or
	// resumes the disruption workflow: paused, it starts no new command
	// (running ones finish).
	UpdatePauseDisruption = "pause"
	// UpdateAdmitCommand (activities.AdmitCommandRequest →
	// activities.AdmitCommandResponse): a command that waited out its
	// validation delay asks whether it may commit now; the disruption
	// workflow validates it against its ledger, one admission or pass at
	// a time, and on admission counts its candidates as disrupting.
	UpdateAdmitCommand = "admitCommand"
	// QueryDisruptionState (→ DisruptionStateView).
	QueryDisruptionState = "state"
	// QueryCommandState (→ CommandStateView).
	QueryCommandState = "state"
)

// ReserveRequest asks a node workflow to hold its node for a command.
type ReserveRequest struct {
	// CommandID is the command workflow's id; the node reports to it.
	CommandID string `json:"commandID"`
	// Reason is the command's reason (Empty, Underutilized, Drifted,
	// Unhealthy); the node terminates with it when committed.
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// ReserveResult answers UpdateReserve.
type ReserveResult struct {
	Accepted bool  `json:"accepted"`
	Phase    Phase `json:"phase"`
}

// Reservation is the command holding a node.
type Reservation struct {
	CommandID string    `json:"commandID"`
	Reason    string    `json:"reason"`
	Message   string    `json:"message"`
	At        time.Time `json:"at"`
	// Committed: the command told the node to go.
	Committed bool `json:"committed,omitempty"`
}

// CommandSignal addresses the node's reservation by command.
type CommandSignal struct {
	CommandID string `json:"commandID"`
	Why       string `json:"why,omitempty"`
	// DisruptedAt (commit) is when the command's mark put the disrupted
	// taint on the candidates (activities.DrainRequest.UnschedulableSince).
	DisruptedAt time.Time `json:"disruptedAt,omitzero"`
}

// NodeEventKind is what happened to a node a command cares about.
type NodeEventKind string

// Node events a command hears.
const (
	// NodeEventReady: a replacement is initialized.
	NodeEventReady NodeEventKind = "Ready"
	// NodeEventFailed: a replacement ended before it was initialized.
	NodeEventFailed NodeEventKind = "Failed"
	// NodeEventTakenOver: a reserved candidate is being terminated for
	// another reason (interruption, expiry, manual drain, deletion).
	NodeEventTakenOver NodeEventKind = "TakenOver"
	// NodeEventTerminated: a reserved candidate is gone.
	NodeEventTerminated NodeEventKind = "Terminated"
)

// CommandNodeEvent is one node's report to a command.
type CommandNodeEvent struct {
	NodeClaimName string        `json:"nodeClaimName"`
	Kind          NodeEventKind `json:"kind"`
	Detail        string        `json:"detail,omitempty"`
}

// DisruptionTrigger wakes the disruption workflow.
type DisruptionTrigger struct {
	Reason string `json:"reason"`
}

// CommandResult is how a command ended.
type CommandResult string

// Command results.
const (
	CommandSucceeded   CommandResult = "Succeeded"
	CommandRejected    CommandResult = "Rejected"
	CommandInvalidated CommandResult = "Invalidated"
	CommandRolledBack  CommandResult = "RolledBack"
)

// acted reports whether a command that ended so changed the cluster
// (nodes gone, or launched and drained back): a rejected or invalidated
// command released its candidates untouched.
func (r CommandResult) acted() bool { return r == CommandSucceeded || r == CommandRolledBack }

// CommandOutcome reports a command's end to the disruption workflow.
type CommandOutcome struct {
	CommandID string        `json:"commandID"`
	Result    CommandResult `json:"result"`
	Detail    string        `json:"detail,omitempty"`
}

// PauseRequest pauses (Paused true) or resumes the disruption workflow.
type PauseRequest struct {
	Paused    bool   `json:"paused"`
	Reason    string `json:"reason,omitempty"`
	Requester string `json:"requester,omitempty"`
}

// DriftNotice tells a node workflow what the last disruption pass found
// drifted about its node.
type DriftNotice struct {
	// Kind is what drifted, in Karpenter's words (AMIDrift,
	// NodePoolDrifted, NodeClassDrifted, SubnetDrift, SecurityGroupDrift,
	// RequirementsDrifted); "" when the node is no longer drifted.
	Kind string `json:"kind,omitempty"`
	// Message says it, e.g. "AMI ami-a → ami-b".
	Message string `json:"message,omitempty"`
}

// AdmissionRetry tells a command answered busy that a command ended.
type AdmissionRetry struct {
	Ended string `json:"ended"`
}

// CommandNodeGone tells the disruption workflow that one candidate of a
// running command is gone.
type CommandNodeGone struct {
	CommandID     string `json:"commandID"`
	NodeClaimName string `json:"nodeClaimName"`
}
