package workflows

import (
	"fmt"
	"time"

	"github.com/millwright/millwright/activities"
)

// terminate is the Terminating phase: it terminates the instance, waits
// until EC2 confirms, then deletes the Node and removes its finalizer. Each
// step is idempotent.
func (w *nodeLifecycle) terminate() Phase {
	outlivesCancel := changed(w.ctx, changeTerminateOutlivesCancel)
	var terminated activities.TerminateInstanceResponse
	var err error
	switch {
	case w.state.Instance == nil && w.state.LaunchUnconfirmed:
		// Finding it by its tags terminates it too.
		err = w.terminateUnconfirmedLaunch(&terminated)
	case w.state.Instance != nil:
		err = w.executeStep(outlivesCancel, mustSucceedOptions("terminate instance"), activities.TerminateInstanceActivity,
			activities.TerminateInstanceRequest{InstanceID: w.state.Instance.InstanceID}, &terminated)
	}
	if instance := w.state.Instance; instance != nil {
		if err != nil {
			w.logger.Error("Could not terminate instance", "instance", instance.InstanceID, "error", err)
			w.decide("Terminating %s failed: %s", instance.InstanceID, errorDetail(err))
		} else {
			w.logger.Info("Terminated instance", "instance", instance.InstanceID, "state", terminated.State)
			var gone activities.WaitForInstanceTerminatedResponse
			err = w.executeStep(outlivesCancel, w.waitForTerminatedOptions(), activities.WaitForInstanceTerminatedActivity,
				activities.WaitForInstanceTerminatedRequest{InstanceID: instance.InstanceID}, &gone)
			if err != nil {
				w.decide("Instance %s not confirmed terminated, moving on: %s", instance.InstanceID, errorDetail(err))
			} else {
				w.decide("Instance %s is %s", instance.InstanceID, gone.State)
			}
		}
	}
	if w.state.NodeName != "" || w.state.Instance != nil {
		// Without a Node name the Node is looked up by provider ID: an
		// instance can register after the workflow stopped waiting for it.
		request := activities.DeleteNodeRequest{NodeName: w.state.NodeName}
		if w.state.Instance != nil {
			request.ProviderID = w.state.Instance.ProviderID
		}
		var deleted activities.DeleteNodeResponse
		err := w.executeStep(outlivesCancel, mustSucceedOptions("delete node"), activities.DeleteNodeActivity, request, &deleted)
		switch {
		case err != nil:
			w.logger.Error("Could not delete node", "node", w.state.NodeName, "error", err)
			w.decide("Deleting the Node failed: %s", errorDetail(err))
		case deleted.Deleted:
			w.logger.Info("Deleted node", "node", w.state.NodeName)
			w.decide("Deleted node %s", w.state.NodeName)
		}
	}
	return PhaseTerminated
}

// terminateUnconfirmedLaunch terminates whatever instance a launch that
// never answered created, found by the node claim's tags, and adopts it so
// the rest of the phase waits for it and deletes its Node (which may have
// registered meanwhile).
func (w *nodeLifecycle) terminateUnconfirmedLaunch(terminated *activities.TerminateInstanceResponse) error {
	err := w.executeStep(true, mustSucceedOptions("terminate what the launch created"), activities.TerminateInstanceActivity,
		activities.TerminateInstanceRequest{Cluster: w.spec.Cluster, NodeClaimName: w.spec.NodeClaimName}, terminated)
	switch {
	case err != nil:
		w.logger.Error("Could not terminate what the launch may have created", "error", err)
		w.decide("Terminating the instances tagged for %s failed: %s", w.spec.NodeClaimName, errorDetail(err))
	case len(terminated.Instances) == 0:
		w.decide("The launch created no instance")
	default:
		found := terminated.Instances[0]
		w.state.Instance = &activities.LaunchResponse{InstanceID: found.InstanceID, ProviderID: found.ProviderID, Zone: found.Zone}
		terminated.State = found.State
		for _, instance := range terminated.Instances[1:] {
			w.decide("The launch had also created %s; terminated it (%s)", instance.InstanceID, instance.State)
		}
	}
	return err
}

func describeTermination(t Termination) string {
	text := string(t.Reason)
	if t.Detail != "" {
		text += ": " + t.Detail
	}
	if t.Requester != "" {
		text += fmt.Sprintf(" (by %s)", t.Requester)
	}
	return text
}

func formatDeadline(deadline time.Time) string {
	if deadline.IsZero() {
		return "none"
	}
	return deadline.UTC().Format(time.RFC3339)
}
