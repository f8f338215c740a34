package metrics

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/millwright/millwright/activities"
)

// scriptedActivities answers the instrumented activities with fixed results;
// the embedded interface is nil, so any other activity panics.
type scriptedActivities struct {
	activities.Activities
	launch    activities.LaunchResponse
	launchErr error
	terminate activities.TerminateInstanceResponse
	plan      activities.PlanResponse
	upsert    activities.UpsertNodeClaimResponse
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

func (s *scriptedActivities) UpsertNodeClaim(context.Context, activities.UpsertNodeClaimRequest) (activities.UpsertNodeClaimResponse, error) {
	return s.upsert, nil
}

func (s *scriptedActivities) Plan(context.Context, activities.PlanRequest) (activities.PlanResponse, error) {
	s.clock.Step(s.planTakes)
	return s.plan, nil
}

func newScripted() *scriptedActivities {
	return &scriptedActivities{clock: clocktesting.NewFakeClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))}
}

func TestInstrumentedLaunchCountsErrorsByCause(t *testing.T) {
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
			instrumented := Instrument(inner, m, inner.clock)

			_, err := instrumented.Launch(context.Background(), activities.LaunchRequest{NodePool: "default"})
			if !errors.Is(err, tc.launchErr) {
				t.Fatalf("Launch returned %v, want the inner error %v unchanged", err, tc.launchErr)
			}
			launched := testutil.ToFloat64(m.nodesLaunched.WithLabelValues("default", "m5.large", "us-east-1a", "spot"))
			if tc.launchErr == nil {
				if launched != 0 {
					t.Errorf("nodes launched = %v by the attempt, want 0: launches are counted from the node's transition", launched)
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

// A node's transitions are counted once each, from UpsertNodeClaim's
// answer: the retry of a call whose success was lost reports no transition
// and counts nothing.
func TestInstrumentedUpsertNodeClaimCountsEachTransitionOnce(t *testing.T) {
	m, _ := newTestMetrics(t)
	inner := newScripted()
	instrumented := Instrument(inner, m, inner.clock)
	instance := &activities.LaunchResponse{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}
	expired := &activities.NodeClaimTermination{Reason: "Expired"}
	steps := []struct {
		req  activities.UpsertNodeClaimRequest
		resp activities.UpsertNodeClaimResponse
	}{
		{activities.UpsertNodeClaimRequest{Phase: "Launching"}, activities.UpsertNodeClaimResponse{Created: true, Entered: "Launching"}},
		{activities.UpsertNodeClaimRequest{Phase: "Launching"}, activities.UpsertNodeClaimResponse{}}, // a retry
		{activities.UpsertNodeClaimRequest{Phase: "Registering", Instance: instance}, activities.UpsertNodeClaimResponse{Entered: "Registering", Left: "Launching", LeftAfter: 20 * time.Second}},
		{activities.UpsertNodeClaimRequest{Phase: "Registering", Instance: instance}, activities.UpsertNodeClaimResponse{}}, // a retry
		{activities.UpsertNodeClaimRequest{Phase: "Initializing", Instance: instance}, activities.UpsertNodeClaimResponse{Entered: "Initializing", Left: "Registering", LeftAfter: time.Minute}},
		{activities.UpsertNodeClaimRequest{Phase: "Ready", Instance: instance}, activities.UpsertNodeClaimResponse{Entered: "Ready", Left: "Initializing", LeftAfter: time.Second}},
		{activities.UpsertNodeClaimRequest{Phase: "Draining", Instance: instance, Termination: expired}, activities.UpsertNodeClaimResponse{Entered: "Draining", Left: "Ready", LeftAfter: time.Hour}},
		{activities.UpsertNodeClaimRequest{Phase: "Terminating", Instance: instance, Termination: expired}, activities.UpsertNodeClaimResponse{Entered: "Terminating", Left: "Draining", LeftAfter: time.Minute}},
		{activities.UpsertNodeClaimRequest{Phase: "Terminated", Instance: instance, Termination: expired}, activities.UpsertNodeClaimResponse{Entered: "Terminated", Left: "Terminating", LeftAfter: time.Minute}},
		{activities.UpsertNodeClaimRequest{Phase: "Terminated", Instance: instance, Termination: expired}, activities.UpsertNodeClaimResponse{Skipped: "gone"}}, // a retry
	}
	for _, step := range steps {
		step.req.NodePool = "default"
		inner.upsert = step.resp
		if _, err := instrumented.UpsertNodeClaim(context.Background(), step.req); err != nil {
			t.Fatal(err)
		}
	}
	for name, got := range map[string]float64{
		"nodeclaims created":    testutil.ToFloat64(m.nodeClaimsCreated.WithLabelValues("provisioned", "default", "false")),
		"nodes launched":        testutil.ToFloat64(m.nodesLaunched.WithLabelValues("default", "m5.large", "us-east-1a", "spot")),
		"nodes created":         testutil.ToFloat64(m.nodesCreated.WithLabelValues("default", "us-east-1a")),
		"nodeclaims disrupted":  testutil.ToFloat64(m.nodeClaimsDisrupted.WithLabelValues("expired", "default", "spot", "", "graceful")),
		"nodeclaims terminated": testutil.ToFloat64(m.nodeClaimsTerminated.WithLabelValues("default", "spot", "us-east-1a")),
		"nodes terminated":      testutil.ToFloat64(m.nodesTerminated.WithLabelValues("default", "us-east-1a", "Expired")),
	} {
		if got != 1 {
			t.Errorf("%s = %v, want 1", name, got)
		}
	}
	if n := testutil.CollectAndCount(m.phaseDuration); n != 6 {
		t.Errorf("%d phase duration series, want one per phase left (6)", n)
	}
}

func TestInstrumentedPlanRecordsTheBatch(t *testing.T) {
	m, _ := newTestMetrics(t)
	inner := newScripted()
	inner.planTakes = 250 * time.Millisecond
	inner.plan = activities.PlanResponse{
		PodsConsidered: 7,
		Unschedulable:  []activities.UnschedulablePod{{PodKey: "default/big", Reason: "no pool fits"}},
		Plans:          []activities.NodeLaunchSpec{{NodePool: "default"}, {NodePool: "default"}, {NodePool: "gpu"}},
	}
	instrumented := Instrument(inner, m, inner.clock)
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
	if got := sampleSum(t, m, "millwright_scheduler_scheduling_duration_seconds"); got != 0.25 {
		t.Errorf("scheduling duration sum = %v, want 0.25", got)
	}
	if got := testutil.ToFloat64(m.unschedulablePods.WithLabelValues(ProvisionerController)); got != 1 {
		t.Errorf("unschedulable pods = %v, want 1", got)
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
