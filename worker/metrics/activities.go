package metrics

import (
	"context"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/workflows"
)

// WorkflowDescriber is the slice of client.Client that finds why a node
// workflow terminates its instance.
type WorkflowDescriber interface {
	DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
}

// describeTimeout bounds the lookup of a terminated node's pool and reason;
// the metric is not worth delaying the activity's completion for.
const describeTimeout = 5 * time.Second

// InstrumentedActivities records metrics around the activities that launch,
// terminate and plan; every other activity is the inner one unchanged.
//
// Counts are per successful activity execution. A retry that repeats a
// success (the completion was lost, CreateFleet's ClientToken returned the
// same instance) counts again; Temporal makes that rare.
type InstrumentedActivities struct {
	activities.Activities
	metrics   *Metrics
	workflows WorkflowDescriber
	clock     clock.PassiveClock
}

var (
	_ activities.Activities           = (*InstrumentedActivities)(nil)
	_ activities.DisruptionActivities = (*InstrumentedActivities)(nil)
)

// Instrument wraps inner. describer (the Temporal client) labels
// terminations with the node workflow's pool and termination reason, which
// the workflow publishes as search attributes before it terminates; nil
// labels them Unknown.
func Instrument(inner activities.Activities, m *Metrics, describer WorkflowDescriber, clk clock.PassiveClock) *InstrumentedActivities {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &InstrumentedActivities{Activities: inner, metrics: m, workflows: describer, clock: clk}
}

// Launch counts the instance launched, or the failure by cause and the
// offerings that had no capacity.
func (a *InstrumentedActivities) Launch(ctx context.Context, req activities.LaunchRequest) (activities.LaunchResponse, error) {
	resp, err := a.Activities.Launch(ctx, req)
	if err != nil {
		a.metrics.LaunchFailed(req.NodePool, LaunchErrorCause(err))
		if offerings, ok := activities.InsufficientCapacityOfferings(err); ok {
			for _, o := range offerings {
				a.metrics.OfferingUnavailable(o.InstanceType, o.Zone, o.CapacityType)
			}
		}
		if rejected, ok := activities.LaunchRejectedOfferings(err); ok {
			for _, o := range rejected {
				a.metrics.OfferingRejected(req.NodePool, o.InstanceType, o.Zone, o.CapacityType)
			}
		}
		return resp, err
	}
	a.metrics.NodeLaunched(req.NodePool, resp.InstanceType, resp.Zone, resp.CapacityType)
	return resp, nil
}

// LaunchErrorCause classifies a Launch error by the contract's error types.
func LaunchErrorCause(err error) string {
	switch {
	case activities.IsInsufficientCapacity(err):
		return CauseInsufficientCapacity
	case activities.IsThrottled(err):
		return CauseThrottled
	case activities.IsInvalidNodeClass(err):
		return CauseInvalidNodeClass
	case activities.IsLaunchFailed(err):
		return CauseLaunchRejected
	default:
		return CauseOther
	}
}

// TerminateInstance counts a terminated instance by its node workflow's pool
// and termination reason; a termination by node claim counts the instances
// it found.
func (a *InstrumentedActivities) TerminateInstance(ctx context.Context, req activities.TerminateInstanceRequest) (activities.TerminateInstanceResponse, error) {
	resp, err := a.Activities.TerminateInstance(ctx, req)
	if err != nil {
		return resp, err
	}
	count := 1
	if req.InstanceID == "" {
		count = len(resp.Instances)
	}
	if count == 0 {
		return resp, nil
	}
	pool, reason := a.terminationLabels(ctx)
	for range count {
		a.metrics.NodeTerminated(pool, reason)
	}
	return resp, nil
}

// terminationLabels reads the calling node workflow's MillwrightNodePool and
// MillwrightTerminationReason search attributes. The workflow upserts them
// in the same workflow task that schedules TerminateInstance, so the
// workflow's state has them by the time the activity runs.
func (a *InstrumentedActivities) terminationLabels(ctx context.Context) (pool, reason string) {
	pool, reason = Unknown, Unknown
	if a.workflows == nil || !activity.IsActivity(ctx) {
		return pool, reason
	}
	execution := activity.GetInfo(ctx).WorkflowExecution
	ctx, cancel := context.WithTimeout(ctx, describeTimeout)
	defer cancel()
	described, err := a.workflows.DescribeWorkflowExecution(ctx, execution.ID, execution.RunID)
	if err != nil {
		activity.GetLogger(ctx).Debug("Describing the node workflow for the terminated-node metric failed", "error", err)
		return pool, reason
	}
	fields := described.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	if v := keyword(fields[workflows.NodePoolAttribute.GetName()]); v != "" {
		pool = v
	}
	if v := keyword(fields[workflows.TerminationReasonAttribute.GetName()]); v != "" {
		reason = v
	}
	return pool, reason
}

func keyword(payload *commonpb.Payload) string {
	if payload == nil {
		return ""
	}
	var value string
	if err := converter.GetDefaultDataConverter().FromPayload(payload, &value); err != nil {
		return ""
	}
	return value
}

// ComputeCommands is the inner activity's (the worker's implements it).
func (a *InstrumentedActivities) ComputeCommands(ctx context.Context, req activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
	d, ok := a.Activities.(activities.DisruptionActivities)
	if !ok {
		return activities.ComputeCommandsResponse{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%T does not implement %s", a.Activities, activities.ComputeCommandsActivity), "NotImplemented", nil)
	}
	return d.ComputeCommands(ctx, req)
}

// Plan records the batch's pending pods, the pass's duration and the node
// plans by pool.
func (a *InstrumentedActivities) Plan(ctx context.Context, req activities.PlanRequest) (activities.PlanResponse, error) {
	start := a.clock.Now()
	resp, err := a.Activities.Plan(ctx, req)
	if err != nil {
		return resp, err
	}
	byPool := map[string]int{}
	for _, plan := range resp.Plans {
		byPool[plan.NodePool]++
	}
	a.metrics.Planned(resp.PodsConsidered, a.clock.Since(start), byPool)
	return resp, nil
}
