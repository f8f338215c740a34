package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/millwright/millwright/activities"
)

type provisionerOption func(*ProvisionerInput)

// provisionerInput is a continued run (so no start-up resync batch) with
// resync disabled that continues as new after one batch: each test ends
// when its batches are done, and the carried state is what it inspects.
func provisionerInput(options ...provisionerOption) ProvisionerInput {
	input := ProvisionerInput{
		Cluster:        testCluster,
		ResyncInterval: -1,
		BatchesPerRun:  1,
		State:          &ProvisionerState{Version: provisionerStateVersion},
	}
	for _, option := range options {
		option(&input)
	}
	return input
}

func batches(n int) provisionerOption {
	return func(in *ProvisionerInput) { in.BatchesPerRun = n }
}

func windows(idle, maxWindow time.Duration) provisionerOption {
	return func(in *ProvisionerInput) { in.IdleWindow, in.MaxWindow = idle, maxWindow }
}

func newProvisionerHarness(t *testing.T) *harness {
	return newHarness(t, ProvisionerWorkflowID(testCluster))
}

// runProvisioner runs until the provisioner continues as new and returns the
// input it continued with.
func (h *harness) runProvisioner(input ProvisionerInput) ProvisionerInput {
	h.t.Helper()
	h.env.ExecuteWorkflow(ProvisionerWorkflowType, input)
	var next ProvisionerInput
	continueAsNewInput(h.t, h.env.GetWorkflowError(), &next)
	if next.State == nil {
		h.t.Fatal("continued as new without carrying state")
	}
	return next
}

func (h *harness) planRequests() []*activities.PlanRequest {
	var requests []*activities.PlanRequest
	for _, call := range h.rec.calls(activities.PlanActivity) {
		requests = append(requests, call.(*activities.PlanRequest))
	}
	return requests
}

func podKeys(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s/pod-%02d", prefix, i)
	}
	return keys
}

func nodePlan(pool string, pods ...string) activities.NodeLaunchSpec {
	spec := nodeSpec()
	spec.Cluster, spec.NodeClaimName, spec.NodePool, spec.PodKeys = "", "", pool, pods
	return spec
}

func TestBatchingWindows(t *testing.T) {
	cases := []struct {
		name        string
		idle, max   time.Duration
		signalsAt   []time.Duration
		sameKey     bool // every signal names the same pod
		wantBatchAt time.Duration
		wantPods    int
	}{
		{
			name:        "closes after a second without a new pod",
			signalsAt:   []time.Duration{time.Second, 1500 * time.Millisecond, 2300 * time.Millisecond},
			wantBatchAt: 3300 * time.Millisecond,
			wantPods:    3,
		},
		{
			name:        "closes ten seconds after the first pod however busy",
			signalsAt:   every(700*time.Millisecond, time.Second, 30*time.Second),
			wantBatchAt: 11 * time.Second,
			wantPods:    15, // 1s, 1.7s … 10.8s
		},
		{
			name:        "repeats of a pending pod do not keep the window open",
			signalsAt:   every(700*time.Millisecond, time.Second, 30*time.Second),
			sameKey:     true,
			wantBatchAt: 2 * time.Second,
			wantPods:    1,
		},
		{
			name:        "windows are configurable",
			idle:        3 * time.Second,
			max:         5 * time.Second,
			signalsAt:   []time.Duration{time.Second, 3 * time.Second, 5500 * time.Millisecond, 7 * time.Second},
			wantBatchAt: 6 * time.Second,
			wantPods:    3,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newProvisionerHarness(t)
			for i, at := range tc.signalsAt {
				if tc.sameKey {
					i = 0
				}
				h.signal(at, SignalPodsPending, PodsPending{PodKeys: []string{fmt.Sprintf("default/pod-%02d", i)}})
			}
			next := h.runProvisioner(provisionerInput(windows(tc.idle, tc.max)))

			requests := h.planRequests()
			if len(requests) != 1 {
				t.Fatalf("planned %d time(s), want one batch", len(requests))
			}
			if got := len(requests[0].PodKeys); got != tc.wantPods {
				t.Errorf("batch planned %d pod(s), want %d: %v", got, tc.wantPods, requests[0].PodKeys)
			}
			if at := next.State.LastBatch.At; !at.Equal(t0.Add(tc.wantBatchAt)) {
				t.Errorf("batch closed at t0+%s, want t0+%s", at.Sub(t0), tc.wantBatchAt)
			}
			for _, line := range []string{"Waiting to batch additional pods", fmt.Sprintf("Found %d provisionable pods", tc.wantPods)} {
				if !h.rec.hasLog(line) {
					t.Errorf("missing log line %q; got %q", line, h.rec.logLines())
				}
			}
		})
	}
}

func every(step, from, to time.Duration) []time.Duration {
	var times []time.Duration
	for at := from; at <= to; at += step {
		times = append(times, at)
	}
	return times
}

func TestBatchStartsOneNodeWorkflowPerPlan(t *testing.T) {
	h := newProvisionerHarness(t)
	h.signal(time.Second, SignalPodsPending, PodsPending{PodKeys: []string{"default/web-1", "default/web-2", "ml/train-1", "default/huge"}})
	h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).Return(activities.PlanResponse{
		Plans:          []activities.NodeLaunchSpec{nodePlan("default", "default/web-1", "default/web-2"), nodePlan("gpu", "ml/train-1")},
		PodsConsidered: 4,
		Unschedulable:  []activities.UnschedulablePod{{PodKey: "default/huge", Reason: "no instance type has 4096 GiB memory"}},
		Skipped:        []activities.SkippedObject{{Kind: "NodePool", Name: "legacy", Reason: "spec.template.spec.nodeClassRef.name: Required value"}},
	}, nil)

	next := h.runProvisioner(provisionerInput())

	starts := h.rec.calls(activities.StartNodeWorkflowsActivity)
	if len(starts) != 1 {
		t.Fatalf("StartNodeWorkflows called %d time(s), want once for the batch", len(starts))
	}
	request := starts[0].(*activities.StartNodeWorkflowsRequest)
	if request.WorkflowType != NodeWorkflowType || request.TaskQueue != "millwright" || len(request.Nodes) != 2 {
		t.Fatalf("start request = %+v", request)
	}
	seen := map[string]bool{}
	for i, node := range request.Nodes {
		pool := []string{"default", "gpu"}[i]
		name := node.Spec.NodeClaimName
		if !strings.HasPrefix(name, pool+"-") || len(name) != len(pool)+9 || seen[name] {
			t.Errorf("node %d named %q, want a distinct %s-xxxxxxxx", i, name, pool)
		}
		seen[name] = true
		if node.Spec.Cluster != testCluster || node.WorkflowID != NodeWorkflowID(testCluster, name) {
			t.Errorf("node %d: cluster %q, workflow id %q", i, node.Spec.Cluster, node.WorkflowID)
		}
		if err := node.Spec.Validate(); err != nil {
			t.Errorf("node %d spec is not launchable: %v", i, err)
		}
	}
	if len(next.State.InFlight) != 2 || next.State.InFlight[0].NodeClaimName != request.Nodes[0].Spec.NodeClaimName ||
		!slices.Equal(next.State.InFlight[0].InstanceTypes, []string{"m5.large", "m5.xlarge"}) {
		t.Errorf("in flight = %+v, want both started nodes", next.State.InFlight)
	}
	summary := next.State.LastBatch
	if summary.Plans != 2 || summary.Started != 2 || summary.Unschedulable != 1 || summary.PodsConsidered != 4 || summary.Error != "" {
		t.Errorf("batch summary = %+v", summary)
	}
	for _, line := range []string{
		"Computed packing for 2 pod(s) with instance type option(s) [m5.large m5.xlarge]",
		"Computed packing for 1 pod(s) with instance type option(s) [m5.large m5.xlarge]",
		"Pod is unschedulable",
		"NodePool legacy skipped by planning: spec.template.spec.nodeClassRef.name: Required value",
	} {
		if !h.rec.hasLog(line) {
			t.Errorf("missing log line %q; got %q", line, h.rec.logLines())
		}
	}
}

func TestNodeClaimNamesAreDeterministic(t *testing.T) {
	name := NodeClaimName("default", "run-1", 7, 0)
	if again := NodeClaimName("default", "run-1", 7, 0); again != name {
		t.Fatalf("same batch and index named %q then %q", name, again)
	}
	others := []string{
		NodeClaimName("default", "run-1", 7, 1),
		NodeClaimName("default", "run-1", 8, 0),
		NodeClaimName("default", "run-2", 7, 0),
	}
	for _, other := range others {
		if other == name {
			t.Errorf("%q collides with another batch, index or provisioner", other)
		}
	}
	if !strings.HasPrefix(name, "default-") || strings.Trim(name[len("default-"):], nodeClaimSuffixAlphabet) != "" {
		t.Errorf("name %q is not <pool>-<suffix from %s>", name, nodeClaimSuffixAlphabet)
	}
}

func TestInFlightNodesAreReportedUntilSettled(t *testing.T) {
	h := newProvisionerHarness(t)
	h.signal(time.Second, SignalPodsPending, PodsPending{PodKeys: []string{"default/a"}})
	h.signal(time.Minute, SignalPodsPending, PodsPending{PodKeys: []string{"default/b"}})
	h.signal(2*time.Minute, SignalPodsPending, PodsPending{PodKeys: []string{"default/c"}})
	h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).
		Return(activities.PlanResponse{Plans: []activities.NodeLaunchSpec{nodePlan("default", "default/a")}}, nil).Once()
	var inFlightName string
	h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req activities.PlanRequest) (activities.PlanResponse, error) {
			if len(req.InFlight) != 1 {
				return activities.PlanResponse{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("in flight %+v, want the first node", req.InFlight), "Test", nil)
			}
			inFlightName = req.InFlight[0].NodeClaimName
			// Its Node registered: the planner settles it.
			return activities.PlanResponse{Settled: []string{inFlightName}, PlacedOnExisting: 1}, nil
		}).Once()
	h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).Return(activities.PlanResponse{PlacedOnExisting: 1}, nil).Once()

	next := h.runProvisioner(provisionerInput(batches(3)))

	requests := h.planRequests()
	if len(requests) != 3 {
		t.Fatalf("planned %d batch(es), want 3", len(requests))
	}
	if got := requests[1].InFlight; len(got) != 1 || !slices.Equal(got[0].PodKeys, []string{"default/a"}) {
		t.Errorf("second batch in flight = %+v, want the node started for default/a", got)
	}
	if len(requests[2].InFlight) != 0 || len(next.State.InFlight) != 0 {
		t.Errorf("settled node still in flight: %+v", requests[2].InFlight)
	}
	if next.State.Batches != 3 || next.State.LastBatch.Error != "" {
		t.Errorf("state = %+v", next.State)
	}
}

func TestReplanSignals(t *testing.T) {
	h := newProvisionerHarness(t)
	unavailable := activities.UnavailableOffering{
		OfferingKey: activities.OfferingKey{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: activities.CapacityTypeSpot},
		Until:       t0.Add(3 * time.Minute),
	}
	input := provisionerInput(batches(2))
	input.State.InFlight = []activities.InFlightNode{{NodeClaimName: "default-failed", NodePool: "default", PodKeys: []string{"default/a"}, StartedAt: t0}}
	h.signal(time.Second, SignalReplan, ReplanRequest{
		NodeClaimName: "default-failed", PodKeys: []string{"default/a"},
		UnavailableOfferings: []activities.UnavailableOffering{unavailable}, Reason: "insufficient capacity",
	})
	h.signal(1500*time.Millisecond, SignalReplan, ReplanRequest{NodeClaimName: "default-spot", DisruptedNodes: []string{"ip-10-0-0-9"}, Reason: "interrupted: spot-warning"})
	h.signal(10*time.Minute, SignalReconcile, ReconcileRequest{Reason: "NodePool gpu created"})

	next := h.runProvisioner(input)

	requests := h.planRequests()
	if len(requests) != 2 {
		t.Fatalf("planned %d batch(es), want 2", len(requests))
	}
	first := requests[0]
	if !slices.Equal(first.PodKeys, []string{"default/a"}) || !slices.Equal(first.DisruptedNodes, []string{"ip-10-0-0-9"}) ||
		len(first.UnavailableOfferings) != 1 || first.UnavailableOfferings[0].OfferingKey != unavailable.OfferingKey || len(first.InFlight) != 0 {
		t.Errorf("first batch = %+v, want the re-planned pod, the disrupted node, the unavailable offering and nothing in flight", first)
	}
	second := requests[1]
	if len(second.PodKeys) != 0 || len(second.UnavailableOfferings) != 0 {
		t.Errorf("second batch = %+v, want a pod-less reconcile with the expired offering forgotten", second)
	}
	if len(next.State.ReconcileReasons) != 0 {
		t.Errorf("reconcile reasons not consumed: %v", next.State.ReconcileReasons)
	}
}

// Signals that arrive while a batch is planning are not read until the run
// ends; continuing as new must carry every one of them.
func TestProvisionerContinuesAsNewWithoutLosingSignals(t *testing.T) {
	cases := []struct {
		name    string
		options []provisionerOption
		setup   func(h *harness)
	}{
		{name: "after its batch budget", options: []provisionerOption{batches(1)}},
		{
			name:    "when the server suggests it",
			options: []provisionerOption{batches(1000)},
			setup:   func(h *harness) { h.at(3*time.Second, func() { h.env.SetContinueAsNewSuggested(true) }) },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newProvisionerHarness(t)
			h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).
				Return(activities.PlanResponse{PlacedOnExisting: 1}, nil).After(5 * time.Second)
			h.signal(time.Second, SignalPodsPending, PodsPending{PodKeys: []string{"default/a"}})
			// The batch closes at 2s and plans until 7s; all of these arrive
			// meanwhile.
			h.at(3*time.Second, func() {
				h.env.SignalWorkflow(SignalPodsPending, PodsPending{PodKeys: []string{"default/b", "default/c"}})
				h.env.SignalWorkflow(SignalReplan, ReplanRequest{NodeClaimName: "default-x", DisruptedNodes: []string{"ip-10-0-0-7"}, Reason: "interrupted"})
			})
			h.at(6*time.Second, func() {
				h.env.SignalWorkflowSkippingWorkflowTask(SignalReconcile, ReconcileRequest{Reason: "NodePool default changed"})
				h.env.SignalWorkflowSkippingWorkflowTask(SignalPodsPending, PodsPending{PodKeys: []string{"default/d", "default/b"}})
			})
			if tc.setup != nil {
				tc.setup(h)
			}

			next := h.runProvisioner(provisionerInput(tc.options...))

			carried := next.State
			if !slices.Equal(carried.PendingPods, []string{"default/b", "default/c", "default/d"}) {
				t.Errorf("carried pods = %v, want b, c and d", carried.PendingPods)
			}
			if !slices.Equal(carried.DisruptedNodes, []string{"ip-10-0-0-7"}) {
				t.Errorf("carried disrupted nodes = %v", carried.DisruptedNodes)
			}
			if !slices.Equal(carried.ReconcileReasons, []string{"default-x: interrupted", "NodePool default changed"}) {
				t.Errorf("carried reconcile reasons = %v", carried.ReconcileReasons)
			}
			if carried.Batches != 1 || next.Cluster != testCluster {
				t.Errorf("carried batches %d, cluster %q", carried.Batches, next.Cluster)
			}
		})
	}
}

func TestNextRunPlansCarriedWorkFirst(t *testing.T) {
	h := newProvisionerHarness(t)
	input := provisionerInput()
	input.State.PendingPods = []string{"default/b"}
	input.State.DisruptedNodes = []string{"ip-10-0-0-7"}

	h.runProvisioner(input)

	requests := h.planRequests()
	if len(requests) != 1 || !slices.Equal(requests[0].PodKeys, []string{"default/b"}) || !slices.Equal(requests[0].DisruptedNodes, []string{"ip-10-0-0-7"}) {
		t.Errorf("plan requests = %+v, want the carried work planned", requests)
	}
}

func TestFreshProvisionerResyncsAtOnceAndPeriodically(t *testing.T) {
	h := newProvisionerHarness(t)
	input := provisionerInput(batches(2))
	input.State = nil
	input.ResyncInterval = 5 * time.Minute

	next := h.runProvisioner(input)

	requests := h.planRequests()
	if len(requests) != 2 || !requests[0].AllPending || !requests[1].AllPending {
		t.Fatalf("plan requests = %+v, want two full resyncs", requests)
	}
	if at := next.State.LastBatch.At; !at.Equal(t0.Add(5 * time.Minute)) {
		t.Errorf("second resync at t0+%s, want t0+5m", at.Sub(t0))
	}
	if h.rec.hasLog("Waiting to batch additional pods") {
		t.Error("a resync alone must not wait for a batch window")
	}
}

// A batch that placed pods in the room of existing or in-flight nodes
// plans every pending pod again 30 s later (Karpenter re-runs while a pod
// is provisionable): should that room go before kube-scheduler binds them,
// no event of theirs would bring them back. A batch that placed none
// leaves the 5-minute resync as it was.
func TestPodsPlacedInRoomArePlannedAgainSoon(t *testing.T) {
	for _, tc := range []struct {
		name         string
		placedInRoom int
		wantSecondAt time.Duration
	}{
		{"placed in room: again after 30 s", 1, time.Second + time.Second + placedPodsRecheck},
		{"none placed: the periodic resync", 0, 5 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newProvisionerHarness(t)
			h.signal(time.Second, SignalPodsPending, PodsPending{PodKeys: []string{"default/a"}})
			h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).
				Return(activities.PlanResponse{PodsConsidered: 1, PlacedOnExisting: 1, PlacedInRoom: tc.placedInRoom}, nil).Once()
			h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).
				Return(activities.PlanResponse{}, nil).Once()
			input := provisionerInput(batches(2))
			input.ResyncInterval = 5 * time.Minute

			next := h.runProvisioner(input)

			requests := h.planRequests()
			if len(requests) != 2 || requests[0].AllPending || !requests[1].AllPending {
				t.Fatalf("plan requests = %+v, want the signalled pod, then every pending pod", requests)
			}
			if at := next.State.LastBatch.At; !at.Equal(t0.Add(tc.wantSecondAt)) {
				t.Errorf("second batch at t0+%s, want t0+%s", at.Sub(t0), tc.wantSecondAt)
			}
		})
	}
}

func TestFailedPlanningKeepsThePods(t *testing.T) {
	h := newProvisionerHarness(t)
	h.signal(time.Second, SignalPodsPending, PodsPending{PodKeys: []string{"default/a"}})
	h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).
		Return(activities.PlanResponse{}, temporal.NewNonRetryableApplicationError("EC2NodeClass default: spec.role: not found", "InvalidNodeClass", nil)).Once()
	h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).
		Return(activities.PlanResponse{PlacedOnExisting: 1}, nil).Once()

	next := h.runProvisioner(provisionerInput(batches(2)))

	requests := h.planRequests()
	if len(requests) != 2 || !slices.Equal(requests[1].PodKeys, []string{"default/a"}) {
		t.Fatalf("plan requests = %+v, want the pod planned again", requests)
	}
	// 1s first pod, 2s batch fails, 30s back-off, 1s idle window.
	if at := next.State.LastBatch.At; !at.Equal(t0.Add(33 * time.Second)) {
		t.Errorf("retry batch at t0+%s, want t0+33s", at.Sub(t0))
	}
}

func TestDeferredPodsAreThePlannedNext(t *testing.T) {
	h := newProvisionerHarness(t)
	h.signal(time.Second, SignalPodsPending, PodsPending{PodKeys: podKeys("default", 3)})
	h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).Return(activities.PlanResponse{
		Plans:    []activities.NodeLaunchSpec{nodePlan("default", "default/pod-00")},
		Deferred: []string{"default/pod-01", "default/pod-02"},
	}, nil).Once()
	h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).Return(activities.PlanResponse{}, nil).Once()

	next := h.runProvisioner(provisionerInput(batches(2), func(in *ProvisionerInput) { in.MaxNodePlansPerBatch = 1 }))

	requests := h.planRequests()
	if len(requests) != 2 || requests[0].MaxNodePlans != 1 || !slices.Equal(requests[1].PodKeys, []string{"default/pod-01", "default/pod-02"}) {
		t.Errorf("plan requests = %+v, want the deferred pods in the next batch", requests)
	}
	// The first batch closed at 2 s (signal at 1 s, 1 s idle); the
	// deferred pods had their window, so the second follows at once.
	if at := next.State.LastBatch.At; !at.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("the batch of deferred pods was planned at t0+%s, want t0+2s (no new window)", at.Sub(t0))
	}
}

func TestProvisionerInputValidation(t *testing.T) {
	cases := []struct {
		name  string
		input ProvisionerInput
		want  string
	}{
		{name: "cluster required", input: ProvisionerInput{}, want: "cluster is empty"},
		{name: "idle window within max window", input: ProvisionerInput{Cluster: "c", IdleWindow: time.Minute, MaxWindow: time.Second}, want: "idleWindow 1m0s is longer than maxWindow 1s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newProvisionerHarness(t)
			h.env.ExecuteWorkflow(ProvisionerWorkflowType, tc.input)
			var appErr *temporal.ApplicationError
			err := h.env.GetWorkflowError()
			if !errors.As(err, &appErr) || appErr.Type() != InvalidProvisionerInputErrorType || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("workflow error = %v, want %s naming %q", err, InvalidProvisionerInputErrorType, tc.want)
			}
		})
	}
}

// startFailsOnce makes the batch's first StartNodeWorkflows activity fail
// every attempt until its schedule-to-close, after starting the first of
// its nodes; later activities start what is left.
func startFailsOnce(h *harness) *int {
	starters := 0
	firstActivity := ""
	started := map[string]bool{}
	h.env.OnActivity(activities.StartNodeWorkflowsActivity, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, req activities.StartNodeWorkflowsRequest) (activities.StartNodeWorkflowsResponse, error) {
			id := activity.GetInfo(ctx).ActivityID
			if firstActivity == "" {
				firstActivity = id
				starters++
			}
			var resp activities.StartNodeWorkflowsResponse
			for i, node := range req.Nodes {
				if id == firstActivity && i > 0 {
					return resp, errors.New("frontend unavailable")
				}
				if started[node.WorkflowID] {
					resp.AlreadyExisted = append(resp.AlreadyExisted, node.WorkflowID)
					continue
				}
				started[node.WorkflowID] = true
				resp.Started = append(resp.Started, node.WorkflowID)
			}
			return resp, nil
		})
	return &starters
}

// Regression (issue 10, defect 3): a failed StartNodeWorkflows batch used to
// put its pods back to be planned again under new node claim names, so the
// node that did start launched them a second time.
func TestFailedStartRetriesTheSameNodeClaims(t *testing.T) {
	h := newProvisionerHarness(t)
	h.signal(time.Second, SignalPodsPending, PodsPending{PodKeys: []string{"default/a", "default/b"}})
	h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).Return(activities.PlanResponse{
		Plans: []activities.NodeLaunchSpec{nodePlan("default", "default/a"), nodePlan("default", "default/b")},
	}, nil).Once()
	startFailsOnce(h)

	next := h.runProvisioner(provisionerInput(batches(2)))

	if plans := len(h.planRequests()); plans != 1 {
		t.Errorf("planned %d time(s), want once: the retry must not plan the pods again", plans)
	}
	names := map[string]bool{}
	for _, call := range h.rec.calls(activities.StartNodeWorkflowsActivity) {
		for _, node := range call.(*activities.StartNodeWorkflowsRequest).Nodes {
			names[node.Spec.NodeClaimName] = true
		}
	}
	if len(names) != 2 {
		t.Errorf("node claims started: %v, want the batch's two names reused by the retry", names)
	}
	if len(next.State.InFlight) != 2 || len(next.State.UnstartedNodes) != 0 || len(next.State.PendingPods) != 0 {
		t.Errorf("carried in flight %+v, unstarted %d, pending %v: want both nodes in flight and nothing left to start",
			next.State.InFlight, len(next.State.UnstartedNodes), next.State.PendingPods)
	}
}

// While the retry is pending, the nodes of the failed batch own their pods:
// a batch planned meanwhile sees them in flight.
func TestFailedStartCountsItsNodesInFlight(t *testing.T) {
	h := newProvisionerHarness(t)
	h.signal(time.Second, SignalPodsPending, PodsPending{PodKeys: []string{"default/a", "default/b"}})
	h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).Return(activities.PlanResponse{
		Plans: []activities.NodeLaunchSpec{nodePlan("default", "default/a"), nodePlan("default", "default/b")},
	}, nil)
	startFailsOnce(h)

	next := h.runProvisioner(provisionerInput())

	if len(next.State.InFlight) != 2 || len(next.State.UnstartedNodes) != 2 || len(next.State.PendingPods) != 0 {
		t.Fatalf("carried in flight %+v, unstarted %d, pending %v: want both nodes in flight and to be started again",
			next.State.InFlight, len(next.State.UnstartedNodes), next.State.PendingPods)
	}
}

// Regression (issue 10, defect 8): a failed planning batch dropped its
// reconcile reasons and resync, so minNodes waited for the next resync
// (5 minutes) instead of the 30 s back-off.
func TestFailedPlanningKeepsResyncAndReconcileReasons(t *testing.T) {
	cases := []struct {
		name  string
		setup func(h *harness, in *ProvisionerInput)
	}{
		{name: "reconcile reason", setup: func(h *harness, _ *ProvisionerInput) {
			h.signal(time.Second, SignalReconcile, ReconcileRequest{Reason: "NodePool default created"})
		}},
		{name: "resync", setup: func(_ *harness, in *ProvisionerInput) { in.State.Resync = true }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newProvisionerHarness(t)
			input := provisionerInput(batches(2))
			input.ResyncInterval = 5 * time.Minute
			tc.setup(h, &input)
			h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).
				Return(activities.PlanResponse{}, temporal.NewNonRetryableApplicationError("informer caches did not sync", "Test", nil)).Once()
			h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).Return(activities.PlanResponse{}, nil).Once()

			next := h.runProvisioner(input)

			requests := h.planRequests()
			if len(requests) != 2 {
				t.Fatalf("planned %d batch(es), want 2", len(requests))
			}
			if at := next.State.LastBatch.At.Sub(t0); at > time.Minute {
				t.Errorf("retry batch at t0+%s, want within the back-off, not at the next resync", at)
			}
			if requests[0].AllPending != requests[1].AllPending {
				t.Errorf("allPending %v then %v: the retry must plan what the failed batch planned", requests[0].AllPending, requests[1].AllPending)
			}
		})
	}
}

// Regression (issue 10, defect 9): in-flight nodes were forgotten after a
// fixed 30 minutes, so a node with a longer registration timeout still
// booting was launched again.
func TestInFlightNodesLastTheirRegistrationTimeout(t *testing.T) {
	h := newProvisionerHarness(t)
	slow := nodePlan("default", "default/a")
	slow.RegistrationTimeout = time.Hour
	h.signal(time.Second, SignalPodsPending, PodsPending{PodKeys: []string{"default/a"}})
	h.signal(50*time.Minute, SignalPodsPending, PodsPending{PodKeys: []string{"default/a"}})
	h.signal(80*time.Minute, SignalPodsPending, PodsPending{PodKeys: []string{"default/a"}})
	h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).
		Return(activities.PlanResponse{Plans: []activities.NodeLaunchSpec{slow}}, nil).Once()
	h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).Return(activities.PlanResponse{PlacedOnExisting: 1}, nil)

	h.runProvisioner(provisionerInput(batches(3)))

	requests := h.planRequests()
	if len(requests) != 3 {
		t.Fatalf("planned %d batch(es), want 3", len(requests))
	}
	if len(requests[1].InFlight) != 1 {
		t.Errorf("50 minutes after the start of a node with a 1h registration timeout, in flight = %+v, want it", requests[1].InFlight)
	}
	if len(requests[2].InFlight) != 0 {
		t.Errorf("80 minutes after (launch 15m + registration 1h + 1m passed), in flight = %+v, want it forgotten", requests[2].InFlight)
	}
}

// Regression (issue 10, defect 7): the disrupted nodes the planner deferred
// were dropped with the batch, so their pods never got a replacement.
func TestDeferredDisruptedNodesArePlannedNext(t *testing.T) {
	h := newProvisionerHarness(t)
	h.signal(time.Second, SignalReplan, ReplanRequest{NodeClaimName: "default-spot", DisruptedNodes: []string{"ip-1", "ip-2", "ip-3"}, Reason: "interrupted"})
	h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).Return(activities.PlanResponse{
		Plans:                  []activities.NodeLaunchSpec{nodePlan("default", "default/a")},
		DeferredDisruptedNodes: []string{"ip-2", "ip-3"},
	}, nil).Once()
	h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).Return(activities.PlanResponse{}, nil).Once()

	h.runProvisioner(provisionerInput(batches(2)))

	requests := h.planRequests()
	if len(requests) != 2 || !slices.Equal(requests[1].DisruptedNodes, []string{"ip-1", "ip-2", "ip-3"}) || len(requests[1].InFlight) != 1 {
		t.Errorf("plan requests = %+v, want the disrupted nodes planned again beside the first batch's node in flight", requests)
	}
}

// backlogPlanner plays a planner over a large backlog of pending pods,
// honouring the request's bounds as the real one does (MaxNodePlans,
// MaxPlannedPods, MaxPlanBytes, MaxDeferredReported): each node takes 20
// pods and offers 60 instance types. No node ever registers, so the
// in-flight state only grows.
type backlogPlanner struct {
	t         *testing.T
	pods      []string
	responses []int // JSON size of each response
}

func (b *backlogPlanner) plan(_ context.Context, req activities.PlanRequest) (activities.PlanResponse, error) {
	owned := map[string]bool{}
	for _, node := range req.InFlight {
		for _, key := range node.PodKeys {
			owned[key] = true
		}
	}
	candidates := req.PodKeys
	if req.AllPending {
		candidates = b.pods
	}
	var todo []string
	for _, key := range candidates {
		if !owned[key] {
			todo = append(todo, key)
		}
	}
	slices.Sort(todo)
	var resp activities.PlanResponse
	planned, planBytes := 0, 0
	for start := 0; start < len(todo); start += 20 {
		chunk := todo[start:min(start+20, len(todo))]
		full := len(resp.Plans) >= req.MaxNodePlans || planBytes >= activities.MaxPlanBytes ||
			req.MaxPlannedPods != 0 && planned+len(chunk) > max(req.MaxPlannedPods, 0)
		if full {
			resp.Deferred = append(resp.Deferred, chunk...)
			continue
		}
		spec := bigNodePlan(chunk)
		encoded, _ := json.Marshal(spec)
		planBytes += len(encoded)
		planned += len(chunk)
		resp.Plans = append(resp.Plans, spec)
	}
	resp.PodsConsidered = len(candidates)
	if len(resp.Deferred) > activities.MaxDeferredReported {
		resp.Deferred, resp.DeferredMore = resp.Deferred[:activities.MaxDeferredReported], true
	}
	b.responses = append(b.responses, payloadSize(b.t, resp))
	return resp, nil
}

func bigNodePlan(pods []string) activities.NodeLaunchSpec {
	spec := nodePlan("default", pods...)
	spec.InstanceTypeOptions = nil
	for i := range 60 {
		spec.InstanceTypeOptions = append(spec.InstanceTypeOptions, instanceOption(fmt.Sprintf("m%d.%dxlarge", 5+i%3, 1+i),
			offering("us-east-1a", activities.CapacityTypeSpot, 0.05+float64(i)/100), offering("us-east-1a", activities.CapacityTypeOnDemand, 0.1+float64(i)/50)))
	}
	spec.LaunchReason = strings.Repeat("why this node: ", 20)
	return spec
}

func payloadSize(t *testing.T, v any) int {
	t.Helper()
	encoded, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(encoded)
}

// Regression (issue 10, defect 5): the Plan request and the continue-as-new
// input carried every pending pod key and every in-flight node with all
// its type names and pod keys (~2 MB near 12,000 pending pods, where the
// server terminates the workflow). With 20,000 pending pods every payload
// stays under Temporal's 512 KiB warning threshold, and provisioning goes
// on at the pace the in-flight bound allows.
func TestProvisionerPayloadsStayBoundedAt20000PendingPods(t *testing.T) {
	const pending = 20000
	const bound = 512 << 10
	h := newProvisionerHarness(t)
	planner := &backlogPlanner{t: t}
	for i := range pending {
		planner.pods = append(planner.pods, fmt.Sprintf("team-%02d/web-%05d-7d9f8c6b5-x2k9p", i%50, i))
	}
	// The pod watcher signals them in bursts of 500.
	for i := 0; i < pending; i += 500 {
		h.signal(time.Second+time.Duration(i/500)*10*time.Millisecond, SignalPodsPending, PodsPending{PodKeys: planner.pods[i : i+500]})
	}
	h.env.OnActivity(activities.PlanActivity, mock.Anything, mock.Anything).Return(planner.plan)

	next := h.runProvisioner(provisionerInput(batches(40)))

	largest := map[string]int{}
	measure := func(what string, size int) {
		largest[what] = max(largest[what], size)
		if size > bound {
			t.Errorf("%s payload %d bytes, want at most %d", what, size, bound)
		}
	}
	for _, req := range h.planRequests() {
		measure("PlanRequest", payloadSize(t, req))
	}
	for _, size := range planner.responses {
		measure("PlanResponse", size)
	}
	started := 0
	for _, call := range h.rec.calls(activities.StartNodeWorkflowsActivity) {
		measure("StartNodeWorkflowsRequest", payloadSize(t, call))
		for _, node := range call.(*activities.StartNodeWorkflowsRequest).Nodes {
			started += len(node.Spec.PodKeys)
		}
	}
	measure("continue-as-new input", payloadSize(t, next))
	t.Logf("largest payloads at %d pending pods: %v; %d pods planned onto %d in-flight nodes in %d batches",
		pending, largest, started, len(next.State.InFlight), len(h.planRequests()))
	if started < maxInFlightPodKeys-20 || started > maxInFlightPodKeys {
		t.Errorf("%d pods planned, want the in-flight bound (%d) reached and kept", started, maxInFlightPodKeys)
	}
	if !next.State.Resync && len(next.State.PendingPods) == 0 {
		t.Error("the rest of the backlog was dropped: want it pending (keys or a resync)")
	}
}

// A pod the provisioner already launched a node for, signalled again while
// it waits for that node (the scheduler rewrites its condition on every
// retry), does not hold a batch's window open.
func TestRepeatsOfInFlightPodsDoNotHoldTheWindow(t *testing.T) {
	h := newProvisionerHarness(t)
	h.signal(time.Second, SignalPodsPending, PodsPending{PodKeys: []string{"default/new"}})
	for _, at := range every(700*time.Millisecond, 1200*time.Millisecond, 30*time.Second) {
		h.signal(at, SignalPodsPending, PodsPending{PodKeys: []string{"default/launched"}})
	}
	next := h.runProvisioner(provisionerInput(func(in *ProvisionerInput) {
		in.State.InFlight = []activities.InFlightNode{{NodeClaimName: "default-abc", NodePool: "default",
			PodKeys: []string{"default/launched"}, StartedAt: t0, Until: t0.Add(time.Hour)}}
	}))
	if at := next.State.LastBatch.At; !at.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("batch closed at t0+%s, want t0+2s (a second after the one new pod)", at.Sub(t0))
	}
}
