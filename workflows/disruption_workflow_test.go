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
	modeldisruption "github.com/millwright/millwright/model/disruption"
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
	if len(second.Nodes) != 3 || !second.Nodes[0].Reserved || !second.Nodes[1].Reserved {
		t.Fatalf("second pass told %+v, want the running command's 2 candidates reserved and its replacement held", second.Nodes)
	}
	replacement := ReplacementClaimName("default", firstCommand, 0)
	if held := second.Nodes[2]; held.NodeClaimName != replacement || held.ReplacementFor != firstCommand || held.Reserved {
		t.Errorf("second pass told %+v about the replacement, want %s held for %s (the name the command starts it under)", held, replacement, firstCommand)
	}
	if started[0].DisruptionWorkflowID != DisruptionWorkflowID(testCluster) || len(started[0].Command.Candidates) != 2 {
		t.Errorf("command input %+v", started[0])
	}
}

// TestEmptyCommandsValidateAtOnceAndAnEndPassesAtOnce: an Empty command
// gets no validation delay (its nodes were empty for consolidateAfter), a
// consolidation the 15 s one; a command's end brings the next pass at once
// (no debounce), so a scale-down's waves follow each other as fast as nodes
// go.
func TestEmptyCommandsValidateAtOnceAndAnEndPassesAtOnce(t *testing.T) {
	h := newHarness(t, DisruptionWorkflowID(testCluster))
	var mu sync.Mutex
	passes := 0
	h.env.RegisterActivityWithOptions(func(context.Context, activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		passes++
		empty := consolidation()
		empty.Reason, empty.Kind, empty.Replacements = modeldisruption.ReasonEmpty, modeldisruption.KindDelete, nil
		empty.Candidates = []activities.DisruptionCandidate{{NodeClaimName: "default-cccc", NodeName: "ip-10-0-0-3", NodePool: "default"}}
		if passes == 1 {
			return activities.ComputeCommandsResponse{Commands: []activities.DisruptionCommand{empty, consolidation()}}, nil
		}
		return activities.ComputeCommandsResponse{}, nil
	}, activity.RegisterOptions{Name: activities.ComputeCommandsActivity, DisableAlreadyRegisteredCheck: true})
	var started []CommandInput
	h.env.OnWorkflow(DisruptionCommandWorkflowType, mock.Anything, mock.Anything).Return(func(_ workflow.Context, input CommandInput) (CommandOutcome, error) {
		mu.Lock()
		started = append(started, input)
		mu.Unlock()
		return CommandOutcome{Result: CommandSucceeded}, nil
	})
	h.at(13*time.Second, func() {
		value, err := h.env.QueryWorkflow(QueryDisruptionState)
		if err != nil {
			t.Fatal(err)
		}
		var view DisruptionStateView
		_ = value.Get(&view)
		if len(view.Running) == 0 {
			t.Error("no running command after the first pass")
			return
		}
		h.env.SignalWorkflow(SignalCommandDone, CommandOutcome{CommandID: view.Running[0].ID, Result: CommandSucceeded})
	})
	var secondPass time.Time
	h.at(14*time.Second, func() {
		value, err := h.env.QueryWorkflow(QueryDisruptionState)
		if err != nil {
			t.Fatal(err)
		}
		var view DisruptionStateView
		_ = value.Get(&view)
		if view.LastPass != nil {
			secondPass = view.LastPass.At
		}
	})
	h.at(time.Minute, func() { h.env.CancelWorkflow() })
	h.env.ExecuteWorkflow(DisruptionWorkflowType, DisruptionInput{Cluster: testCluster})

	mu.Lock()
	defer mu.Unlock()
	if len(started) != 2 {
		t.Fatalf("%d command(s) started, want the Empty one and the consolidation", len(started))
	}
	if d := started[0].ValidationDelay; d != 0 {
		t.Errorf("Empty command waits %s before validating, want 0", d)
	}
	if d := started[1].ValidationDelay; d != DefaultValidationDelay {
		t.Errorf("consolidation waits %s before validating, want %s", d, DefaultValidationDelay)
	}
	if want := t0.Add(13 * time.Second); !secondPass.Equal(want) {
		t.Errorf("last pass at t0+%s a second after a command ended at t0+13s, want at once", secondPass.Sub(t0))
	}
}

// TestRefusedCommandWaitsForThePoll: a command that ended Rejected (a
// candidate's workflow refused the reservation) brings no pass of its own:
// the same decision comes again only at the poll interval, not in a loop of
// refusals; one that succeeded brings the next pass at once.
func TestRefusedCommandWaitsForThePoll(t *testing.T) {
	for _, tt := range []struct {
		result   CommandResult
		wantNext time.Duration // after the first pass
	}{
		{result: CommandRejected, wantNext: DefaultDisruptionPollInterval},
		{result: CommandInvalidated, wantNext: DefaultDisruptionPollInterval},
		{result: CommandSucceeded, wantNext: 0},
	} {
		t.Run(string(tt.result), func(t *testing.T) {
			h := newHarness(t, DisruptionWorkflowID(testCluster))
			var mu sync.Mutex
			var passes []time.Time
			env := h.env
			h.env.RegisterActivityWithOptions(func(context.Context, activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
				mu.Lock()
				defer mu.Unlock()
				passes = append(passes, env.Now())
				empty := consolidation()
				empty.Reason, empty.Kind, empty.Replacements = modeldisruption.ReasonEmpty, modeldisruption.KindDelete, nil
				return activities.ComputeCommandsResponse{Commands: []activities.DisruptionCommand{empty}}, nil
			}, activity.RegisterOptions{Name: activities.ComputeCommandsActivity, DisableAlreadyRegisteredCheck: true})
			ended := 0
			h.env.OnWorkflow(DisruptionCommandWorkflowType, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, input CommandInput) (CommandOutcome, error) {
				outcome := CommandOutcome{CommandID: workflow.GetInfo(ctx).WorkflowExecution.ID, Result: tt.result}
				err := workflow.SignalExternalWorkflow(ctx, input.DisruptionWorkflowID, "", SignalCommandDone, outcome).Get(ctx, nil)
				mu.Lock()
				ended++
				mu.Unlock()
				return outcome, err
			})
			h.at(time.Minute, func() { h.env.CancelWorkflow() })
			h.env.ExecuteWorkflow(DisruptionWorkflowType, DisruptionInput{Cluster: testCluster})

			mu.Lock()
			defer mu.Unlock()
			if len(passes) < 2 || ended == 0 {
				t.Fatalf("%d pass(es) and %d command(s) reported done in a minute, want several", len(passes), ended)
			}
			if got := passes[1].Sub(passes[0]); got != tt.wantNext {
				t.Errorf("second pass %s after the first, whose command ended %s; want %s (%d passes in a minute)", got, tt.result, tt.wantNext, len(passes))
			}
		})
	}
}

// TestDisruptionWorkflowTellsNodesTheirDrift: a node the pass finds
// drifted is told once (SignalDrifted with what drifted), not again while
// it stays drifted, and told once more when it no longer is.
func TestDisruptionWorkflowTellsNodesTheirDrift(t *testing.T) {
	h := newHarness(t, DisruptionWorkflowID(testCluster))
	sent := captureSignals(h)
	var mu sync.Mutex
	passes := 0
	h.env.RegisterActivityWithOptions(func(context.Context, activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		passes++
		v := activities.DisruptionVerdict{NodeClaimName: "default-a", NodeName: "node-a", NodePool: "default", Command: -1}
		if passes <= 3 {
			v.Drifted, v.DriftKind = "AMI ami-a → ami-b", "AMIDrift"
		}
		return activities.ComputeCommandsResponse{Verdicts: []activities.DisruptionVerdict{v}}, nil
	}, activity.RegisterOptions{Name: activities.ComputeCommandsActivity})
	h.at(time.Hour, func() { h.env.CancelWorkflow() })
	h.env.ExecuteWorkflow(DisruptionWorkflowType, DisruptionInput{Cluster: testCluster})

	notices := sent.named(SignalDrifted)
	if len(notices) != 2 {
		t.Fatalf("drift notices %+v, want 2 (drifted, then no longer)", notices)
	}
	want := NodeWorkflowID(testCluster, "default-a")
	if notices[0].workflowID != want || notices[0].arg.(DriftNotice) != (DriftNotice{Kind: "AMIDrift", Message: "AMI ami-a → ami-b"}) {
		t.Errorf("first notice %+v, want AMIDrift to %s", notices[0], want)
	}
	if notices[1].arg.(DriftNotice) != (DriftNotice{}) {
		t.Errorf("second notice %+v, want the empty notice", notices[1])
	}
}
