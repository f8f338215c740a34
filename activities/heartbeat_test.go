package activities

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestKeepAliveHeartbeatsEveryInterval: a long activity (Launch waiting on
// EC2) heartbeats at every interval, so its heartbeat timeout only fires
// when the worker running it is gone.
func TestKeepAliveHeartbeatsEveryInterval(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	beats := make(chan struct{})
	original := RecordKeepAlive
	RecordKeepAlive = func(context.Context) { beats <- struct{}{} }
	t.Cleanup(func() { RecordKeepAlive = original })

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	slowActivity := func(ctx context.Context) error {
		defer KeepAlive(ctx, clock, HeartbeatInterval)()
		for range 3 {
			clock.Step(HeartbeatInterval)
			select {
			case <-beats:
			case <-time.After(10 * time.Second):
				t.Error("no heartbeat after an interval passed")
				return nil
			}
		}
		return nil
	}
	env.RegisterActivity(slowActivity)
	if _, err := env.ExecuteActivity(slowActivity); err != nil {
		t.Fatal(err)
	}
}

// Outside an activity (the starter CLI, tools) KeepAlive starts no ticker
// and never heartbeats, however much time passes.
func TestKeepAliveOutsideAnActivityDoesNothing(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	var beats atomic.Int32
	original := RecordKeepAlive
	RecordKeepAlive = func(context.Context) { beats.Add(1) }
	t.Cleanup(func() { RecordKeepAlive = original })

	stop := KeepAlive(context.Background(), clock, time.Second)
	if clock.HasWaiters() {
		t.Error("KeepAlive outside an activity started a ticker")
	}
	clock.Step(10 * time.Second)
	stop()
	if n := beats.Load(); n != 0 {
		t.Errorf("KeepAlive outside an activity heartbeat %d time(s)", n)
	}
}

func TestHeartbeatIntervalsFitTheTimeout(t *testing.T) {
	if HeartbeatInterval > MaxHeartbeatInterval {
		t.Errorf("HeartbeatInterval %s exceeds MaxHeartbeatInterval %s", HeartbeatInterval, MaxHeartbeatInterval)
	}
	if HeartbeatTimeout < 3*MaxHeartbeatInterval || HeartbeatTimeout > 30*time.Second {
		t.Errorf("HeartbeatTimeout %s: want at least 3 intervals (%s) and at most 30s", HeartbeatTimeout, 3*MaxHeartbeatInterval)
	}
}
