package workflows

import (
	"testing"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
)

// Every activity that heartbeats has the contract's heartbeat timeout, which
// fits three of the longest heartbeat intervals; nothing waits a minute for
// a dead worker.
func TestHeartbeatTimeouts(t *testing.T) {
	now := t0
	for name, options := range map[string]workflow.ActivityOptions{
		"launch":               launchOptions(),
		"wait":                 waitOptions(now, now.Add(15*time.Minute), "wait"),
		"drain":                drainOptions(),
		"wait for terminated":  waitForTerminatedOptions(),
		"plan":                 planOptions(),
		"short":                shortOptions("short"),
		"must succeed":         mustSucceedOptions("must succeed"),
		"start node workflows": startNodeWorkflowsOptions(),
	} {
		switch timeout := options.HeartbeatTimeout; {
		case timeout == 0 && options.StartToCloseTimeout > 2*time.Minute:
			t.Errorf("%s: no heartbeat timeout with a %s start-to-close: a dead worker goes unnoticed that long", name, options.StartToCloseTimeout)
		case timeout != 0 && timeout != activities.HeartbeatTimeout:
			t.Errorf("%s: heartbeat timeout %s, want activities.HeartbeatTimeout (%s)", name, timeout, activities.HeartbeatTimeout)
		}
	}
}

// A worker killed while a node waits (for registration, initialization,
// the instance's termination) is noticed within 30 s, as for launch and
// drain, not after a minute.
func TestNodeWaitsNoticeAKilledWorkerWithin30s(t *testing.T) {
	h := newNodeHarness(t)
	h.signal(time.Hour, SignalDrain, DrainRequest{Reason: "kernel upgrade", Requester: "alice"})
	h.runNode(nodeSpec(), nil)
	for _, activity := range []string{activities.WaitForRegistrationActivity, activities.WaitForInitializationActivity,
		activities.WaitForInstanceTerminatedActivity, activities.LaunchActivity, activities.DrainActivity} {
		timeouts := h.rec.heartbeatTimeoutsOf(activity)
		if len(timeouts) != 1 || timeouts[0] != 30*time.Second {
			t.Errorf("%s heartbeat timeout(s) %v, want [30s]", activity, timeouts)
		}
	}
}
