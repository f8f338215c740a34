package stacktest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/local/cluster/clustertesting"
)

// PodAvailable reports whether a pod counts for its workload: Running,
// Ready and not terminating.
func PodAvailable(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podsPollInterval is how often WaitPodsAvailable lists the pods: the
// 200 ms both suites polled at before they shared this helper. Tests that
// query a node workflow right after its pods run depend on that pace (the
// workflow reaches Ready a moment after the pods do).
const podsPollInterval = 200 * time.Millisecond

// WaitPodsAvailable waits until exactly n pods match selector in
// namespace, all available (PodAvailable), and returns them. Its error
// names the pods' last phases and nodes (or the last list error), for the
// caller's failure message.
func WaitPodsAvailable(ctx context.Context, client kubernetes.Interface, namespace, selector string, n int, timeout time.Duration) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	var last string
	err := wait.PollUntilContextTimeout(ctx, podsPollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		pods = list.Items
		available := 0
		var states []string
		for i := range pods {
			states = append(states, fmt.Sprintf("%s:%s@%s", pods[i].Name, pods[i].Status.Phase, pods[i].Spec.NodeName))
			if PodAvailable(&pods[i]) {
				available++
			}
		}
		last = strings.Join(states, " ")
		return available == n && len(pods) == n, nil
	})
	if err != nil {
		return nil, fmt.Errorf("pods %q in %s not all %d Running within %s: %s", selector, namespace, n, timeout, last)
	}
	return pods, nil
}

// HasTaint reports whether node carries a taint with key.
func HasTaint(node *corev1.Node, key string) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// NodeObservations is what WatchNode saw happen to a Node.
type NodeObservations struct {
	// Cordoned: spec.unschedulable was set at some point.
	Cordoned bool
	// DisruptedTaint: Millwright's disrupted NoSchedule taint was on it.
	DisruptedTaint bool
	// HeldByFinalizer: the Node was seen deleting (deletionTimestamp set)
	// with Millwright's termination finalizer still on it.
	HeldByFinalizer bool
	// Deleted: the Node object went away.
	Deleted bool
}

// WatchNode records every change of node from its current resource version
// on (a watch sees each update, however short-lived, where polling would
// miss a cordon lifted a moment later). The returned function stops the
// watch and reports what it saw; the watch also stops when the test ends.
func WatchNode(t testing.TB, client kubernetes.Interface, node *corev1.Node) func() NodeObservations {
	t.Helper()
	w, err := client.CoreV1().Nodes().Watch(context.Background(), metav1.ListOptions{
		FieldSelector: "metadata.name=" + node.Name, ResourceVersion: node.ResourceVersion,
	})
	if err != nil {
		t.Fatalf("watching Node %s: %v", node.Name, err)
	}
	var mu sync.Mutex
	var seen NodeObservations
	done := make(chan struct{})
	go func() {
		defer close(done)
		for event := range w.ResultChan() {
			n, ok := event.Object.(*corev1.Node)
			if !ok {
				continue
			}
			mu.Lock()
			seen.Cordoned = seen.Cordoned || n.Spec.Unschedulable
			seen.DisruptedTaint = seen.DisruptedTaint || HasTaint(n, activities.DisruptedTaintKey)
			seen.HeldByFinalizer = seen.HeldByFinalizer ||
				(n.DeletionTimestamp != nil && slices.Contains(n.Finalizers, activities.TerminationFinalizer))
			seen.Deleted = seen.Deleted || event.Type == watch.Deleted
			mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return func() NodeObservations {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// WaitNodeGone waits until the Node object is deleted.
func WaitNodeGone(t testing.TB, client kubernetes.Interface, name string, timeout time.Duration) {
	t.Helper()
	clustertesting.Eventually(t, timeout, "Node "+name+" deleted", func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// ApplyManifest creates, or replaces, the cluster-scoped object of a YAML
// manifest, after edit (nil: none) changed it, e.g. renamed it.
func ApplyManifest(ctx context.Context, client dynamic.Interface, resource schema.GroupVersionResource, manifest []byte, edit func(*unstructured.Unstructured) error) error {
	var object map[string]any
	if err := yaml.Unmarshal(manifest, &object); err != nil {
		return fmt.Errorf("decoding a %s manifest: %w", resource.Resource, err)
	}
	u := &unstructured.Unstructured{Object: object}
	if edit != nil {
		if err := edit(u); err != nil {
			return fmt.Errorf("editing the %s manifest of %s: %w", resource.Resource, u.GetName(), err)
		}
	}
	return ApplyObject(ctx, client, resource, u)
}

// ApplyObject creates the cluster-scoped object u, or replaces the one of
// its name (at its current resourceVersion).
func ApplyObject(ctx context.Context, client dynamic.Interface, resource schema.GroupVersionResource, u *unstructured.Unstructured) error {
	api := client.Resource(resource)
	// The worker's controllers write the object too (a pool's status and
	// finalizer), so an update can race one of theirs: read again and retry.
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		existing, err := api.Get(ctx, u.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, u, metav1.CreateOptions{})
		case err == nil:
			u.SetResourceVersion(existing.GetResourceVersion())
			_, err = api.Update(ctx, u, metav1.UpdateOptions{})
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("applying %s %s: %w", resource.Resource, u.GetName(), err)
	}
	return nil
}
