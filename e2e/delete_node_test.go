package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/local/stack/stacktest"
	"github.com/millwright/millwright/workflows"
)

// TestKubectlDeleteNode: `kubectl delete node` on a node with pods. The
// termination finalizer holds the Node while its workflow cordons and taints
// it, evicts its pods and terminates its instance; then the finalizer goes,
// the Node with it, and the workflow completes with reason Deleted. The
// evicted pods run again on a replacement node.
func TestKubectlDeleteNode(t *testing.T) {
	s := newScenario(t, "delete-node")
	const replicas = 2
	before, node, wf, state := s.readyNodeWithPods(t, replicas)
	nodeName := node.Name
	if !slices.Contains(node.Finalizers, activities.TerminationFinalizer) {
		t.Fatalf("Node %s lacks the %s finalizer (finalizers %v)", nodeName, activities.TerminationFinalizer, node.Finalizers)
	}
	seen := stacktest.WatchNode(t, suite.kube, node)

	deleted := time.Now()
	// --wait=false: kubectl would otherwise block until the finalizer is
	// removed, which is the whole drain.
	kubectl(t, "delete", "node", nodeName, "--wait=false")
	result := waitWorkflowResult(t, wf.ID, terminateTimeout)
	assertTerminated(t, wf.ID, result, workflows.ReasonDeleted)
	t.Logf("kubectl delete node → drained, instance terminated, Node gone: %s", time.Since(deleted).Round(time.Millisecond))

	observed := seen()
	if !observed.HeldByFinalizer {
		t.Errorf("Node %s was never seen deleting with the %s finalizer holding it", nodeName, activities.TerminationFinalizer)
	}
	if !observed.Cordoned || !observed.DisruptedTaint {
		t.Errorf("while draining, Node %s was cordoned: %v, tainted %s: %v; want both", nodeName, observed.Cordoned, activities.DisruptedTaintKey, observed.DisruptedTaint)
	}
	if !observed.Deleted {
		t.Errorf("the watch never saw Node %s deleted", nodeName)
	}
	if result.Instance == nil || result.Instance.InstanceID != state.Instance.InstanceID {
		t.Errorf("the workflow's result names instance %v, it launched %s", result.Instance, state.Instance.InstanceID)
	}

	after := s.waitPodsRunning(t, "app=app", replicas, launchTimeout)
	t.Logf("kubectl delete node → pods Running again: %s", time.Since(deleted).Round(time.Millisecond))
	s.assertReplaced(t, before, after, wf)
}

// readyNodeWithPods runs a deployment "app" of replicas pods on one new
// node and returns the pods, the Node and its Ready node workflow.
func (s *scenario) readyNodeWithPods(t *testing.T, replicas int32) ([]corev1.Pod, *corev1.Node, nodeWorkflow, workflows.NodeStateView) {
	t.Helper()
	s.createDeployment(t, "app", replicas, "500m")
	pods := s.waitPodsRunning(t, "app=app", int(replicas), launchTimeout)
	nodeName := onOneNode(t, pods)
	wf, state := s.readyWorkflowOf(t, nodeName)
	node, err := suite.kube.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pods, node, wf, state
}
