//go:build recordhistories

package workflows

// Records the histories TestReplayRecordedHistories replays, on a real
// Temporal server (go.temporal.io/server/temporaltest, in process). It is
// behind a build tag because it compiles the whole server; run it after a
// deliberate, versioned workflow change:
//
//	go test -tags recordhistories -run TestRecordHistories ./workflows/

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"

	"github.com/millwright/millwright/activities"
)

// recordingWorld is fakeWorld with behaviour keyed on the node claim name,
// so one worker plays every scenario: "ice" launches fail for the first
// option, "noregister" never registers, "empty" nodes start without pods.
type recordingWorld struct{ fakeWorld }

func (w recordingWorld) Launch(ctx context.Context, req activities.LaunchRequest) (activities.LaunchResponse, error) {
	if strings.Contains(req.NodeClaimName, "ice") && len(req.Options) > 1 {
		first := req.Options[0]
		var failed []activities.OfferingKey
		for _, o := range first.Offerings {
			failed = append(failed, activities.OfferingKey{InstanceType: first.Name, Zone: o.Zone, CapacityType: o.CapacityType})
		}
		return activities.LaunchResponse{}, activities.NewInsufficientCapacityError("InsufficientInstanceCapacity", failed)
	}
	return w.fakeWorld.Launch(ctx, req)
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
	if strings.Contains(req.NodeName, "empty") {
		return activities.WaitForInitializationResponse{}, nil
	}
	return activities.WaitForInitializationResponse{NonDaemonSetPods: 1}, nil
}

func (w recordingWorld) Plan(_ context.Context, req activities.PlanRequest) (activities.PlanResponse, error) {
	if len(req.PodKeys) == 0 {
		return activities.PlanResponse{}, nil
	}
	return activities.PlanResponse{Plans: []activities.NodeLaunchSpec{nodePlan("default", req.PodKeys...)}, PodsConsidered: len(req.PodKeys)}, nil
}

func TestRecordHistories(t *testing.T) {
	server := temporaltest.NewServer(temporaltest.WithT(t))
	c := server.GetDefaultClient()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: server.GetDefaultNamespace(), SearchAttributes: SearchAttributeTypes(),
	}); err != nil {
		t.Fatalf("register search attributes: %v", err)
	}
	const taskQueue = "millwright"
	server.NewWorker(taskQueue, func(registry worker.Registry) {
		Register(registry)
		activities.Register(registry, recordingWorld{})
	})
	start := func(id string, workflowType string, args ...any) client.WorkflowRun {
		t.Helper()
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, workflowType, args...)
		if err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
		return run
	}

	// The provisioner: a start-up resync, then two batches of pods, then it
	// continues as new; it keeps running to receive the nodes' signals.
	provisioner := start(ProvisionerWorkflowID(testCluster), ProvisionerWorkflowType, ProvisionerInput{
		Cluster: testCluster, IdleWindow: 200 * time.Millisecond, MaxWindow: 2 * time.Second, ResyncInterval: -1, BatchesPerRun: 3,
	})
	waitFor(t, ctx, "provisioner's first batch", func() bool { return provisionerBatches(ctx, c, provisioner) >= 1 })
	signal(t, ctx, c, provisioner.GetID(), SignalPodsPending, PodsPending{PodKeys: []string{"default/web-1", "default/web-2"}})
	signal(t, ctx, c, provisioner.GetID(), SignalPodsPending, PodsPending{PodKeys: []string{"default/web-3"}})
	waitFor(t, ctx, "provisioner's second batch", func() bool { return provisionerBatches(ctx, c, provisioner) >= 2 })
	signal(t, ctx, c, provisioner.GetID(), SignalReconcile, ReconcileRequest{Reason: "NodePool default changed"})
	var continued *workflow.ContinueAsNewError
	if err := provisioner.GetWithOptions(ctx, nil, client.WorkflowRunGetOptions{DisableFollowingRuns: true}); !errors.As(err, &continued) {
		t.Fatalf("provisioner's first run ended with %v, want continue-as-new", err)
	}
	save(t, ctx, c, provisioner.GetID(), provisioner.GetRunID(), "provisioner_batches_and_continue_as_new")

	// A node drained by the validated update.
	updated := start(NodeWorkflowID(testCluster, "default-update"), NodeWorkflowType, specNamed("default-update", terminationGracePeriod(10*time.Minute)))
	waitForPhase(t, ctx, c, updated, PhaseReady)
	handle, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: updated.GetID(), UpdateName: UpdateDrain, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{DrainRequest{Reason: "kernel upgrade", Requester: "alice"}},
	})
	if err != nil {
		t.Fatalf("drain update: %v", err)
	}
	var drained DrainResult
	if err := handle.Get(ctx, &drained); err != nil || !drained.Accepted {
		t.Fatalf("drain update answered %+v, %v", drained, err)
	}
	finish(t, ctx, updated, ReasonDrained)
	save(t, ctx, c, updated.GetID(), updated.GetRunID(), "node_drained_by_update")

	// Insufficient capacity for the first option, then empty for a second.
	emptied := start(NodeWorkflowID(testCluster, "default-ice-empty"), NodeWorkflowType, specNamed("default-ice-empty", consolidateAfter(time.Second)))
	finish(t, ctx, emptied, ReasonEmpty)
	save(t, ctx, c, emptied.GetID(), emptied.GetRunID(), "node_ice_fallback_then_empty")

	// A spot interruption, after pods came and went.
	interrupted := start(NodeWorkflowID(testCluster, "default-spot"), NodeWorkflowType, specNamed("default-spot", expireAfter(24*time.Hour)))
	waitForPhase(t, ctx, c, interrupted, PhaseReady)
	signal(t, ctx, c, interrupted.GetID(), SignalPodsChanged, PodsChanged{NonDaemonSetPods: 3, ObservedAt: time.Now()})
	signal(t, ctx, c, interrupted.GetID(), SignalInterruption, Interruption{Kind: InterruptionRebalance, EventID: "rebalance-1"})
	signal(t, ctx, c, interrupted.GetID(), SignalInterruption, Interruption{Kind: InterruptionSpotWarning, EventID: "spot-1", Deadline: time.Now().Add(2 * time.Minute)})
	finish(t, ctx, interrupted, ReasonInterrupted)
	save(t, ctx, c, interrupted.GetID(), interrupted.GetRunID(), "node_spot_interruption")

	// Deleted with kubectl.
	deleted := start(NodeWorkflowID(testCluster, "default-deleted"), NodeWorkflowType, specNamed("default-deleted", terminationGracePeriod(time.Minute)))
	waitForPhase(t, ctx, c, deleted, PhaseReady)
	signal(t, ctx, c, deleted.GetID(), SignalDrain, DrainRequest{Requester: "nobody"}) // ignored: no reason
	signal(t, ctx, c, deleted.GetID(), SignalNodeDeleted, NodeDeleted{DeletionTimestamp: time.Now()})
	finish(t, ctx, deleted, ReasonDeleted)
	save(t, ctx, c, deleted.GetID(), deleted.GetRunID(), "node_deleted")

	// Never registers.
	lost := start(NodeWorkflowID(testCluster, "default-noregister"), NodeWorkflowType,
		specNamed("default-noregister", func(s *activities.NodeLaunchSpec) { s.RegistrationTimeout = 2 * time.Second }))
	finish(t, ctx, lost, ReasonRegistrationTimeout)
	save(t, ctx, c, lost.GetID(), lost.GetRunID(), "node_registration_timeout")

	if err := c.TerminateWorkflow(ctx, provisioner.GetID(), "", "recording done"); err != nil {
		t.Fatalf("terminate provisioner: %v", err)
	}
}

func specNamed(name string, options ...specOption) activities.NodeLaunchSpec {
	spec := nodeSpec(options...)
	spec.NodeClaimName = name
	return spec
}

func signal(t *testing.T, ctx context.Context, c client.Client, id, name string, payload any) {
	t.Helper()
	if err := c.SignalWorkflow(ctx, id, "", name, payload); err != nil {
		t.Fatalf("signal %s to %s: %v", name, id, err)
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

func waitForPhase(t *testing.T, ctx context.Context, c client.Client, run client.WorkflowRun, phase Phase) {
	t.Helper()
	waitFor(t, ctx, run.GetID()+" "+string(phase), func() bool {
		value, err := c.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), QueryState)
		if err != nil {
			return false
		}
		var view NodeStateView
		return value.Get(&view) == nil && view.Phase == phase
	})
}

func finish(t *testing.T, ctx context.Context, run client.WorkflowRun, reason TerminationReason) {
	t.Helper()
	var result NodeResult
	if err := run.Get(ctx, &result); err != nil {
		t.Fatalf("%s: %v", run.GetID(), err)
	}
	if result.Termination.Reason != reason {
		t.Fatalf("%s terminated for %s, want %s", run.GetID(), result.Termination.Reason, reason)
	}
}

func save(t *testing.T, ctx context.Context, c client.Client, workflowID, runID, name string) {
	t.Helper()
	var history historypb.History
	iterator := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iterator.HasNext() {
		event, err := iterator.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", workflowID, err)
		}
		history.Events = append(history.Events, event)
	}
	data, err := temporalproto.CustomJSONMarshalOptions{Indent: " "}.Marshal(&history)
	if err != nil {
		t.Fatal(err)
	}
	var compressed bytes.Buffer
	writer := gzip.NewWriter(&compressed)
	if _, err := writer.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := writer.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", name+".json.gz")
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, compressed.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s (%d events)", path, len(history.Events))
}
