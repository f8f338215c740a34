package nodeworkflows

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap/zaptest"

	"github.com/millwright/millwright/activities"
	localtemporal "github.com/millwright/millwright/local/temporal"
	"github.com/millwright/millwright/local/temporal/temporaltesting"
	"github.com/millwright/millwright/workflows"
)

// env is the package's embedded Temporal server. No worker polls the task
// queues the tests start workflows on, so started workflows stay running
// exactly as started.
var env *temporaltesting.Env

func TestMain(m *testing.M) {
	temporaltesting.Main(m, &env, localtemporal.Options{SearchAttributes: workflows.SearchAttributeTypes()})
}

func uniqueName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

func newStarter(t *testing.T) *Starter {
	t.Helper()
	s, err := New(env.Client, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// nodeStart is a valid start of one node workflow.
func nodeStart(nodeClaim string) activities.NodeWorkflowStart {
	return activities.NodeWorkflowStart{
		WorkflowID: workflows.NodeWorkflowID("test", nodeClaim),
		Spec: activities.NodeLaunchSpec{
			Cluster: "test", NodeClaimName: nodeClaim, NodePool: "default", NodeClassName: "default",
			InstanceTypeOptions: []activities.InstanceTypeOption{{Name: "m5.large",
				Offerings: []activities.Offering{{Zone: "us-east-1a", CapacityType: "on-demand", PricePerHour: 0.096}}}},
			PodKeys:      []string{"ns/a"},
			LaunchReason: "1 pod(s) (ns/a) need cpu 1; chose m5.large on-demand us-east-1a $0.0960/h",
		},
	}
}

func startRequest(nodes ...activities.NodeWorkflowStart) activities.StartNodeWorkflowsRequest {
	return activities.StartNodeWorkflowsRequest{WorkflowType: workflows.NodeWorkflowType, TaskQueue: uniqueName("queue"), Nodes: nodes}
}

func startNodes(t *testing.T, s *Starter, req activities.StartNodeWorkflowsRequest) activities.StartNodeWorkflowsResponse {
	t.Helper()
	resp, err := s.StartNodeWorkflows(t.Context(), req)
	if err != nil {
		t.Fatalf("StartNodeWorkflows: %v", err)
	}
	return resp
}

// runID is the workflow's current (or last) run.
func runID(t *testing.T, workflowID string) string {
	t.Helper()
	described, err := env.Client.DescribeWorkflowExecution(t.Context(), workflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	return described.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

func TestStartingTwiceStartsOnce(t *testing.T) {
	s := newStarter(t)
	req := startRequest(nodeStart(uniqueName("claim")))
	id := req.Nodes[0].WorkflowID

	first := startNodes(t, s, req)
	if !slices.Equal(first.Started, []string{id}) || len(first.AlreadyExisted) != 0 {
		t.Fatalf("first start: %+v, want %s started", first, id)
	}
	run := runID(t, id)

	second := startNodes(t, s, req)
	if !slices.Equal(second.AlreadyExisted, []string{id}) || len(second.Started) != 0 {
		t.Fatalf("second start: %+v, want %s already existing", second, id)
	}
	if again := runID(t, id); again != run {
		t.Fatalf("run %s replaced by %s: the second start must not create a run", run, again)
	}
}

// Two workers may both find an id free and start it; the start's own
// policies keep that to one run (both then report it as started).
func TestRacingStartsCreateOneRun(t *testing.T) {
	s := newStarter(t)
	req := startRequest(nodeStart(uniqueName("claim")))
	node := req.Nodes[0]
	if existed, err := s.start(t.Context(), req, node); err != nil || existed {
		t.Fatalf("first start: existed %v, error %v", existed, err)
	}
	run := runID(t, node.WorkflowID)

	// The second worker skipped the lookup (it raced the first).
	if _, err := s.start(t.Context(), req, node); err != nil {
		t.Fatalf("racing start: %v", err)
	}

	if again := runID(t, node.WorkflowID); again != run {
		t.Fatalf("run %s replaced by %s", run, again)
	}
}

// REJECT_DUPLICATE: a node whose workflow already ended is never started
// again under the same id (a retried batch must not relaunch a finished
// node).
func TestClosedNodeWorkflowIsNotStartedAgain(t *testing.T) {
	s := newStarter(t)
	req := startRequest(nodeStart(uniqueName("claim")))
	id := req.Nodes[0].WorkflowID
	startNodes(t, s, req)
	run := runID(t, id)
	if err := env.Client.TerminateWorkflow(t.Context(), id, "", "test: the node ended"); err != nil {
		t.Fatal(err)
	}

	resp := startNodes(t, s, req)

	if !slices.Equal(resp.AlreadyExisted, []string{id}) || len(resp.Started) != 0 {
		t.Fatalf("start after close: %+v, want %s already existing", resp, id)
	}
	described, err := env.Client.DescribeWorkflowExecution(t.Context(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	info := described.GetWorkflowExecutionInfo()
	if info.GetExecution().GetRunId() != run || info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED {
		t.Fatalf("latest run %s (%s), want the terminated run %s", info.GetExecution().GetRunId(), info.GetStatus(), run)
	}
}

// A retried batch starts what is missing and reports the rest.
func TestRetriedBatchStartsOnlyWhatIsMissing(t *testing.T) {
	s := newStarter(t)
	a, b := nodeStart(uniqueName("claim")), nodeStart(uniqueName("claim"))
	queue := uniqueName("queue")
	startNodes(t, s, activities.StartNodeWorkflowsRequest{WorkflowType: workflows.NodeWorkflowType, TaskQueue: queue, Nodes: []activities.NodeWorkflowStart{a}})

	resp := startNodes(t, s, activities.StartNodeWorkflowsRequest{WorkflowType: workflows.NodeWorkflowType, TaskQueue: queue, Nodes: []activities.NodeWorkflowStart{a, b}})

	if !slices.Equal(resp.Started, []string{b.WorkflowID}) || !slices.Equal(resp.AlreadyExisted, []string{a.WorkflowID}) {
		t.Fatalf("response %+v, want %s started and %s already existing", resp, b.WorkflowID, a.WorkflowID)
	}
}

// The node is findable by pool and phase, and explains itself, from the
// start.
func TestStartedWorkflowCarriesSearchAttributesAndLaunchReason(t *testing.T) {
	s := newStarter(t)
	start := nodeStart(uniqueName("claim"))
	req := startRequest(start)
	startNodes(t, s, req)

	described, err := env.Client.DescribeWorkflowExecution(t.Context(), start.WorkflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	info := described.GetWorkflowExecutionInfo()
	if got := info.GetTaskQueue(); got != req.TaskQueue {
		t.Errorf("task queue %q, want %q", got, req.TaskQueue)
	}
	if got := info.GetType().GetName(); got != workflows.NodeWorkflowType {
		t.Errorf("workflow type %q, want %q", got, workflows.NodeWorkflowType)
	}
	attributes := info.GetSearchAttributes().GetIndexedFields()
	for name, want := range map[string]string{
		workflows.NodePoolAttribute.GetName(): "default",
		workflows.PhaseAttribute.GetName():    string(workflows.PhaseLaunching),
	} {
		if got := decodeString(t, attributes[name]); got != want {
			t.Errorf("search attribute %s = %q, want %q", name, got, want)
		}
	}
	if got := decodeString(t, info.GetMemo().GetFields()[workflows.MemoLaunchReason]); got != start.Spec.LaunchReason {
		t.Errorf("memo %s = %q, want the spec's launch reason", workflows.MemoLaunchReason, got)
	}
}

func decodeString(t *testing.T, payload *commonpb.Payload) string {
	t.Helper()
	if payload == nil {
		return ""
	}
	var s string
	if err := converter.GetDefaultDataConverter().FromPayload(payload, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestInvalidRequestsFailWithoutRetry(t *testing.T) {
	s := newStarter(t)
	noPool := nodeStart(uniqueName("claim"))
	noPool.Spec.NodePool = ""
	valid := nodeStart(uniqueName("claim"))
	cases := []struct {
		name  string
		req   activities.StartNodeWorkflowsRequest
		field string
	}{
		{name: "no workflow type", req: activities.StartNodeWorkflowsRequest{TaskQueue: "q", Nodes: []activities.NodeWorkflowStart{valid}}, field: "workflowType"},
		{name: "no task queue", req: activities.StartNodeWorkflowsRequest{WorkflowType: workflows.NodeWorkflowType, Nodes: []activities.NodeWorkflowStart{valid}}, field: "taskQueue"},
		{name: "an unusable spec", req: startRequest(valid, noPool), field: "nodes[1].spec"},
		{name: "a repeated id", req: startRequest(valid, valid), field: "nodes[1].workflowID"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.StartNodeWorkflows(t.Context(), tc.req)
			var appErr *temporal.ApplicationError
			if !IsInvalidStart(err) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v, want an %s naming %s", err, InvalidStartErrorType, tc.field)
			}
			if asApp, ok := err.(*temporal.ApplicationError); ok {
				appErr = asApp
			}
			if appErr == nil || !appErr.NonRetryable() {
				t.Errorf("error %v is retryable; the same request would fail again", err)
			}
		})
	}
	// Nothing of an invalid request is started.
	if _, err := env.Client.DescribeWorkflowExecution(context.Background(), valid.WorkflowID, ""); err == nil {
		t.Errorf("workflow %s was started by an invalid request", valid.WorkflowID)
	}
}

// concurrencyProbe is the real client, with ExecuteWorkflow counting the
// starts in flight. The first maxConcurrentStarts starts wait for one
// another, so a starter that starts one at a time fails at once.
type concurrencyProbe struct {
	client.Client
	mu       sync.Mutex
	inFlight int
	peak     int
	arrived  int
	barrier  chan struct{}
}

func (p *concurrencyProbe) ExecuteWorkflow(ctx context.Context, options client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error) {
	p.mu.Lock()
	p.inFlight++
	p.peak = max(p.peak, p.inFlight)
	p.arrived++
	waits := p.arrived <= maxConcurrentStarts
	if p.arrived == maxConcurrentStarts {
		close(p.barrier)
	}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inFlight--
		p.mu.Unlock()
	}()
	if waits {
		select {
		case <-p.barrier:
		case <-time.After(10 * time.Second):
			return nil, errors.New("probe: the other starts never came; starts are not concurrent")
		}
	}
	return p.Client.ExecuteWorkflow(ctx, options, workflow, args...)
}

// A large batch starts maxConcurrentStarts workflows at a time (never
// more), and reports them in request order.
func TestLargeBatchStartsConcurrentlyAndReportsInOrder(t *testing.T) {
	probe := &concurrencyProbe{Client: env.Client, barrier: make(chan struct{})}
	s, err := New(probe, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	queue := uniqueName("queue")
	var nodes, existing []activities.NodeWorkflowStart
	for i := range 2*maxConcurrentStarts + 3 {
		node := nodeStart(uniqueName(fmt.Sprintf("claim-%02d", i)))
		nodes = append(nodes, node)
		if i%5 == 0 {
			existing = append(existing, node)
		}
	}
	if _, err := newStarter(t).StartNodeWorkflows(t.Context(), activities.StartNodeWorkflowsRequest{WorkflowType: workflows.NodeWorkflowType, TaskQueue: queue, Nodes: existing}); err != nil {
		t.Fatal(err)
	}

	resp := startNodes(t, s, activities.StartNodeWorkflowsRequest{WorkflowType: workflows.NodeWorkflowType, TaskQueue: queue, Nodes: nodes})

	var wantStarted, wantExisted []string
	for i, node := range nodes {
		if i%5 == 0 {
			wantExisted = append(wantExisted, node.WorkflowID)
		} else {
			wantStarted = append(wantStarted, node.WorkflowID)
		}
	}
	if !slices.Equal(resp.Started, wantStarted) || !slices.Equal(resp.AlreadyExisted, wantExisted) {
		t.Fatalf("response %+v,\nwant started %v and already existing %v, in request order", resp, wantStarted, wantExisted)
	}
	if probe.peak != maxConcurrentStarts {
		t.Errorf("%d starts in flight at most, want %d", probe.peak, maxConcurrentStarts)
	}
}
