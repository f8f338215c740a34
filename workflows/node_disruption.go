package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"
)

// The node workflow is the single lock of its node: a disruption command
// reserves it with UpdateReserve, commits with SignalDisruptionCommit (the
// node drains and terminates for the command's reason) or releases it with
// SignalDisruptionRelease. Anything else that ends the node while reserved
// (an interruption, expiry, a manual drain, the Node's deletion) takes over
// and the command is told.

// commandNotice is a signal to a command workflow, sent by the main flow.
type commandNotice struct {
	workflowID string
	event      CommandNodeEvent
}

func (w *nodeLifecycle) validateReserve(_ workflow.Context, request ReserveRequest) error {
	switch {
	case strings.TrimSpace(request.CommandID) == "":
		return fmt.Errorf("reserve %s: commandID is required", w.spec.NodeClaimName)
	case strings.TrimSpace(request.Reason) == "":
		return fmt.Errorf("reserve %s: reason is required", w.spec.NodeClaimName)
	}
	if r := w.state.Reservation; r != nil {
		if r.CommandID == request.CommandID {
			return nil // a retried reservation
		}
		return fmt.Errorf("reserve %s refused: reserved by %s (%s)", w.spec.NodeClaimName, r.CommandID, r.Message)
	}
	if t := w.state.Termination; t != nil {
		return fmt.Errorf("reserve %s refused: node is already %s (%s)", w.spec.NodeClaimName, w.leavingPhase(), describeTermination(*t))
	}
	if w.state.Phase != PhaseReady {
		return fmt.Errorf("reserve %s refused: node is %s, not Ready", w.spec.NodeClaimName, w.state.Phase)
	}
	return nil
}

func (w *nodeLifecycle) handleReserve(_ workflow.Context, request ReserveRequest) (ReserveResult, error) {
	if r := w.state.Reservation; r == nil || r.CommandID != request.CommandID {
		w.state.Reservation = &Reservation{CommandID: request.CommandID, Reason: request.Reason, Message: request.Message, At: workflow.Now(w.ctx)}
		w.logger.Info("Reserved for disruption", "command", request.CommandID, "reason", request.Reason, "message", request.Message)
		w.decide("Reserved by disruption command %s: %s", request.CommandID, request.Message)
		w.claimStale = true
		w.wake.SendAsync(true)
	}
	return ReserveResult{Accepted: true, Phase: w.state.Phase}, nil
}

func (w *nodeLifecycle) applyDisruptionCommit(request CommandSignal) {
	r := w.state.Reservation
	switch {
	case r == nil || r.CommandID != request.CommandID:
		w.decide("Commit from %s ignored: the node is not reserved by it", request.CommandID)
		return
	case r.Committed:
		return
	}
	r.Committed = true
	if w.terminationRequested() {
		w.decide("Commit from %s: the node is already leaving (%s)", r.CommandID, w.state.Termination.Reason)
		return
	}
	w.logger.Info("Disrupting node", "command", r.CommandID, "reason", r.Reason, "message", r.Message)
	if r.Reason == string(ReasonEmpty) {
		after, _ := w.spec.ConsolidateAfter.Get()
		w.logger.Info(fmt.Sprintf("Triggering termination after %s for empty node", formatDuration(after)))
	}
	t := Termination{
		Reason:    TerminationReason(r.Reason),
		Detail:    r.Message,
		Requester: r.CommandID,
		// Repair replaces a broken node: its pods are not served anyway.
		Voluntary:          r.Reason != string(ReasonUnhealthy),
		UnschedulableSince: request.DisruptedAt,
	}
	if r.Reason == string(ReasonUnhealthy) && changed(w.ctx, changeRepairForced) {
		// Past its pods' budgets at once, as Karpenter's node health
		// controller forces the termination: a budget counts the broken
		// node's pods unhealthy and would hold the drain for ever.
		t.Deadline = workflow.Now(w.ctx)
	}
	w.requestTermination(t)
}

func (w *nodeLifecycle) applyDisruptionRelease(request CommandSignal) {
	r := w.state.Reservation
	if r == nil || r.CommandID != request.CommandID || r.Committed {
		return
	}
	w.state.Reservation = nil
	w.claimStale = true
	w.logger.Info("Released from disruption", "command", request.CommandID, "why", request.Why)
	w.decide("Released by disruption command %s: %s", request.CommandID, request.Why)
}

// noticeTakeover tells the reserving command that t, from someone else,
// ends the node.
func (w *nodeLifecycle) noticeTakeover(t Termination) {
	if r := w.state.Reservation; r != nil && t.Requester != r.CommandID {
		w.notifyCommand(r.CommandID, NodeEventTakenOver, describeTermination(t))
	}
}

// noticePhase tells the commands interested in this node about its phase:
// a replacement's command that it is initialized or failed, a reserving
// command that its candidate is gone.
func (w *nodeLifecycle) noticePhase(phase Phase) {
	if by := w.spec.ReplacementFor; by != "" {
		switch {
		case phase == PhaseReady:
			w.notifyCommand(by, NodeEventReady, "initialized node "+w.state.NodeName)
		case phase.leaving() && w.state.InitializedAt.IsZero() && !w.state.ReplacementFailureReported:
			w.state.ReplacementFailureReported = true
			detail := "ended before it was initialized"
			if t := w.state.Termination; t != nil {
				detail = describeTermination(*t)
			}
			w.notifyCommand(by, NodeEventFailed, detail)
		}
	}
	if r := w.state.Reservation; r != nil && phase == PhaseTerminated {
		detail := ""
		if t := w.state.Termination; t != nil {
			detail = describeTermination(*t)
		}
		w.notifyCommand(r.CommandID, NodeEventTerminated, detail)
	}
}

func (w *nodeLifecycle) notifyCommand(commandID string, kind NodeEventKind, detail string) {
	if !changed(w.ctx, changeDisruptionCommands) {
		return
	}
	w.notices = append(w.notices, commandNotice{workflowID: commandID,
		event: CommandNodeEvent{NodeClaimName: w.spec.NodeClaimName, Kind: kind, Detail: detail}})
}

// flushNotices sends queued command notices; a command that is gone is not
// an error (it ended, and does not need to know).
func (w *nodeLifecycle) flushNotices() {
	for len(w.notices) > 0 {
		notice := w.notices[0]
		w.notices = w.notices[1:]
		err := workflow.SignalExternalWorkflow(w.ctx, notice.workflowID, "", SignalCommandNodeEvent, notice.event).Get(w.ctx, nil)
		if err != nil {
			w.logger.Warn("Could not signal the disruption command", "command", notice.workflowID, "event", string(notice.event.Kind), "error", err)
		}
	}
}

// applyDrifted records what the disruption workflow found drifted (or that
// nothing is any more) and shows it: the MillwrightDrifted search
// attribute, a decision in the node's history ("Drifted: AMI ami-a →
// ami-b") and the NodeClaim's Drifted condition (flushNodeClaimConditions).
// A notice that changes nothing is ignored.
func (w *nodeLifecycle) applyDrifted(notice DriftNotice) {
	current := DriftNotice{}
	if w.state.Drift != nil {
		current = *w.state.Drift
	}
	if notice == current {
		return
	}
	w.claimStale = true
	update := DriftedAttribute.ValueUnset()
	if notice.Kind == "" {
		w.state.Drift = nil
		w.decide("No longer drifted")
	} else {
		w.state.Drift = &notice
		update = DriftedAttribute.ValueSet(notice.Kind)
		w.logger.Info("Node drifted", "kind", notice.Kind, "message", notice.Message)
		w.decide("Drifted: %s", notice.Message)
	}
	if err := workflow.UpsertTypedSearchAttributes(w.ctx, update); err != nil {
		w.logger.Warn("Could not upsert the drift search attribute", "error", err)
	}
}
