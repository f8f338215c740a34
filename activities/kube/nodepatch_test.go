package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// updateReadNode starts from a copy of the Node to save a read. A copy that
// is not live and already shows the change is not trusted: the Node is read
// again and written. A copy older than the Node costs a Conflict and a
// re-read, never a lost write.
func TestUpdateReadNodeFromACopy(t *testing.T) {
	h := newHarness(t)
	cordon := func(n *corev1.Node) { n.Spec.Unschedulable = true }

	node := createNode(t, newNode("copied").withoutKwok().build())
	showsTheChange := node.DeepCopy()
	showsTheChange.Spec.Unschedulable = true
	_, changed, err := h.activities.updateReadNode(t.Context(), node.Name, showsTheChange, false, cordon)
	if err != nil {
		t.Fatal(err)
	}
	if live := getNode(t, node.Name); !changed || !live.Spec.Unschedulable {
		t.Errorf("changed %v, unschedulable %v: want the cordon written although the copy showed it", changed, live.Spec.Unschedulable)
	}

	older := createNode(t, newNode("older").withoutKwok().build())
	// A patch, not an Update: the controller-manager writes a new Node too
	// (taints, podCIDR), and an Update racing it fails with a Conflict.
	labelMeanwhile := []byte(`{"metadata":{"labels":{"written-meanwhile":"yes"}}}`)
	if _, err := testClientset.CoreV1().Nodes().Patch(t.Context(), older.Name, types.MergePatchType, labelMeanwhile, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.activities.updateReadNode(t.Context(), older.Name, older, true, cordon); err != nil {
		t.Fatal(err)
	}
	live := getNode(t, older.Name)
	if !live.Spec.Unschedulable || live.Labels["written-meanwhile"] != "yes" {
		t.Errorf("unschedulable %v, labels %v: want the cordon and the label written meanwhile", live.Spec.Unschedulable, live.Labels)
	}
}
