package status

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/jsonmergepatch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// writeStatus makes obj's status the given one with a merge patch on the
// status subresource, when they differ; it reports whether it wrote. The
// patch carries obj's resourceVersion, so it fails with a Conflict when
// someone changed the object since the cache saw it (optimistic locking, as
// controller-runtime's MergeFromWithOptimisticLock): a status computed from
// an old object is never written over a newer one.
func writeStatus(ctx context.Context, client dynamic.ResourceInterface, obj *unstructured.Unstructured, status map[string]any) (bool, error) {
	patch, err := statusPatch(obj, status)
	if err != nil || patch == nil {
		return false, err
	}
	_, err = client.Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		// Deleted meanwhile: nothing to report on.
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("patching the status of %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return true, nil
}

// statusPatch is the JSON merge patch turning obj's status into status, nil
// when there is nothing to change. A merge patch replaces lists whole but
// merges maps, so a key that disappeared (a resource no Node has any more)
// must be sent as null: the three-way merge patch kubectl apply uses
// computes those.
func statusPatch(obj *unstructured.Unstructured, status map[string]any) ([]byte, error) {
	current, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "status")
	if current == nil {
		current = map[string]any{}
	}
	original, err := json.Marshal(map[string]any{"status": current})
	if err != nil {
		return nil, err
	}
	modified, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return nil, err
	}
	diff, err := jsonmergepatch.CreateThreeWayJSONMergePatch(original, modified, original)
	if err != nil {
		return nil, fmt.Errorf("status patch of %s: %w", obj.GetName(), err)
	}
	var patch map[string]any
	if err := json.Unmarshal(diff, &patch); err != nil {
		return nil, err
	}
	if len(patch) == 0 {
		return nil, nil
	}
	patch["metadata"] = map[string]any{"resourceVersion": obj.GetResourceVersion()}
	return json.Marshal(patch)
}

// toObject is a status as the JSON the API server stores.
func toObject(status any) (map[string]any, error) {
	data, err := json.Marshal(status)
	if err != nil {
		return nil, err
	}
	var object map[string]any
	return object, json.Unmarshal(data, &object)
}

// nodePoolStatusObject is a NodePool status as JSON, with "nodes" present
// even when 0: the Go type omits an empty count, and `kubectl get
// nodepools` would then show a blank NODES column for an empty pool.
func nodePoolStatusObject(status apisv1.NodePoolStatus) (map[string]any, error) {
	object, err := toObject(status)
	if err != nil {
		return nil, err
	}
	object["nodes"] = status.Nodes
	return object, nil
}

// nodePoolOfNode indexes a Node by its millwright.dev/nodepool label.
func nodePoolOfNode(obj any) ([]string, error) {
	node, ok := obj.(*corev1.Node)
	if !ok || node.Labels[apisv1.LabelNodePool] == "" {
		return nil, nil
	}
	return []string{node.Labels[apisv1.LabelNodePool]}, nil
}

// asNode unwraps an informer's Node, including the last state of a Node
// whose deletion the watch missed.
func asNode(obj any) (*corev1.Node, bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	node, ok := obj.(*corev1.Node)
	return node, ok
}

// objectName is the name of an informer's object, tombstones included.
func objectName(obj any) string {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tombstone.Key
	}
	if u, ok := obj.(metav1.Object); ok {
		return u.GetName()
	}
	return ""
}

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, quantity := range a {
		other, ok := b[name]
		if !ok || quantity.Cmp(other) != 0 {
			return false
		}
	}
	return true
}

// writeAnnotations sets the given annotations on obj with a merge patch on
// its metadata, when any differs; it reports whether it wrote. The drift
// stamps (the NodePool's and EC2NodeClass's hashes) are written this way:
// derived from the spec, a stale value is rewritten by the reconcile the
// spec change brings.
func writeAnnotations(ctx context.Context, client dynamic.ResourceInterface, obj *unstructured.Unstructured, want map[string]string) (bool, error) {
	current := obj.GetAnnotations()
	diff := map[string]string{}
	for k, v := range want {
		if current[k] != v {
			diff[k] = v
		}
	}
	if len(diff) == 0 {
		return false, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": diff}})
	if err != nil {
		return false, err
	}
	_, err = client.Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("annotating %s %s with its hash: %w", obj.GetKind(), obj.GetName(), err)
	}
	return true, nil
}
