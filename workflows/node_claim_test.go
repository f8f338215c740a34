package workflows

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"

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
