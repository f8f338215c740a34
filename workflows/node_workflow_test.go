package workflows

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/millwright/millwright/activities"
)

func TestNodeGoesThroughEveryPhase(t *testing.T) {
	h := newNodeHarness(t)
	var mu sync.Mutex
	var publishedPhases []string
	var lastSearchAttributes map[string]string
	h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		mu.Lock()
		defer mu.Unlock()
		attributes := args.Get(0).(temporal.SearchAttributes)
		lastSearchAttributes = map[string]string{}
		for _, key := range []temporal.SearchAttributeKeyKeyword{NodePoolAttribute, InstanceTypeAttribute, ZoneAttribute,
			CapacityTypeAttribute, NodeNameAttribute, InstanceIDAttribute, PhaseAttribute, TerminationReasonAttribute} {
			if value, ok := attributes.GetKeyword(key); ok {
				lastSearchAttributes[key.GetName()] = value
			}
		}
		publishedPhases = append(publishedPhases, lastSearchAttributes[PhaseAttribute.GetName()])
	}).Return(nil)
	h.signal(time.Hour, SignalDrain, DrainRequest{Reason: "kernel upgrade", Requester: "alice"})

	spec := nodeSpec(terminationGracePeriod(10 * time.Minute))
	result := h.runNode(spec, nil)

	want := Termination{Reason: ReasonDrained, Detail: "kernel upgrade", Requester: "alice", RequestedAt: t0.Add(time.Hour), Voluntary: true}
	if result.Termination != want {
		t.Errorf("termination = %+v, want %+v", result.Termination, want)
	}
	if result.NodeName != testNodeName || result.Instance == nil || result.Instance.InstanceID != testInstance {
		t.Errorf("result does not name the node and instance: %+v", result)
	}
	history := h.history()
	wantPhases := []Phase{PhaseRegistering, PhaseInitializing, PhaseReady, PhaseDraining, PhaseTerminating, PhaseTerminated}
	if got := phasesOf(history); !slices.Equal(got, wantPhases) {
		t.Errorf("phases = %v, want %v", got, wantPhases)
	}
	mu.Lock()
	wantPublished := []string{"Launching", "Registering", "Initializing", "Ready", "Draining", "Terminating", "Terminated"}
	if !slices.Equal(publishedPhases, wantPublished) {
		t.Errorf("MillwrightPhase upserts = %v, want %v", publishedPhases, wantPublished)
	}
	wantAttributes := map[string]string{
		"MillwrightNodePool": "default", "MillwrightInstanceType": "m5.large", "MillwrightZone": "us-east-1a",
		"MillwrightCapacityType": "spot", "MillwrightNodeName": testNodeName, "MillwrightInstanceID": testInstance,
		"MillwrightPhase": "Terminated", "MillwrightTerminationReason": "Drained",
	}
	for name, value := range wantAttributes {
		if lastSearchAttributes[name] != value {
			t.Errorf("search attribute %s = %q, want %q", name, lastSearchAttributes[name], value)
		}
	}
	mu.Unlock()

	for activity, times := range map[string]int{
		activities.LaunchActivity: 1, activities.WaitForRegistrationActivity: 1, activities.RegisterNodeActivity: 1,
		activities.WaitForInitializationActivity: 1, activities.AllowDisruptionActivity: 0, activities.DrainActivity: 1,
		activities.TerminateInstanceActivity: 1, activities.WaitForInstanceTerminatedActivity: 1, activities.DeleteNodeActivity: 1,
	} {
		if got := len(h.rec.calls(activity)); got != times {
			t.Errorf("%s called %d time(s), want %d", activity, got, times)
		}
	}
	launch := h.rec.calls(activities.LaunchActivity)[0].(*activities.LaunchRequest)
	workflowID := NodeWorkflowID(testCluster, testNodeClaim)
	if launch.ClientToken != activities.LaunchClientToken(workflowID, spec.InstanceTypeOptions) || launch.WorkflowID != workflowID {
		t.Errorf("launch request does not carry the workflow's client token: %+v", launch)
	}
	if launch.Labels[activities.NodeClaimLabel] != testNodeClaim || launch.Labels["team"] != "payments" {
		t.Errorf("launch labels = %v, want the spec's plus %s", launch.Labels, activities.NodeClaimLabel)
	}
	register := h.rec.calls(activities.RegisterNodeActivity)[0].(*activities.RegisterNodeRequest)
	if register.NodeName != testNodeName || register.Labels[activities.NodeClaimLabel] != testNodeClaim || register.Labels["team"] != "payments" {
		t.Errorf("register request = %+v", register)
	}
	if register.Labels["node.kubernetes.io/instance-type"] != "m5.large" || register.Labels["millwright.dev/capacity-type"] != "spot" {
		t.Errorf("register labels = %v, want the launched offering's labels too", register.Labels)
	}
	for key, want := range map[string]string{
		"millwright.dev/image-id": "ami-0a", "millwright.dev/subnet-id": "subnet-0a", "millwright.dev/security-group-ids": "sg-0a,sg-0b",
	} {
		if got := register.Annotations[key]; got != want {
			t.Errorf("register annotation %s = %q, want %q (the launch's drift stamp)", key, got, want)
		}
	}
	claim := h.rec.calls(activities.UpsertNodeClaimActivity)
	if last := claim[len(claim)-1].(*activities.UpsertNodeClaimRequest); last.Annotations["millwright.dev/image-id"] != "ami-0a" {
		t.Errorf("NodeClaim annotations = %v, want the drift stamps too", last.Annotations)
	}
	drain := h.rec.calls(activities.DrainActivity)[0].(*activities.DrainRequest)
	if !drain.Voluntary || !drain.Deadline.Equal(t0.Add(time.Hour+10*time.Minute)) || drain.Reason != "Drained: kernel upgrade (by alice)" {
		t.Errorf("drain request = %+v, want voluntary with the grace period's deadline", drain)
	}
	deleteNode := h.rec.calls(activities.DeleteNodeActivity)[0].(*activities.DeleteNodeRequest)
	if deleteNode.NodeName != testNodeName || deleteNode.ProviderID != "aws:///us-east-1a/"+testInstance {
		t.Errorf("delete request = %+v", deleteNode)
	}

	for _, line := range []string{
		"Launched instance: i-0123456789abcdef0, type: m5.large, zone: us-east-1a, hostname: ip-10-0-0-1.ec2.internal",
		"Registered node", "Initialized node", "Drain requested", "Terminated instance", "Deleted node", "Node terminated",
	} {
		if !h.rec.hasLog(line) {
			t.Errorf("missing log line %q; got %q", line, h.rec.logLines())
		}
	}
	if history.Launch.Chosen == nil || history.Launch.Chosen.InstanceType != "m5.large" || history.Launch.Chosen.CapacityType != "spot" ||
		!slices.Equal(history.Launch.OptionsConsidered, []string{"m5.large", "m5.xlarge"}) || len(history.Launch.PodKeys) != 2 {
		t.Errorf("launch record = %+v", history.Launch)
	}
	replans := h.rec.replanRequests()
	if len(replans) != 1 || replans[0].NodeClaimName != testNodeClaim || replans[0].Reason != "node terminated: Drained" || len(replans[0].PodKeys) != 0 {
		t.Errorf("provisioner signals = %+v, want one settling node terminated", replans)
	}
}

// readyExit is one way out of the Ready phase.
type readyExit struct {
	name       string
	spec       []specOption
	podsAtInit int
	setup      func(h *harness)
	reason     TerminationReason
	// requestedAt is when the workflow decided to terminate (offset from t0).
	requestedAt time.Duration
	voluntary   bool
	// drainDeadline is the drain's deadline as an offset from t0; zero: none.
	drainDeadline   time.Duration
	logs            []string
	replanDisrupted bool
	check           func(t *testing.T, h *harness, history NodeHistoryView)
}

func TestNodeLeavesReady(t *testing.T) {
	cases := []readyExit{
		{
			name:        "empty for consolidateAfter",
			spec:        []specOption{consolidateAfter(30 * time.Second)},
			reason:      ReasonEmpty,
			requestedAt: 30 * time.Second,
			voluntary:   true,
			logs:        []string{"Added TTL to empty node", "Triggering termination after 30s for empty node"},
		},
		{
			name: "a pod arriving cancels the empty countdown",
			spec: []specOption{consolidateAfter(5 * time.Minute)},
			setup: func(h *harness) {
				h.signal(10*time.Second, SignalPodsChanged, PodsChanged{NonDaemonSetPods: 1, ObservedAt: t0.Add(10 * time.Second)})
				// A late report from another worker must not undo the arrival.
				h.signal(20*time.Second, SignalPodsChanged, PodsChanged{NonDaemonSetPods: 0, ObservedAt: t0.Add(5 * time.Second)})
				h.signal(time.Hour, SignalPodsChanged, PodsChanged{NonDaemonSetPods: 0, ObservedAt: t0.Add(time.Hour)})
			},
			reason:      ReasonEmpty,
			requestedAt: time.Hour + 5*time.Minute,
			voluntary:   true,
			logs:        []string{"Added TTL to empty node", "Removed TTL from node", "Triggering termination after 5m for empty node"},
			check: func(t *testing.T, h *harness, history NodeHistoryView) {
				if at := decisionAt(t, history, "A pod arrived"); !at.Equal(t0.Add(10 * time.Second)) {
					t.Errorf("countdown cancelled at %s, want t0+10s", at.Sub(t0))
				}
			},
		},
		{
			// Karpenter v1's default consolidateAfter: the node initializes
			// before the scheduler binds the pods it was launched for.
			name: "a node launched for pods waits for them to bind (consolidateAfter 0s)",
			spec: []specOption{consolidateAfter(0)},
			setup: func(h *harness) {
				h.signal(3*time.Second, SignalPodsChanged, PodsChanged{NonDaemonSetPods: 2, ObservedAt: t0.Add(3 * time.Second)})
				h.signal(2*time.Hour, SignalPodsChanged, PodsChanged{NonDaemonSetPods: 0, ObservedAt: t0.Add(2 * time.Hour)})
			},
			reason:      ReasonEmpty,
			requestedAt: 2 * time.Hour,
			voluntary:   true,
			check: func(t *testing.T, h *harness, history NodeHistoryView) {
				decisionAt(t, history, "Node is nominated for 2 pod(s) until 2026-03-01T12:00:20Z")
			},
		},
		{
			name:        "a nominated node whose pods never bind goes after the nomination window",
			spec:        []specOption{consolidateAfter(0), nominationWindow(45 * time.Second)},
			reason:      ReasonEmpty,
			requestedAt: 45 * time.Second,
			voluntary:   true,
		},
		{
			name:        "a node launched for no pod is not nominated",
			spec:        []specOption{consolidateAfter(0), func(s *activities.NodeLaunchSpec) { s.PodKeys = nil }},
			reason:      ReasonEmpty,
			requestedAt: 0,
			voluntary:   true,
		},
		{
			name:       "consolidateAfter counts from the pod event that emptied the node",
			spec:       []specOption{consolidateAfter(30 * time.Second)},
			podsAtInit: 1,
			setup: func(h *harness) {
				h.signal(2*time.Hour, SignalPodsChanged, PodsChanged{NonDaemonSetPods: 0, ObservedAt: t0.Add(2*time.Hour - 10*time.Second)})
			},
			reason:      ReasonEmpty,
			requestedAt: 2*time.Hour + 20*time.Second,
			voluntary:   true,
		},
		{
			// Before change refused-empty-waits the node asked again every
			// RetryAfter (10 s by default): ~4k history events per
			// node-hour while the budget said no.
			name: "a node its budget refused waits for the disruption workflow, without polling",
			spec: []specOption{consolidateAfter(30 * time.Second)},
			setup: func(h *harness) {
				captureSignals(h)
				h.env.OnActivity(activities.AllowDisruptionActivity, mock.Anything, mock.Anything).
					Return(activities.AllowDisruptionResponse{Why: "budget of pool default allows 0 disruptions now", RetryAfter: 5 * time.Second}, nil).Once()
				h.at(10*time.Minute, func() {
					h.env.UpdateWorkflow(UpdateReserve, "r", &testsuite.TestUpdateCallback{
						OnReject: func(err error) { h.t.Errorf("reservation rejected: %v", err) }, OnComplete: func(any, error) {},
					}, ReserveRequest{CommandID: testCommandID, Reason: string(ReasonEmpty), Message: "Empty: 3 nodes"})
				})
				h.signal(10*time.Minute+time.Second, SignalDisruptionCommit, CommandSignal{CommandID: testCommandID})
			},
			reason:      ReasonEmpty,
			requestedAt: 10*time.Minute + time.Second,
			voluntary:   true,
			check: func(t *testing.T, h *harness, history NodeHistoryView) {
				decisionAt(t, history, "Empty node kept: budget of pool default allows 0 disruptions now; the disruption workflow takes it when the budget allows")
				if n := len(h.rec.calls(activities.AllowDisruptionActivity)); n != 1 {
					t.Errorf("asked AllowDisruption %d times, want once (no polling)", n)
				}
			},
		},
		{
			name:        "expiry",
			spec:        []specOption{expireAfter(24 * time.Hour), terminationGracePeriod(time.Hour)},
			podsAtInit:  3,
			reason:      ReasonExpired,
			requestedAt: 24 * time.Hour,
			// Expiry is forceful: not voluntary.
			drainDeadline: 25 * time.Hour,
			logs:          []string{"Node expired"},
		},
		{
			name:       "expiry counts from creation, not from readiness",
			spec:       []specOption{expireAfter(time.Hour)},
			podsAtInit: 1,
			setup: func(h *harness) {
				h.env.OnActivity(activities.WaitForRegistrationActivity, mock.Anything, mock.Anything).
					Return(activities.WaitForRegistrationResponse{NodeName: testNodeName}, nil).After(10 * time.Minute)
			},
			reason:      ReasonExpired,
			requestedAt: time.Hour,
		},
		{
			name:       "spot interruption warning",
			spec:       []specOption{terminationGracePeriod(10 * time.Minute)},
			podsAtInit: 2,
			setup: func(h *harness) {
				h.signal(2*time.Hour, SignalInterruption, Interruption{Kind: InterruptionSpotWarning, EventID: "e-1", EventTime: t0.Add(2 * time.Hour), Deadline: t0.Add(2*time.Hour + 2*time.Minute)})
				// The same event from a second poller changes nothing.
				h.signal(2*time.Hour, SignalInterruption, Interruption{Kind: InterruptionSpotWarning, EventID: "e-1", EventTime: t0.Add(2 * time.Hour), Deadline: t0.Add(2*time.Hour + 2*time.Minute)})
			},
			reason:          ReasonInterrupted,
			requestedAt:     2 * time.Hour,
			drainDeadline:   2*time.Hour + 2*time.Minute,
			replanDisrupted: true,
			check: func(t *testing.T, h *harness, history NodeHistoryView) {
				if len(history.Interruptions) != 1 {
					t.Errorf("interruptions = %+v, want the duplicate dropped", history.Interruptions)
				}
			},
		},
		{
			name:       "instance stopping",
			spec:       []specOption{terminationGracePeriod(10 * time.Minute)},
			podsAtInit: 2,
			setup: func(h *harness) {
				h.signal(2*time.Hour, SignalInterruption, Interruption{Kind: InterruptionStateChange, EventID: "e-2", Detail: "stopping"})
			},
			reason:          ReasonInterrupted,
			requestedAt:     2 * time.Hour,
			drainDeadline:   2*time.Hour + 10*time.Minute,
			replanDisrupted: true,
			check: func(t *testing.T, h *harness, history NodeHistoryView) {
				if history.Termination.Detail != "state-change stopping" {
					t.Errorf("termination detail = %q", history.Termination.Detail)
				}
			},
		},
		{
			name:       "an interruption right behind a manual drain makes the drain involuntary",
			podsAtInit: 1,
			setup: func(h *harness) {
				h.at(2*time.Hour, func() {
					h.env.SignalWorkflowSkippingWorkflowTask(SignalDrain, DrainRequest{Reason: "maintenance", Requester: "kim"})
					h.env.SignalWorkflow(SignalInterruption, Interruption{Kind: InterruptionSpotWarning, EventID: "e-4", Deadline: t0.Add(2*time.Hour + 2*time.Minute)})
				})
			},
			reason:          ReasonDrained,
			requestedAt:     2 * time.Hour,
			drainDeadline:   2*time.Hour + 2*time.Minute,
			replanDisrupted: true,
		},
		{
			name:       "rebalance recommendation is only recorded",
			podsAtInit: 1,
			setup: func(h *harness) {
				h.signal(time.Hour, SignalInterruption, Interruption{Kind: InterruptionRebalance, EventID: "e-3"})
				h.signal(2*time.Hour, SignalDrain, DrainRequest{Reason: "done testing", Requester: "bob"})
			},
			reason:      ReasonDrained,
			requestedAt: 2 * time.Hour,
			voluntary:   true,
			logs:        []string{"Rebalance recommendation recorded"},
			check: func(t *testing.T, h *harness, history NodeHistoryView) {
				if len(history.Interruptions) != 1 || history.Interruptions[0].Kind != InterruptionRebalance {
					t.Errorf("interruptions = %+v, want the rebalance recorded", history.Interruptions)
				}
			},
		},
		{
			name:       "manual drain signal",
			spec:       []specOption{terminationGracePeriod(10 * time.Minute)},
			podsAtInit: 1,
			setup: func(h *harness) {
				h.signal(3*time.Hour, SignalDrain, DrainRequest{Reason: "replace AMI", Requester: "carol"})
			},
			reason:        ReasonDrained,
			requestedAt:   3 * time.Hour,
			voluntary:     true,
			drainDeadline: 3*time.Hour + 10*time.Minute,
			check: func(t *testing.T, h *harness, history NodeHistoryView) {
				if history.Termination.Requester != "carol" || history.Termination.Detail != "replace AMI" {
					t.Errorf("termination = %+v, want carol's reason", history.Termination)
				}
			},
		},
		{
			name:       "drain update",
			podsAtInit: 1,
			setup: func(h *harness) {
				h.at(3*time.Hour, func() {
					h.env.UpdateWorkflow(UpdateDrain, "drain-1", &testsuite.TestUpdateCallback{
						OnReject: func(err error) { h.t.Errorf("drain update rejected: %v", err) },
						OnComplete: func(result any, err error) {
							if got, ok := result.(DrainResult); err != nil || !ok || !got.Accepted || got.Phase != PhaseReady {
								h.t.Errorf("drain update completed with %+v, %v", result, err)
							}
						},
					}, DrainRequest{Reason: "rotate", Requester: "dave"})
				})
			},
			reason:      ReasonDrained,
			requestedAt: 3 * time.Hour,
			voluntary:   true,
		},
		{
			name:       "node deleted",
			spec:       []specOption{terminationGracePeriod(10 * time.Minute)},
			podsAtInit: 1,
			setup: func(h *harness) {
				h.signal(4*time.Hour, SignalNodeDeleted, NodeDeleted{DeletionTimestamp: t0.Add(4*time.Hour - 30*time.Second)})
				h.signal(4*time.Hour, SignalNodeDeleted, NodeDeleted{DeletionTimestamp: t0.Add(4*time.Hour - 30*time.Second)})
			},
			reason:      ReasonDeleted,
			requestedAt: 4 * time.Hour,
			voluntary:   true,
			// The grace period counts from the Node's deletion timestamp.
			drainDeadline: 4*time.Hour - 30*time.Second + 10*time.Minute,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newNodeHarness(t)
			h.env.OnActivity(activities.WaitForInitializationActivity, mock.Anything, mock.Anything).
				Return(activities.WaitForInitializationResponse{NonDaemonSetPods: tc.podsAtInit}, nil).Maybe()
			if tc.setup != nil {
				tc.setup(h)
			}
			result := h.runNode(nodeSpec(tc.spec...), nil)
			history := h.history()
			if result.Termination.Reason != tc.reason {
				t.Fatalf("terminated for %s, want %s; decisions:\n%s", result.Termination.Reason, tc.reason, formatDecisions(history.Decisions))
			}
			if at := decisionAt(t, history, "Termination requested"); !at.Equal(t0.Add(tc.requestedAt)) {
				t.Errorf("termination requested at t0+%s, want t0+%s", at.Sub(t0), tc.requestedAt)
			}
			drains := h.rec.calls(activities.DrainActivity)
			if len(drains) != 1 {
				t.Fatalf("drained %d time(s), want once", len(drains))
			}
			drain := drains[0].(*activities.DrainRequest)
			var wantDeadline time.Time
			if tc.drainDeadline != 0 {
				wantDeadline = t0.Add(tc.drainDeadline)
			}
			if drain.Voluntary != tc.voluntary || !drain.Deadline.Equal(wantDeadline) {
				t.Errorf("drain voluntary=%v deadline=%s, want voluntary=%v deadline=%s", drain.Voluntary, formatDeadline(drain.Deadline), tc.voluntary, formatDeadline(wantDeadline))
			}
			for _, line := range tc.logs {
				if !h.rec.hasLog(line) {
					t.Errorf("missing log line %q; got %q", line, h.rec.logLines())
				}
			}
			var disrupted []ReplanRequest
			for _, replan := range h.rec.replanRequests() {
				if len(replan.DisruptedNodes) > 0 {
					disrupted = append(disrupted, replan)
				}
			}
			if tc.replanDisrupted {
				if len(disrupted) != 1 || disrupted[0].DisruptedNodes[0] != testNodeName {
					t.Errorf("provisioner told about disrupted node %d time(s) (%+v), want once", len(disrupted), disrupted)
				}
			} else if len(disrupted) > 0 {
				t.Errorf("provisioner told about a disrupted node: %+v", disrupted)
			}
			if tc.check != nil {
				tc.check(t, h, history)
			}
		})
	}
}

func TestInterruptionDuringVoluntaryDrainTightensIt(t *testing.T) {
	h := newNodeHarness(t)
	// The first drain is stuck on a PDB until it is cancelled.
	h.env.OnActivity(activities.DrainActivity, mock.Anything, mock.MatchedBy(func(req activities.DrainRequest) bool { return req.Voluntary })).
		Return(activities.DrainResponse{}, nil).After(time.Hour)
	h.env.OnActivity(activities.DrainActivity, mock.Anything, mock.MatchedBy(func(req activities.DrainRequest) bool { return !req.Voluntary })).
		Return(activities.DrainResponse{Evicted: 2, Deleted: 1}, nil)
	h.signal(time.Hour, SignalDrain, DrainRequest{Reason: "maintenance", Requester: "erin"})
	h.signal(time.Hour+5*time.Minute, SignalInterruption, Interruption{Kind: InterruptionSpotWarning, EventID: "e-9", Deadline: t0.Add(time.Hour + 7*time.Minute)})

	result := h.runNode(nodeSpec(), nil)

	if result.Termination.Reason != ReasonDrained {
		t.Errorf("the first reason must stay the termination reason, got %s", result.Termination.Reason)
	}
	drains := h.rec.calls(activities.DrainActivity)
	if len(drains) != 2 {
		t.Fatalf("drain ran %d time(s), want 2 (voluntary, then restarted involuntary)", len(drains))
	}
	second := drains[1].(*activities.DrainRequest)
	if second.Voluntary || !second.Deadline.Equal(t0.Add(time.Hour+7*time.Minute)) {
		t.Errorf("restarted drain = %+v, want involuntary until the interruption", second)
	}
	history := h.history()
	decisionAt(t, history, "Drain restarted")
	if replans := h.rec.replanRequests(); len(replans) != 2 || replans[0].DisruptedNodes[0] != testNodeName {
		t.Errorf("provisioner signals = %+v, want the disrupted node then the termination", replans)
	}
}

func TestDrainUpdateValidation(t *testing.T) {
	type attempt struct {
		at      time.Duration
		request DrainRequest
		// rejected is a substring of the expected rejection; empty: accepted.
		rejected string
		phase    Phase
	}
	cases := []struct {
		name     string
		setup    func(h *harness)
		attempts []attempt
		reason   TerminationReason
		check    func(t *testing.T, h *harness)
	}{
		{
			name: "a reason is required",
			attempts: []attempt{
				{at: time.Hour, request: DrainRequest{Requester: "frank"}, rejected: "reason is required"},
				{at: 2 * time.Hour, request: DrainRequest{Reason: "  ", Requester: "frank"}, rejected: "reason is required"},
				{at: 3 * time.Hour, request: DrainRequest{Reason: "now with a reason"}, phase: PhaseReady},
			},
			reason: ReasonDrained,
			check: func(t *testing.T, h *harness) {
				if got := h.history().Termination.Requester; got != "unknown" {
					t.Errorf("requester = %q, want unknown when not given", got)
				}
			},
		},
		{
			name: "refused once draining",
			setup: func(h *harness) {
				h.env.OnActivity(activities.DrainActivity, mock.Anything, mock.Anything).Return(activities.DrainResponse{}, nil).After(10 * time.Minute)
			},
			attempts: []attempt{
				{at: time.Hour, request: DrainRequest{Reason: "first", Requester: "grace"}, phase: PhaseReady},
				{at: time.Hour + 5*time.Minute, request: DrainRequest{Reason: "second", Requester: "heidi"}, rejected: "is already Draining (Drained: first (by grace))"},
			},
			reason: ReasonDrained,
		},
		{
			name: "refused when another reason already ends the node",
			setup: func(h *harness) {
				h.env.OnActivity(activities.DrainActivity, mock.Anything, mock.Anything).Return(activities.DrainResponse{}, nil).After(10 * time.Minute)
				h.signal(time.Hour, SignalNodeDeleted, NodeDeleted{})
			},
			attempts: []attempt{
				{at: time.Hour + time.Minute, request: DrainRequest{Reason: "too late", Requester: "ivan"}, rejected: "is already Draining (Deleted"},
			},
			reason: ReasonDeleted,
		},
		{
			name: "accepted while launching: terminated right after the launch",
			setup: func(h *harness) {
				h.env.OnActivity(activities.LaunchActivity, mock.Anything, mock.Anything).Return(fakeWorld{}.Launch).After(time.Minute)
			},
			attempts: []attempt{
				{at: 30 * time.Second, request: DrainRequest{Reason: "changed my mind", Requester: "judy"}, phase: PhaseLaunching},
				{at: 40 * time.Second, request: DrainRequest{Reason: "twice", Requester: "judy"}, rejected: "already Draining"},
			},
			reason: ReasonDrained,
			check: func(t *testing.T, h *harness) {
				if n := len(h.rec.calls(activities.WaitForRegistrationActivity)); n != 0 {
					t.Errorf("waited for registration %d time(s) after a drain", n)
				}
				if n := len(h.rec.calls(activities.TerminateInstanceActivity)); n != 1 {
					t.Errorf("terminated %d time(s), want the launched instance terminated once", n)
				}
				if got := phasesOf(h.history()); !slices.Equal(got, []Phase{PhaseTerminating, PhaseTerminated}) {
					t.Errorf("phases = %v", got)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newNodeHarness(t)
			if tc.setup != nil {
				tc.setup(h)
			}
			outcomes := make([]string, len(tc.attempts))
			for i, a := range tc.attempts {
				h.at(a.at, func() {
					h.env.UpdateWorkflow(UpdateDrain, "drain-"+string(rune('a'+i)), &testsuite.TestUpdateCallback{
						OnReject: func(err error) { outcomes[i] = "rejected: " + err.Error() },
						OnComplete: func(result any, err error) {
							if err != nil {
								outcomes[i] = "failed: " + err.Error()
								return
							}
							outcomes[i] = "accepted in " + string(result.(DrainResult).Phase)
						},
					}, a.request)
				})
			}
			h.env.OnActivity(activities.WaitForInitializationActivity, mock.Anything, mock.Anything).
				Return(activities.WaitForInitializationResponse{NonDaemonSetPods: 1}, nil).Maybe()
			result := h.runNode(nodeSpec(), nil)
			for i, a := range tc.attempts {
				if a.rejected != "" {
					if !strings.HasPrefix(outcomes[i], "rejected: ") || !strings.Contains(outcomes[i], a.rejected) {
						t.Errorf("attempt %d: %q, want rejected with %q", i, outcomes[i], a.rejected)
					}
				} else if outcomes[i] != "accepted in "+string(a.phase) {
					t.Errorf("attempt %d: %q, want accepted in %s", i, outcomes[i], a.phase)
				}
			}
			if result.Termination.Reason != tc.reason {
				t.Errorf("terminated for %s, want %s", result.Termination.Reason, tc.reason)
			}
			if tc.check != nil {
				tc.check(t, h)
			}
		})
	}
}

func TestLaunchFallsBackWhenCapacityIsInsufficient(t *testing.T) {
	h := newNodeHarness(t)
	spotFailed := []activities.OfferingKey{
		{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: activities.CapacityTypeSpot},
		{InstanceType: "m5.large", Zone: "us-east-1b", CapacityType: activities.CapacityTypeSpot},
	}
	h.env.OnActivity(activities.LaunchActivity, mock.Anything, mock.Anything).
		Return(activities.LaunchResponse{}, activities.NewInsufficientCapacityError("InsufficientInstanceCapacity", spotFailed)).Once()
	h.env.OnActivity(activities.LaunchActivity, mock.Anything, mock.Anything).Return(fakeWorld{}.Launch).Once()
	h.signal(time.Hour, SignalDrain, DrainRequest{Reason: "end of test", Requester: "test"})

	result := h.runNode(nodeSpec(), nil)

	launches := h.rec.calls(activities.LaunchActivity)
	if len(launches) != 2 {
		t.Fatalf("launched %d time(s), want 2", len(launches))
	}
	first, second := launches[0].(*activities.LaunchRequest), launches[1].(*activities.LaunchRequest)
	if len(second.Options) != 1 || second.Options[0].Name != "m5.xlarge" {
		t.Errorf("second launch offered %+v, want only the remaining m5.xlarge", second.Options)
	}
	if first.ClientToken == second.ClientToken {
		t.Error("a launch with different options must use a different client token")
	}
	if result.Instance.InstanceType != "m5.xlarge" || result.Instance.CapacityType != activities.CapacityTypeOnDemand {
		t.Errorf("launched %+v, want the on-demand fallback", result.Instance)
	}
	history := h.history()
	if len(history.Launch.Rejected) != 2 || history.Launch.Rejected[0].Reason != "insufficient capacity" {
		t.Errorf("rejected offerings = %+v", history.Launch.Rejected)
	}
	decisionAt(t, history, "Insufficient capacity for m5.large/us-east-1a/spot, m5.large/us-east-1b/spot; retrying with 1 remaining option(s) [m5.xlarge]")
	if !h.rec.hasLog("Launched instance: i-0123456789abcdef0, type: m5.xlarge, zone: us-east-1a, hostname: ip-10-0-0-1.ec2.internal") {
		t.Errorf("missing launch log; got %q", h.rec.logLines())
	}
}

func TestInsufficientCapacityEverywhereReplansThePods(t *testing.T) {
	h := newNodeHarness(t)
	h.env.OnActivity(activities.LaunchActivity, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req activities.LaunchRequest) (activities.LaunchResponse, error) {
			option := req.Options[0]
			var failed []activities.OfferingKey
			for _, o := range option.Offerings {
				failed = append(failed, activities.OfferingKey{InstanceType: option.Name, Zone: o.Zone, CapacityType: o.CapacityType})
			}
			return activities.LaunchResponse{}, activities.NewInsufficientCapacityError("InsufficientInstanceCapacity", failed)
		})

	result := h.runNode(nodeSpec(), nil)

	if result.Termination.Reason != ReasonInsufficientCapacity {
		t.Fatalf("terminated for %s, want InsufficientCapacity", result.Termination.Reason)
	}
	if n := len(h.rec.calls(activities.LaunchActivity)); n != 2 {
		t.Errorf("launched %d time(s), want one per option", n)
	}
	for _, activity := range []string{activities.TerminateInstanceActivity, activities.DeleteNodeActivity, activities.DrainActivity} {
		if n := len(h.rec.calls(activity)); n != 0 {
			t.Errorf("%s called %d time(s) for a node that never launched", activity, n)
		}
	}
	replans := h.rec.replanRequests()
	if len(replans) != 2 {
		t.Fatalf("provisioner signals = %+v, want the re-plan and the settlement", replans)
	}
	replan := replans[0]
	if !slices.Equal(replan.PodKeys, []string{"default/web-1", "default/web-2"}) || len(replan.UnavailableOfferings) != 3 {
		t.Errorf("re-plan = %+v, want both pods and all three offerings unavailable", replan)
	}
	for _, unavailable := range replan.UnavailableOfferings {
		if !unavailable.Until.Equal(t0.Add(activities.UnavailableOfferingTTL)) {
			t.Errorf("offering %s unavailable until %s, want t0+3m", unavailable.OfferingKey, unavailable.Until.Sub(t0))
		}
	}
	if got := phasesOf(h.history()); !slices.Equal(got, []Phase{PhaseTerminated}) {
		t.Errorf("phases = %v, want straight to Terminated", got)
	}
}

func TestLaunchFailures(t *testing.T) {
	cases := []struct {
		name        string
		err         error
		replansPods bool
	}{
		{name: "invalid node class is not re-planned in a loop", err: activities.NewInvalidNodeClassError("default", "spec.subnetSelectorTerms", "matched no subnet")},
		{name: "other failures re-plan the pods", err: temporal.NewNonRetryableApplicationError("UnauthorizedOperation", "AccessDenied", nil), replansPods: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newNodeHarness(t)
			h.env.OnActivity(activities.LaunchActivity, mock.Anything, mock.Anything).Return(activities.LaunchResponse{}, tc.err)
			result := h.runNode(nodeSpec(), nil)
			if result.Termination.Reason != ReasonLaunchFailed {
				t.Fatalf("terminated for %s, want LaunchFailed", result.Termination.Reason)
			}
			var podsReplanned bool
			for _, replan := range h.rec.replanRequests() {
				podsReplanned = podsReplanned || len(replan.PodKeys) > 0
			}
			if podsReplanned != tc.replansPods {
				t.Errorf("pods re-planned = %v, want %v", podsReplanned, tc.replansPods)
			}
		})
	}
}

func TestRegistrationTimeoutTerminatesTheInstance(t *testing.T) {
	h := newNodeHarness(t)
	h.env.OnActivity(activities.WaitForRegistrationActivity, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req activities.WaitForRegistrationRequest) (activities.WaitForRegistrationResponse, error) {
			if !req.Deadline.Equal(t0.Add(20 * time.Minute)) {
				return activities.WaitForRegistrationResponse{}, errors.New("deadline is not launch + registrationTimeout")
			}
			return activities.WaitForRegistrationResponse{}, activities.NewRegistrationTimeoutError(req.InstanceID, req.ProviderID, 20*time.Minute)
		}).After(20 * time.Minute)

	result := h.runNode(nodeSpec(func(s *activities.NodeLaunchSpec) { s.RegistrationTimeout = 20 * time.Minute }), nil)

	if result.Termination.Reason != ReasonRegistrationTimeout {
		t.Fatalf("terminated for %s (%s), want RegistrationTimeout", result.Termination.Reason, result.Termination.Detail)
	}
	if n := len(h.rec.calls(activities.TerminateInstanceActivity)); n != 1 {
		t.Errorf("terminated the instance %d time(s), want once", n)
	}
	deleteNode := h.rec.calls(activities.DeleteNodeActivity)
	if len(deleteNode) != 1 || deleteNode[0].(*activities.DeleteNodeRequest).ProviderID != "aws:///us-east-1a/"+testInstance {
		t.Errorf("delete node requests = %+v, want one by provider ID (a late registration)", deleteNode)
	}
	if n := len(h.rec.calls(activities.DrainActivity)); n != 0 {
		t.Errorf("drained %d time(s) a node that never registered", n)
	}
	if got := phasesOf(h.history()); !slices.Equal(got, []Phase{PhaseRegistering, PhaseTerminating, PhaseTerminated}) {
		t.Errorf("phases = %v", got)
	}
}

func TestInitializationTimeoutDrainsAndTerminates(t *testing.T) {
	h := newNodeHarness(t)
	h.env.OnActivity(activities.WaitForInitializationActivity, mock.Anything, mock.Anything).Return(
		activities.WaitForInitializationResponse{}, activities.NewInitializationTimeoutError(testNodeName, "startup taint example.com/agent-not-ready", DefaultInitializationTimeout)).
		After(DefaultInitializationTimeout)

	result := h.runNode(nodeSpec(), nil)

	if result.Termination.Reason != ReasonInitializationTimeout || !strings.Contains(result.Termination.Detail, "example.com/agent-not-ready") {
		t.Fatalf("termination = %+v, want InitializationTimeout naming the startup taint", result.Termination)
	}
	if got := phasesOf(h.history()); !slices.Equal(got, []Phase{PhaseRegistering, PhaseInitializing, PhaseDraining, PhaseTerminating, PhaseTerminated}) {
		t.Errorf("phases = %v", got)
	}
}

func TestInterruptionWhileRegisteringStopsWaiting(t *testing.T) {
	h := newNodeHarness(t)
	h.env.OnActivity(activities.WaitForRegistrationActivity, mock.Anything, mock.Anything).
		Return(activities.WaitForRegistrationResponse{NodeName: testNodeName}, nil).After(10 * time.Minute)
	h.signal(2*time.Minute, SignalInterruption, Interruption{Kind: InterruptionSpotWarning, EventID: "e-early", Deadline: t0.Add(4 * time.Minute)})

	result := h.runNode(nodeSpec(), nil)

	if result.Termination.Reason != ReasonInterrupted {
		t.Fatalf("terminated for %s, want Interrupted", result.Termination.Reason)
	}
	history := h.history()
	if at := decisionAt(t, history, "Phase Terminating"); !at.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("stopped waiting at t0+%s, want at the interruption", at.Sub(t0))
	}
	replans := h.rec.replanRequests()
	if len(replans) == 0 || !slices.Equal(replans[0].PodKeys, []string{"default/web-1", "default/web-2"}) {
		t.Errorf("provisioner signals = %+v, want the node's pods re-planned before it ever registered", replans)
	}
}

func TestCancelledNodeStillCleansUp(t *testing.T) {
	h := newNodeHarness(t)
	h.at(time.Hour, h.env.CancelWorkflow)

	h.env.ExecuteWorkflow(NodeWorkflowType, nodeSpec(), (*NodeState)(nil))

	var canceled *temporal.CanceledError
	if err := h.env.GetWorkflowError(); !errors.As(err, &canceled) {
		t.Fatalf("workflow error = %v, want Canceled after cleanup", err)
	}
	for _, activity := range []string{activities.DrainActivity, activities.TerminateInstanceActivity, activities.DeleteNodeActivity} {
		if n := len(h.rec.calls(activity)); n != 1 {
			t.Errorf("%s called %d time(s) after cancellation, want once", activity, n)
		}
	}
	if reason := h.history().Termination.Reason; reason != ReasonCancelled {
		t.Errorf("termination reason = %s, want Cancelled", reason)
	}
}

func TestStateQueryShowsTimersAndDeadlines(t *testing.T) {
	h := newNodeHarness(t)
	h.env.OnActivity(activities.WaitForInitializationActivity, mock.Anything, mock.Anything).
		Return(activities.WaitForInitializationResponse{NonDaemonSetPods: 0}, nil)
	var view NodeStateView
	h.at(10*time.Second, func() { view = h.state() })

	h.runNode(nodeSpec(expireAfter(24*time.Hour), consolidateAfter(time.Minute)), nil)

	if view.Phase != PhaseReady || view.NodeName != testNodeName || view.Instance == nil || view.NonDaemonSetPods != 0 {
		t.Errorf("state = %+v", view)
	}
	if !view.ExpiresAt.Equal(t0.Add(24*time.Hour)) || !view.EmptyTTLAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("deadlines: expires %s, empty TTL %s", view.ExpiresAt.Sub(t0), view.EmptyTTLAt.Sub(t0))
	}
	wantTimers := []PendingTimer{{Name: emptyTTLTimerName, FiresAt: t0.Add(time.Minute)}, {Name: expiryTimerName, FiresAt: t0.Add(24 * time.Hour)}}
	if !slices.Equal(view.Timers, wantTimers) {
		t.Errorf("timers = %+v, want %+v", view.Timers, wantTimers)
	}
}

func TestInvalidSpecFailsTheWorkflow(t *testing.T) {
	h := newNodeHarness(t)
	h.env.ExecuteWorkflow(NodeWorkflowType, nodeSpec(func(s *activities.NodeLaunchSpec) { s.InstanceTypeOptions = nil }), (*NodeState)(nil))
	var appErr *temporal.ApplicationError
	if err := h.env.GetWorkflowError(); !errors.As(err, &appErr) || appErr.Type() != InvalidNodeLaunchSpecErrorType ||
		!strings.Contains(err.Error(), "instanceTypeOptions is empty") {
		t.Fatalf("workflow error = %v, want InvalidNodeLaunchSpec naming the field", err)
	}
}

func TestNodeDeletedBeforeItRegistersTerminatesTheInstance(t *testing.T) {
	h := newNodeHarness(t)
	h.env.OnActivity(activities.RegisterNodeActivity, mock.Anything, mock.Anything).
		Return(activities.RegisterNodeResponse{}, activities.NewNodeGoneError(testNodeName, nil))

	result := h.runNode(nodeSpec(), nil)

	if result.Termination.Reason != ReasonDeleted {
		t.Fatalf("terminated for %s (%s), want Deleted", result.Termination.Reason, result.Termination.Detail)
	}
	if n := len(h.rec.calls(activities.RegisterNodeActivity)); n != 1 {
		t.Errorf("RegisterNode ran %d time(s), want once: a gone Node does not come back", n)
	}
	if n := len(h.rec.calls(activities.DrainActivity)); n != 0 {
		t.Errorf("drained %d time(s) a Node that is gone", n)
	}
	if n := len(h.rec.calls(activities.TerminateInstanceActivity)); n != 1 {
		t.Errorf("terminated the instance %d time(s), want once", n)
	}
	if got := phasesOf(h.history()); !slices.Equal(got, []Phase{PhaseRegistering, PhaseTerminating, PhaseTerminated}) {
		t.Errorf("phases = %v", got)
	}
	replans := h.rec.replanRequests()
	if len(replans) == 0 || !slices.Equal(replans[0].PodKeys, []string{"default/web-1", "default/web-2"}) {
		t.Errorf("provisioner signals = %+v, want the node's pods re-planned at once", replans)
	}
}
