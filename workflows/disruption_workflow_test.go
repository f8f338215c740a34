package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
)

// TestDisruptionWorkflowStartsCommandsWithinItsLedger: each pass asks
// ComputeCommands, passing the candidates of running commands as reserved;
// a decision whose candidates a running command holds is not started
// twice; a command's end frees its candidates; paused, no pass runs.
func TestDisruptionWorkflowStartsCommandsWithinItsLedger(t *testing.T) {
	h := newHarness(t, DisruptionWorkflowID(testCluster))
	var mu sync.Mutex
	var requests []activities.ComputeCommandsRequest
	h.env.RegisterActivityWithOptions(func(_ context.Context, req activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		requests = append(requests, req)
		return activities.ComputeCommandsResponse{Commands: []activities.DisruptionCommand{consolidation()}, NodesConsidered: 3}, nil
	}, activity.RegisterOptions{Name: activities.ComputeCommandsActivity, DisableAlreadyRegisteredCheck: true})
	var started []CommandInput
	h.env.OnWorkflow(DisruptionCommandWorkflowType, mock.Anything, mock.Anything).Return(func(_ workflow.Context, input CommandInput) (CommandOutcome, error) {
		mu.Lock()
		started = append(started, input)
		mu.Unlock()
		return CommandOutcome{Result: CommandSucceeded}, nil
	})
	var firstCommand string
	h.at(25*time.Second, func() {
		value, err := h.env.QueryWorkflow(QueryDisruptionState)
		if err != nil {
			t.Fatal(err)
		}
		var view DisruptionStateView
		_ = value.Get(&view)
		if len(view.Running) != 1 {
			t.Errorf("running %+v after two passes, want the one command once", view.Running)
			return
		}
		firstCommand = view.Running[0].ID
		h.env.SignalWorkflow(SignalCommandDone, CommandOutcome{CommandID: firstCommand, Result: CommandSucceeded})
	})
	h.at(time.Minute, func() {
		h.env.UpdateWorkflow(UpdatePauseDisruption, "pause-1", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { t.Errorf("pause rejected: %v", err) },
			OnComplete: func(any, error) {},
		}, PauseRequest{Paused: true, Reason: "change freeze", Requester: "kim"})
	})
	h.at(time.Hour, func() { h.env.CancelWorkflow() })
	h.env.ExecuteWorkflow(DisruptionWorkflowType, DisruptionInput{Cluster: testCluster})

	mu.Lock()
	defer mu.Unlock()
	if len(started) != 2 {
		t.Fatalf("%d command(s) started, want 2 (one, then again once the first ended)", len(started))
	}
	if len(requests) < 3 || len(requests) > 8 {
		t.Errorf("%d pass(es) in an hour, want a few before the pause at 1m and none after", len(requests))
	}
	second := requests[1]
	if len(second.Nodes) != 2 || !second.Nodes[0].Reserved {
		t.Errorf("second pass told %+v, want the running command's 2 candidates reserved", second.Nodes)
	}
	if started[0].DisruptionWorkflowID != DisruptionWorkflowID(testCluster) || len(started[0].Command.Candidates) != 2 {
		t.Errorf("command input %+v", started[0])
	}
}
