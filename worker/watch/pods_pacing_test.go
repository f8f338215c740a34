package watch

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/millwright/millwright/activities/planning"
)

// The first pending pod is signalled at once; pods queued within
// pendingSignalInterval of a signal wait for it and go together.
func TestPendingPodsSignalsArePaced(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Now())
	rec := &recordingSignaler{signals: map[string][]string{}}
	pods := cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Pod{}, 0, cache.Indexers{})
	for _, name := range []string{"a", "b", "c", "d"} {
		if err := pods.GetStore().Add(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			}}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	w := &PodWatcher{
		provisioner: Provisioner{Signaler: rec, Cluster: "paced"},
		clock:       clock,
		logger:      zaptest.NewLogger(t),
		pods:        pods,
		pending:     workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { w.runPending(ctx); close(done) }()
	defer func() { cancel(); w.pending.ShutDown(); <-done }()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("%s: signals %v", what, rec.pendingSent())
		}
	}
	w.pending.Add("default/a")
	waitFor("the first pod signalled at once", func() bool { return len(rec.pendingSent()) == 1 })
	// The next pods arrive one by one within the interval.
	w.pending.Add("default/b")
	waitFor("the watcher waiting out the interval", clock.HasWaiters)
	w.pending.Add("default/c")
	w.pending.Add("default/d")
	if got := len(rec.pendingSent()); got != 1 {
		t.Fatalf("%d signals before the interval passed, want 1: %v", got, rec.pendingSent())
	}
	clock.Step(pendingSignalInterval)
	waitFor("the queued pods signalled together", func() bool { return len(rec.pendingSent()) == 2 })
	if got := rec.pendingSent()[1]; !slices.Equal(got, []string{"default/b", "default/c", "default/d"}) {
		t.Errorf("second signal %v, want b, c and d together", got)
	}
}

// A pod kube-scheduler has not looked at is signalled once its grace is
// over (no event marks it), and not before; one scheduled meanwhile is not
// signalled at all.
func TestOverlookedPodsAreSignalledAfterTheSchedulerGrace(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC))
	rec := &recordingSignaler{signals: map[string][]string{}}
	pods := cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Pod{}, 0, cache.Indexers{})
	w := &PodWatcher{
		provisioner: Provisioner{Signaler: rec, Cluster: "overlooked"},
		clock:       clock,
		logger:      zaptest.NewLogger(t),
		pods:        pods,
		pending: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Clock: clock}),
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { w.runPending(ctx); close(done) }()
	defer func() { cancel(); w.pending.ShutDown(); <-done }()

	newPod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, CreationTimestamp: metav1.NewTime(clock.Now())}}
	}
	waiting, scheduled := newPod("waiting"), newPod("scheduled")
	for _, pod := range []*corev1.Pod{waiting, scheduled} {
		if err := pods.GetStore().Add(pod); err != nil {
			t.Fatal(err)
		}
		w.onPod(nil, pod)
	}
	clock.Step(planning.SchedulerGrace - time.Millisecond)
	if sent := rec.pendingSent(); len(sent) != 0 {
		t.Fatalf("signalled within the scheduler's grace: %v", sent)
	}
	// The scheduler binds one of them before the grace is over.
	bound := scheduled.DeepCopy()
	bound.Spec.NodeName = "node-1"
	if err := pods.GetStore().Update(bound); err != nil {
		t.Fatal(err)
	}
	clock.Step(time.Millisecond)
	if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(rec.pendingSent()) == 1, nil
	}); err != nil {
		t.Fatalf("no signal after the grace: %v", rec.pendingSent())
	}
	if got := rec.pendingSent()[0]; !slices.Equal(got, []string{"default/waiting"}) {
		t.Errorf("signalled %v, want the unscheduled pod alone", got)
	}
}
