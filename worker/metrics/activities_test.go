package metrics

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/workflows"
)

// scriptedActivities answers the instrumented activities with fixed results;
// the embedded interface is nil, so any other activity panics.
type scriptedActivities struct {
	activities.Activities
	launch    activities.LaunchResponse
	launchErr error
	terminate activities.TerminateInstanceResponse
	plan      activities.PlanResponse
	// planTakes advances the clock inside Plan.
	planTakes time.Duration
	clock     *clocktesting.FakeClock
}

func (s *scriptedActivities) Launch(context.Context, activities.LaunchRequest) (activities.LaunchResponse, error) {
	return s.launch, s.launchErr
}

func (s *scriptedActivities) TerminateInstance(context.Context, activities.TerminateInstanceRequest) (activities.TerminateInstanceResponse, error) {
	return s.terminate, nil
}

func (s *scriptedActivities) Plan(context.Context, activities.PlanRequest) (activities.PlanResponse, error) {
	s.clock.Step(s.planTakes)
	return s.plan, nil
}

// nodeWorkflowDescriber answers DescribeWorkflowExecution with a node
// workflow's search attributes, or err.
type nodeWorkflowDescriber struct {
	attributes map[string]string
	err        error
	asked      []string
}

func (d *nodeWorkflowDescriber) DescribeWorkflowExecution(_ context.Context, workflowID, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	d.asked = append(d.asked, workflowID)
	if d.err != nil {
		return nil, d.err
	}
	fields := map[string]*commonpb.Payload{}
	for name, value := range d.attributes {
		payload, err := converter.GetDefaultDataConverter().ToPayload(value)
		if err != nil {
			return nil, err
		}
		fields[name] = payload
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{SearchAttributes: &commonpb.SearchAttributes{IndexedFields: fields}},
	}, nil
}

func newScripted() *scriptedActivities {
	return &scriptedActivities{clock: clocktesting.NewFakeClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))}
}

func TestInstrumentedLaunchCountsLaunchesAndErrorsByCause(t *testing.T) {
	iceOfferings := []activities.OfferingKey{
		{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"},
		{InstanceType: "m5.large", Zone: "us-east-1b", CapacityType: "spot"},
	}
	cases := []struct {
		name      string
		launchErr error
		wantCause string
	}{
		{name: "success"},
		{name: "insufficient capacity", launchErr: activities.NewInsufficientCapacityError("no capacity", iceOfferings), wantCause: CauseInsufficientCapacity},
		{name: "throttled", launchErr: activities.NewThrottledError("CreateFleet", errors.New("RequestLimitExceeded"), 1), wantCause: CauseThrottled},
		{name: "invalid node class", launchErr: activities.NewInvalidNodeClassError("default", "spec.role", "empty"), wantCause: CauseInvalidNodeClass},
		{name: "rejected", launchErr: activities.NewLaunchFailedError("CreateFleet launched no instance", []activities.UnavailableOffering{{OfferingKey: iceOfferings[0]}}), wantCause: CauseLaunchRejected},
		{name: "other", launchErr: errors.New("CreateFleet: connection reset"), wantCause: CauseOther},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTestMetrics(t)
			inner := newScripted()
			inner.launch = activities.LaunchResponse{InstanceID: "i-1", InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}
			inner.launchErr = tc.launchErr
			instrumented := Instrument(inner, m, nil, inner.clock)

			_, err := instrumented.Launch(context.Background(), activities.LaunchRequest{NodePool: "default"})
			if !errors.Is(err, tc.launchErr) {
				t.Fatalf("Launch returned %v, want the inner error %v unchanged", err, tc.launchErr)
			}
			launched := testutil.ToFloat64(m.nodesLaunched.WithLabelValues("default", "m5.large", "us-east-1a", "spot"))
			if tc.launchErr == nil {
				if launched != 1 {
					t.Errorf("nodes launched = %v, want 1", launched)
				}
				if n := testutil.CollectAndCount(m.launchErrors); n != 0 {
					t.Errorf("%d launch error series after a success", n)
				}
				return
			}
			if launched != 0 {
				t.Errorf("nodes launched = %v after a failure, want 0", launched)
			}
			if got := testutil.ToFloat64(m.launchErrors.WithLabelValues("default", tc.wantCause)); got != 1 {
				t.Errorf("launch errors{cause=%s} = %v, want 1", tc.wantCause, got)
			}
			wantUnavailable := 0
			if tc.wantCause == CauseInsufficientCapacity {
				wantUnavailable = len(iceOfferings)
				for _, o := range iceOfferings {
					if got := testutil.ToFloat64(m.offeringsUnavailable.WithLabelValues(o.InstanceType, o.Zone, o.CapacityType)); got != 1 {
						t.Errorf("offerings unavailable %s = %v, want 1", o, got)
					}
				}
			}
			wantRejected := 0
			if tc.wantCause == CauseLaunchRejected {
				wantRejected = 1
				o := iceOfferings[0]
				if got := testutil.ToFloat64(m.offeringsRejected.WithLabelValues("default", o.InstanceType, o.Zone, o.CapacityType)); got != 1 {
					t.Errorf("offerings rejected %s = %v, want 1", o, got)
				}
			}
			if n := testutil.CollectAndCount(m.offeringsRejected); n != wantRejected {
				t.Errorf("%d rejected-offering series, want %d", n, wantRejected)
			}
			if n := testutil.CollectAndCount(m.offeringsUnavailable); n != wantUnavailable {
				t.Errorf("%d unavailable offering series, want %d", n, wantUnavailable)
			}
		})
	}
}

// TestInstrumentedTerminateLabelsFromTheNodeWorkflow runs TerminateInstance
// as an activity (the SDK's test environment), so the decorator finds the
// calling workflow the way it does in a worker.
func TestInstrumentedTerminateLabelsFromTheNodeWorkflow(t *testing.T) {
	cases := []struct {
		name       string
		describer  *nodeWorkflowDescriber
		wantPool   string
		wantReason string
	}{
		{
			name: "search attributes name the pool and reason",
			describer: &nodeWorkflowDescriber{attributes: map[string]string{
				workflows.NodePoolAttribute.GetName():          "default",
				workflows.TerminationReasonAttribute.GetName(): "Interrupted",
			}},
			wantPool: "default", wantReason: "Interrupted",
		},
		{
			name:      "describe fails: unknown labels, the activity still succeeds",
			describer: &nodeWorkflowDescriber{err: errors.New("unavailable")},
			wantPool:  Unknown, wantReason: Unknown,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTestMetrics(t)
			inner := newScripted()
			inner.terminate = activities.TerminateInstanceResponse{State: "shutting-down"}
			instrumented := Instrument(inner, m, tc.describer, inner.clock)

			env := (&testsuite.WorkflowTestSuite{}).NewTestActivityEnvironment()
			env.RegisterActivity(instrumented.TerminateInstance)
			result, err := env.ExecuteActivity(instrumented.TerminateInstance, activities.TerminateInstanceRequest{InstanceID: "i-1"})
			if err != nil {
				t.Fatalf("TerminateInstance: %v", err)
			}
			var resp activities.TerminateInstanceResponse
			if err := result.Get(&resp); err != nil || resp.State != "shutting-down" {
				t.Fatalf("response %+v (%v), want the inner one", resp, err)
			}
			if len(tc.describer.asked) != 1 || tc.describer.asked[0] == "" {
				t.Fatalf("described workflows %v, want the calling workflow once", tc.describer.asked)
			}
			if got := testutil.ToFloat64(m.nodesTerminated.WithLabelValues(tc.wantPool, tc.wantReason)); got != 1 {
				t.Errorf("nodes terminated{%s,%s} = %v, want 1", tc.wantPool, tc.wantReason, got)
			}
			if n := testutil.CollectAndCount(m.nodesTerminated); n != 1 {
				t.Errorf("%d terminated series, want 1", n)
			}
		})
	}
}

func TestInstrumentedPlanRecordsTheBatch(t *testing.T) {
	m, _ := newTestMetrics(t)
	inner := newScripted()
	inner.planTakes = 250 * time.Millisecond
	inner.plan = activities.PlanResponse{
		PodsConsidered: 7,
		Plans:          []activities.NodeLaunchSpec{{NodePool: "default"}, {NodePool: "default"}, {NodePool: "gpu"}},
	}
	instrumented := Instrument(inner, m, nil, inner.clock)
	if _, err := instrumented.Plan(context.Background(), activities.PlanRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.plannedNodes.WithLabelValues("default")); got != 2 {
		t.Errorf("planned nodes for default = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.plannedNodes.WithLabelValues("gpu")); got != 1 {
		t.Errorf("planned nodes for gpu = %v, want 1", got)
	}
	if got := sampleSum(t, m, "millwright_provisioner_plan_duration_seconds"); got != 0.25 {
		t.Errorf("plan duration sum = %v, want 0.25 (the fake clock's step)", got)
	}
	if got := sampleSum(t, m, "millwright_provisioner_pending_pods"); got != 7 {
		t.Errorf("pending pods sum = %v, want 7", got)
	}
}

// sampleSum is a histogram's sum of observations.
func sampleSum(t *testing.T, m *Metrics, name string) float64 {
	t.Helper()
	families, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, family := range families {
		if family.GetName() == name && len(family.GetMetric()) == 1 {
			return family.GetMetric()[0].GetHistogram().GetSampleSum()
		}
	}
	t.Fatalf("no single %s series", name)
	return 0
}
