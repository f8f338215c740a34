package workflows

import (
	"fmt"
	"time"

	"github.com/millwright/millwright/activities"
)

// terminate is the Terminating phase: it terminates the instance, waits until EC2 confirms, then deletes
// the Node and removes its finalizer. Each step is idempotent.
func (w *nodeLifecycle) terminate() Phase {
	if instance := w.state.Instance; instance != nil {
		var terminated activities.TerminateInstanceResponse
		err := w.execute(mustSucceedOptions("terminate instance"), activities.TerminateInstanceActivity,
			activities.TerminateInstanceRequest{InstanceID: instance.InstanceID}, &terminated)
		if err != nil {
			w.logger.Error("Could not terminate instance", "instance", instance.InstanceID, "error", err)
			w.decide("Terminating %s failed: %s", instance.InstanceID, errorDetail(err))
		} else {
			w.logger.Info("Terminated instance", "instance", instance.InstanceID, "state", terminated.State)
			var gone activities.WaitForInstanceTerminatedResponse
			err = w.execute(w.waitForTerminatedOptions(), activities.WaitForInstanceTerminatedActivity,
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
		err := w.execute(mustSucceedOptions("delete node"), activities.DeleteNodeActivity, request, &deleted)
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
