package activities

import (
	"context"
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

func TestKeepAliveOutsideAnActivityDoesNothing(t *testing.T) {
	KeepAlive(context.Background(), clocktesting.NewFakeClock(time.Now()), time.Second)() // no ticker, no goroutine
}
