package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/local/stack/stacktest"
	"github.com/millwright/millwright/workflows"
)

// TestManualDrainWithStarter: `starter drain NODE --reason TEXT`, the built
// binary pointed at the stack by the environment a user's shell has, sends
// the drain update; the node is cordoned and drained, its instance
// terminated, its Node deleted, and its workflow completes with reason
// Drained, the given reason and the starter as requester. The pods run
// again on a replacement node.
func TestManualDrainWithStarter(t *testing.T) {
	s := newScenario(t, "drain-starter")
	const reason = "e2e: drained with starter"
	result := s.manualDrain(t, func(node string, wf nodeWorkflow) {
		out, err := runStarter("drain", node, "--reason", reason)
		if err != nil {
			t.Fatalf("starter drain %s: %v\n%s", node, err, out)
		}
		t.Logf("starter drain %s: %s", node, strings.TrimSpace(out))
		if !strings.Contains(out, "accepted") {
			t.Errorf("starter drain did not report the drain accepted:\n%s", out)
		}
	})
	if result.Termination.Detail != reason || !strings.Contains(result.Termination.Requester, "starter") {
		t.Errorf("termination detail %q by %q, want %q by the starter", result.Termination.Detail, result.Termination.Requester, reason)
	}
}

// TestManualDrainSignalFromUI: the drain signal sent as the Temporal UI
// sends it (a page load for the CSRF cookie, then the UI server's signal
// endpoint with the token, the DrainRequest typed as JSON); then the same
// outcome as with starter: cordon, drain, instance terminated, Node gone,
// reason Drained with the UI user's reason and requester, pods running on a
// replacement.
func TestManualDrainSignalFromUI(t *testing.T) {
	s := newScenario(t, "drain-ui")
	request := workflows.DrainRequest{Reason: "e2e: drained from the Temporal UI", Requester: "e2e-ui-user"}
	result := s.manualDrain(t, func(_ string, wf nodeWorkflow) {
		signalThroughUI(t, wf.ID, wf.RunID, workflows.SignalDrain, request)
	})
	if result.Termination.Detail != request.Reason || result.Termination.Requester != request.Requester {
		t.Errorf("termination detail %q by %q, want %q by %q", result.Termination.Detail, result.Termination.Requester, request.Reason, request.Requester)
	}
}

// manualDrain runs a deployment of two 500m pods (one node), calls drain
// with the node and its workflow, and checks the drain end to end: the
// workflow completes with reason Drained (search attributes too), the
// Node was cordoned and tainted, then deleted, its instance terminated,
// every pod of the node evicted before the instance stopped, and the pods
// run again on a replacement node owned by a new workflow. It returns the
// drained workflow's result for the caller's own checks.
func (s *scenario) manualDrain(t *testing.T, drain func(node string, wf nodeWorkflow)) workflows.NodeResult {
	t.Helper()
	const replicas = 2
	s.createDeployment(t, "app", replicas, "500m")
	before := s.waitPodsRunning(t, "app=app", replicas, launchTimeout)
	nodeName := onOneNode(t, before)
	wf, state := s.readyWorkflowOf(t, nodeName)
	node, err := suite.kube.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := stacktest.WatchNode(t, suite.kube, node)
	pods := s.watchPodTimeline(t, "app=app", replicas)

	drained := time.Now()
	drain(nodeName, wf)
	result := waitWorkflowResult(t, wf.ID, terminateTimeout)
	assertTerminated(t, wf.ID, result, workflows.ReasonDrained)
	t.Logf("drain → node drained, instance terminated, Node gone: %s", time.Since(drained).Round(time.Millisecond))

	observed := seen()
	if !observed.Cordoned || !observed.DisruptedTaint || !observed.Deleted {
		t.Errorf("Node %s: cordoned %v, disrupted taint %v, deleted %v; want all seen", nodeName, observed.Cordoned, observed.DisruptedTaint, observed.Deleted)
	}
	if result.Instance == nil || result.Instance.InstanceID != state.Instance.InstanceID {
		t.Fatalf("the workflow's result names instance %v, it launched %s", result.Instance, state.Instance.InstanceID)
	}
	s.assertDrainedBeforeTermination(t, pods, nodeName, result.Instance.InstanceID)

	after := s.waitPodsRunning(t, "app=app", replicas, launchTimeout)
	t.Logf("drain → pods Running again: %s", time.Since(drained).Round(time.Millisecond))
	s.assertReplaced(t, before, after, wf)
	return result
}

// assertDrainedBeforeTermination: every pod seen on node was deleted (the
// drain evicted it) before the instance finished terminating in the
// emulator, and the termination was the worker's own TerminateInstances.
func (s *scenario) assertDrainedBeforeTermination(t *testing.T, pods *podTimeline, node, instanceID string) {
	t.Helper()
	count, allGone, lastGone := pods.goneFromNode(node)
	inst := instance(t, instanceID)
	switch {
	case count == 0:
		t.Errorf("the pod watch saw no pod on Node %s", node)
	case !allGone:
		t.Errorf("not every pod of Node %s was deleted by the drain", node)
	case inst.State != "terminated" || !lastGone.Before(inst.StateSince):
		t.Errorf("the last of %d pods left Node %s at %s; instance %s %s since %s: want the pods gone first",
			count, node, lastGone.Format(time.StampMilli), instanceID, inst.State, inst.StateSince.Format(time.StampMilli))
	default:
		t.Logf("%d pods of %s evicted by %s; instance %s terminated at %s (%s)", count, node,
			lastGone.Format(time.StampMilli), instanceID, inst.StateSince.Format(time.StampMilli), inst.StateReason)
	}
	if inst.StateReason != emulatorUserTermination {
		t.Errorf("instance %s state reason %q, want %q (terminated by the worker)", instanceID, inst.StateReason, emulatorUserTermination)
	}
}

// emulatorUserTermination is the emulator's (and EC2's) state reason of an
// instance ended by TerminateInstances.
const emulatorUserTermination = "Client.UserInitiatedShutdown"
