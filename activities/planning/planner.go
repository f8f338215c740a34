package planning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/events"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/packer"
)

// InstanceTypeSource lists what a NodePool using an EC2NodeClass can launch:
// instance types with their offerings in the zones of the class's subnets,
// offerings recently out of capacity marked unavailable.
// activities/cloud's *Provider implements it. It fails with an
// activities.IsInvalidNodeClass error when the class cannot be resolved
// (selectors matching nothing); other errors are transient.
type InstanceTypeSource interface {
	InstanceTypesForNodeClass(ctx context.Context, nodeClass *apisv1.EC2NodeClass) ([]*catalog.InstanceType, error)
}

// Config is what the planner needs.
type Config struct {
	// Cluster names the cluster in launch specs when a request leaves it
	// empty.
	Cluster string
	// State reads the cluster. Required.
	State ClusterState
	// InstanceTypes lists launchable types per EC2NodeClass. Required.
	InstanceTypes InstanceTypeSource
	// Clock decides which unavailable offerings have expired and how old a
	// Node is. Default: the real clock.
	Clock clock.PassiveClock
	// Logger receives skipped NodePools and EC2NodeClasses (warn) and the
	// details of each plan (debug). Default: no logging.
	Logger *zap.Logger
	// RegistrationTimeout is put in every launch spec; zero leaves the
	// node workflow's default (activities.DefaultRegistrationTimeout).
	RegistrationTimeout time.Duration
	// Events tells each pod no NodePool can take why (FailedScheduling, in
	// the packer's words). Default: events.Discard.
	Events events.Recorder
}

// InvalidConfigError names the Config field that makes it unusable.
type InvalidConfigError struct {
	Field  string
	Reason string
}

func (e *InvalidConfigError) Error() string {
	return fmt.Sprintf("planning config: %s: %s", e.Field, e.Reason)
}

// IsInvalidConfig reports whether err is an InvalidConfigError.
func IsInvalidConfig(err error) bool {
	var target *InvalidConfigError
	return errors.As(err, &target)
}

// Planner implements the Plan activity. It holds no state between calls and
// is safe for concurrent use.
type Planner struct {
	cluster             string
	state               ClusterState
	instanceTypes       InstanceTypeSource
	clock               clock.PassiveClock
	log                 *zap.Logger
	registrationTimeout time.Duration
	events              events.Recorder
}

// New checks cfg and returns a planner.
func New(cfg Config) (*Planner, error) {
	switch {
	case cfg.State == nil:
		return nil, &InvalidConfigError{Field: "State", Reason: "required"}
	case cfg.InstanceTypes == nil:
		return nil, &InvalidConfigError{Field: "InstanceTypes", Reason: "required"}
	case cfg.RegistrationTimeout < 0:
		return nil, &InvalidConfigError{Field: "RegistrationTimeout", Reason: fmt.Sprintf("%s is negative", cfg.RegistrationTimeout)}
	}
	p := &Planner{
		cluster: cfg.Cluster, state: cfg.State, instanceTypes: cfg.InstanceTypes,
		clock: cfg.Clock, log: cfg.Logger, registrationTimeout: cfg.RegistrationTimeout, events: cfg.Events,
	}
	if p.events == nil {
		p.events = events.Discard
	}
	if p.clock == nil {
		p.clock = clock.RealClock{}
	}
	if p.log == nil {
		p.log = zap.NewNop()
	}
	p.log = p.log.Named("planner")
	return p, nil
}

// launchOrder is the order in which a pass fills its plans (at most
// MaxNodePlans, MaxPlanBytes and the in-flight room): the nodes carrying the
// most pods first, in the packer's order among equals. The plans a pass
// cannot take are deferred and packed again with the next batch; taking the
// packer's first nodes instead launched, pass after pass, the small nodes it
// happened to open first for the largest pods. At 5,000 pods created at once
// that was 415 nodes of 4 pods (574 in all, where batches of the scheduler's
// pace had made 216 to 279).
func launchOrder(nodes []packer.NodePlan) []int {
	order := make([]int, len(nodes))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return len(nodes[b].Pods) - len(nodes[a].Pods) })
	return order
}

// Plan reads the cluster, packs the batch's pods onto existing, in-flight
// and new nodes, and returns a launch spec per new node, plus the empty
// nodes that bring each NodePool up to its minNodes. It only reads, so a
// retried call is harmless; the same cluster state and request yield the
// same plans. Plans leave NodeClaimName empty: the provisioner names them
// from its batch sequence (see workflows.NodeClaimName), which is stable
// across retries of one batch yet new for a later batch that re-plans the
// same pods (a name derived from the pods would collide with the closed
// workflow of a node that found no capacity).
func (p *Planner) Plan(ctx context.Context, req activities.PlanRequest) (activities.PlanResponse, error) {
	defer p.keepAlive(ctx)()
	cluster, err := p.clusterOf("plan", req.Cluster)
	if err != nil {
		return activities.PlanResponse{}, err
	}
	started := p.clock.Now()
	w, err := p.observe(ctx, req)
	if err != nil {
		return activities.PlanResponse{}, err
	}
	observed := p.clock.Since(started)
	resp := activities.PlanResponse{
		Settled:          w.settled,
		PodsConsidered:   len(w.batch) + len(w.batchInFlight),
		PlacedOnExisting: len(w.batchInFlight),
	}

	result, err := packer.Pack(w.packerInput())
	if err != nil {
		return activities.PlanResponse{}, fmt.Errorf("packing %d pod(s): %w", len(w.batch), err)
	}
	resp.PlacedOnExisting += len(result.Placements)
	resp.PlacedInRoom = len(result.Placements)
	resp.UnschedulableCount = len(result.Unschedulable)
	for _, u := range result.Unschedulable {
		if len(resp.Unschedulable) == activities.MaxUnschedulableReported {
			break
		}
		resp.Unschedulable = append(resp.Unschedulable, activities.UnschedulablePod{PodKey: podKey(u.Pod), Reason: u.Reason})
		p.events.Publish(events.PodFailedToSchedule(u.Pod, string(u.Pod.UID), u.Reason))
	}

	maxPlans := req.MaxNodePlans
	if maxPlans <= 0 {
		maxPlans = len(result.NewNodes) + w.totalMinNodes()
	}
	deferredNodes := map[string]bool{}
	plans, plannedPods, planBytes := 0, 0, 0
	launched := make([]*activities.NodeLaunchSpec, len(result.NewNodes))
	for _, i := range launchOrder(result.NewNodes) {
		plan := &result.NewNodes[i]
		full := plans >= maxPlans || planBytes >= activities.MaxPlanBytes ||
			req.MaxPlannedPods != 0 && plannedPods+len(plan.Pods) > max(req.MaxPlannedPods, 0)
		if full {
			for _, pod := range plan.Pods {
				if node := pod.Spec.NodeName; node != "" {
					deferredNodes[node] = true // a disrupted node's pod
					continue
				}
				resp.Deferred = append(resp.Deferred, podKey(pod))
			}
			continue
		}
		pool := w.pools[plan.NodePool]
		spec := w.launchSpec(cluster, pool, plan, p.registrationTimeout)
		pool.planned++
		pool.addUsage(pool.typeByName[plan.InstanceType])
		launched[i] = &spec
		plans++
		plannedPods += len(plan.Pods)
		planBytes += encodedSize(spec)
	}
	for _, spec := range launched { // in the packer's order
		if spec != nil {
			resp.Plans = append(resp.Plans, *spec)
		}
	}
	slices.Sort(resp.Deferred)
	if len(resp.Deferred) > activities.MaxDeferredReported {
		resp.Deferred, resp.DeferredMore = resp.Deferred[:activities.MaxDeferredReported], true
	}
	for node := range deferredNodes {
		resp.DeferredDisruptedNodes = append(resp.DeferredDisruptedNodes, node)
	}
	slices.Sort(resp.DeferredDisruptedNodes)

	resp.Plans = append(resp.Plans, w.minNodesPlans(cluster, maxPlans-len(resp.Plans), p.registrationTimeout)...)
	resp.Skipped = w.skipped

	p.logPlan(req, w, resp, observed, p.clock.Since(started))
	return resp, nil
}

// keepAlive heartbeats the activity until the returned stop is called.
func (p *Planner) keepAlive(ctx context.Context) (stop func()) {
	ticker, ok := p.clock.(clock.WithTicker)
	if !ok {
		ticker = clock.RealClock{}
	}
	return activities.KeepAlive(ctx, ticker, activities.HeartbeatInterval)
}

// clusterOf is the request's cluster, or the planner's default.
func (p *Planner) clusterOf(what, cluster string) (string, error) {
	if cluster == "" {
		cluster = p.cluster
	}
	if cluster == "" {
		return "", fmt.Errorf("%s request: cluster is empty and the planner has no default cluster", what)
	}
	return cluster, nil
}

// encodedSize is how many bytes spec takes in a Temporal payload (JSON).
func encodedSize(spec activities.NodeLaunchSpec) int {
	encoded, err := json.Marshal(spec)
	if err != nil {
		return 0
	}
	return len(encoded)
}

func (p *Planner) logPlan(req activities.PlanRequest, w *world, resp activities.PlanResponse, observed, took time.Duration) {
	for _, s := range resp.Skipped {
		p.log.Warn("Skipped "+s.Kind, zap.String("name", s.Name), zap.String("reason", s.Reason))
	}
	if !p.log.Core().Enabled(zap.DebugLevel) {
		return
	}
	p.log.Debug("Planned batch",
		zap.Int("requestedPods", len(req.PodKeys)), zap.Bool("allPending", req.AllPending),
		zap.Int("podsConsidered", resp.PodsConsidered), zap.Int("placedOnExisting", resp.PlacedOnExisting),
		zap.Int("inFlightPods", len(w.batchInFlight)), zap.Int("plans", len(resp.Plans)),
		zap.Int("unschedulable", resp.UnschedulableCount), zap.Int("deferred", len(resp.Deferred)),
		zap.Strings("settled", resp.Settled), zap.Int("existingNodes", len(w.nodes)), zap.Int("inFlightNodes", len(w.inFlight)),
		zap.Duration("observed", observed), zap.Duration("took", took))
	for _, spec := range resp.Plans {
		p.log.Debug("Node plan", zap.String("nodePool", spec.NodePool), zap.Int("pods", len(spec.PodKeys)),
			zap.String("reason", spec.LaunchReason))
	}
	for _, u := range resp.Unschedulable {
		p.log.Debug("Unschedulable pod", zap.String("pod", u.PodKey), zap.String("reason", u.Reason))
	}
}
