package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
)

// Timeouts and retry policies of every activity, in one place so they can be
// read side by side. Every activity has an explicit start-to-close bound;
// the activities that can run long heartbeat at least every
// activities.MaxHeartbeatInterval and have activities.HeartbeatTimeout (30 s),
// so a dead worker is noticed within half a minute instead of at the end of
// the wait. The single API calls (shortOptions, mustSucceedOptions) do not
// heartbeat: their start-to-close bound is what notices a dead worker.

// DefaultInitializationTimeout bounds registration-to-initialized. Other
// systems remove startup taints; a Node that never loses them is useless.
const DefaultInitializationTimeout = 30 * time.Minute

// retryForever retries with exponential backoff up to maxInterval until the
// schedule-to-close bound (if any); for steps that must eventually succeed
// (terminating an instance we pay for, removing a finalizer).
func retryForever(maxInterval time.Duration) *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        maxInterval,
		NonRetryableErrorTypes: activities.NonRetryableErrorTypes,
	}
}

// launchOptions: CreateFleet answers in seconds; throttling errors carry
// their own jittered NextRetryDelay, which overrides this policy's interval.
// Retrying is safe because the request's ClientToken is fixed.
func launchOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout:    3 * time.Minute,
		ScheduleToCloseTimeout: 15 * time.Minute,
		// Launch heartbeats (activities.KeepAlive): a worker that dies
		// mid-launch is replaced within this, not after the whole 3
		// minutes, and the retry's ClientToken returns the instance
		// already created.
		HeartbeatTimeout: activities.HeartbeatTimeout,
		RetryPolicy:      retryForever(time.Minute),
		Summary:          "launch instance",
	}
}

// v02WaitHeartbeatTimeout was the waits' heartbeat timeout in v0.2: a
// worker killed during a registration wait stalled its node for a minute.
// Runs recorded before changeWaitHeartbeatTimeout keep it.
const v02WaitHeartbeatTimeout = time.Minute

// waitOptions is for activities that heartbeat at every poll while waiting
// for the cluster until deadline (they return a typed timeout error
// themselves); a minute of grace lets that error arrive before Temporal's
// own timeout.
func waitOptions(now, deadline time.Time, summary string) workflow.ActivityOptions {
	bound := max(deadline.Sub(now), 0) + time.Minute
	return workflow.ActivityOptions{
		StartToCloseTimeout:    bound,
		ScheduleToCloseTimeout: bound,
		HeartbeatTimeout:       activities.HeartbeatTimeout,
		RetryPolicy:            retryForever(30 * time.Second),
		Summary:                summary,
	}
}

// shortOptions is for single API calls (a Node patch, a budget check).
func shortOptions(summary string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: 10 * time.Minute,
		RetryPolicy:            retryForever(30 * time.Second),
		Summary:                summary,
	}
}

// drainOptions: a drain may legitimately wait on a PodDisruptionBudget for
// as long as the pool allows (no terminationGracePeriod: forever), so it has
// no schedule-to-close bound; each attempt is bounded and resumes from its
// heartbeat details. Drain heartbeats on every poll (2 s), so a worker that
// dies mid-drain is replaced after the 30 s heartbeat timeout.
func drainOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    activities.HeartbeatTimeout,
		RetryPolicy:         retryForever(time.Minute),
		Summary:             "drain node",
	}
}

// mustSucceedOptions is for cleanup that must not be abandoned: an instance
// left running costs money, a finalizer left behind blocks the Node forever.
func mustSucceedOptions(summary string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         retryForever(2 * time.Minute),
		Summary:             summary,
	}
}

// waitForTerminatedOptions: EC2 normally reports shutting-down within
// seconds; after half an hour the workflow moves on and says so. The wait
// heartbeats at every poll (5 s).
func waitForTerminatedOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout:    15 * time.Minute,
		ScheduleToCloseTimeout: 30 * time.Minute,
		HeartbeatTimeout:       activities.HeartbeatTimeout,
		RetryPolicy:            retryForever(time.Minute),
		Summary:                "wait for instance terminated",
	}
}

// planOptions: planning reads the cluster and runs the packer (well under a
// second for thousands of pods), so two minutes per attempt is generous.
func planOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout:    2 * time.Minute,
		ScheduleToCloseTimeout: 10 * time.Minute,
		// Plan heartbeats (activities.KeepAlive): pending pods wait at
		// most this long for a worker that died mid-plan.
		HeartbeatTimeout: activities.HeartbeatTimeout,
		RetryPolicy:      retryForever(30 * time.Second),
		Summary:          "plan nodes",
	}
}

// computeCommandsOptions: ComputeCommands reads the cluster and runs the
// decision (under a second for 500 nodes); it only reads, so retries are
// free.
func computeCommandsOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout:    2 * time.Minute,
		ScheduleToCloseTimeout: 5 * time.Minute,
		RetryPolicy:            retryForever(30 * time.Second),
		Summary:                "compute disruption commands",
	}
}

// startNodeWorkflowsOptions: starting is idempotent (USE_EXISTING), so
// retries are safe.
func startNodeWorkflowsOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: 10 * time.Minute,
		RetryPolicy:            retryForever(30 * time.Second),
		Summary:                "start node workflows",
	}
}

// waitOptions are waitOptions with the heartbeat timeout this run was
// recorded with.
func (w *nodeLifecycle) waitOptions(now, deadline time.Time, summary string) workflow.ActivityOptions {
	return w.withWaitHeartbeatTimeout(waitOptions(now, deadline, summary))
}

// waitForTerminatedOptions are waitForTerminatedOptions with the heartbeat
// timeout this run was recorded with.
func (w *nodeLifecycle) waitForTerminatedOptions() workflow.ActivityOptions {
	return w.withWaitHeartbeatTimeout(waitForTerminatedOptions())
}

func (w *nodeLifecycle) withWaitHeartbeatTimeout(options workflow.ActivityOptions) workflow.ActivityOptions {
	if !changed(w.ctx, changeWaitHeartbeatTimeout) {
		options.HeartbeatTimeout = v02WaitHeartbeatTimeout
	}
	return options
}

// nodeClaimOptions: the NodeClaim is a mirror, so its write is bounded and
// then given up (the next phase writes it again); it must not hold the
// lifecycle for long while the API server is away.
func nodeClaimOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: time.Minute,
		RetryPolicy:            retryForever(10 * time.Second),
		Summary:                "mirror the NodeClaim",
	}
}
