package workflows

import (
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"
)

// nodeSignals are the node workflow's signal channels.
type nodeSignals struct {
	podsChanged  workflow.ReceiveChannel
	interruption workflow.ReceiveChannel
	drain        workflow.ReceiveChannel
	nodeDeleted  workflow.ReceiveChannel
	commit       workflow.ReceiveChannel
	release      workflow.ReceiveChannel
	drifted      workflow.ReceiveChannel
}

func newNodeSignals(ctx workflow.Context) nodeSignals {
	return nodeSignals{
		podsChanged:  workflow.GetSignalChannel(ctx, SignalPodsChanged),
		interruption: workflow.GetSignalChannel(ctx, SignalInterruption),
		drain:        workflow.GetSignalChannel(ctx, SignalDrain),
		nodeDeleted:  workflow.GetSignalChannel(ctx, SignalNodeDeleted),
		commit:       workflow.GetSignalChannel(ctx, SignalDisruptionCommit),
		release:      workflow.GetSignalChannel(ctx, SignalDisruptionRelease),
		drifted:      workflow.GetSignalChannel(ctx, SignalDrifted),
	}
}

// listen adds every signal channel, the update wake-up channel and the
// workflow's cancellation to selector. Handlers only update state.
func (w *nodeLifecycle) listen(selector workflow.Selector) {
	selector.AddReceive(w.signals.podsChanged, func(c workflow.ReceiveChannel, _ bool) {
		var report PodsChanged
		c.Receive(w.ctx, &report)
		w.applyPodsChanged(report)
	})
	selector.AddReceive(w.signals.interruption, func(c workflow.ReceiveChannel, _ bool) {
		var event Interruption
		c.Receive(w.ctx, &event)
		w.applyInterruption(event)
	})
	selector.AddReceive(w.signals.drain, func(c workflow.ReceiveChannel, _ bool) {
		var request DrainRequest
		c.Receive(w.ctx, &request)
		w.applyDrainSignal(request)
	})
	selector.AddReceive(w.signals.nodeDeleted, func(c workflow.ReceiveChannel, _ bool) {
		var deleted NodeDeleted
		c.Receive(w.ctx, &deleted)
		w.applyNodeDeleted(deleted)
	})
	selector.AddReceive(w.signals.commit, func(c workflow.ReceiveChannel, _ bool) {
		var request CommandSignal
		c.Receive(w.ctx, &request)
		w.applyDisruptionCommit(request)
	})
	selector.AddReceive(w.signals.release, func(c workflow.ReceiveChannel, _ bool) {
		var request CommandSignal
		c.Receive(w.ctx, &request)
		w.applyDisruptionRelease(request)
	})
	selector.AddReceive(w.signals.drifted, func(c workflow.ReceiveChannel, _ bool) {
		var notice DriftNotice
		c.Receive(w.ctx, &notice)
		w.applyDrifted(notice)
	})
	selector.AddReceive(w.wake, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(w.ctx, nil)
	})
	if !w.cancelled {
		selector.AddReceive(w.ctx.Done(), func(workflow.ReceiveChannel, bool) {})
	}
}

// absorbPendingSignals applies every signal already delivered, without
// blocking, so none is lost when the run continues as new.
func (w *nodeLifecycle) absorbPendingSignals() {
	for {
		absorbed := false
		var report PodsChanged
		for w.signals.podsChanged.ReceiveAsync(&report) {
			w.applyPodsChanged(report)
			absorbed = true
		}
		var event Interruption
		for w.signals.interruption.ReceiveAsync(&event) {
			w.applyInterruption(event)
			absorbed = true
		}
		var request DrainRequest
		for w.signals.drain.ReceiveAsync(&request) {
			w.applyDrainSignal(request)
			absorbed = true
		}
		var deleted NodeDeleted
		for w.signals.nodeDeleted.ReceiveAsync(&deleted) {
			w.applyNodeDeleted(deleted)
			absorbed = true
		}
		var command CommandSignal
		for w.signals.commit.ReceiveAsync(&command) {
			w.applyDisruptionCommit(command)
			absorbed = true
		}
		for w.signals.release.ReceiveAsync(&command) {
			w.applyDisruptionRelease(command)
			absorbed = true
		}
		var notice DriftNotice
		for w.signals.drifted.ReceiveAsync(&notice) {
			w.applyDrifted(notice)
			absorbed = true
		}
		if !absorbed {
			return
		}
	}
}

func (w *nodeLifecycle) applyPodsChanged(report PodsChanged) {
	if !report.ObservedAt.IsZero() && report.ObservedAt.Before(w.state.Pods.ObservedAt) {
		return // an older observation from another worker
	}
	if report.ObservedAt.IsZero() {
		report.ObservedAt = workflow.Now(w.ctx)
	}
	w.state.Pods = PodCount{NonDaemonSet: max(report.NonDaemonSetPods, 0), ObservedAt: report.ObservedAt}
}

func (w *nodeLifecycle) applyInterruption(event Interruption) {
	if event.EventID != "" && slices.ContainsFunc(w.state.Interruptions, func(seen Interruption) bool { return seen.EventID == event.EventID }) {
		return // the same event from another poller
	}
	if event.Kind == InterruptionStateChange && w.state.Phase == PhaseTerminating && changed(w.ctx, changeOwnTerminationIsNoInterruption) {
		// Millwright is terminating the instance itself: this is the echo
		// of its own TerminateInstances, not an interruption to replace
		// the node for.
		w.decide("Instance state change (%s) while terminating the instance; not an interruption", strings.TrimSpace(event.Detail))
		return
	}
	w.state.Interruptions = append(w.state.Interruptions, event)
	if extra := len(w.state.Interruptions) - maxRememberedInterruptions; extra > 0 {
		w.state.Interruptions = append([]Interruption(nil), w.state.Interruptions[extra:]...)
	}
	if event.Kind == InterruptionRebalance {
		w.logger.Info("Rebalance recommendation recorded", "event", event.EventID)
		w.decide("Rebalance recommendation recorded (event %s); no action", event.EventID)
		return
	}
	w.logger.Info("Interruption received", "kind", string(event.Kind), "event", event.EventID, "deadline", event.Deadline)
	w.requestTermination(Termination{
		Reason:    ReasonInterrupted,
		Detail:    strings.TrimSuffix(fmt.Sprintf("%s %s", event.Kind, event.Detail), " "),
		Requester: "ec2",
		Voluntary: false,
		Deadline:  event.Deadline,
	})
	if !w.replanSentForInterruption {
		w.replanSentForInterruption = true
		// Tell the provisioner now, so replacements launch while this
		// node drains.
		replan := ReplanRequest{Reason: "interrupted: " + string(event.Kind)}
		if w.state.NodeName != "" {
			replan.DisruptedNodes = []string{w.state.NodeName}
		} else {
			replan.PodKeys = w.spec.PodKeys
		}
		w.queueReplan(replan)
	}
}

func (w *nodeLifecycle) applyDrainSignal(request DrainRequest) {
	if err := w.validateDrain(request); err != nil {
		w.decide("Drain signal from %s ignored: %v", requesterOrUnknown(request.Requester), err)
		return
	}
	w.acceptDrain(request)
}

func (w *nodeLifecycle) applyNodeDeleted(deleted NodeDeleted) {
	if w.state.Termination != nil && w.state.Termination.Reason == ReasonDeleted {
		return // several workers saw the same deletion
	}
	w.requestTermination(Termination{
		Reason:      ReasonDeleted,
		Detail:      "the Node was deleted",
		Requester:   "kubernetes",
		RequestedAt: deleted.DeletionTimestamp,
		Voluntary:   true,
	})
}

// setMessageHandlers registers the queries and the drain update.
func (w *nodeLifecycle) setMessageHandlers() error {
	if err := workflow.SetQueryHandler(w.ctx, QueryState, w.stateView); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(w.ctx, QueryHistory, w.historyView); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(w.ctx, UpdateReserve, w.handleReserve,
		workflow.UpdateHandlerOptions{Validator: w.validateReserve, Description: "hold the node for a disruption command"}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(w.ctx, UpdateDrain, w.handleDrainUpdate,
		workflow.UpdateHandlerOptions{Validator: w.validateDrainUpdate, Description: "drain and terminate the node"})
}

func (w *nodeLifecycle) validateDrainUpdate(_ workflow.Context, request DrainRequest) error {
	return w.validateDrain(request)
}

// validateDrain refuses a drain without a reason, and a drain of a node
// already on its way out. It must not change state.
func (w *nodeLifecycle) validateDrain(request DrainRequest) error {
	if strings.TrimSpace(request.Reason) == "" {
		return fmt.Errorf("drain %s: reason is required", w.spec.NodeClaimName)
	}
	if t := w.state.Termination; t != nil {
		return fmt.Errorf("drain %s refused: node is already %s (%s)", w.spec.NodeClaimName, w.leavingPhase(), describeTermination(*t))
	}
	if w.state.Phase.leaving() {
		return fmt.Errorf("drain %s refused: node is already %s", w.spec.NodeClaimName, w.state.Phase)
	}
	return nil
}

// leavingPhase is the phase a node with a termination request is in, or
// will enter as soon as its current step ends.
func (w *nodeLifecycle) leavingPhase() Phase {
	if w.state.Phase.leaving() {
		return w.state.Phase
	}
	return PhaseDraining
}

func (w *nodeLifecycle) handleDrainUpdate(_ workflow.Context, request DrainRequest) (DrainResult, error) {
	phase := w.state.Phase
	w.acceptDrain(request)
	w.wake.SendAsync(true)
	return DrainResult{Accepted: true, Phase: phase}, nil
}

func (w *nodeLifecycle) acceptDrain(request DrainRequest) {
	requester := requesterOrUnknown(request.Requester)
	w.logger.Info("Drain requested", "requester", requester, "reason", request.Reason)
	w.requestTermination(Termination{
		Reason:    ReasonDrained,
		Detail:    request.Reason,
		Requester: requester,
		Voluntary: true,
	})
}

func requesterOrUnknown(requester string) string {
	if strings.TrimSpace(requester) == "" {
		return "unknown"
	}
	return requester
}

func (w *nodeLifecycle) stateView() (NodeStateView, error) {
	view := NodeStateView{
		NodeClaimName:    w.spec.NodeClaimName,
		NodePool:         w.spec.NodePool,
		Phase:            w.state.Phase,
		Instance:         w.state.Instance,
		NodeName:         w.state.NodeName,
		NonDaemonSetPods: w.state.Pods.NonDaemonSet,
		CreatedAt:        w.state.CreatedAt,
		Termination:      w.state.Termination,
		Reservation:      w.state.Reservation,
		Drift:            w.state.Drift,
	}
	if after, enabled := w.spec.ExpireAfter.Get(); enabled {
		view.ExpiresAt = w.state.CreatedAt.Add(after)
	}
	if w.emptyTTL.pending() {
		view.EmptyTTLAt = w.emptyTTL.deadline
	}
	if w.state.Phase == PhaseRegistering {
		view.RegistrationDeadline = w.state.RegistrationDeadline
	}
	if w.state.Phase == PhaseDraining {
		_, view.DrainDeadline = w.drainParameters()
	}
	view.Timers = pendingTimers(w.expiry, w.emptyTTL)
	return view, nil
}

func (w *nodeLifecycle) historyView() (NodeHistoryView, error) {
	launch := LaunchRecord{
		Summary:  w.spec.LaunchReason,
		PodKeys:  w.spec.PodKeys,
		Rejected: w.state.RejectedOfferings,
	}
	for _, option := range w.spec.InstanceTypeOptions {
		launch.OptionsConsidered = append(launch.OptionsConsidered, option.Name)
	}
	if inst := w.state.Instance; inst != nil {
		launch.Chosen = &ChosenOffering{PricePerHour: inst.PricePerHour}
		launch.Chosen.InstanceType, launch.Chosen.Zone, launch.Chosen.CapacityType = inst.InstanceType, inst.Zone, inst.CapacityType
	}
	return NodeHistoryView{
		Launch:           launch,
		Termination:      w.state.Termination,
		Interruptions:    w.state.Interruptions,
		Decisions:        w.state.Decisions,
		DroppedDecisions: w.state.DroppedDecisions,
	}, nil
}

// launchSummary is the memo's one-line launch reason.
func (w *nodeLifecycle) launchSummary() string {
	summary := fmt.Sprintf("%d pod(s)", len(w.spec.PodKeys))
	if w.spec.LaunchReason != "" {
		summary = w.spec.LaunchReason + "; " + summary
	}
	summary += fmt.Sprintf("; options %s", optionNames(w.spec.InstanceTypeOptions, 5))
	if inst := w.state.Instance; inst != nil {
		summary += fmt.Sprintf("; chose %s in %s (%s, $%.4f/h)", inst.InstanceType, inst.Zone, inst.CapacityType, inst.PricePerHour)
	}
	reasons := map[string]int{}
	var order []string
	for _, rejected := range w.state.RejectedOfferings {
		if reasons[rejected.Reason] == 0 {
			order = append(order, rejected.Reason)
		}
		reasons[rejected.Reason]++
	}
	for _, reason := range order {
		if reason == "insufficient capacity" {
			summary += fmt.Sprintf("; %d offering(s) rejected for insufficient capacity", reasons[reason])
		} else {
			summary += fmt.Sprintf("; %d offering(s) %s", reasons[reason], reason)
		}
	}
	return summary
}
