package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
)

// Timer names, shown in QueryState and as timer summaries in the UI.
const (
	expiryTimerName   = "expireAfter"
	emptyTTLTimerName = "consolidateAfter"
)

// defaultDisruptionRetry is how long an empty node waits before asking its
// disruption budget again when the budget did not say: about as often as
// Karpenter's disruption loop looks, so a node refused because a sibling
// was leaving goes soon after the sibling is gone.
const defaultDisruptionRetry = 10 * time.Second

// ready is the Ready phase: it waits for whichever comes first — the node
// staying empty for consolidateAfter, expiry, an interruption, a manual
// drain, or the Node's deletion — and then moves to Draining. It returns
// continueAsNewPhase instead when the run should continue as new.
func (w *nodeLifecycle) ready() Phase {
	w.startExpiryTimer()
	for !w.terminationRequested() {
		w.syncEmptyTTL()
		selector := workflow.NewSelector(w.ctx)
		w.listen(selector)
		w.expiry.addTo(w.ctx, selector, w.expired)
		w.emptyTTL.addTo(w.ctx, selector, nil)
		w.selectAll(selector)
		w.checkCancelled()
		w.flushOutbox()
		if w.emptyTTL.takeFired() {
			w.considerEmptyTermination()
		}
		if !w.terminationRequested() && w.shouldContinueAsNew() {
			// Take every signal already delivered into the state we carry;
			// one of them may even end the node instead.
			w.absorbPendingSignals()
			w.flushOutbox()
			if !w.terminationRequested() {
				// Record an emptiness the absorbed signals revealed, so the
				// next run counts consolidateAfter from now, not from its
				// own start.
				w.syncEmptyTTL()
				return continueAsNewPhase
			}
		}
	}
	w.emptyTTL.stop()
	return PhaseDraining
}

// startExpiryTimer arms expireAfter, counted from the node's creation (not
// from this run), so continuing as new never extends a node's life.
func (w *nodeLifecycle) startExpiryTimer() {
	after, enabled := w.spec.ExpireAfter.Get()
	if !enabled {
		return
	}
	w.expiry.start(w.ctx, w.state.CreatedAt.Add(after))
}

func (w *nodeLifecycle) expired() {
	after, _ := w.spec.ExpireAfter.Get()
	w.logger.Info("Node expired", "expireAfter", formatDuration(after))
	w.requestTermination(Termination{
		Reason:    ReasonExpired,
		Detail:    fmt.Sprintf("expired after %s", formatDuration(after)),
		Requester: "millwright",
		// Expiry is forceful: do-not-disrupt pods cannot keep a node past it.
		Voluntary: false,
	})
}

// syncEmptyTTL starts the consolidateAfter countdown when the node is empty
// and cancels it when a pod arrives.
func (w *nodeLifecycle) syncEmptyTTL() {
	after, enabled := w.spec.ConsolidateAfter.Get()
	if !enabled {
		return
	}
	nominated := changed(w.ctx, changeNominationWindow)
	empty := w.state.Pods.NonDaemonSet == 0
	switch {
	case empty && w.state.EmptySince.IsZero():
		w.state.EmptySince = workflow.Now(w.ctx)
		if nominated {
			w.state.EmptySince = w.lastPodEvent()
		}
		w.logger.Info("Added TTL to empty node", "ttl", formatDuration(after))
		w.decide("Node is empty; terminating after %s unless a pod arrives", formatDuration(after))
		if !nominated {
			w.armEmptyTTL(w.state.EmptySince.Add(after))
			return
		}
		if until := w.nominatedUntil(); until.After(w.state.EmptySince.Add(after)) {
			w.decide("Node is nominated for %d pod(s) until %s; not disrupted as empty before", len(w.spec.PodKeys), formatDeadline(until))
		}
		w.armEmptyTTL(w.emptyDeadline(after))
	case empty && !w.emptyTTL.pending():
		// Continued as new while empty, or a disruption budget asked to
		// wait: resume the countdown from its absolute deadlines.
		if nominated {
			w.armEmptyTTL(w.emptyDeadline(after))
			return
		}
		deadline := w.state.EmptySince.Add(after)
		if w.state.DisruptionRetryAt.After(deadline) {
			deadline = w.state.DisruptionRetryAt
		}
		w.armEmptyTTL(deadline)
	case !empty && !w.state.EmptySince.IsZero():
		w.emptyTTL.stop()
		w.state.EmptySince = time.Time{}
		w.state.DisruptionRetryAt = time.Time{}
		w.logger.Info("Removed TTL from node", "pods", w.state.Pods.NonDaemonSet)
		w.decide("A pod arrived; empty-node countdown cancelled")
	}
}

// armEmptyTTL starts the consolidateAfter timer, unless the disruption
// workflow decides this node's emptiness (spec.DisruptionDecidesEmpty, or
// handed over after a budget refused).
func (w *nodeLifecycle) armEmptyTTL(deadline time.Time) {
	if w.spec.DisruptionDecidesEmpty && changed(w.ctx, changeEmptyByDisruption) {
		return
	}
	if w.state.EmptyHandedOver {
		return // its budget refused once; the disruption workflow decides
	}
	if w.state.Reservation != nil && changed(w.ctx, changeReservedArmsNoEmptyTTL) {
		return // the command decides; a release re-arms it on the next pass
	}
	w.emptyTTL.start(w.ctx, deadline)
}

// lastPodEvent is when the node last changed pods as far as the workflow
// knows: the observation of the count that emptied it, or its
// initialization when no pod was reported after it. consolidateAfter counts
// from it (Karpenter's lastPodEventTime), not from when the workflow
// happened to notice.
func (w *nodeLifecycle) lastPodEvent() time.Time {
	last := w.state.InitializedAt
	if w.state.Pods.ObservedAt.After(last) {
		last = w.state.Pods.ObservedAt
	}
	if last.IsZero() {
		return workflow.Now(w.ctx)
	}
	return last
}

// nominatedUntil ends the window in which a node launched for pending pods
// waits for them to bind: before it, an empty node is not empty, it is
// waiting for its pods. A node launched for no pod (minNodes) is never
// nominated.
func (w *nodeLifecycle) nominatedUntil() time.Time {
	if len(w.spec.PodKeys) == 0 || w.state.InitializedAt.IsZero() {
		return time.Time{}
	}
	window := w.spec.NominationWindow
	if window <= 0 {
		window = activities.DefaultNominationWindow
	}
	return w.state.InitializedAt.Add(window)
}

// emptyDeadline is when an empty node may be terminated: consolidateAfter
// after its last pod event, not inside its nomination window, and not before
// a disruption budget said to ask again. Never in the past, so the timer
// fires at once rather than failing.
func (w *nodeLifecycle) emptyDeadline(after time.Duration) time.Time {
	deadline := w.state.EmptySince.Add(after)
	for _, later := range []time.Time{w.nominatedUntil(), w.state.DisruptionRetryAt} {
		if later.After(deadline) {
			deadline = later
		}
	}
	if now := workflow.Now(w.ctx); deadline.Before(now) {
		return now
	}
	return deadline
}

// considerEmptyTermination runs when the node has been empty for
// consolidateAfter: terminate it if its pool's disruption budget (and
// minNodes) allow, otherwise ask again later.
func (w *nodeLifecycle) considerEmptyTermination() {
	if w.state.Pods.NonDaemonSet > 0 || w.terminationRequested() || w.state.Reservation != nil {
		return // not empty, already leaving, or a disruption command holds it
	}
	var answer activities.AllowDisruptionResponse
	err := w.execute(shortOptions("check disruption budget"), activities.AllowDisruptionActivity,
		activities.AllowDisruptionRequest{NodePool: w.spec.NodePool, NodeName: w.state.NodeName, Reason: string(ReasonEmpty)}, &answer)
	if err != nil {
		answer = activities.AllowDisruptionResponse{Why: "budget check failed: " + err.Error()}
	}
	if w.state.Pods.NonDaemonSet > 0 || w.terminationRequested() {
		return // a pod arrived, or something else ended the node, meanwhile
	}
	if !answer.Allowed && changed(w.ctx, changeRefusedEmptyWaits) {
		w.state.EmptyHandedOver = true
		w.logger.Info("Empty node kept by its disruption budget; the disruption workflow decides when it goes", "why", answer.Why)
		w.decide("Empty node kept: %s; the disruption workflow takes it when the budget allows", answer.Why)
		return
	}
	if !answer.Allowed {
		retry := answer.RetryAfter
		if retry <= 0 {
			retry = defaultDisruptionRetry
		}
		w.state.DisruptionRetryAt = workflow.Now(w.ctx).Add(retry)
		w.logger.Info("Empty node kept by its disruption budget", "why", answer.Why, "retryIn", formatDuration(retry))
		w.decide("Empty node kept: %s; asking again in %s", answer.Why, formatDuration(retry))
		return
	}
	after, _ := w.spec.ConsolidateAfter.Get()
	w.logger.Info(fmt.Sprintf("Triggering termination after %s for empty node", formatDuration(after)))
	w.requestTermination(Termination{
		Reason:    ReasonEmpty,
		Detail:    fmt.Sprintf("empty for %s", formatDuration(after)),
		Requester: "millwright",
		Voluntary: true,
	})
}

func (w *nodeLifecycle) shouldContinueAsNew() bool {
	info := workflow.GetInfo(w.ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= nodeHistoryEventsBeforeContinueAsNew
}

// continueAsNew carries the state into a new run once every message handler
// has finished. Signals delivered while it waited are taken into the state
// first (changeAbsorbSignalsAfterHandlers): one that ends the node (a
// disruption commit, a deleted Node) sends it to Draining instead, with no
// error.
func (w *nodeLifecycle) continueAsNew() (Phase, error) {
	w.awaitNodeClaimMirror()
	if err := workflow.Await(w.ctx, func() bool { return workflow.AllHandlersFinished(w.ctx) }); err != nil {
		return "", err
	}
	if changed(w.ctx, changeAbsorbSignalsAfterHandlers) {
		w.absorbPendingSignals()
		w.flushOutbox()
		if w.terminationRequested() {
			w.emptyTTL.stop()
			return PhaseDraining, nil
		}
		w.syncEmptyTTL()
	}
	w.logger.Info("Continuing as new", "historyLength", workflow.GetInfo(w.ctx).GetCurrentHistoryLength())
	return "", workflow.NewContinueAsNewError(w.ctx, NodeWorkflowType, w.spec, w.state)
}
