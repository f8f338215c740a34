package kube

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/util/retry"
)

// updateNode reads the Node called name (its first attempt from the
// activities' informer when that has synced; see updateReadNode), lets
// mutate change a copy, and writes the difference as a strategic merge
// patch carrying the resourceVersion it read. The API server refuses the
// patch with Conflict if anyone wrote the Node in between; RetryOnConflict
// then re-reads and re-applies mutate, so a concurrent change (the
// kubelet's status, another system's taint) is never overwritten. A
// mutation that changes nothing writes nothing. It returns the Node as
// written (or as read when unchanged) and the API error, NotFound
// included, unwrapped enough for apierrors.Is*.
func (a *Activities) updateNode(ctx context.Context, name string, mutate func(node *corev1.Node)) (*corev1.Node, bool, error) {
	return a.updateReadNode(ctx, name, a.cachedNodeCopy(name), false, mutate)
}

// updateReadNode is updateNode starting from read, a copy of the Node
// (nil: read it from the API server), so the first attempt costs one
// request, not two: under load each took 150–250 ms. The patch carries
// read's resourceVersion, so a stale copy only costs a Conflict and a
// re-read. A copy that is not live (the informer's) is trusted only to
// write: when mutate finds nothing to change in it, the Node is read again,
// since the change may be one the copy has not seen yet.
func (a *Activities) updateReadNode(ctx context.Context, name string, read *corev1.Node, live bool, mutate func(node *corev1.Node)) (*corev1.Node, bool, error) {
	var (
		result  *corev1.Node
		changed bool
	)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		current, trusted := read, live
		read = nil
		var modified *corev1.Node
		for {
			if current == nil {
				var err error
				if current, err = a.clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
					return err
				}
				trusted = true
			}
			modified = current.DeepCopy()
			mutate(modified)
			if !equality.Semantic.DeepEqual(current, modified) {
				break
			}
			if trusted {
				result, changed = current, false
				return nil
			}
			current = nil
		}
		patch, err := optimisticMergePatch(current, modified)
		if err != nil {
			return fmt.Errorf("node %s: build patch: %w", name, err)
		}
		written, err := a.clientset.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return err
		}
		result, changed = written, true
		return nil
	})
	return result, changed, err
}

// cachedNodeCopy is a copy of the Node called name from the activities'
// informer when it has synced, or nil.
func (a *Activities) cachedNodeCopy(name string) *corev1.Node {
	if a.nodes == nil || !a.nodes.HasSynced() {
		return nil
	}
	node, err := cachedNode(a.nodes.GetIndexer(), name)
	if err != nil || node == nil {
		return nil
	}
	return node.DeepCopy()
}

// optimisticMergePatch is the strategic merge patch from current to
// modified, plus current's resourceVersion so the API server applies it only
// to the version it was computed from. (The same idea as controller-runtime's
// MergeFromWithOptimisticLock, which this module does not depend on.)
func optimisticMergePatch(current, modified *corev1.Node) ([]byte, error) {
	original := current.DeepCopy()
	original.ResourceVersion = "" // so the diff carries modified's resourceVersion
	originalJSON, err := json.Marshal(original)
	if err != nil {
		return nil, err
	}
	modifiedJSON, err := json.Marshal(modified)
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(originalJSON, modifiedJSON, corev1.Node{})
}

// taintKeyEffect says whether two taints are the same taint for scheduling:
// the same key and effect (values differ between writers; the scheduler
// does not care).
func taintKeyEffect(a, b corev1.Taint) bool {
	return a.Key == b.Key && a.Effect == b.Effect
}

// hasTaint reports whether taints hold one with want's key and effect.
func hasTaint(taints []corev1.Taint, want corev1.Taint) bool {
	for _, taint := range taints {
		if taintKeyEffect(taint, want) {
			return true
		}
	}
	return false
}

// addMissingTaints appends each of wanted not already present by key and
// effect, leaving present ones (and their values) alone.
func addMissingTaints(taints []corev1.Taint, wanted ...corev1.Taint) []corev1.Taint {
	for _, want := range wanted {
		if !hasTaint(taints, want) {
			taints = append(taints, want)
		}
	}
	return taints
}

// removeTaintKey drops every taint with key, whatever its effect.
func removeTaintKey(taints []corev1.Taint, key string) []corev1.Taint {
	kept := taints[:0:0]
	for _, taint := range taints {
		if taint.Key != key {
			kept = append(kept, taint)
		}
	}
	return kept
}

// nodeReady returns the Ready condition's status and reason.
func nodeReady(node *corev1.Node) (corev1.ConditionStatus, string) {
	for _, condition := range node.Status.Conditions {
		if condition.Type == corev1.NodeReady {
			return condition.Status, condition.Reason
		}
	}
	return corev1.ConditionUnknown, "no Ready condition yet"
}
