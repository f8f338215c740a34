package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/local/awsemu"
	"github.com/millwright/millwright/local/stack/stacktest"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/workflows"
)

// spotTerminateAfter is how long the emulator waits after its interruption
// warning before it terminates the instance itself: long enough that a
// worker on a loaded machine drains in time, short of EC2's two minutes
// so the scenario stays quick.
const spotTerminateAfter = 90 * time.Second

// TestSpotInterruption: a spot node with pods gets EC2's spot interruption
// warning from the emulator (EventBridge event → SQS → the worker's
// interruption poller → the node workflow's signal). The node is cordoned
// and its pods evicted, then the worker terminates the instance itself,
// all before the emulator's own termination time; the workflow completes
// with reason Interrupted; a replacement spot node is launched and the pods
// run there.
func TestSpotInterruption(t *testing.T) {
	s := newScenario(t, "spot-interruption", withPool(onlyCapacityType(apisv1.CapacityTypeSpot)))
	const replicas = 2
	s.createDeployment(t, "app", replicas, "500m")
	before := s.waitPodsRunning(t, "app=app", replicas, launchTimeout)
	nodeName := onOneNode(t, before)
	wf, state := s.readyWorkflowOf(t, nodeName)
	instanceID := state.Instance.InstanceID
	if got := instance(t, instanceID).CapacityType; got != apisv1.CapacityTypeSpot {
		t.Fatalf("instance %s is %s in the emulator; the pool allows spot only", instanceID, got)
	}
	node, err := suite.kube.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := stacktest.WatchNode(t, suite.kube, node)
	pods := s.watchPodTimeline(t, "app=app", replicas)

	admin := awsemu.NewAdminClient(suite.stack.EmulatorURL(), nil)
	interrupted := time.Now()
	interruption, err := admin.InterruptSpot(context.Background(), instanceID, spotTerminateAfter)
	if err != nil {
		t.Fatalf("interrupting %s: %v", instanceID, err)
	}
	t.Logf("emulator sent %q for %s; it terminates the instance at %s", interruption.Event.DetailType, instanceID, interruption.TerminateAt.Format(time.StampMilli))

	result := waitWorkflowResult(t, wf.ID, terminateTimeout)
	assertTerminated(t, wf.ID, result, workflows.ReasonInterrupted)
	t.Logf("interruption → drained, instance terminated, Node gone: %s", time.Since(interrupted).Round(time.Millisecond))
	if !strings.Contains(result.Termination.Detail, string(workflows.InterruptionSpotWarning)) {
		t.Errorf("termination detail %q does not name the %s", result.Termination.Detail, workflows.InterruptionSpotWarning)
	}

	// The workflow's own record: the event as the poller mapped it, with
	// EC2's two-minute deadline the drain had to meet.
	history := stacktest.HistoryOf(t, suite.temporal, wf.ID)
	recorded := false
	for _, i := range history.Interruptions {
		if i.Kind == workflows.InterruptionSpotWarning && i.EventID == interruption.Event.ID && !i.Deadline.IsZero() {
			recorded = true
		}
	}
	if !recorded {
		t.Errorf("the history of %s does not record spot warning %s with a deadline: %+v", wf.ID, interruption.Event.ID, history.Interruptions)
	}

	observed := seen()
	if !observed.Cordoned || !observed.Deleted {
		t.Errorf("Node %s: cordoned %v, deleted %v; want both seen", nodeName, observed.Cordoned, observed.Deleted)
	}
	s.assertDrainedBeforeTermination(t, pods, nodeName, instanceID)
	if terminated := instance(t, instanceID); !terminated.StateSince.Before(interruption.TerminateAt) {
		t.Errorf("instance %s terminated at %s, not before the emulator's own termination at %s",
			instanceID, terminated.StateSince.Format(time.StampMilli), interruption.TerminateAt.Format(time.StampMilli))
	}

	after := s.waitPodsRunning(t, "app=app", replicas, launchTimeout)
	t.Logf("interruption → pods Running again: %s", time.Since(interrupted).Round(time.Millisecond))
	s.assertReplaced(t, before, after, wf)
	for _, p := range after {
		n, err := suite.kube.CoreV1().Nodes().Get(context.Background(), p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Errorf("the node %s of pod %s: %v", p.Spec.NodeName, p.Name, err)
			continue
		}
		if got := n.Labels[apisv1.LabelCapacityType]; got != apisv1.CapacityTypeSpot {
			t.Errorf("replacement node %s is %q, want spot (the pool's only capacity type)", n.Name, got)
		}
	}
	t.Logf("instances launched for the pool: %d", len(s.instances()))
}
