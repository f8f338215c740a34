package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/local/cluster/clustertesting"
)

// unscheduledPod is a pending pod no scheduler picks up (its scheduler does
// not exist), so only the test and the activity touch its status.
func unscheduledPod(namespace, name string) *corev1.Pod {
	pod := newPod(namespace, name, "").build()
	pod.Spec.SchedulerName = "millwright-test-none"
	return pod
}

// TestRegisterNodeNominatesItsPlannedPods: registering a node that still
// carries the unregistered taint nominates the pending pods it was launched
// for; a pod already bound, one the scheduler nominated elsewhere and a key
// whose pod is gone are left alone, and a re-run after the taint came off
// nominates nothing more.
func TestRegisterNodeNominatesItsPlannedPods(t *testing.T) {
	requireCluster(t)
	h := newHarness(t)
	namespace := clustertesting.CreateNamespace(t, testClientset, "nominate")
	node := createNode(t, newNode("nominate").withoutKwok().taint(activities.UnregisteredTaintKey, corev1.TaintEffectNoExecute).build())
	other := createNode(t, newNode("elsewhere").withoutKwok().build())

	createPod(t, unscheduledPod(namespace, "planned-a"))
	createPod(t, unscheduledPod(namespace, "planned-b"))
	createPod(t, newPod(namespace, "bound", other.Name).build())
	elsewhere := createPod(t, unscheduledPod(namespace, "elsewhere"))
	elsewhere.Status.NominatedNodeName = other.Name
	if _, err := testClientset.CoreV1().Pods(namespace).UpdateStatus(t.Context(), elsewhere, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	keys := []string{namespace + "/planned-a", namespace + "/planned-b", namespace + "/bound", namespace + "/elsewhere", namespace + "/gone", "malformed"}
	req := activities.RegisterNodeRequest{NodeName: node.Name, NodeClaimName: "default-nomin", NodePool: "default", PodKeys: keys}
	if _, err := execute[activities.RegisterNodeResponse](h, nil, h.activities.RegisterNode, req); err != nil {
		t.Fatal(err)
	}

	nominated := func(name string) string {
		t.Helper()
		pod, err := testClientset.CoreV1().Pods(namespace).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return pod.Status.NominatedNodeName
	}
	for name, want := range map[string]string{"planned-a": node.Name, "planned-b": node.Name, "bound": "", "elsewhere": other.Name} {
		if got := nominated(name); got != want {
			t.Errorf("pod %s nominated for %q, want %q", name, got, want)
		}
	}
	if !h.logged("Nominated pending pods for the node", node.Name) {
		t.Error("no log line for the nominations")
	}

	// Registered: the scheduler has seen the node, a re-run nominates no one.
	createPod(t, unscheduledPod(namespace, "late"))
	req.PodKeys = append(req.PodKeys, namespace+"/late")
	if _, err := execute[activities.RegisterNodeResponse](h, nil, h.activities.RegisterNode, req); err != nil {
		t.Fatal(err)
	}
	if got := nominated("late"); got != "" {
		t.Errorf("pod late nominated for %q after the node registered, want none", got)
	}
}
