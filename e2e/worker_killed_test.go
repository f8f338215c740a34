package e2e

// Crash recovery: the worker process is SIGKILLed while a node workflow is
// in the middle of an activity that talks to EC2 or the cluster, then
// started again. Temporal keeps the lifecycle; what these scenarios check is
// that the restarted worker finishes it without a duplicate or leaked
// instance.
//
// A killed worker's running activity attempt is only given up by Temporal at
// its timeout (Launch: 3 minutes start-to-close, no heartbeat; Drain: 2
// minutes heartbeat), so these scenarios wait minutes, not seconds, for the
// lifecycle to resume.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/local/awsemu"
	"github.com/millwright/millwright/local/stack/stacktest"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/workflows"
)

// Bounds of the crash scenarios' waits: an abandoned activity attempt times
// out (see above), then the lifecycle goes on as usual.
const (
	launchAttemptTimeout = 3 * time.Minute
	drainHeartbeatWait   = 2 * time.Minute
)

// pendingActivityOf is the node workflow's pending activity of type
// activityType (as DescribeWorkflowExecution reports it), if any.
func pendingActivityOf(ctx context.Context, workflowID, activityType string) (*workflowpb.PendingActivityInfo, error) {
	described, err := suite.temporal.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return nil, fmt.Errorf("describing %s: %w", workflowID, err)
	}
	for _, pending := range described.GetPendingActivities() {
		if pending.GetActivityType().GetName() == activityType {
			return pending, nil
		}
	}
	return nil, nil
}

// scheduledActivities counts, over every run of the workflow
// (continue-as-new included), how many times each activity type was
// scheduled. Retries of one scheduled activity are attempts, not new
// schedules, so a count of one means the workflow asked once.
func scheduledActivities(t *testing.T, workflowID string) map[string]int {
	t.Helper()
	ctx := context.Background()
	counts := map[string]int{}
	for runID := ""; ; {
		var previousRun string
		iter := suite.temporal.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			event, err := iter.Next()
			if err != nil {
				t.Fatalf("reading the history of %s (run %q): %v", workflowID, runID, err)
			}
			switch attributes := event.GetAttributes().(type) {
			case *historypb.HistoryEvent_ActivityTaskScheduledEventAttributes:
				counts[attributes.ActivityTaskScheduledEventAttributes.GetActivityType().GetName()]++
			case *historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes:
				previousRun = attributes.WorkflowExecutionStartedEventAttributes.GetContinuedExecutionRunId()
			}
		}
		if previousRun == "" {
			return counts
		}
		runID = previousRun
	}
}

// instancesOfClaim are the emulator's instances (any state) tagged with the
// node claim.
func instancesOfClaim(nodeClaim string) []awsemu.InstanceState {
	var out []awsemu.InstanceState
	for _, i := range suite.stack.Emulator.State().Instances {
		if i.Tags[apisv1.TagNodeClaim] == nodeClaim {
			out = append(out, i)
		}
	}
	return out
}

// TestWorkerKilledMidLaunch: the worker dies after CreateFleet created the
// instance but before the Launch activity returned it to the workflow — the
// window where a launch without an idempotency token would create a second
// instance on retry. The window is held open deterministically by
// throttling DescribeInstances in the emulator (Launch describes the
// instance it created before returning), and the kill lands while a Launch
// attempt runs, after Launch already retried once (so the replayed
// CreateFleet is exercised before and after the crash). Temporal gives the
// killed attempt up only at Launch's 3-minute start-to-close timeout. After the restart, with the throttle lifted, the
// lifecycle completes: one instance for the node claim (the retried
// CreateFleet's ClientToken returned the first one), the Node Ready, the
// pod Running on it; after the pod leaves, the instance is terminated and
// nothing is left.
func TestWorkerKilledMidLaunch(t *testing.T) {
	s := newScenario(t, "killed-mid-launch")
	throttle := awsemu.ThrottleFault{Rate: 1, Actions: []string{"DescribeInstances"}}
	if err := suite.stack.Emulator.SetThrottle(throttle); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(suite.stack.Emulator.ClearThrottle)

	created := time.Now()
	s.createPod(t, "app", "500m")
	wf := s.waitNodeWorkflows(t, 1, launchTimeout)[0]
	var claim string
	var launch *workflowpb.PendingActivityInfo
	poll(t, launchTimeout, "CreateFleet to create the instance while Launch, throttled, retries", func(ctx context.Context) (bool, error) {
		state, err := tryQueryState(wf.ID)
		if err != nil {
			return false, err
		}
		if state.Phase != workflows.PhaseLaunching {
			return false, fmt.Errorf("node workflow %s is in phase %s; the throttle should hold it in Launching", wf.ID, state.Phase)
		}
		claim = state.NodeClaimName
		if launch, err = pendingActivityOf(ctx, wf.ID, activities.LaunchActivity); err != nil || launch == nil {
			return false, err
		}
		// Killed while an attempt runs (not between attempts): the crash
		// that matters, where Temporal cannot know whether the attempt's
		// CreateFleet went through.
		return len(instancesOfClaim(claim)) > 0 && launch.GetAttempt() >= 2 &&
			launch.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED, nil
	})
	launched := instancesOfClaim(claim)
	t.Logf("instance %s created for node claim %s; Launch attempt %d (%s), last failure: %s",
		launched[0].ID, claim, launch.GetAttempt(), launch.GetState(), launch.GetLastFailure().GetMessage())

	suite.worker.kill(t)
	killed := time.Now()
	suite.stack.Emulator.ClearThrottle()
	suite.worker.start(t)

	pods := s.waitPodsRunning(t, "app=app", 1, launchAttemptTimeout+launchTimeout)
	t.Logf("worker killed mid-launch → pod Running on %s: %s after the kill, %s after the pod was created",
		pods[0].Spec.NodeName, time.Since(killed).Round(time.Millisecond), time.Since(created).Round(time.Millisecond))

	instances := instancesOfClaim(claim)
	if len(instances) != 1 {
		t.Fatalf("node claim %s has %d instances, want exactly 1 (the retried CreateFleet must return the first): %+v", claim, len(instances), instances)
	}
	inst := instances[0]
	if pool := s.instances(); len(pool) != 1 {
		t.Errorf("pool %s has %d instances, want the node claim's one: %+v", s.pool, len(pool), pool)
	}
	if inst.ID != launched[0].ID || inst.State != "running" {
		t.Errorf("node claim %s's instance is %s (%s), want %s running", claim, inst.ID, inst.State, launched[0].ID)
	}
	state := waitReadyState(t, wf.ID)
	if state.Phase != workflows.PhaseReady || state.Instance == nil || state.Instance.InstanceID != inst.ID || state.NodeName != pods[0].Spec.NodeName {
		t.Errorf("node workflow %s: phase %s, instance %+v, node %s; want Ready with %s on %s",
			wf.ID, state.Phase, state.Instance, state.NodeName, inst.ID, pods[0].Spec.NodeName)
	}
	node, err := suite.kube.CoreV1().Nodes().Get(context.Background(), pods[0].Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "aws:///" + inst.Zone + "/" + inst.ID; node.Spec.ProviderID != want {
		t.Errorf("Node %s providerID %q, want %q", node.Name, node.Spec.ProviderID, want)
	}
	if !nodeReady(node) {
		t.Errorf("Node %s is not Ready", node.Name)
	}
	if n := scheduledActivities(t, wf.ID)[activities.LaunchActivity]; n != 1 {
		t.Errorf("node workflow %s scheduled Launch %d times, want once (retries are attempts of one)", wf.ID, n)
	}

	emptied := time.Now()
	if err := suite.kube.CoreV1().Pods(s.namespace).Delete(context.Background(), "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	result := waitWorkflowResult(t, wf.ID, terminateTimeout)
	assertTerminated(t, wf.ID, result, workflows.ReasonEmpty)
	t.Logf("pod deleted → node terminated (Empty): %s", time.Since(emptied).Round(time.Millisecond))
	if live := s.liveInstances(); len(live) != 0 {
		t.Errorf("instances of pool %s still live: %+v", s.pool, live)
	}
	if instances := instancesOfClaim(claim); len(instances) != 1 {
		t.Errorf("node claim %s has %d instances after termination, want 1: %+v", claim, len(instances), instances)
	}
}

// nodeReady reports the Node's Ready condition.
func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestWorkerKilledMidDrain: `kubectl delete node` on a node whose two pods
// are covered by a PodDisruptionBudget that allows no disruption, so the
// drain is held in its eviction stage for as long as the test wants. The
// worker is SIGKILLed while the Drain activity runs, started again, and the
// budget relaxed to one disruption at a time. The restarted worker resumes
// the drain (a new Drain attempt, from the heartbeated progress) and
// finishes the lifecycle: pods evicted one at a time onto a replacement
// node, the instance terminated once, the finalizer removed and the Node
// gone, the workflow completed with reason Deleted.
func TestWorkerKilledMidDrain(t *testing.T) {
	s := newScenario(t, "killed-mid-drain")
	ctx := context.Background()
	const replicas = 2
	s.createDeployment(t, "app", replicas, "500m")
	before := s.waitPodsRunning(t, "app=app", replicas, launchTimeout)
	nodeName := onOneNode(t, before)
	s.createPDB(t, "app", policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(replicas))}, replicas, 0)
	wf, state := s.readyWorkflowOf(t, nodeName)
	instanceID := state.Instance.InstanceID
	node, err := suite.kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := stacktest.WatchNode(t, suite.kube, node)

	deleted := time.Now()
	kubectl(t, "delete", "node", nodeName, "--wait=false")
	var drain *workflowpb.PendingActivityInfo
	// The kill must come after the attempt's first heartbeat reached the
	// server: a worker killed before that leaves no progress to resume from,
	// and the next attempt rightly starts over (seen in CI, killed 121 ms
	// after the delete).
	poll(t, terminateTimeout, "the Drain activity running on the cordoned Node, held by the budget, its progress heartbeated", func(ctx context.Context) (bool, error) {
		state, err := tryQueryState(wf.ID)
		if err != nil || state.Phase != workflows.PhaseDraining {
			return false, err
		}
		if drain, err = pendingActivityOf(ctx, wf.ID, activities.DrainActivity); err != nil || drain == nil {
			return false, err
		}
		n, err := suite.kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		progress, ok := drainProgressOf(drain)
		return drain.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED && ok && progress.Stage != "" &&
			n.Spec.Unschedulable && stacktest.HasTaint(n, activities.DisruptedTaintKey), nil
	})
	progress, _ := drainProgressOf(drain)
	t.Logf("draining (Drain attempt %d started, last heartbeat %+v) %s after kubectl delete node",
		drain.GetAttempt(), progress, time.Since(deleted).Round(time.Millisecond))

	from := suite.worker.logOffset()
	suite.worker.kill(t)
	killed := time.Now()
	// Nothing could be evicted: the budget allowed no disruption.
	for _, p := range s.waitPodsRunning(t, "app=app", replicas, time.Minute) {
		if p.Spec.NodeName != nodeName {
			t.Fatalf("pod %s moved to %s before the budget allowed it", p.Name, p.Spec.NodeName)
		}
	}
	suite.worker.start(t)
	relaxed, err := suite.kube.PolicyV1().PodDisruptionBudgets(s.namespace).Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	relaxed.Spec.MinAvailable = ptr.To(intstr.FromInt32(replicas - 1))
	if _, err := suite.kube.PolicyV1().PodDisruptionBudgets(s.namespace).Update(ctx, relaxed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The dead worker's attempt is given up at its heartbeat timeout; the
	// next attempt resumes from the progress it heartbeated.
	suite.worker.waitLog(t, from, drainHeartbeatWait+time.Minute, "Resuming drain")
	result := waitWorkflowResult(t, wf.ID, drainHeartbeatWait+terminateTimeout)
	assertTerminated(t, wf.ID, result, workflows.ReasonDeleted)
	t.Logf("worker killed mid-drain → drained, instance terminated, Node gone: %s after the kill, %s after kubectl delete node",
		time.Since(killed).Round(time.Millisecond), time.Since(deleted).Round(time.Millisecond))

	if result.Instance == nil || result.Instance.InstanceID != instanceID {
		t.Errorf("the workflow's result names instance %v, it launched %s", result.Instance, instanceID)
	}
	counts := scheduledActivities(t, wf.ID)
	if counts[activities.TerminateInstanceActivity] != 1 || counts[activities.DrainActivity] != 1 {
		t.Errorf("node workflow %s scheduled TerminateInstance %d and Drain %d times, want each once (a retry is an attempt of one)",
			wf.ID, counts[activities.TerminateInstanceActivity], counts[activities.DrainActivity])
	}
	if inst := instance(t, instanceID); inst.State != "terminated" || !strings.Contains(inst.StateReason, "UserInitiated") {
		t.Errorf("instance %s is %s (%s), want terminated by the user (the worker)", instanceID, inst.State, inst.StateReason)
	}
	observed := seen()
	if !observed.HeldByFinalizer || !observed.Deleted {
		t.Errorf("Node %s: held by the %s finalizer while deleting: %v, deleted: %v; want both", nodeName, activities.TerminationFinalizer, observed.HeldByFinalizer, observed.Deleted)
	}

	after := s.waitPodsRunning(t, "app=app", replicas, launchTimeout)
	t.Logf("worker killed mid-drain → pods Running again: %s after kubectl delete node", time.Since(deleted).Round(time.Millisecond))
	s.assertReplaced(t, before, after, wf)
	if live := s.liveInstances(); len(live) != 1 || live[0].ID == instanceID {
		t.Errorf("live instances of pool %s: %+v, want only the replacement's", s.pool, live)
	}
}

// drainProgressOf decodes a pending Drain activity's heartbeated progress.
func drainProgressOf(pending *workflowpb.PendingActivityInfo) (activities.DrainProgress, bool) {
	var progress activities.DrainProgress
	payloads := pending.GetHeartbeatDetails().GetPayloads()
	if len(payloads) == 0 {
		return progress, false
	}
	return progress, converter.GetDefaultDataConverter().FromPayload(payloads[0], &progress) == nil
}
