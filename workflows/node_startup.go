package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
)

// register waits for the instance's Node and adopts it. An instance whose
// Node never shows up is terminated.
func (w *nodeLifecycle) register() {
	instance := w.state.Instance
	var registered activities.WaitForRegistrationResponse
	stopped, err := w.executeUnless(w.terminationRequested,
		waitOptions(workflow.Now(w.ctx), w.state.RegistrationDeadline, "wait for node registration"),
		activities.WaitForRegistrationActivity,
		activities.WaitForRegistrationRequest{
			NodeClaimName: w.spec.NodeClaimName,
			InstanceID:    instance.InstanceID,
			ProviderID:    instance.ProviderID,
			Deadline:      w.state.RegistrationDeadline,
		}, &registered)
	switch {
	case stopped:
		w.enterPhase(PhaseTerminating)
		return
	case activities.IsRegistrationTimeout(err) || isTimeout(err):
		w.requestTermination(Termination{
			Reason: ReasonRegistrationTimeout,
			Detail: fmt.Sprintf("instance %s did not register a Node within %s", instance.InstanceID, formatDuration(w.registrationTimeout())),
		})
		w.enterPhase(PhaseTerminating)
		return
	case err != nil:
		w.requestTermination(Termination{Reason: ReasonFailed, Detail: "waiting for registration: " + err.Error()})
		w.enterPhase(PhaseTerminating)
		return
	}

	w.state.NodeName = registered.NodeName
	err = w.execute(shortOptions("register node"), activities.RegisterNodeActivity, activities.RegisterNodeRequest{
		NodeName:      registered.NodeName,
		NodeClaimName: w.spec.NodeClaimName,
		NodePool:      w.spec.NodePool,
		Labels:        w.nodeLabels(),
		Annotations:   w.spec.Annotations,
		Taints:        w.spec.Taints,
		StartupTaints: w.spec.StartupTaints,
	}, nil)
	if err != nil {
		w.requestTermination(Termination{Reason: ReasonFailed, Detail: "registering node " + registered.NodeName + ": " + err.Error()})
		w.enterPhase(PhaseDraining)
		return
	}
	w.state.RegisteredAt = workflow.Now(w.ctx)
	w.logger.Info("Registered node", "node", registered.NodeName)
	w.decide("Registered node %s", registered.NodeName)
	if w.terminationRequested() {
		w.enterPhase(PhaseDraining)
		return
	}
	w.enterPhase(PhaseInitializing)
}

// initialize waits until the Node is Ready, its startup taints are gone
// (other systems remove them; Millwright never does) and the extended
// resources its pods asked for are allocatable.
func (w *nodeLifecycle) initialize() {
	started := workflow.Now(w.ctx)
	deadline := started.Add(DefaultInitializationTimeout)
	var initialized activities.WaitForInitializationResponse
	stopped, err := w.executeUnless(w.terminationRequested,
		waitOptions(started, deadline, "wait for node initialization"),
		activities.WaitForInitializationActivity,
		activities.WaitForInitializationRequest{
			NodeName:          w.state.NodeName,
			StartupTaints:     w.spec.StartupTaints,
			ExtendedResources: w.spec.ExtendedResources,
			Deadline:          deadline,
		}, &initialized)
	switch {
	case stopped:
		w.enterPhase(PhaseDraining)
		return
	case activities.IsInitializationTimeout(err) || isTimeout(err):
		w.requestTermination(Termination{Reason: ReasonInitializationTimeout, Detail: errorDetail(err)})
		w.enterPhase(PhaseDraining)
		return
	case err != nil:
		w.requestTermination(Termination{Reason: ReasonFailed, Detail: "waiting for initialization: " + err.Error()})
		w.enterPhase(PhaseDraining)
		return
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
		w.enterPhase(PhaseDraining)
		return
	}
	w.enterPhase(PhaseReady)
}

func isTimeout(err error) bool {
	var timeoutErr *temporal.TimeoutError
	return errors.As(err, &timeoutErr)
}

// errorDetail is the innermost message of an activity error: the
// activity's own words, without the SDK's wrapping.
func errorDetail(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Error()
	}
	return err.Error()
}
