package metrics

import (
	"context"

	"k8s.io/utils/clock"

	"github.com/millwright/millwright/activities"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// InstrumentedActivities records metrics around the activities; every
// activity not named here is the inner one unchanged.
//
// The node lifecycle (node claims created, instances launched, Nodes
// registered, nodes disrupted and terminated, phase durations) is counted
// from UpsertNodeClaim, which node workflows call once per phase they
// enter and which reports each transition only the first time: a retried
// call whose first success was lost counts nothing again. Launch counts
// its failed attempts (each attempt is one), never its successes.
type InstrumentedActivities struct {
	activities.Activities
	metrics *Metrics
	clock   clock.PassiveClock
}

var (
	_ activities.Activities           = (*InstrumentedActivities)(nil)
	_ activities.DisruptionActivities = (*InstrumentedActivities)(nil)
)

// Instrument wraps inner.
func Instrument(inner activities.Activities, m *Metrics, clk clock.PassiveClock) *InstrumentedActivities {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &InstrumentedActivities{Activities: inner, metrics: m, clock: clk}
}

// Launch counts a failed attempt by cause and the offerings that had no
// capacity.
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
	}
	return resp, err
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

// UpsertNodeClaim counts the transition the call reports, if any.
func (a *InstrumentedActivities) UpsertNodeClaim(ctx context.Context, req activities.UpsertNodeClaimRequest) (activities.UpsertNodeClaimResponse, error) {
	resp, err := a.Activities.UpsertNodeClaim(ctx, req)
	if err != nil {
		return resp, err
	}
	a.metrics.NodeTransition(req, resp)
	return resp, nil
}

// NodeTransition counts what entering req.Phase means, once: resp.Entered
// is empty for a repeat.
func (m *Metrics) NodeTransition(req activities.UpsertNodeClaimRequest, resp activities.UpsertNodeClaimResponse) {
	pool := req.NodePool
	zone, capacityType := "", ""
	if inst := req.Instance; inst != nil {
		zone, capacityType = inst.Zone, inst.CapacityType
	}
	if resp.Left != "" && resp.LeftAfter > 0 {
		m.PhaseLeft(pool, resp.Left, resp.LeftAfter)
	}
	if resp.Created && req.Phase == activities.NodePhaseLaunching {
		m.NodeClaimCreated(pool)
	}
	reason := Unknown
	if t := req.Termination; t != nil && t.Reason != "" {
		reason = t.Reason
	}
	switch resp.Entered {
	case "":
		return
	case activities.NodePhaseRegistering:
		if inst := req.Instance; inst != nil {
			m.NodeLaunched(pool, inst.InstanceType, inst.Zone, inst.CapacityType)
		}
	case activities.NodePhaseInitializing:
		m.NodeRegistered(pool, zone)
	case activities.NodePhaseDraining, activities.NodePhaseTerminating:
		if !activities.NodePhaseLeaving(resp.Left) {
			m.NodeDisrupted(pool, capacityType, reason, TerminationMode(req.TerminationGracePeriod))
		}
	case activities.NodePhaseTerminated:
		// A node that ends straight from Launching (no capacity, launch
		// failed) was never disrupted, but it is terminated.
		m.NodeTerminated(pool, zone, capacityType, reason)
	}
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
	a.metrics.Planned(resp.PodsConsidered, len(resp.Unschedulable), a.clock.Since(start), byPool)
	return resp, nil
}

// ComputeCommands records, for a pass of the disruption workflow (not a
// command's validation), the commands decided and the eligible nodes.
func (a *InstrumentedActivities) ComputeCommands(ctx context.Context, req activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
	resp, err := a.Activities.ComputeCommands(ctx, req)
	if err != nil || req.Validation {
		return resp, err
	}
	for _, cmd := range resp.Commands {
		a.metrics.DisruptionDecided(string(cmd.Kind), string(cmd.Reason), len(cmd.Candidates))
	}
	eligible, drifted, unhealthy := 0, 0, 0
	for _, v := range resp.Verdicts {
		if !v.Candidate {
			continue
		}
		eligible++
		if v.Drifted != "" {
			drifted++
		}
		if v.Unhealthy != "" {
			unhealthy++
		}
	}
	a.metrics.DisruptionEligible(string(apisv1.DisruptionReasonUnderutilized), eligible)
	a.metrics.DisruptionEligible(string(apisv1.DisruptionReasonDrifted), drifted)
	a.metrics.DisruptionEligible("Unhealthy", unhealthy)
	return resp, nil
}

// InstrumentedCommandActivities count the disruption commands rolled back
// (MarkDisruption untainting their candidates).
type InstrumentedCommandActivities struct {
	activities.DisruptionCommandActivities
	metrics *Metrics
}

// InstrumentCommands wraps a disruption command's activities.
func InstrumentCommands(inner activities.DisruptionCommandActivities, m *Metrics) *InstrumentedCommandActivities {
	return &InstrumentedCommandActivities{DisruptionCommandActivities: inner, metrics: m}
}

// MarkDisruption counts a rollback once per command (a retried activity
// finds the taints already gone and changes nothing).
func (a *InstrumentedCommandActivities) MarkDisruption(ctx context.Context, req activities.MarkDisruptionRequest) (activities.MarkDisruptionResponse, error) {
	resp, err := a.DisruptionCommandActivities.MarkDisruption(ctx, req)
	if err == nil && !req.Disrupted && !req.Candidate && len(resp.Changed) > 0 && req.Reason != "" {
		decision := "delete"
		if req.Replacing {
			decision = "replace"
		}
		a.metrics.DisruptionFailed(decision, req.Reason, len(req.NodeNames))
	}
	return resp, err
}
