package watch

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
)

// The first pending pod is signalled at once; pods queued within
// pendingSignalInterval of a signal wait for it and go together.
func TestPendingPodsSignalsArePaced(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Now())
	rec := &recordingSignaler{signals: map[string][]string{}}
	w := &PodWatcher{
		provisioner: Provisioner{Signaler: rec, Cluster: "paced"},
		clock:       clock,
		logger:      zaptest.NewLogger(t),
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
