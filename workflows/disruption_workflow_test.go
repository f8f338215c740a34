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
// the same decision is started again only at the poll interval, not in a
// loop of refusals (the pass right after a start, changePassAfterStart,
// finds its candidates held and starts nothing); one that succeeded brings
// the next pass, and the next start, at once.
func TestRefusedCommandWaitsForThePoll(t *testing.T) {
	for _, tt := range []struct {
		result    CommandResult
		wantStart time.Duration // between the first two commands started
	}{
		{result: CommandRejected, wantStart: DefaultDisruptionPollInterval},
		{result: CommandInvalidated, wantStart: DefaultDisruptionPollInterval},
		{result: CommandSucceeded, wantStart: 0},
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
			var starts []time.Time
			h.env.OnWorkflow(DisruptionCommandWorkflowType, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, input CommandInput) (CommandOutcome, error) {
				mu.Lock()
				starts = append(starts, workflow.Now(ctx))
				mu.Unlock()
				outcome := CommandOutcome{CommandID: workflow.GetInfo(ctx).WorkflowExecution.ID, Result: tt.result}
				err := workflow.SignalExternalWorkflow(ctx, input.DisruptionWorkflowID, "", SignalCommandDone, outcome).Get(ctx, nil)
				return outcome, err
			})
			h.at(time.Minute, func() { h.env.CancelWorkflow() })
			h.env.ExecuteWorkflow(DisruptionWorkflowType, DisruptionInput{Cluster: testCluster})

			mu.Lock()
			defer mu.Unlock()
			if len(passes) < 2 || len(starts) < 2 {
				t.Fatalf("%d pass(es) and %d command(s) started in a minute, want several", len(passes), len(starts))
			}
			if got := starts[1].Sub(starts[0]); got != tt.wantStart {
				t.Errorf("second command started %s after the first, which ended %s; want %s (%d passes, %d commands in a minute)", got, tt.result, tt.wantStart, len(passes), len(starts))
			}
			if tt.result.acted() {
				return
			}
			for i := 1; i < len(starts); i++ {
				if gap := starts[i].Sub(starts[i-1]); gap < DefaultDisruptionPollInterval {
					t.Errorf("command %d started %s after a refused one, want at least the poll interval %s", i+1, gap, DefaultDisruptionPollInterval)
				}
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

// TestPassAfterStartUsesTheRestOfTheBudget: a pass that started a command
// is followed by another at once (Karpenter requeues at once after a
// command), with the new command's candidates reserved, so a second
// decision over other nodes starts in the same instant instead of a poll
// interval later; a pass that starts nothing waits for the poll.
func TestPassAfterStartUsesTheRestOfTheBudget(t *testing.T) {
	h := newHarness(t, DisruptionWorkflowID(testCluster))
	var mu sync.Mutex
	var passes []time.Time
	var requests []activities.ComputeCommandsRequest
	env := h.env
	second := consolidation()
	second.Candidates = []activities.DisruptionCandidate{
		{NodeClaimName: "default-cccc", NodeName: "ip-10-0-0-3", NodePool: "default"},
		{NodeClaimName: "default-dddd", NodeName: "ip-10-0-0-4", NodePool: "default"},
	}
	h.env.RegisterActivityWithOptions(func(_ context.Context, req activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		passes = append(passes, env.Now())
		requests = append(requests, req)
		switch len(passes) {
		case 1:
			return activities.ComputeCommandsResponse{Commands: []activities.DisruptionCommand{consolidation()}}, nil
		case 2:
			return activities.ComputeCommandsResponse{Commands: []activities.DisruptionCommand{second}}, nil
		}
		return activities.ComputeCommandsResponse{}, nil
	}, activity.RegisterOptions{Name: activities.ComputeCommandsActivity, DisableAlreadyRegisteredCheck: true})
	var starts []time.Time
	h.env.OnWorkflow(DisruptionCommandWorkflowType, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, _ CommandInput) (CommandOutcome, error) {
		mu.Lock()
		starts = append(starts, workflow.Now(ctx))
		mu.Unlock()
		// It reports no end (SignalCommandDone): the ledger holds its
		// candidates for the rest of the test.
		return CommandOutcome{}, nil
	})
	h.at(45*time.Second, func() { h.env.CancelWorkflow() })
	h.env.ExecuteWorkflow(DisruptionWorkflowType, DisruptionInput{Cluster: testCluster})

	mu.Lock()
	defer mu.Unlock()
	if len(starts) != 2 || len(passes) < 4 {
		t.Fatalf("%d command(s) started in %d pass(es), want 2 commands and passes on", len(starts), len(passes))
	}
	if gap := starts[1].Sub(starts[0]); gap != 0 {
		t.Errorf("second command started %s after the first, want at once", gap)
	}
	reserved := 0
	for _, n := range requests[1].Nodes {
		if n.Reserved {
			reserved++
		}
	}
	if reserved != 2 {
		t.Errorf("the pass after the start told %+v, want the first command's 2 candidates reserved", requests[1].Nodes)
	}
	// Pass 3 comes at once after pass 2's start and starts nothing; pass 4
	// waits the poll interval.
	if gap := passes[2].Sub(passes[1]); gap != 0 {
		t.Errorf("third pass %s after the second (which started a command), want at once", gap)
	}
	if gap := passes[3].Sub(passes[2]); gap != DefaultDisruptionPollInterval {
		t.Errorf("fourth pass %s after a pass that started nothing, want the poll interval %s", gap, DefaultDisruptionPollInterval)
	}
}
