package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
)

// The phases the UpsertNodeClaim activity knows are the workflow's.
func TestNodeClaimPhasesAreTheWorkflowPhases(t *testing.T) {
	pairs := map[Phase]string{
		PhaseLaunching: activities.NodePhaseLaunching, PhaseRegistering: activities.NodePhaseRegistering,
		PhaseInitializing: activities.NodePhaseInitializing, PhaseReady: activities.NodePhaseReady,
		PhaseDraining: activities.NodePhaseDraining, PhaseTerminating: activities.NodePhaseTerminating,
		PhaseTerminated: activities.NodePhaseTerminated,
	}
	for phase, name := range pairs {
		if string(phase) != name {
			t.Errorf("workflow phase %q is %q for UpsertNodeClaim", phase, name)
		}
		if phase.leaving() != activities.NodePhaseLeaving(name) {
			t.Errorf("phase %q: leaving %v in the workflow, %v for UpsertNodeClaim", phase, phase.leaving(), activities.NodePhaseLeaving(name))
		}
	}
	if len(pairs) != len(nodePhases)+1 {
		t.Errorf("%d phases paired, the lifecycle has %d plus Terminated", len(pairs), len(nodePhases))
	}
}

func TestNodeClaimIsWrittenAtEveryPhase(t *testing.T) {
	h := newNodeHarness(t)
	h.signal(time.Hour, SignalDrain, DrainRequest{Reason: "kernel upgrade", Requester: "alice"})
	h.runNode(nodeSpec(), nil)

	var phases []string
	var last *activities.UpsertNodeClaimRequest
	for _, call := range h.rec.calls(activities.UpsertNodeClaimActivity) {
		last = call.(*activities.UpsertNodeClaimRequest)
		phases = append(phases, last.Phase)
		if last.NodeClaimName != testNodeClaim || last.NodePool != "default" || last.At.IsZero() {
			t.Errorf("UpsertNodeClaim %s request does not name the node claim, pool and time: %+v", last.Phase, last)
		}
		if (last.Phase == string(PhaseLaunching)) != (len(last.PodKeys) > 0) {
			t.Errorf("UpsertNodeClaim %s carries %d pod keys; only Launching nominates pods", last.Phase, len(last.PodKeys))
		}
	}
	want := []string{"Launching", "Registering", "Initializing", "Ready", "Draining", "Terminating", "Terminated"}
	if !slices.Equal(phases, want) {
		t.Fatalf("UpsertNodeClaim phases = %v, want %v", phases, want)
	}
	if last.Instance == nil || last.NodeName != testNodeName || last.RegisteredAt.IsZero() || last.InitializedAt.IsZero() ||
		last.Termination == nil || last.Termination.Reason != string(ReasonDrained) || !last.Termination.Voluntary {
		t.Errorf("the Terminated request lacks the node's state: %+v", last)
	}
}

// A NodeClaim that cannot be written does not stop the node: the mirror is
// given up after its bound and the lifecycle goes on.
func TestNodeClaimWriteFailuresDoNotStopTheNode(t *testing.T) {
	h := newNodeHarness(t)
	h.env.OnActivity(activities.UpsertNodeClaimActivity, mock.Anything, mock.Anything).
		Return(activities.UpsertNodeClaimResponse{}, errors.New("the API server is away"))
	h.signal(time.Hour, SignalDrain, DrainRequest{Reason: "kernel upgrade", Requester: "alice"})
	result := h.runNode(nodeSpec(), nil)
	if result.Termination.Reason != ReasonDrained {
		t.Errorf("termination %+v, want Drained", result.Termination)
	}
	if !h.rec.hasLog("Could not write the NodeClaim") {
		t.Error("the failed write was not logged")
	}
}

// The launch does not wait for the NodeClaim: the Launching write is still
// in flight when Launch starts (at 100 nodes at once each write took
// 10–20 s, in front of every phase). The writes stay in phase order and the
// last one ends before the workflow does.
func TestLaunchDoesNotWaitForTheNodeClaimWrite(t *testing.T) {
	h := newNodeHarness(t)
	launchStarted := make(chan struct{})
	var once sync.Once
	h.env.OnActivity(activities.LaunchActivity, mock.Anything, mock.Anything).
		Return(func(ctx context.Context, req activities.LaunchRequest) (activities.LaunchResponse, error) {
			once.Do(func() { close(launchStarted) })
			return fakeWorld{}.Launch(ctx, req)
		})
	h.env.OnActivity(activities.UpsertNodeClaimActivity, mock.Anything, mock.Anything).
		Return(func(ctx context.Context, req activities.UpsertNodeClaimRequest) (activities.UpsertNodeClaimResponse, error) {
			if req.Phase == string(PhaseLaunching) {
				select {
				case <-launchStarted:
				case <-time.After(10 * time.Second):
					return activities.UpsertNodeClaimResponse{}, errors.New("Launch waited for the NodeClaim write")
				}
			}
			return fakeWorld{}.UpsertNodeClaim(ctx, req)
		})
	h.signal(time.Hour, SignalDrain, DrainRequest{Reason: "kernel upgrade", Requester: "alice"})

	result := h.runNode(nodeSpec(), nil)

	if h.rec.hasLog("Could not write the NodeClaim") {
		t.Fatal("a NodeClaim write failed: Launch did not start while the Launching write ran")
	}
	if result.Termination.Reason != ReasonDrained {
		t.Errorf("termination %+v, want Drained", result.Termination)
	}
	var phases []string
	for _, call := range h.rec.calls(activities.UpsertNodeClaimActivity) {
		phases = append(phases, call.(*activities.UpsertNodeClaimRequest).Phase)
	}
	want := []string{"Launching", "Registering", "Initializing", "Ready", "Draining", "Terminating", "Terminated"}
	if !slices.Equal(phases, want) {
		t.Errorf("UpsertNodeClaim phases = %v, want %v", phases, want)
	}
}

// claimWrite is one UpsertNodeClaim request, as the tests compare them.
type claimWrite struct {
	phase      string
	at         time.Duration // after t0
	drift      activities.NodeClaimCause
	disruption activities.NodeClaimCause
}

func claimWrites(h *harness) []claimWrite {
	var out []claimWrite
	for _, call := range h.rec.calls(activities.UpsertNodeClaimActivity) {
		req := call.(*activities.UpsertNodeClaimRequest)
		w := claimWrite{phase: req.Phase, at: req.At.Sub(t0)}
		if req.Drift != nil {
			w.drift = *req.Drift
		}
		if req.Disruption != nil {
			w.disruption = *req.Disruption
		}
		out = append(out, w)
	}
	return out
}

// A drift notice reaches the NodeClaim at once, not at the node's next
// phase: the Ready node writes it with the drift (the Drifted condition),
// a repeated notice writes nothing, and "no longer drifted" writes it
// without (the condition removed).
func TestDriftNoticeWritesTheNodeClaim(t *testing.T) {
	h := newNodeHarness(t)
	captureSignals(h)
	notice := DriftNotice{Kind: "AMIDrift", Message: "AMI ami-a → ami-b"}
	h.signal(time.Hour, SignalDrifted, notice)
	h.signal(time.Hour+time.Minute, SignalDrifted, notice)
	h.signal(2*time.Hour, SignalDrifted, DriftNotice{})
	h.signal(3*time.Hour, SignalDrain, DrainRequest{Reason: "done"})
	h.runNode(nodeSpec(), nil)

	var ready []claimWrite
	for _, w := range claimWrites(h) {
		if w.phase == string(PhaseReady) {
			ready = append(ready, w)
		}
	}
	drifted := activities.NodeClaimCause{Reason: "AMIDrift", Message: "AMI ami-a → ami-b"}
	if len(ready) != 3 || ready[1].at != time.Hour || ready[1].drift != drifted ||
		ready[2].at != 2*time.Hour || ready[2].drift != (activities.NodeClaimCause{}) {
		t.Fatalf("Ready NodeClaim writes %+v, want the phase's, the drift's at t0+1h and the undrift's at t0+2h", ready)
	}
}

// A reservation by a disruption command writes the NodeClaim with the
// command's reason (the DisruptionReason condition), its release without;
// a committed reservation stays on the claim while the node leaves.
func TestReservationWritesTheNodeClaim(t *testing.T) {
	h := newNodeHarness(t)
	captureSignals(h)
	reserve(h, time.Hour, testCommandID, func(error) {})
	h.signal(time.Hour+time.Minute, SignalDisruptionRelease, CommandSignal{CommandID: testCommandID, Why: "no longer valid"})
	reserve(h, 2*time.Hour, "disruption/c1/command-other-2", func(error) {})
	h.signal(2*time.Hour+time.Minute, SignalDisruptionCommit, CommandSignal{CommandID: "disruption/c1/command-other-2"})
	h.runNode(nodeSpec(), nil)

	reason := activities.NodeClaimCause{Reason: string(ReasonUnderutilized), Message: "Underutilized: 2 nodes → 1 m5.large"}
	var got []string
	for _, w := range claimWrites(h) {
		if w.at < time.Hour {
			continue
		}
		got = append(got, fmt.Sprintf("%s@%s:%v", w.phase, w.at, w.disruption == reason))
	}
	want := []string{"Ready@1h0m0s:true", "Ready@1h1m0s:false", "Ready@2h0m0s:true", "Draining@2h1m0s:true", "Terminating@2h1m0s:true", "Terminated@2h1m0s:true"}
	if !slices.Equal(got, want) {
		t.Errorf("NodeClaim writes after t0+1h (phase@time:reserved) %v, want %v", got, want)
	}
}

// A run recorded before changeNodeClaimConditions keeps its commands: a
// drift notice is written with the node's next phase, not at once.
func TestDriftNoticeBeforeTheChangeWaitsForTheNextPhase(t *testing.T) {
	h := newNodeHarness(t)
	captureSignals(h)
	h.env.OnGetVersion(string(changeNodeClaimConditions), workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	h.signal(time.Hour, SignalDrifted, DriftNotice{Kind: "AMIDrift", Message: "AMI ami-a → ami-b"})
	h.signal(2*time.Hour, SignalDrain, DrainRequest{Reason: "done"})
	h.runNode(nodeSpec(), nil)

	var got []string
	for _, w := range claimWrites(h) {
		got = append(got, fmt.Sprintf("%s:%s", w.phase, w.drift.Reason))
	}
	want := []string{"Launching:", "Registering:", "Initializing:", "Ready:", "Draining:AMIDrift", "Terminating:AMIDrift", "Terminated:AMIDrift"}
	if !slices.Equal(got, want) {
		t.Errorf("NodeClaim writes (phase:drift) %v, want %v", got, want)
	}
}
