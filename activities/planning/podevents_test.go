package planning

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// TestPodEventsDateEveryPodChangeOfANode: consolidateAfter counts from the
// last pod bound to, finished on or deleted from a node; before any event
// (and for the pods listed at start) it counts from the source's start.
func TestPodEventsDateEveryPodChangeOfANode(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	bound := pending.DeepCopy()
	bound.Spec.NodeName = "n1"
	finished := bound.DeepCopy()
	finished.Status.Phase = corev1.PodSucceeded
	deleting := bound.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: start}
	for _, tc := range []struct {
		name   string
		events func(cache.ResourceEventHandler)
		want   time.Duration // after start, for node n1
	}{
		{"no event: the source's start", func(cache.ResourceEventHandler) {}, 0},
		{"listed at start is no event", func(h cache.ResourceEventHandler) { h.OnAdd(bound, true) }, 0},
		{"bound by the scheduler", func(h cache.ResourceEventHandler) { h.OnUpdate(pending, bound) }, time.Minute},
		{"created bound", func(h cache.ResourceEventHandler) { h.OnAdd(bound, false) }, time.Minute},
		{"finished", func(h cache.ResourceEventHandler) { h.OnUpdate(bound, finished) }, time.Minute},
		{"deletion started", func(h cache.ResourceEventHandler) { h.OnUpdate(bound, deleting) }, time.Minute},
		{"deleted", func(h cache.ResourceEventHandler) { h.OnDelete(bound) }, time.Minute},
		{"deleted, state unknown", func(h cache.ResourceEventHandler) {
			h.OnDelete(cache.DeletedFinalStateUnknown{Key: "p", Obj: bound})
		}, time.Minute},
		{"status change only (resync) is no event", func(h cache.ResourceEventHandler) { h.OnUpdate(bound, bound) }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(start)
			e := newPodEvents(clk)
			clk.Step(time.Minute)
			tc.events(e.podHandler())
			if got := e.LastPodEvent("n1").Sub(start); got != tc.want {
				t.Errorf("LastPodEvent(n1) = start+%s, want start+%s", got, tc.want)
			}
		})
	}
}

// TestPodEventsForgetDeletedNodes keeps the map bounded by live Nodes.
func TestPodEventsForgetDeletedNodes(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	e := newPodEvents(clk)
	clk.Step(time.Minute)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	e.podHandler().OnDelete(pod)
	e.nodeHandler().OnDelete(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	if got := e.LastPodEvent("n1"); !got.Equal(start) || len(e.last) != 0 {
		t.Errorf("after the Node's deletion: LastPodEvent = %s (want the start), %d entries kept", got, len(e.last))
	}
}

// TestPodEventsDateANodesInitialization: a node that never had a pod
// counts consolidateAfter from its initialization, not from its creation
// (Karpenter's rule); label changes after that are no event.
func TestPodEventsDateANodesInitialization(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	registered := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"a": "b"}}}
	initialized := registered.DeepCopy()
	initialized.Labels[apisv1.LabelNodeInitialized] = "true"
	relabelled := initialized.DeepCopy()
	relabelled.Labels["c"] = "d"
	clk := clocktesting.NewFakeClock(start)
	e := newPodEvents(clk)
	h := e.nodeHandler()
	clk.Step(time.Minute)
	h.OnUpdate(registered, registered)
	if got := e.LastPodEvent("n1"); !got.Equal(start) {
		t.Fatalf("before initialization: LastPodEvent = start+%s, want the start", got.Sub(start))
	}
	h.OnUpdate(registered, initialized)
	clk.Step(time.Minute)
	h.OnUpdate(initialized, relabelled)
	if got := e.LastPodEvent("n1").Sub(start); got != time.Minute {
		t.Errorf("LastPodEvent = start+%s, want start+1m (its initialization)", got)
	}
}
