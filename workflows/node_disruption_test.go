package workflows

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/millwright/millwright/activities"
)

func reserve(h *harness, at time.Duration, commandID string, check func(err error)) {
	h.at(at, func() {
		h.env.UpdateWorkflow(UpdateReserve, commandID+"/reserve", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { check(err) },
			OnComplete: func(_ any, err error) { check(err) },
		}, ReserveRequest{CommandID: commandID, Reason: string(ReasonUnderutilized), Message: "Underutilized: 2 nodes → 1 m5.large"})
	})
}

func TestReservedNodeTerminatesForItsCommand(t *testing.T) {
	h := newNodeHarness(t)
	sent := captureSignals(h)
	reserve(h, time.Hour, testCommandID, func(err error) {
		if err != nil {
			t.Errorf("reservation rejected: %v", err)
		}
	})
	reserve(h, time.Hour+time.Second, "disruption/c1/command-other-2", func(err error) {
		if err == nil || !strings.Contains(err.Error(), "reserved by "+testCommandID) {
			t.Errorf("a second command's reservation answered %v, want refused naming the holder", err)
		}
	})
	h.signal(time.Hour+time.Minute, SignalDisruptionCommit, CommandSignal{CommandID: "disruption/c1/command-other-2"})
	h.signal(time.Hour+2*time.Minute, SignalDisruptionCommit, CommandSignal{CommandID: testCommandID, DisruptedAt: markedAt})

	result := h.runNode(nodeSpec(consolidateAfter(time.Hour)), nil)
	if result.Termination.Reason != ReasonUnderutilized || result.Termination.Requester != testCommandID || !result.Termination.Voluntary {
		t.Fatalf("termination %+v, want a voluntary Underutilized by the command", result.Termination)
	}
	if at := decisionAt(t, h.history(), "Termination requested"); !at.Equal(t0.Add(time.Hour + 2*time.Minute)) {
		t.Errorf("terminated at t0+%s, want at the holder's commit (t0+1h2m)", at.Sub(t0))
	}
	events := sent.named(SignalCommandNodeEvent)
	if len(events) != 1 || events[0].workflowID != testCommandID || events[0].arg.(CommandNodeEvent).Kind != NodeEventTerminated {
		t.Errorf("command notices %+v, want one Terminated to the holder", events)
	}
	// The drain counts its confirmation window from the command's mark.
	drains := h.rec.calls(activities.DrainActivity)
	if len(drains) != 1 || !drains[0].(*activities.DrainRequest).UnschedulableSince.Equal(markedAt) {
		t.Errorf("drain requests %+v, want one saying the node was tainted at %v", drains, markedAt)
	}
}

// TestRepairedNodeDrainsPastItsBudgets: a node committed to an Unhealthy
// command terminates involuntarily with its drain deadline at the commit
// (changeRepairForced), as Karpenter's health controller forces it.
func TestRepairedNodeDrainsPastItsBudgets(t *testing.T) {
	h := newNodeHarness(t)
	captureSignals(h)
	h.at(time.Hour, func() {
		h.env.UpdateWorkflow(UpdateReserve, testCommandID+"/reserve", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { t.Errorf("reservation rejected: %v", err) },
			OnComplete: func(_ any, err error) {},
		}, ReserveRequest{CommandID: testCommandID, Reason: string(ReasonUnhealthy), Message: "Unhealthy: Ready=Unknown for 31m0s"})
	})
	h.signal(time.Hour+time.Minute, SignalDisruptionCommit, CommandSignal{CommandID: testCommandID, DisruptedAt: markedAt})

	result := h.runNode(nodeSpec(), nil)
	committed := t0.Add(time.Hour + time.Minute)
	if result.Termination.Reason != ReasonUnhealthy || result.Termination.Voluntary || !result.Termination.Deadline.Equal(committed) {
		t.Fatalf("termination %+v, want an involuntary Unhealthy due at the commit (t0+1h1m)", result.Termination)
	}
	drains := h.rec.calls(activities.DrainActivity)
	if len(drains) != 1 || !drains[0].(*activities.DrainRequest).Deadline.Equal(committed) {
		t.Errorf("drain requests %+v, want one due at the commit", drains)
	}
}

func TestReservedNodeTakenOverTellsTheCommand(t *testing.T) {
	h := newNodeHarness(t)
	sent := captureSignals(h)
	reserve(h, time.Hour, testCommandID, func(error) {})
	h.signal(time.Hour+time.Minute, SignalInterruption, Interruption{Kind: InterruptionSpotWarning, EventID: "e-1"})
	result := h.runNode(nodeSpec(), nil)
	if result.Termination.Reason != ReasonInterrupted {
		t.Fatalf("termination %+v, want the interruption to take over", result.Termination)
	}
	var kinds []NodeEventKind
	for _, s := range sent.named(SignalCommandNodeEvent) {
		kinds = append(kinds, s.arg.(CommandNodeEvent).Kind)
	}
	if len(kinds) != 2 || kinds[0] != NodeEventTakenOver || kinds[1] != NodeEventTerminated {
		t.Errorf("command notices %v, want TakenOver then Terminated", kinds)
	}
}

func TestReleasedNodeIsFreeAgain(t *testing.T) {
	h := newNodeHarness(t)
	captureSignals(h)
	reserve(h, time.Hour, testCommandID, func(error) {})
	h.signal(time.Hour+time.Minute, SignalDisruptionRelease, CommandSignal{CommandID: testCommandID, Why: "no longer valid"})
	reserve(h, 2*time.Hour, "disruption/c1/command-other-2", func(err error) {
		if err != nil {
			t.Errorf("reservation after release rejected: %v", err)
		}
	})
	h.signal(3*time.Hour, SignalDisruptionCommit, CommandSignal{CommandID: "disruption/c1/command-other-2"})
	result := h.runNode(nodeSpec(), nil)
	if result.Termination.Requester != "disruption/c1/command-other-2" {
		t.Fatalf("termination %+v, want the second command's", result.Termination)
	}
	decisionAt(t, h.history(), "Released by disruption command "+testCommandID+": no longer valid")
}

func TestReplacementTellsItsCommand(t *testing.T) {
	h := newNodeHarness(t)
	sent := captureSignals(h)
	h.signal(time.Hour, SignalDrain, DrainRequest{Reason: "end of test", Requester: "t"})
	h.runNode(nodeSpec(func(s *activities.NodeLaunchSpec) { s.ReplacementFor = testCommandID }), nil)
	events := sent.named(SignalCommandNodeEvent)
	if len(events) != 1 || events[0].arg.(CommandNodeEvent).Kind != NodeEventReady {
		t.Errorf("command notices %+v, want one Ready", events)
	}
}

// TestEmptyNodeLeftToTheDisruptionWorkflowDoesNotPoll: with
// DisruptionDecidesEmpty an empty node arms no timer and never asks its
// budget (before, a refused node asked every 10 s); an Empty command takes
// it.
func TestEmptyNodeLeftToTheDisruptionWorkflowDoesNotPoll(t *testing.T) {
	h := newNodeHarness(t)
	captureSignals(h)
	h.env.OnActivity(activities.WaitForInitializationActivity, mock.Anything, mock.Anything).
		Return(activities.WaitForInitializationResponse{NonDaemonSetPods: 0}, nil)
	h.at(6*time.Hour, func() {
		h.env.UpdateWorkflow(UpdateReserve, "r", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("reservation rejected: %v", err) }, OnComplete: func(any, error) {},
		}, ReserveRequest{CommandID: testCommandID, Reason: string(ReasonEmpty), Message: "Empty: 1 node"})
	})
	h.signal(6*time.Hour+time.Minute, SignalDisruptionCommit, CommandSignal{CommandID: testCommandID})
	result := h.runNode(nodeSpec(consolidateAfter(30*time.Second), func(s *activities.NodeLaunchSpec) { s.DisruptionDecidesEmpty = true }), nil)
	if result.Termination.Reason != ReasonEmpty || result.Termination.Requester != testCommandID {
		t.Fatalf("termination %+v, want Empty by the command", result.Termination)
	}
	if n := len(h.rec.calls(activities.AllowDisruptionActivity)); n != 0 {
		t.Errorf("asked AllowDisruption %d time(s), want never", n)
	}
	if !h.rec.hasLog("Triggering termination after 30s for empty node") {
		t.Errorf("missing the empty-node log line; got %q", h.rec.logLines())
	}
}

// TestReservedEmptyNodeWaitsForItsCommand: an empty node reserved before its
// consolidateAfter timer fires leaves the decision to the command. Before
// change reserved-arms-no-empty-ttl the fired timer was re-armed at its past
// deadline on every pass, so the workflow spun without yielding (the SDK's
// deadlock detector failed every task) until the command committed.
func TestReservedEmptyNodeWaitsForItsCommand(t *testing.T) {
	h := newNodeHarness(t)
	captureSignals(h)
	h.env.OnActivity(activities.WaitForInitializationActivity, mock.Anything, mock.Anything).
		Return(activities.WaitForInitializationResponse{NonDaemonSetPods: 0}, nil)
	h.at(30*time.Minute, func() {
		h.env.UpdateWorkflow(UpdateReserve, "r", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("reservation rejected: %v", err) }, OnComplete: func(any, error) {},
		}, ReserveRequest{CommandID: testCommandID, Reason: string(ReasonEmpty), Message: "Empty: 1 node"})
	})
	h.signal(3*time.Hour, SignalDisruptionCommit, CommandSignal{CommandID: testCommandID})
	result := h.runNode(nodeSpec(consolidateAfter(time.Hour)), nil)
	if result.Termination.Reason != ReasonEmpty || result.Termination.Requester != testCommandID {
		t.Fatalf("termination %+v, want Empty by the command", result.Termination)
	}
	if n := len(h.rec.calls(activities.AllowDisruptionActivity)); n != 0 {
		t.Errorf("asked AllowDisruption %d time(s) while reserved, want never", n)
	}
}

// A drift notice shows on the node: MillwrightDrifted set to what drifted,
// "Drifted: AMI ami-a → ami-b" in its history; a repeated notice changes
// nothing; "no longer drifted" unsets the attribute.
func TestDriftNoticeShowsOnTheNode(t *testing.T) {
	h := newNodeHarness(t)
	captureSignals(h)
	var mu sync.Mutex
	var drifted []string // MillwrightDrifted as upserted: a value, or "-" when unset
	h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		mu.Lock()
		defer mu.Unlock()
		attributes := args.Get(0).(temporal.SearchAttributes)
		// The drift upsert carries that one key; unsetting it leaves none
		// (publish always names the pool and phase).
		if value, ok := attributes.GetKeyword(DriftedAttribute); ok {
			drifted = append(drifted, value)
		} else if attributes.Size() == 0 {
			drifted = append(drifted, "-")
		}
	}).Return(nil)
	notice := DriftNotice{Kind: "AMIDrift", Message: "AMI ami-a → ami-b"}
	h.signal(time.Hour, SignalDrifted, notice)
	h.signal(time.Hour+time.Minute, SignalDrifted, notice)
	h.at(time.Hour+2*time.Minute, func() {
		value, err := h.env.QueryWorkflow(QueryState)
		if err != nil {
			t.Fatal(err)
		}
		var view NodeStateView
		_ = value.Get(&view)
		if view.Drift == nil || *view.Drift != notice {
			t.Errorf("state drift %+v, want %+v", view.Drift, notice)
		}
	})
	h.signal(2*time.Hour, SignalDrifted, DriftNotice{})
	h.signal(3*time.Hour, SignalDrain, DrainRequest{Reason: "done"})

	h.runNode(nodeSpec(), nil)
	mu.Lock()
	defer mu.Unlock()
	if len(drifted) != 2 || drifted[0] != "AMIDrift" || drifted[1] != "-" {
		t.Errorf("MillwrightDrifted upserts %v, want [AMIDrift -]", drifted)
	}
	if at := decisionAt(t, h.history(), "Drifted: AMI ami-a → ami-b"); !at.Equal(t0.Add(time.Hour)) {
		t.Errorf("drift decision at t0+%s, want t0+1h", at.Sub(t0))
	}
	decisionAt(t, h.history(), "No longer drifted")
}
