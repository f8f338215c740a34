package workflows

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"

	"github.com/millwright/millwright/activities"
)

// A Ready node continues as new when the server suggests it. The next run
// must pick up exactly where the last stopped: same instance and Node, no
// second launch, every signal delivered before the switch applied, and its
// countdowns computed from absolute deadlines so continuing as new never
// extends a node's life.
func TestNodeContinuesAsNewWithoutResettingItsDeadlines(t *testing.T) {
	const switchAt = 2 * time.Hour
	cases := []struct {
		name string
		// before runs in the first run, before the switch; atSwitch at the
		// switch, before the signal that wakes the workflow.
		before      func(h *harness)
		atSwitch    func(h *harness)
		reason      TerminationReason
		requestedAt time.Duration
		check       func(t *testing.T, carried NodeState)
	}{
		{
			name:        "expiry is not reset",
			reason:      ReasonExpired,
			requestedAt: 24 * time.Hour,
		},
		{
			name: "the empty countdown keeps running",
			before: func(h *harness) {
				h.signal(switchAt-5*time.Minute, SignalPodsChanged, PodsChanged{NonDaemonSetPods: 0, ObservedAt: t0.Add(switchAt - 5*time.Minute)})
			},
			reason:      ReasonEmpty,
			requestedAt: switchAt + 5*time.Minute,
			check: func(t *testing.T, carried NodeState) {
				if !carried.EmptySince.Equal(t0.Add(switchAt - 5*time.Minute)) {
					t.Errorf("carried emptySince t0+%s, want t0+1h55m", carried.EmptySince.Sub(t0))
				}
			},
		},
		{
			name: "a node emptied by a signal delivered at the switch counts from then",
			atSwitch: func(h *harness) {
				h.env.SignalWorkflowSkippingWorkflowTask(SignalPodsChanged, PodsChanged{NonDaemonSetPods: 0, ObservedAt: t0.Add(switchAt)})
			},
			reason:      ReasonEmpty,
			requestedAt: switchAt + 10*time.Minute,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := nodeSpec(expireAfter(24*time.Hour), consolidateAfter(10*time.Minute))

			first := newNodeHarness(t)
			if tc.before != nil {
				tc.before(first)
			}
			first.at(switchAt, func() {
				first.env.SetContinueAsNewSuggested(true)
				// Signals delivered without a workflow task of their own are
				// only seen when the run drains its channels before switching.
				first.env.SignalWorkflowSkippingWorkflowTask(SignalInterruption, Interruption{Kind: InterruptionRebalance, EventID: "e-rebalance"})
				if tc.atSwitch != nil {
					tc.atSwitch(first)
				}
				first.env.SignalWorkflow(SignalInterruption, Interruption{Kind: InterruptionRebalance, EventID: "e-wake"})
			})
			first.env.ExecuteWorkflow(NodeWorkflowType, spec, (*NodeState)(nil))
			var carriedSpec activities.NodeLaunchSpec
			var carried NodeState
			continueAsNewInput(t, first.env.GetWorkflowError(), &carriedSpec, &carried)

			if carried.Phase != PhaseReady || !carried.CreatedAt.Equal(t0) || carried.NodeName != testNodeName ||
				carried.Instance == nil || carried.Instance.InstanceID != testInstance {
				t.Fatalf("carried state = %+v", carried)
			}
			if len(carried.Interruptions) != 2 || carried.Interruptions[0].EventID != "e-rebalance" || carried.Interruptions[1].EventID != "e-wake" {
				t.Errorf("carried interruptions = %+v, want both events delivered at the switch", carried.Interruptions)
			}
			if carriedSpec.NodeClaimName != spec.NodeClaimName || carriedSpec.ExpireAfter != spec.ExpireAfter {
				t.Errorf("carried spec = %+v", carriedSpec)
			}
			if tc.check != nil {
				tc.check(t, carried)
			}

			second := newNodeHarness(t)
			second.env.SetStartTime(t0.Add(switchAt))
			result := second.runNode(carriedSpec, &carried)

			if result.Termination.Reason != tc.reason {
				t.Fatalf("second run terminated for %s, want %s", result.Termination.Reason, tc.reason)
			}
			history := second.history()
			if at := decisionAt(t, history, "Termination requested"); !at.Equal(t0.Add(tc.requestedAt)) {
				t.Errorf("termination requested at t0+%s, want t0+%s", at.Sub(t0), tc.requestedAt)
			}
			for _, activity := range []string{activities.LaunchActivity, activities.WaitForRegistrationActivity,
				activities.RegisterNodeActivity, activities.WaitForInitializationActivity} {
				if n := len(second.rec.calls(activity)); n != 0 {
					t.Errorf("second run called %s %d time(s); it must resume, not relaunch", activity, n)
				}
			}
			if got := phasesOf(history); !slices.Equal(got[len(got)-3:], []Phase{PhaseDraining, PhaseTerminating, PhaseTerminated}) {
				t.Errorf("phases = %v", got)
			}
		})
	}
}

// A node told to go while its continue-as-new waits for the NodeClaim write
// in flight drains in this run instead of continuing: the signal was
// dropped with the run before (changeAbsorbSignalsAfterHandlers), and a
// deleted Node's workflow went on as if nothing had happened.
func TestNodeToldToGoWhileContinuingAsNewDrains(t *testing.T) {
	const switchAt = 2 * time.Hour
	h := newNodeHarness(t)
	// Every NodeClaim write takes a minute, so the one a drift notice
	// starts is still in flight when the run decides to continue as new.
	h.env.OnActivity(activities.UpsertNodeClaimActivity, mock.Anything, mock.Anything).
		Return(activities.UpsertNodeClaimResponse{}, nil).After(time.Minute)
	h.at(switchAt, func() {
		h.env.SetContinueAsNewSuggested(true)
		h.env.SignalWorkflow(SignalDrifted, DriftNotice{Kind: "AMIDrift", Message: "AMI ami-a → ami-b"})
	})
	h.signal(switchAt+time.Second, SignalNodeDeleted, NodeDeleted{})
	h.env.ExecuteWorkflow(NodeWorkflowType, nodeSpec(), (*NodeState)(nil))
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatalf("node workflow ended with %v, want it drained and terminated for its deleted Node", err)
	}
	var result NodeResult
	if err := h.env.GetWorkflowResult(&result); err != nil {
		t.Fatal(err)
	}
	if result.Termination.Reason != ReasonDeleted {
		t.Errorf("terminated for %q, want %q", result.Termination.Reason, ReasonDeleted)
	}
}
