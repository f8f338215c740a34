package cloud

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestLaunchHeartbeatsWhileItRuns: a long Launch (EC2 slow to show the
// instance) heartbeats at every interval, so launchOptions' heartbeat
// timeout only fires when the worker running it is gone.
func TestLaunchHeartbeatsWhileItRuns(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	p := &Provider{clock: clock}
	beats := make(chan struct{})
	original := recordLaunchHeartbeat
	recordLaunchHeartbeat = func(context.Context) { beats <- struct{}{} }
	t.Cleanup(func() { recordLaunchHeartbeat = original })

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	slowLaunch := func(ctx context.Context) error {
		stop := p.heartbeatWhileRunning(ctx, launchHeartbeatInterval)
		defer stop()
		for range 3 {
			clock.Step(launchHeartbeatInterval)
			select {
			case <-beats:
			case <-time.After(10 * time.Second):
				t.Error("no heartbeat after an interval passed")
				return nil
			}
		}
		return nil
	}
	env.RegisterActivity(slowLaunch)
	if _, err := env.ExecuteActivity(slowLaunch); err != nil {
		t.Fatal(err)
	}
}

func TestHeartbeatWhileRunningOutsideAnActivityDoesNothing(t *testing.T) {
	p := &Provider{clock: clocktesting.NewFakeClock(time.Now())}
	p.heartbeatWhileRunning(context.Background(), time.Second)() // no ticker, no goroutine
}
