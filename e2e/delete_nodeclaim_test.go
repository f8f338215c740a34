package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/local/stack/stacktest"
	"github.com/millwright/millwright/workflows"
)

// TestKubectlDeleteNodeClaim: `kubectl delete nodeclaim` does what `kubectl
// delete node` does, as in Karpenter: the NodeClaim's finalizer holds it
// while its node workflow cordons and taints the Node, evicts its pods and
// terminates its instance; then the Node and the NodeClaim are gone, the
// workflow completes with reason Deleted and the pods run again on a
// replacement node.
func TestKubectlDeleteNodeClaim(t *testing.T) {
	s := newScenario(t, "delete-nodeclaim")
	const replicas = 2
	before, node, wf, state := s.readyNodeWithPods(t, replicas)
	nodeName := node.Name
	claim := node.Labels[activities.NodeClaimLabel]
	if claim == "" {
		t.Fatalf("Node %s has no %s label", nodeName, activities.NodeClaimLabel)
	}
	seen := stacktest.WatchNode(t, suite.kube, node)

	deleted := time.Now()
	// --wait=false: kubectl would otherwise block until the finalizer is
	// removed, which is the whole drain.
	kubectl(t, "delete", "nodeclaim", claim, "--wait=false")
	result := waitWorkflowResult(t, wf.ID, terminateTimeout)
	assertTerminated(t, wf.ID, result, workflows.ReasonDeleted)
	t.Logf("kubectl delete nodeclaim %s → drained, instance terminated: %s", claim, time.Since(deleted).Round(time.Millisecond))

	if observed := seen(); !observed.Cordoned || !observed.DisruptedTaint || !observed.Deleted {
		t.Errorf("Node %s: cordoned %v, tainted %s %v, deleted %v; want all three",
			nodeName, observed.Cordoned, activities.DisruptedTaintKey, observed.DisruptedTaint, observed.Deleted)
	}
	if result.Instance == nil || result.Instance.InstanceID != state.Instance.InstanceID {
		t.Errorf("the workflow's result names instance %v, it launched %s", result.Instance, state.Instance.InstanceID)
	}
	poll(t, time.Minute, "NodeClaim "+claim+" gone", func(context.Context) (bool, error) {
		out, _, err := runKubectl(nil, "get", "nodeclaim", claim, "--ignore-not-found", "-o", "name")
		return err == nil && strings.TrimSpace(out) == "", err
	})

	after := s.waitPodsRunning(t, "app=app", replicas, launchTimeout)
	t.Logf("kubectl delete nodeclaim → pods Running again: %s", time.Since(deleted).Round(time.Millisecond))
	s.assertReplaced(t, before, after, wf)
}
