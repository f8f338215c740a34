package workflows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
)

// t0 is every test's workflow start time, so expectations can be absolute.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	testCluster   = "c1"
	testNodeClaim = "default-bcdfghjk"
	testNodeName  = "ip-10-0-0-1.ec2.internal"
	testInstance  = "i-0123456789abcdef0"
)

// --- fixture builders -------------------------------------------------------

func offering(zone, capacityType string, price float64) activities.Offering {
	return activities.Offering{Zone: zone, CapacityType: capacityType, PricePerHour: price}
}

func instanceOption(name string, offerings ...activities.Offering) activities.InstanceTypeOption {
	return activities.InstanceTypeOption{Name: name, Offerings: offerings}
}

type specOption func(*activities.NodeLaunchSpec)

// nodeSpec is a launchable spec with two options (spot and on-demand in two
// zones); options change what a test cares about.
func nodeSpec(options ...specOption) activities.NodeLaunchSpec {
	spec := activities.NodeLaunchSpec{
		Cluster:       testCluster,
		NodeClaimName: testNodeClaim,
		NodePool:      "default",
		NodeClassName: "default",
		InstanceTypeOptions: []activities.InstanceTypeOption{
			instanceOption("m5.large", offering("us-east-1a", activities.CapacityTypeSpot, 0.04), offering("us-east-1b", activities.CapacityTypeSpot, 0.05)),
			instanceOption("m5.xlarge", offering("us-east-1a", activities.CapacityTypeOnDemand, 0.192)),
		},
		Labels:                 map[string]string{"team": "payments"},
		PodKeys:                []string{"default/web-1", "default/web-2"},
		LaunchReason:           "2 pending pods fit no existing node",
		ExpireAfter:            activities.Never(),
		ConsolidateAfter:       activities.Never(),
		TerminationGracePeriod: activities.Never(),
	}
	for _, option := range options {
		option(&spec)
	}
	return spec
}

func consolidateAfter(d time.Duration) specOption {
	return func(s *activities.NodeLaunchSpec) { s.ConsolidateAfter = activities.After(d) }
}

func nominationWindow(d time.Duration) specOption {
	return func(s *activities.NodeLaunchSpec) { s.NominationWindow = d }
}

func expireAfter(d time.Duration) specOption {
	return func(s *activities.NodeLaunchSpec) { s.ExpireAfter = activities.After(d) }
}

func terminationGracePeriod(d time.Duration) specOption {
	return func(s *activities.NodeLaunchSpec) { s.TerminationGracePeriod = activities.After(d) }
}

// --- the world the workflows see ------------------------------------------

// fakeWorld answers every activity the happy way: launches the first
// offering offered, registers and initializes at once with one pod, allows
// disruptions, drains and terminates. Tests override single activities with
// env.OnActivity.
type fakeWorld struct{}

var _ activities.Activities = fakeWorld{}

func (fakeWorld) Launch(_ context.Context, req activities.LaunchRequest) (activities.LaunchResponse, error) {
	option := req.Options[0]
	chosen := option.Offerings[0]
	return activities.LaunchResponse{
		InstanceID: testInstance, InstanceType: option.Name, Zone: chosen.Zone, CapacityType: chosen.CapacityType,
		PricePerHour: chosen.PricePerHour, Hostname: testNodeName, PrivateDNSName: testNodeName,
		ProviderID: "aws:///" + chosen.Zone + "/" + testInstance,
		ImageID:    "ami-0a", SubnetID: "subnet-0a", SecurityGroupIDs: []string{"sg-0a", "sg-0b"},
		Labels: map[string]string{"node.kubernetes.io/instance-type": option.Name, "millwright.dev/capacity-type": chosen.CapacityType},
	}, nil
}

func (fakeWorld) WaitForRegistration(context.Context, activities.WaitForRegistrationRequest) (activities.WaitForRegistrationResponse, error) {
	return activities.WaitForRegistrationResponse{NodeName: testNodeName}, nil
}

func (fakeWorld) RegisterNode(context.Context, activities.RegisterNodeRequest) (activities.RegisterNodeResponse, error) {
	return activities.RegisterNodeResponse{}, nil
}

func (fakeWorld) WaitForInitialization(context.Context, activities.WaitForInitializationRequest) (activities.WaitForInitializationResponse, error) {
	return activities.WaitForInitializationResponse{NonDaemonSetPods: 1}, nil
}

func (fakeWorld) AllowDisruption(context.Context, activities.AllowDisruptionRequest) (activities.AllowDisruptionResponse, error) {
	return activities.AllowDisruptionResponse{Allowed: true}, nil
}

func (fakeWorld) Drain(context.Context, activities.DrainRequest) (activities.DrainResponse, error) {
	return activities.DrainResponse{Evicted: 1}, nil
}

func (fakeWorld) TerminateInstance(context.Context, activities.TerminateInstanceRequest) (activities.TerminateInstanceResponse, error) {
	return activities.TerminateInstanceResponse{State: "shutting-down"}, nil
}

func (fakeWorld) WaitForInstanceTerminated(context.Context, activities.WaitForInstanceTerminatedRequest) (activities.WaitForInstanceTerminatedResponse, error) {
	return activities.WaitForInstanceTerminatedResponse{State: "terminated"}, nil
}

func (fakeWorld) DeleteNode(context.Context, activities.DeleteNodeRequest) (activities.DeleteNodeResponse, error) {
	return activities.DeleteNodeResponse{Deleted: true}, nil
}

func (fakeWorld) UpsertNodeClaim(_ context.Context, req activities.UpsertNodeClaimRequest) (activities.UpsertNodeClaimResponse, error) {
	return activities.UpsertNodeClaimResponse{Entered: req.Phase}, nil
}

func (fakeWorld) Plan(_ context.Context, req activities.PlanRequest) (activities.PlanResponse, error) {
	return activities.PlanResponse{PodsConsidered: len(req.PodKeys), PlacedOnExisting: len(req.PodKeys)}, nil
}

func (fakeWorld) StartNodeWorkflows(_ context.Context, req activities.StartNodeWorkflowsRequest) (activities.StartNodeWorkflowsResponse, error) {
	var response activities.StartNodeWorkflowsResponse
	for _, node := range req.Nodes {
		response.Started = append(response.Started, node.WorkflowID)
	}
	return response, nil
}

// ComputeCommands decides nothing; disruption tests register their own
// answer over it.
func (fakeWorld) ComputeCommands(context.Context, activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
	return activities.ComputeCommandsResponse{}, nil
}

// --- recording ---------------------------------------------------------------

// recorder keeps what the workflow did that tests assert on: log lines,
// activity requests, provisioner signals. Activities run on their own
// goroutines, hence the lock.
type recorder struct {
	mu       sync.Mutex
	logs     []string
	requests map[string][]any
	// heartbeatTimeouts are the activities' heartbeat timeouts, per call.
	heartbeatTimeouts map[string][]time.Duration
	replans           []ReplanRequest
}

func newRecorder() *recorder {
	return &recorder{requests: map[string][]any{}, heartbeatTimeouts: map[string][]time.Duration{}}
}

func (r *recorder) record(activity string, request any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests[activity] = append(r.requests[activity], request)
}

func (r *recorder) recordHeartbeatTimeout(activity string, timeout time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.heartbeatTimeouts[activity] = append(r.heartbeatTimeouts[activity], timeout)
}

func (r *recorder) heartbeatTimeoutsOf(activity string) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.heartbeatTimeouts[activity]...)
}

func (r *recorder) calls(activity string) []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]any(nil), r.requests[activity]...)
}

func (r *recorder) replanRequests() []ReplanRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ReplanRequest(nil), r.replans...)
}

func (r *recorder) hasLog(message string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, line := range r.logs {
		if line == message {
			return true
		}
	}
	return false
}

func (r *recorder) logLines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.logs...)
}

// Logger implementation (go.temporal.io/sdk/log.Logger) keeping messages.
func (r *recorder) Debug(string, ...any)       {}
func (r *recorder) Info(msg string, _ ...any)  { r.keep(msg) }
func (r *recorder) Warn(msg string, _ ...any)  { r.keep(msg) }
func (r *recorder) Error(msg string, _ ...any) { r.keep(msg) }
func (r *recorder) keep(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, msg)
}

// --- environments -----------------------------------------------------------

type harness struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment
	rec *recorder
	// admissionTimes are the workflow times of AdmitCommand calls
	// (admissionWorld).
	admissionTimes []time.Time
}

// newHarness is a test environment starting at t0 with the fake world and
// every activity call recorded. A test overrides an activity with
// h.env.OnActivity before executing the workflow.
func newHarness(t *testing.T, workflowID string) *harness {
	t.Helper()
	rec := newRecorder()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(rec)
	env := suite.NewTestWorkflowEnvironment()
	env.SetStartTime(t0)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflowID, TaskQueue: "millwright"})
	Register(env)
	activities.Register(env, fakeWorld{})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		rec.record(info.ActivityType.Name, decodeRequest(t, info.ActivityType.Name, args))
		rec.recordHeartbeatTimeout(info.ActivityType.Name, info.HeartbeatTimeout)
	})
	env.OnSignalExternalWorkflow(mock.Anything, ProvisionerWorkflowID(testCluster), "", SignalReplan, mock.Anything).
		Return(func(_, _, _, _ string, arg any) error {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.replans = append(rec.replans, arg.(ReplanRequest))
			return nil
		}).Maybe()
	t.Cleanup(func() { env.AssertExpectations(t) })
	return &harness{t: t, env: env, rec: rec}
}

func newNodeHarness(t *testing.T) *harness {
	return newHarness(t, NodeWorkflowID(testCluster, testNodeClaim))
}

// decodeRequest decodes an activity's request into its contract type.
func decodeRequest(t *testing.T, activityName string, args converter.EncodedValues) any {
	var target any
	switch activityName {
	case activities.LaunchActivity:
		target = &activities.LaunchRequest{}
	case activities.WaitForRegistrationActivity:
		target = &activities.WaitForRegistrationRequest{}
	case activities.RegisterNodeActivity:
		target = &activities.RegisterNodeRequest{}
	case activities.WaitForInitializationActivity:
		target = &activities.WaitForInitializationRequest{}
	case activities.AllowDisruptionActivity:
		target = &activities.AllowDisruptionRequest{}
	case activities.DrainActivity:
		target = &activities.DrainRequest{}
	case activities.TerminateInstanceActivity:
		target = &activities.TerminateInstanceRequest{}
	case activities.WaitForInstanceTerminatedActivity:
		target = &activities.WaitForInstanceTerminatedRequest{}
	case activities.DeleteNodeActivity:
		target = &activities.DeleteNodeRequest{}
	case activities.UpsertNodeClaimActivity:
		target = &activities.UpsertNodeClaimRequest{}
	case activities.PlanActivity:
		target = &activities.PlanRequest{}
	case activities.StartNodeWorkflowsActivity:
		target = &activities.StartNodeWorkflowsRequest{}
	case activities.ReserveNodesActivity:
		target = &activities.ReserveNodesRequest{}
	case activities.MarkDisruptionActivity:
		target = &activities.MarkDisruptionRequest{}
	case activities.ComputeCommandsActivity:
		target = &activities.ComputeCommandsRequest{}
	case activities.AdmitCommandActivity:
		target = &activities.AdmitCommandRequest{}
	case activities.MarkOutliersActivity:
		target = &activities.MarkOutliersRequest{}
	default:
		t.Errorf("unexpected activity %s", activityName)
		return nil
	}
	if err := args.Get(target); err != nil {
		t.Errorf("decode %s request: %v", activityName, err)
	}
	return target
}

// at runs action at workflow time t0+offset.
func (h *harness) at(offset time.Duration, action func()) {
	h.env.RegisterDelayedCallback(action, offset)
}

func (h *harness) signal(offset time.Duration, name string, payload any) {
	h.at(offset, func() { h.env.SignalWorkflow(name, payload) })
}

// runNode executes a node workflow to its end and returns its result.
func (h *harness) runNode(spec activities.NodeLaunchSpec, resume *NodeState) NodeResult {
	h.t.Helper()
	h.env.ExecuteWorkflow(NodeWorkflowType, spec, resume)
	if !h.env.IsWorkflowCompleted() {
		h.t.Fatal("node workflow did not complete")
	}
	var result NodeResult
	if err := h.env.GetWorkflowError(); err != nil {
		h.t.Fatalf("node workflow failed: %v", err)
	}
	if err := h.env.GetWorkflowResult(&result); err != nil {
		h.t.Fatal(err)
	}
	return result
}

func (h *harness) history() NodeHistoryView {
	h.t.Helper()
	value, err := h.env.QueryWorkflow(QueryHistory)
	if err != nil {
		h.t.Fatalf("query history: %v", err)
	}
	var view NodeHistoryView
	if err := value.Get(&view); err != nil {
		h.t.Fatal(err)
	}
	return view
}

func (h *harness) state() NodeStateView {
	h.t.Helper()
	value, err := h.env.QueryWorkflow(QueryState)
	if err != nil {
		h.t.Fatalf("query state: %v", err)
	}
	var view NodeStateView
	if err := value.Get(&view); err != nil {
		h.t.Fatal(err)
	}
	return view
}

// decisionAt returns when the first decision containing text was taken.
func decisionAt(t *testing.T, history NodeHistoryView, text string) time.Time {
	t.Helper()
	for _, decision := range history.Decisions {
		if strings.Contains(decision.Message, text) {
			return decision.At
		}
	}
	t.Fatalf("no decision mentions %q; decisions:\n%s", text, formatDecisions(history.Decisions))
	return time.Time{}
}

func phasesOf(history NodeHistoryView) []Phase {
	var phases []Phase
	for _, decision := range history.Decisions {
		if phase, ok := strings.CutPrefix(decision.Message, "Phase "); ok {
			phases = append(phases, Phase(phase))
		}
	}
	return phases
}

func formatDecisions(decisions []Decision) string {
	var b strings.Builder
	for _, d := range decisions {
		fmt.Fprintf(&b, "  %s [%s] %s\n", d.At.Sub(t0), d.Phase, d.Message)
	}
	return b.String()
}

// continueAsNewInput decodes the arguments a run continued as new with.
func continueAsNewInput(t *testing.T, err error, into ...any) {
	t.Helper()
	var canErr *workflow.ContinueAsNewError
	if !errors.As(err, &canErr) {
		t.Fatalf("want continue-as-new, got %v", err)
	}
	if err := converter.GetDefaultDataConverter().FromPayloads(canErr.Input, into...); err != nil {
		t.Fatal(err)
	}
}
