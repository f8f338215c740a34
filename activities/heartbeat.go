package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"k8s.io/utils/clock"
)

// HeartbeatInterval is how often a short activity that cannot report
// progress (Launch waiting on EC2, Plan reading the cluster) tells Temporal
// its worker is alive; its options' heartbeat timeout is a few of these.
const HeartbeatInterval = 5 * time.Second

// MaxHeartbeatInterval is the longest any heartbeating activity goes without
// heartbeating while it runs: KeepAlive's HeartbeatInterval and the polls of
// the waits (registration, initialization, instance termination) are
// shorter, and their packages test it.
const MaxHeartbeatInterval = 10 * time.Second

// HeartbeatTimeout is the heartbeat timeout workflows give heartbeating
// activities: three intervals, so one late heartbeat is not taken for a dead
// worker, and a worker that died is replaced within half a minute.
const HeartbeatTimeout = 3 * MaxHeartbeatInterval

// RecordKeepAlive is the heartbeat KeepAlive sends; tests replace it to see
// every call (the SDK's test environment reports only throttled ones).
var RecordKeepAlive = func(ctx context.Context) { activity.RecordHeartbeat(ctx) }

// KeepAlive heartbeats every interval (on clk) until the returned stop is
// called or ctx ends, so a worker that dies in the middle of the activity is
// noticed at the heartbeat timeout rather than at the end of the whole
// start-to-close timeout. Outside an activity it does nothing.
func KeepAlive(ctx context.Context, clk clock.WithTicker, interval time.Duration) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	done := make(chan struct{})
	ticker := clk.NewTicker(interval)
	go func() {
		defer ticker.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-ticker.C():
				RecordKeepAlive(ctx)
			}
		}
	}()
	return func() { close(done) }
}
