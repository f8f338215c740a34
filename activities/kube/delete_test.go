package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/local/cluster/clustertesting"
)

func TestDeleteNodeRemovesTheFinalizerAndTheNode(t *testing.T) {
	tests := []struct {
		name string
		req  func(nodeName, providerID string) activities.DeleteNodeRequest
	}{
		{"by name", func(name, _ string) activities.DeleteNodeRequest {
			return activities.DeleteNodeRequest{NodeName: name}
		}},
		{"by providerID", func(_, providerID string) activities.DeleteNodeRequest {
			return activities.DeleteNodeRequest{ProviderID: providerID}
		}},
		{"by a stale name, found by providerID", func(_, providerID string) activities.DeleteNodeRequest {
			return activities.DeleteNodeRequest{NodeName: clustertesting.UniqueName("renamed"), ProviderID: providerID}
		}},
	}
	h := newHarness(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := createNode(t, newNode("delete").withoutKwok().finalizer(activities.TerminationFinalizer).build())
			req := tt.req(node.Name, node.Spec.ProviderID)

			resp, err := execute[activities.DeleteNodeResponse](h, nil, h.activities.DeleteNode, req)
			if err != nil {
				t.Fatal(err)
			}
			if !resp.Deleted {
				t.Error("Deleted = false, want true")
			}
			if _, err := testClientset.CoreV1().Nodes().Get(t.Context(), node.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("Node still there after DeleteNode (get: %v)", err)
			}
			if !h.logged("Deleted node", node.Name) {
				t.Error(`no "Deleted node" log line naming the node`)
			}

			// Retried after success: the Node is gone, which is success.
			again, err := execute[activities.DeleteNodeResponse](h, nil, h.activities.DeleteNode, req)
			if err != nil {
				t.Fatal(err)
			}
			if again.Deleted {
				t.Error("second DeleteNode reported Deleted = true for a Node already gone")
			}
		})
	}
}

// A retry after the delete but before the finalizer's removal (the Node is
// terminating behind the finalizer, as after `kubectl delete node`) finishes
// the job.
func TestDeleteNodeFinishesATerminatingNode(t *testing.T) {
	h := newHarness(t)
	node := createNode(t, newNode("terminating").withoutKwok().finalizer(activities.TerminationFinalizer).build())
	if err := testClientset.CoreV1().Nodes().Delete(t.Context(), node.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if live := getNode(t, node.Name); live.DeletionTimestamp == nil {
		t.Fatal("Node not terminating behind its finalizer")
	}

	resp, err := execute[activities.DeleteNodeResponse](h, nil, h.activities.DeleteNode, activities.DeleteNodeRequest{NodeName: node.Name})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Deleted {
		t.Error("Deleted = false, want true")
	}
	if _, err := testClientset.CoreV1().Nodes().Get(t.Context(), node.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node still there (get: %v)", err)
	}
}

// A Node whose name now belongs to another instance is not ours to delete.
func TestDeleteNodeLeavesANodeOfAnotherInstanceAlone(t *testing.T) {
	h := newHarness(t)
	node := createNode(t, newNode("reused").withoutKwok().build())

	resp, err := execute[activities.DeleteNodeResponse](h, nil, h.activities.DeleteNode,
		activities.DeleteNodeRequest{NodeName: node.Name, ProviderID: "aws:///us-east-1a/i-someoneelse"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Deleted {
		t.Error("Deleted = true for a Node of another instance")
	}
	if live := getNode(t, node.Name); live.DeletionTimestamp != nil {
		t.Error("the other instance's Node is being deleted")
	}
}

// Millwright's own deletion never shows the Node terminating behind its
// finalizer: that is what `kubectl delete node` looks like to the node
// watchers, which would then signal the workflow that is deleting it.
func TestDeleteNodeNeverShowsTheNodeTerminating(t *testing.T) {
	h := newHarness(t)
	node := createNode(t, newNode("vanishing").withoutKwok().finalizer(activities.TerminationFinalizer).build())
	watcher, err := testClientset.CoreV1().Nodes().Watch(t.Context(), metav1.ListOptions{
		FieldSelector: "metadata.name=" + node.Name, ResourceVersion: node.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()

	resp, err := execute[activities.DeleteNodeResponse](h, nil, h.activities.DeleteNode, activities.DeleteNodeRequest{NodeName: node.Name})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Deleted {
		t.Error("Deleted = false, want true")
	}
	timeout := time.After(time.Minute)
	for {
		select {
		case ev, ok := <-watcher.ResultChan():
			if !ok {
				t.Fatal("watch closed before the Node was deleted")
			}
			seen, isNode := ev.Object.(*corev1.Node)
			if !isNode {
				t.Fatalf("watch event %s: %v", ev.Type, ev.Object)
			}
			if ev.Type == watch.Deleted {
				return
			}
			if seen.DeletionTimestamp != nil {
				t.Fatalf("the Node was seen terminating (%s event with deletionTimestamp %s)", ev.Type, seen.DeletionTimestamp)
			}
		case <-timeout:
			t.Fatal("no Deleted event within a minute")
		}
	}
}
