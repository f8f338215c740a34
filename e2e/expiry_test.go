package e2e

import (
	"context"
	"testing"
	"time"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/workflows"
)

// expiryScenarioExpireAfter is the pool's expireAfter: short for a quick
// scenario, yet long enough that a replacement launched on this loaded
// machine still lives when the test looks at it.
const expiryScenarioExpireAfter = 60 * time.Second

// TestExpiry: a pool with expireAfter 60s. The node of a running pod is
// replaced when it expires: its workflow completes with reason Expired no
// earlier than 60 s after the node's creation, its instance is terminated
// and its Node deleted, and the pod runs again on a replacement node. The
// workload is deleted at the end so the replacements (which expire too)
// empty and go away.
func TestExpiry(t *testing.T) {
	s := newScenario(t, "expiry", withPool(func(pool *apisv1.NodePool) {
		pool.Spec.Template.Spec.ExpireAfter = apisv1.DurationOrNeverOf(expiryScenarioExpireAfter)
	}))
	const replicas = 1
	s.createDeployment(t, "app", replicas, "500m")
	before := s.waitPodsRunning(t, "app=app", replicas, launchTimeout)
	nodeName := onOneNode(t, before)
	wf := s.workflowOfNode(t, nodeName)
	state := queryState(t, wf.ID)
	if state.ExpiresAt.IsZero() || !state.ExpiresAt.Equal(state.CreatedAt.Add(expiryScenarioExpireAfter)) {
		t.Fatalf("node workflow %s: created %s, expires at %s; want expiry %s after creation", wf.ID, state.CreatedAt, state.ExpiresAt, expiryScenarioExpireAfter)
	}
	t.Logf("node %s created %s, expires %s", nodeName, state.CreatedAt.Format(time.StampMilli), state.ExpiresAt.Format(time.StampMilli))
	pods := s.watchPodTimeline(t, "app=app", replicas)

	result := waitWorkflowResult(t, wf.ID, expiryScenarioExpireAfter+terminateTimeout)
	assertTerminated(t, wf.ID, result, workflows.ReasonExpired)
	if result.Termination.RequestedAt.Before(state.ExpiresAt) {
		t.Errorf("termination requested at %s, before the node's expiry at %s", result.Termination.RequestedAt, state.ExpiresAt)
	}
	t.Logf("node created → expired, drained and terminated: %s", time.Since(state.CreatedAt).Round(time.Millisecond))
	if result.Instance == nil {
		t.Fatal("the expired workflow's result names no instance")
	}
	s.assertDrainedBeforeTermination(t, pods, nodeName, result.Instance.InstanceID)

	after := s.waitPodsRunning(t, "app=app", replicas, launchTimeout)
	s.assertReplaced(t, before, after, wf)
	t.Logf("node created → pod Running on a replacement: %s", time.Since(state.CreatedAt).Round(time.Millisecond))

	// Without pods the replacement empties (or expires) and goes; wait for
	// it here so this pool's expiry loop ends inside the scenario.
	kubectl(t, "delete", "deployment", "app", "-n", s.namespace)
	emptied := time.Now()
	poll(t, terminateTimeout, "every node workflow of pool "+s.pool+" completed and its instances terminated", func(ctx context.Context) (bool, error) {
		return len(s.runningWorkflowsNoFail(ctx)) == 0 && len(s.liveInstances()) == 0, nil
	})
	t.Logf("workload deleted → pool empty: %s (%d instances in all)", time.Since(emptied).Round(time.Millisecond), len(s.instances()))
}
