package e2e

import (
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/millwright/millwright/workflows"
)

// TestPodDisruptionBudgetNeverViolated: four replicas on one node, guarded
// by a PodDisruptionBudget with maxUnavailable 1, and the node deleted with
// kubectl. A watch on the pods from before the deletion until all four run
// again never sees more than one replica unavailable (terminating, pending
// or not Ready) at once, however briefly; the drain completes all the same
// (workflow Deleted, instance terminated, Node gone) and the replicas end up
// on a replacement node.
func TestPodDisruptionBudgetNeverViolated(t *testing.T) {
	s := newScenario(t, "pdb")
	const replicas = 4
	// 4 × 300m fit one m5.large, so the drain has to move every replica.
	s.createDeployment(t, "guarded", replicas, "300m")
	before := s.waitPodsRunning(t, "app=guarded", replicas, launchTimeout)
	nodeName := onOneNode(t, before)
	// Until the disruption controller has computed the budget every
	// eviction is refused, and the test would prove nothing about pacing.
	s.createPDB(t, "guarded", policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}, replicas, 1)
	wf := s.workflowOfNode(t, nodeName)
	state := queryState(t, wf.ID)
	if state.Instance == nil {
		t.Fatalf("node workflow %s has no instance (phase %s)", wf.ID, state.Phase)
	}
	pods := s.watchPodTimeline(t, "app=guarded", replicas)

	deleted := time.Now()
	kubectl(t, "delete", "node", nodeName, "--wait=false")
	result := waitWorkflowResult(t, wf.ID, 2*terminateTimeout)
	assertTerminated(t, wf.ID, result, workflows.ReasonDeleted)
	t.Logf("kubectl delete node → %d guarded pods moved one at a time, instance terminated: %s", replicas, time.Since(deleted).Round(time.Millisecond))
	s.assertDrainedBeforeTermination(t, pods, nodeName, state.Instance.InstanceID)

	after := s.waitPodsRunning(t, "app=guarded", replicas, launchTimeout)
	pods.finish()
	if err := pods.watchError(); err != nil {
		t.Errorf("the pod watch reported an error, so it may have missed a moment: %v", err)
	}
	most, when := pods.mostUnavailable()
	if most > 1 {
		t.Errorf("%d replicas were unavailable at once, the PDB allows 1: %s", most, when)
	} else {
		t.Logf("at most %d replica unavailable at once (first at %s)", most, when)
	}
	if most < 1 {
		t.Errorf("no replica was ever unavailable: the watch saw no eviction")
	}
	for _, p := range after {
		if p.Spec.NodeName == nodeName {
			t.Errorf("pod %s still on the deleted node %s", p.Name, nodeName)
		}
	}
}
