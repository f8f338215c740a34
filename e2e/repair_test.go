package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/millwright/millwright/local/cluster"
	"github.com/millwright/millwright/model/disruption"
	"github.com/millwright/millwright/workflows"
)

// TestRepairNotReadyNode: a node whose kubelet reports Ready=False, and has
// for longer than the repair toleration (the worker's default, 30 min), is
// replaced by the disruption workflow, as Karpenter's node health controller
// does: its node workflow ends with reason Unhealthy, its instance is
// terminated and its Node deleted, and the pod runs again on a new node.
//
// The test plays the broken kubelet: it takes the Node from kwok (which
// would set Ready back to True), writes Ready=False with a transition 31
// minutes ago — what a kubelet whose container runtime died half an hour
// ago reports — and keeps renewing the Node's Lease, as such a kubelet
// does, so the node lifecycle controller does not turn the condition into
// Unknown (a new transition) while the command is validated.
func TestRepairNotReadyNode(t *testing.T) {
	s := newScenario(t, "repair")
	const replicas = 1
	before, node, wf, _ := s.readyNodeWithPods(t, replicas)
	nodeName := node.Name

	ctx, stopKubelet := context.WithCancel(context.Background())
	defer stopKubelet()
	removeKwok, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{cluster.FakeNodeAnnotation: nil}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := suite.kube.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType, removeKwok, metav1.PatchOptions{}); err != nil {
		t.Fatalf("taking Node %s from kwok: %v", nodeName, err)
	}
	brokeAt := time.Now()
	// Whole seconds: the API keeps condition times to the second.
	notReadySince := metav1.NewTime(brokeAt.Add(-(disruption.DefaultRepairToleration + time.Minute)).Truncate(time.Second))
	poll(t, time.Minute, "Node "+nodeName+" reporting Ready=False", func(ctx context.Context) (bool, error) {
		return reportNotReady(ctx, nodeName, notReadySince)
	})
	go brokenKubelet(ctx, nodeName, notReadySince)

	result := waitWorkflowResult(t, wf.ID, launchTimeout+terminateTimeout)
	stopKubelet()
	assertTerminated(t, wf.ID, result, workflows.ReasonUnhealthy)
	if !strings.Contains(result.Termination.Detail, "Ready=False") {
		t.Errorf("termination detail %q does not say the node was Ready=False", result.Termination.Detail)
	}
	if result.Termination.Voluntary {
		t.Errorf("termination %+v is voluntary; a broken node's drain is not", result.Termination)
	}
	t.Logf("Ready=False → replaced, drained, terminated: %s", time.Since(brokeAt).Round(time.Millisecond))

	after := s.waitPodsRunning(t, "app=app", replicas, launchTimeout)
	s.assertReplaced(t, before, after, wf)
}

// reportNotReady posts the Node's Ready condition as False since since, with
// a fresh heartbeat; it reports whether the Node already said so before.
func reportNotReady(ctx context.Context, nodeName string, since metav1.Time) (bool, error) {
	live, err := suite.kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	already := false
	for i := range live.Status.Conditions {
		condition := &live.Status.Conditions[i]
		if condition.Type != corev1.NodeReady {
			continue
		}
		already = condition.Status == corev1.ConditionFalse && condition.LastTransitionTime.Equal(&since)
		condition.Status, condition.Reason = corev1.ConditionFalse, "KubeletNotReady"
		condition.Message = "container runtime is down (e2e)"
		condition.LastTransitionTime, condition.LastHeartbeatTime = since, metav1.Now()
	}
	_, err = suite.kube.CoreV1().Nodes().UpdateStatus(ctx, live, metav1.UpdateOptions{})
	return already, err
}

// brokenKubelet is a kubelet that is up but NotReady: every few seconds
// until ctx ends or the Node is gone it renews the Node's Lease (when kwok
// made one) and posts Ready=False with a fresh heartbeat, so the node
// lifecycle controller never finds it silent.
func brokenKubelet(ctx context.Context, nodeName string, since metav1.Time) {
	leases := suite.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	for tick := time.NewTicker(5 * time.Second); ; {
		if lease, err := leases.Get(ctx, nodeName, metav1.GetOptions{}); err == nil {
			renewed := metav1.NewMicroTime(time.Now())
			lease.Spec.RenewTime = &renewed
			_, _ = leases.Update(ctx, lease, metav1.UpdateOptions{})
		}
		if _, err := reportNotReady(ctx, nodeName, since); apierrors.IsNotFound(err) {
			tick.Stop()
			return
		}
		select {
		case <-ctx.Done():
			tick.Stop()
			return
		case <-tick.C:
		}
	}
}
