package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
)

// initialize is the Initializing phase: it waits until the Node is Ready, its startup taints are gone
// (other systems remove them; Millwright never does) and the extended
// resources its pods asked for are allocatable.
func (w *nodeLifecycle) initialize() Phase {
	started := workflow.Now(w.ctx)
	deadline := started.Add(DefaultInitializationTimeout)
	var initialized activities.WaitForInitializationResponse
	stopped, err := w.executeUnless(w.terminationRequested,
		w.waitOptions(started, deadline, "wait for node initialization"),
		activities.WaitForInitializationActivity,
		activities.WaitForInitializationRequest{
			NodeName:          w.state.NodeName,
			StartupTaints:     w.spec.StartupTaints,
			ExtendedResources: w.spec.ExtendedResources,
			Deadline:          deadline,
		}, &initialized)
	switch {
	case stopped:
		return PhaseDraining
	case activities.IsInitializationTimeout(err) || isTimeout(err):
		w.requestTermination(Termination{Reason: ReasonInitializationTimeout, Detail: errorDetail(err)})
		return PhaseDraining
	case err != nil:
		w.requestTermination(Termination{Reason: ReasonFailed, Detail: "waiting for initialization: " + err.Error()})
		return PhaseDraining
	}

	// The activity counted pods at some moment after it started; a
	// pod-count signal observed after that start wins over its answer, and
	// any report observed later still applies.
	if w.state.Pods.ObservedAt.Before(started) {
		w.state.Pods = PodCount{NonDaemonSet: initialized.NonDaemonSetPods, ObservedAt: started}
	}
	w.state.InitializedAt = workflow.Now(w.ctx)
	w.logger.Info("Initialized node", "node", w.state.NodeName, "pods", w.state.Pods.NonDaemonSet)
	w.decide("Initialized node %s with %d non-DaemonSet pod(s)", w.state.NodeName, w.state.Pods.NonDaemonSet)
	if w.terminationRequested() {
		return PhaseDraining
	}
	return PhaseReady
}
