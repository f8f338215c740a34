//go:build recordhistories

package workflows

// Records the histories TestReplayRecordedHistories replays, on a real
// Temporal server (go.temporal.io/server/temporaltest, in process), into
// testdata/<release>/. It is behind a build tag because it compiles the
// whole server. Run it once per release, on the release's code, and commit
// the directory (see the versioning policy in doc.go):
//
//	go test -tags recordhistories -run TestRecordHistories ./workflows/ -args -release=v0.3
//
// Each scenario is one path through a workflow; the node claim name selects
// the recording world's behaviour (see recordingWorld).

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/common/dynamicconfig"
	servertemporal "go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"

	"github.com/millwright/millwright/activities"
)

var recordRelease = flag.String("release", "", "release whose histories are recorded, e.g. v0.3 (writes testdata/<release>/)")

// recordingWorld is fakeWorld with behaviour keyed on the node claim name,
// so one worker plays every scenario:
//
//	ice           the first option has no capacity
//	ice-all       no option has capacity
//	launchfail    EC2 rejects the launch (LaunchFailed)
//	badclass      the NodeClass is invalid
//	hold-launch   Launch holds until cancelled (at most holdFor)
//	noregister    the Node never registers
//	noinit        the Node never initializes
//	empty         the node starts without pods
//	budget        the first disruption check is refused
//	hold-drain    a voluntary Drain holds until cancelled
//	hold-term     TerminateInstance holds until cancelled
//	hold-wait     WaitForInstanceTerminated holds (at most holdFor)
type recordingWorld struct {
	fakeWorld
	started *startedActivities
	// commands plays the disruption workflow's world (see
	// record_disruption_test.go).
	commands *commandWorldOnServer
}

// holdFor bounds how long a holding activity holds.
const holdFor = 3 * time.Second

// startedActivities lets a scenario wait until an activity of its node
// started, to act while it runs.
type startedActivities struct {
	mu       sync.Mutex
	channels map[string]chan struct{}
	refused  map[string]bool
}

func newStartedActivities() *startedActivities {
	return &startedActivities{channels: map[string]chan struct{}{}, refused: map[string]bool{}}
}

func (s *startedActivities) channel(key string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.channels[key] == nil {
		s.channels[key] = make(chan struct{})
	}
	return s.channels[key]
}

func (s *startedActivities) markStarted(nodeClaim, activity string) {
	ch := s.channel(nodeClaim + "/" + activity)
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// firstRefusal is true once per node.
func (s *startedActivities) firstRefusal(node string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused[node] {
		return false
	}
	s.refused[node] = true
	return true
}

func hold(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(holdFor):
	}
}

func (w recordingWorld) Launch(ctx context.Context, req activities.LaunchRequest) (activities.LaunchResponse, error) {
	w.started.markStarted(req.NodeClaimName, activities.LaunchActivity)
	name := req.NodeClaimName
	switch {
	case strings.Contains(name, "ice-all"):
		return activities.LaunchResponse{}, activities.NewInsufficientCapacityError("InsufficientInstanceCapacity", offeringKeys(req.Options))
	case strings.Contains(name, "ice") && len(req.Options) > 1:
		return activities.LaunchResponse{}, activities.NewInsufficientCapacityError("InsufficientInstanceCapacity", offeringKeys(req.Options[:1]))
	case strings.Contains(name, "launchfail"):
		first := req.Options[0]
		rejected := []activities.UnavailableOffering{{
			OfferingKey: activities.OfferingKey{InstanceType: first.Name, Zone: first.Offerings[0].Zone, CapacityType: first.Offerings[0].CapacityType},
			Until:       time.Now().Add(time.Minute),
		}}
		return activities.LaunchResponse{}, activities.NewLaunchFailedError(
			"CreateFleet launched no instance for "+name+": InvalidParameterValue", rejected)
	case strings.Contains(name, "badclass"):
		return activities.LaunchResponse{}, activities.NewInvalidNodeClassError(req.NodeClassName, "spec.subnetSelectorTerms", "matched no subnet")
	case strings.Contains(name, "hold-launch"):
		hold(ctx)
	}
	launched, err := w.fakeWorld.Launch(ctx, req)
	launched.InstanceID = "i-" + name
	launched.ProviderID = "aws:///" + launched.Zone + "/" + launched.InstanceID
	return launched, err
}

func (w recordingWorld) WaitForRegistration(ctx context.Context, req activities.WaitForRegistrationRequest) (activities.WaitForRegistrationResponse, error) {
	if strings.Contains(req.NodeClaimName, "noregister") {
		select {
		case <-ctx.Done():
			return activities.WaitForRegistrationResponse{}, ctx.Err()
		case <-time.After(time.Until(req.Deadline)):
		}
		return activities.WaitForRegistrationResponse{}, activities.NewRegistrationTimeoutError(req.InstanceID, req.ProviderID, 2*time.Second)
	}
	return activities.WaitForRegistrationResponse{NodeName: "ip-" + req.NodeClaimName}, nil
}

func (w recordingWorld) WaitForInitialization(_ context.Context, req activities.WaitForInitializationRequest) (activities.WaitForInitializationResponse, error) {
	switch {
	case strings.Contains(req.NodeName, "noinit"):
		return activities.WaitForInitializationResponse{}, activities.NewInitializationTimeoutError(req.NodeName, "startup taint example.com/agent", time.Second)
	case strings.Contains(req.NodeName, "empty"):
		return activities.WaitForInitializationResponse{}, nil
	}
	return activities.WaitForInitializationResponse{NonDaemonSetPods: 1}, nil
}

func (w recordingWorld) AllowDisruption(ctx context.Context, req activities.AllowDisruptionRequest) (activities.AllowDisruptionResponse, error) {
	if strings.Contains(req.NodeName, "budget") && w.started.firstRefusal(req.NodeName) {
		w.started.markStarted(strings.TrimPrefix(req.NodeName, "ip-"), activities.AllowDisruptionActivity)
		return activities.AllowDisruptionResponse{Why: "budget of pool default allows 0 disruptions now", RetryAfter: time.Second}, nil
	}
	return w.fakeWorld.AllowDisruption(ctx, req)
}

func (w recordingWorld) Drain(ctx context.Context, req activities.DrainRequest) (activities.DrainResponse, error) {
	w.started.markStarted(strings.TrimPrefix(req.NodeName, "ip-"), activities.DrainActivity)
	if strings.Contains(req.NodeName, "hold-drain") && req.Voluntary {
		hold(ctx)
	}
	return w.fakeWorld.Drain(ctx, req)
}

func (w recordingWorld) TerminateInstance(ctx context.Context, req activities.TerminateInstanceRequest) (activities.TerminateInstanceResponse, error) {
	w.instanceActivityStarted(ctx, req.InstanceID, activities.TerminateInstanceActivity, "hold-term")
	if claim, ok := strings.CutPrefix(req.InstanceID, "i-"); ok {
		w.commands.terminated(claim) // no longer a candidate
	}
	return w.fakeWorld.TerminateInstance(ctx, req)
}

func (w recordingWorld) WaitForInstanceTerminated(ctx context.Context, req activities.WaitForInstanceTerminatedRequest) (activities.WaitForInstanceTerminatedResponse, error) {
	w.instanceActivityStarted(ctx, req.InstanceID, activities.WaitForInstanceTerminatedActivity, "hold-wait")
	return w.fakeWorld.WaitForInstanceTerminated(ctx, req)
}

// instanceActivityStarted marks activity started for the instance's node
// claim (instance ids are per node claim in this world, see Launch), and
// holds when the claim's name asks for it.
func (w recordingWorld) instanceActivityStarted(ctx context.Context, instanceID, activity, holdKeyword string) {
	claim, ok := strings.CutPrefix(instanceID, "i-")
	if !ok {
		return
	}
	w.started.markStarted(claim, activity)
	if strings.Contains(claim, holdKeyword) {
		hold(ctx)
	}
}

func (w recordingWorld) Plan(_ context.Context, req activities.PlanRequest) (activities.PlanResponse, error) {
	if len(req.PodKeys) == 0 {
		return activities.PlanResponse{}, nil
	}
	return activities.PlanResponse{Plans: []activities.NodeLaunchSpec{nodePlan("default", req.PodKeys...)}, PodsConsidered: len(req.PodKeys)}, nil
}

// recording is one server, its worker and what a scenario needs.
type recording struct {
	t        *testing.T
	ctx      context.Context
	c        client.Client
	started  *startedActivities
	commands *commandWorldOnServer
	dir      string
}

const recordingTaskQueue = "millwright"

// newRecording starts a server with the given dynamic config overrides and
// a worker running today's workflows on the recording world.
func newRecording(t *testing.T, ctx context.Context, dir string, overrides dynamicconfig.StaticClient) *recording {
	t.Helper()
	config := dynamicconfig.StaticClient{
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): []dynamicconfig.ConstrainedValue{{Value: true}},
	}
	for key, value := range overrides {
		config[key] = value
	}
	server := temporaltest.NewServer(temporaltest.WithT(t),
		temporaltest.WithBaseServerOptions(servertemporal.WithDynamicConfigClient(config)))
	c := server.GetDefaultClient()
	if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: server.GetDefaultNamespace(), SearchAttributes: SearchAttributeTypes(),
	}); err != nil {
		t.Fatalf("register search attributes: %v", err)
	}
	started := newStartedActivities()
	world := recordingWorld{started: started, commands: newCommandWorldOnServer(c)}
	server.NewWorker(recordingTaskQueue, func(registry worker.Registry) {
		Register(registry)
		activities.Register(registry, world)
		activities.RegisterDisruptionCommands(registry, world)
	})
	return &recording{t: t, ctx: ctx, c: c, started: started, commands: world.commands, dir: dir}
}

func (r *recording) start(id string, workflowType string, args ...any) client.WorkflowRun {
	r.t.Helper()
	run, err := r.c.ExecuteWorkflow(r.ctx, client.StartWorkflowOptions{ID: id, TaskQueue: recordingTaskQueue}, workflowType, args...)
	if err != nil {
		r.t.Fatalf("start %s: %v", id, err)
	}
	return run
}

func (r *recording) startNode(name string, options ...specOption) client.WorkflowRun {
	r.t.Helper()
	return r.start(NodeWorkflowID(testCluster, name), NodeWorkflowType, specNamed(name, options...), (*NodeState)(nil))
}

func (r *recording) signal(run client.WorkflowRun, name string, payload any) {
	r.t.Helper()
	signal(r.t, r.ctx, r.c, run.GetID(), name, payload)
}

func (r *recording) drainUpdate(run client.WorkflowRun, reason string) {
	r.t.Helper()
	handle, err := r.c.UpdateWorkflow(r.ctx, client.UpdateWorkflowOptions{
		WorkflowID: run.GetID(), UpdateName: UpdateDrain, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{DrainRequest{Reason: reason, Requester: "alice"}},
	})
	if err != nil {
		r.t.Fatalf("drain update: %v", err)
	}
	var drained DrainResult
	if err := handle.Get(r.ctx, &drained); err != nil || !drained.Accepted {
		r.t.Fatalf("drain update answered %+v, %v", drained, err)
	}
}

// awaitActivity waits until the node's activity started.
func (r *recording) awaitActivity(nodeClaim, activity string) {
	r.t.Helper()
	select {
	case <-r.started.channel(nodeClaim + "/" + activity):
	case <-r.ctx.Done():
		r.t.Fatalf("%s never started %s", nodeClaim, activity)
	}
}

func (r *recording) cancel(run client.WorkflowRun) {
	r.t.Helper()
	if err := r.c.CancelWorkflow(r.ctx, run.GetID(), run.GetRunID()); err != nil {
		r.t.Fatalf("cancel %s: %v", run.GetID(), err)
	}
}

func (r *recording) save(run client.WorkflowRun, name string) {
	r.t.Helper()
	save(r.t, r.ctx, r.c, run.GetID(), run.GetRunID(), filepath.Join(r.dir, name))
}

func TestRecordHistories(t *testing.T) {
	if !regexp.MustCompile(`^v\d+\.\d+(\.\d+)?$`).MatchString(*recordRelease) {
		t.Fatalf("-release=%q: want the release being recorded, like -release=v0.3", *recordRelease)
	}
	dir := filepath.Join("testdata", *recordRelease)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	t.Run("provisioner", func(t *testing.T) { recordProvisioner(newRecording(t, ctx, dir, nil)) })
	t.Run("nodes", func(t *testing.T) { recordNodes(newRecording(t, ctx, dir, nil)) })
	t.Run("disruption", func(t *testing.T) { recordDisruption(newRecording(t, ctx, dir, nil)) })
	t.Run("node continue-as-new", func(t *testing.T) {
		// A server that suggests continue-as-new early, so a Ready node
		// switches runs after a few signals.
		recordNodeContinueAsNew(newRecording(t, ctx, dir, dynamicconfig.StaticClient{
			dynamicconfig.HistoryCountSuggestContinueAsNew.Key(): []dynamicconfig.ConstrainedValue{{Value: 40}},
		}))
	})
}

// recordProvisioner: a start-up resync, then two batches of pods, then it
// continues as new; the next run keeps running to receive the nodes'
// signals until the recording ends.
func recordProvisioner(r *recording) {
	t, ctx, c := r.t, r.ctx, r.c
	provisioner := r.start(ProvisionerWorkflowID(testCluster), ProvisionerWorkflowType, ProvisionerInput{
		Cluster: testCluster, IdleWindow: 200 * time.Millisecond, MaxWindow: 2 * time.Second, ResyncInterval: -1, BatchesPerRun: 3,
	})
	waitFor(t, ctx, "provisioner's first batch", func() bool { return provisionerBatches(ctx, c, provisioner) >= 1 })
	r.signal(provisioner, SignalPodsPending, PodsPending{PodKeys: []string{"default/web-1", "default/web-2"}})
	r.signal(provisioner, SignalPodsPending, PodsPending{PodKeys: []string{"default/web-3"}})
	waitFor(t, ctx, "provisioner's second batch", func() bool { return provisionerBatches(ctx, c, provisioner) >= 2 })
	r.signal(provisioner, SignalReconcile, ReconcileRequest{Reason: "NodePool default changed"})
	var continued *workflow.ContinueAsNewError
	if err := provisioner.GetWithOptions(ctx, nil, client.WorkflowRunGetOptions{DisableFollowingRuns: true}); !errors.As(err, &continued) {
		t.Fatalf("provisioner's first run ended with %v, want continue-as-new", err)
	}
	r.save(provisioner, "provisioner_batches_and_continue_as_new")

	// The next run: a replan signal, a batch.
	next := c.GetWorkflow(ctx, provisioner.GetID(), "")
	r.signal(next, SignalReplan, ReplanRequest{NodeClaimName: "default-gone", PodKeys: []string{"default/web-4"}, Reason: "launch failed"})
	waitFor(t, ctx, "second run's replan batch", func() bool { return provisionerBatches(ctx, c, next) >= 4 })
	if err := c.TerminateWorkflow(ctx, next.GetID(), next.GetRunID(), "recording done"); err != nil {
		t.Fatalf("terminate provisioner: %v", err)
	}
	r.save(next, "provisioner_resumed_after_continue_as_new")
}

// recordNodes plays every way a node run ends, in parallel.
func recordNodes(r *recording) {
	t := r.t
	scenarios := []struct {
		file string
		name string
		spec []specOption
		// play acts on the running workflow; nil: it ends by itself.
		play   func(run client.WorkflowRun)
		reason TerminationReason
		// cancelled: the workflow ends Canceled.
		cancelled bool
	}{
		{
			file: "node_drained_by_update", name: "default-update", spec: []specOption{terminationGracePeriod(10 * time.Minute)},
			play: func(run client.WorkflowRun) {
				r.waitForPhase(run, PhaseReady)
				r.drainUpdate(run, "kernel upgrade")
			},
			reason: ReasonDrained,
		},
		{
			file: "node_drained_by_signal", name: "default-drainsignal",
			play: func(run client.WorkflowRun) {
				r.waitForPhase(run, PhaseReady)
				r.signal(run, SignalDrain, DrainRequest{Reason: "kernel upgrade", Requester: "ui"})
			},
			reason: ReasonDrained,
		},
		// Insufficient capacity for the first option, then empty for a second.
		{file: "node_ice_fallback_then_empty", name: "default-ice-empty", spec: []specOption{consolidateAfter(time.Second)}, reason: ReasonEmpty},
		{file: "node_insufficient_capacity", name: "default-ice-all", reason: ReasonInsufficientCapacity},
		{file: "node_launch_failed", name: "default-launchfail", reason: ReasonLaunchFailed},
		{file: "node_invalid_nodeclass", name: "default-badclass", reason: ReasonLaunchFailed},
		{
			// Since refused-empty-waits a refused empty node hands its
			// emptiness to the disruption workflow and waits (v0.3 recorded
			// node_empty_budget_refused_then_allowed); a person drains it.
			file: "node_empty_budget_refused_then_drained", name: "default-budget-empty", spec: []specOption{consolidateAfter(time.Second)},
			play: func(run client.WorkflowRun) {
				r.awaitActivity("default-budget-empty", activities.AllowDisruptionActivity)
				r.drainUpdate(run, "after the budget refused")
			},
			reason: ReasonDrained,
		},
		{file: "node_expired", name: "default-expire", spec: []specOption{expireAfter(3 * time.Second)}, reason: ReasonExpired},
		{
			// A spot interruption, after pods came and went.
			file: "node_spot_interruption", name: "default-spot", spec: []specOption{expireAfter(24 * time.Hour)},
			play: func(run client.WorkflowRun) {
				r.waitForPhase(run, PhaseReady)
				r.signal(run, SignalPodsChanged, PodsChanged{NonDaemonSetPods: 3, ObservedAt: time.Now()})
				r.signal(run, SignalInterruption, Interruption{Kind: InterruptionRebalance, EventID: "rebalance-1"})
				r.signal(run, SignalInterruption, Interruption{Kind: InterruptionSpotWarning, EventID: "spot-1", Deadline: time.Now().Add(2 * time.Minute)})
			},
			reason: ReasonInterrupted,
		},
		{
			file: "node_deleted", name: "default-deleted", spec: []specOption{terminationGracePeriod(time.Minute)},
			play: func(run client.WorkflowRun) {
				r.waitForPhase(run, PhaseReady)
				r.signal(run, SignalDrain, DrainRequest{Requester: "nobody"}) // ignored: no reason
				r.signal(run, SignalNodeDeleted, NodeDeleted{DeletionTimestamp: time.Now()})
			},
			reason: ReasonDeleted,
		},
		{
			file: "node_interrupted_during_drain", name: "default-hold-drain", spec: []specOption{terminationGracePeriod(time.Hour)},
			play: func(run client.WorkflowRun) {
				r.waitForPhase(run, PhaseReady)
				r.drainUpdate(run, "kernel upgrade")
				r.awaitActivity("default-hold-drain", activities.DrainActivity)
				r.signal(run, SignalInterruption, Interruption{Kind: InterruptionSpotWarning, EventID: "spot-2", Deadline: time.Now().Add(2 * time.Minute)})
			},
			reason: ReasonDrained,
		},
		{
			file: "node_registration_timeout", name: "default-noregister",
			spec:   []specOption{func(s *activities.NodeLaunchSpec) { s.RegistrationTimeout = 2 * time.Second }},
			reason: ReasonRegistrationTimeout,
		},
		{file: "node_initialization_timeout", name: "default-noinit", reason: ReasonInitializationTimeout},
		{
			// The state-change event of its own TerminateInstances.
			file: "node_own_termination_state_change", name: "default-hold-wait",
			play: func(run client.WorkflowRun) {
				r.waitForPhase(run, PhaseReady)
				r.drainUpdate(run, "kernel upgrade")
				r.awaitActivity("default-hold-wait", activities.WaitForInstanceTerminatedActivity)
				r.signal(run, SignalInterruption, Interruption{Kind: InterruptionStateChange, EventID: "state-1", EventTime: time.Now(), Detail: "shutting-down"})
			},
			reason: ReasonDrained,
		},
		{
			file: "node_cancelled_when_ready", name: "default-cancel-ready",
			play: func(run client.WorkflowRun) {
				r.waitForPhase(run, PhaseReady)
				r.cancel(run)
			},
			reason: ReasonCancelled, cancelled: true,
		},
		{
			file: "node_cancelled_during_launch", name: "default-hold-launch",
			play: func(run client.WorkflowRun) {
				r.awaitActivity("default-hold-launch", activities.LaunchActivity)
				r.cancel(run)
			},
			reason: ReasonCancelled, cancelled: true,
		},
		{
			file: "node_cancelled_during_terminate", name: "default-hold-term",
			play: func(run client.WorkflowRun) {
				r.waitForPhase(run, PhaseReady)
				r.drainUpdate(run, "kernel upgrade")
				r.awaitActivity("default-hold-term", activities.TerminateInstanceActivity)
				r.cancel(run)
			},
			reason: ReasonDrained, cancelled: true,
		},
	}
	var wg sync.WaitGroup
	for _, s := range scenarios {
		run := r.startNode(s.name, s.spec...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.play != nil {
				s.play(run)
			}
			r.finish(run, s.reason, s.cancelled)
			r.save(run, s.file)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// recordNodeContinueAsNew: a Ready node that becomes empty (a long
// consolidateAfter) continues as new on the server's suggestion; the next
// run is drained by the update.
func recordNodeContinueAsNew(r *recording) {
	t, ctx := r.t, r.ctx
	name := "default-continue"
	run := r.startNode(name, consolidateAfter(time.Hour), expireAfter(24*time.Hour))
	r.waitForPhase(run, PhaseReady)
	r.signal(run, SignalPodsChanged, PodsChanged{NonDaemonSetPods: 0, ObservedAt: time.Now()})
	var continued *workflow.ContinueAsNewError
	for i := 0; ; i++ {
		// Each signal grows the history until the server suggests a new run.
		err := run.GetWithOptions(ctxWithTimeout(ctx, 200*time.Millisecond), nil, client.WorkflowRunGetOptions{DisableFollowingRuns: true})
		if errors.As(err, &continued) {
			break
		}
		if i == 100 {
			t.Fatalf("node never continued as new: %v", err)
		}
		// Alternate so the node is not left with pods (its TTL restarts).
		r.signal(run, SignalPodsChanged, PodsChanged{NonDaemonSetPods: i % 2, ObservedAt: time.Now()})
	}
	r.save(run, "node_continue_as_new")

	next := r.c.GetWorkflow(ctx, run.GetID(), "")
	r.waitForPhase(next, PhaseReady)
	r.drainUpdate(next, "kernel upgrade")
	r.finish(next, ReasonDrained, false)
	r.save(next, "node_resumed_after_continue_as_new")
}

func ctxWithTimeout(parent context.Context, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(parent, d)
	time.AfterFunc(d, cancel)
	return ctx
}

func specNamed(name string, options ...specOption) activities.NodeLaunchSpec {
	spec := nodeSpec(options...)
	spec.NodeClaimName = name
	return spec
}

func signal(t *testing.T, ctx context.Context, c client.Client, id, name string, payload any) {
	t.Helper()
	if err := c.SignalWorkflow(ctx, id, "", name, payload); err != nil {
		t.Errorf("signal %s to %s: %v", name, id, err)
	}
}

// waitFor polls condition until it holds or the test's context ends.
func waitFor(t *testing.T, ctx context.Context, what string, condition func() bool) {
	t.Helper()
	for !condition() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func provisionerBatches(ctx context.Context, c client.Client, run client.WorkflowRun) int64 {
	value, err := c.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), QueryProvisionerState)
	if err != nil {
		return 0
	}
	var view ProvisionerStateView
	if value.Get(&view) != nil {
		return 0
	}
	return view.Batches
}

func (r *recording) waitForPhase(run client.WorkflowRun, phase Phase) {
	r.t.Helper()
	waitFor(r.t, r.ctx, run.GetID()+" "+string(phase), func() bool {
		value, err := r.c.QueryWorkflow(r.ctx, run.GetID(), run.GetRunID(), QueryState)
		if err != nil {
			return false
		}
		var view NodeStateView
		return value.Get(&view) == nil && view.Phase == phase
	})
}

// finish waits for the run's end: a result terminated for reason, or (when
// cancelled) a Canceled error carrying one.
func (r *recording) finish(run client.WorkflowRun, reason TerminationReason, cancelled bool) {
	r.t.Helper()
	var result NodeResult
	err := run.Get(r.ctx, &result)
	if cancelled {
		var canceledErr *temporal.CanceledError
		if !errors.As(err, &canceledErr) {
			r.t.Errorf("%s ended with %v, want Canceled", run.GetID(), err)
			return
		}
		if canceledErr.HasDetails() {
			_ = canceledErr.Details(&result)
		}
	} else if err != nil {
		r.t.Errorf("%s: %v", run.GetID(), err)
		return
	}
	if result.Termination.Reason != reason {
		r.t.Errorf("%s terminated for %s, want %s", run.GetID(), result.Termination.Reason, reason)
	}
}

func save(t *testing.T, ctx context.Context, c client.Client, workflowID, runID, name string) {
	t.Helper()
	var history historypb.History
	iterator := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iterator.HasNext() {
		event, err := iterator.Next()
		if err != nil {
			t.Errorf("history of %s: %v", workflowID, err)
			return
		}
		history.Events = append(history.Events, event)
	}
	data, err := temporalproto.CustomJSONMarshalOptions{Indent: " "}.Marshal(&history)
	if err != nil {
		t.Error(err)
		return
	}
	var compressed bytes.Buffer
	writer := gzip.NewWriter(&compressed)
	if _, err := writer.Write(data); err != nil {
		t.Error(err)
		return
	}
	if err := writer.Close(); err != nil {
		t.Error(err)
		return
	}
	path := name + ".json.gz"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Error(err)
		return
	}
	if err := os.WriteFile(path, compressed.Bytes(), 0o644); err != nil {
		t.Error(err)
		return
	}
	t.Logf("recorded %s (%d events)", path, len(history.Events))
}
