package workflows

import (
	"time"

	"github.com/millwright/millwright/activities"
)

// drain is the Draining phase: it evicts the node's pods. It restarts the
// Drain activity with tighter parameters when an involuntary disruption (an
// interruption) arrives during a voluntary drain.
func (w *nodeLifecycle) drain() Phase {
	if w.state.NodeName == "" {
		return PhaseTerminating
	}
	for {
		voluntary, deadline := w.drainParameters()
		request := activities.DrainRequest{
			NodeName:           w.state.NodeName,
			Reason:             describeTermination(*w.state.Termination),
			Voluntary:          voluntary,
			Deadline:           deadline,
			UnschedulableSince: w.state.Termination.UnschedulableSince,
		}
		parametersChanged := func() bool {
			voluntary, deadline := w.drainParameters()
			return voluntary != request.Voluntary || !deadline.Equal(request.Deadline)
		}
		var drained activities.DrainResponse
		restarted, err := w.executeUnless(parametersChanged, drainOptions(), activities.DrainActivity, request, &drained)
		if restarted {
			voluntary, deadline := w.drainParameters()
			w.decide("Drain restarted: voluntary=%v, deadline %s", voluntary, formatDeadline(deadline))
			continue
		}
		if err != nil {
			// Only a non-retryable error ends a drain; the instance must
			// still go, or it runs (and costs) forever.
			w.logger.Error("Drain failed; terminating anyway", "node", w.state.NodeName, "error", err)
			w.decide("Drain failed, terminating anyway: %s", errorDetail(err))
		} else {
			w.decide("Drained node %s: %d pod(s) evicted, %d deleted", w.state.NodeName, drained.Evicted, drained.Deleted)
		}
		return PhaseTerminating
	}
}

// drainParameters derive from the termination reason, any involuntary
// request that came after it, and the pool's terminationGracePeriod
// (counted from the termination request, for a deleted Node from its
// deletion timestamp).
func (w *nodeLifecycle) drainParameters() (voluntary bool, deadline time.Time) {
	termination := w.state.Termination
	voluntary = termination.Voluntary && !w.escalated
	deadline = earliest(termination.Deadline, w.escalatedDeadline)
	if grace, enabled := w.spec.TerminationGracePeriod.Get(); enabled {
		deadline = earliest(deadline, termination.RequestedAt.Add(grace))
	}
	return voluntary, deadline
}
