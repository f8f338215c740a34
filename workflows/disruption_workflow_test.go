package workflows

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
		view := disruptionView(t, h)
		if len(view.Running) != 1 {
			t.Errorf("running %+v after two passes, want the one command once", view.Running)
			return
		}
		firstCommand = view.Running[0].ID
		h.env.SignalWorkflow(SignalCommandDone, CommandOutcome{CommandID: firstCommand, Result: CommandSucceeded})
	})
	h.at(time.Minute, func() { pauseDisruption(t, h) })
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
	// The command has not been admitted (changeAdmitAtCommit): its
	// candidates are held as validating, which a pass keeps in its
	// waiting ledger rather than charging (changeValidatingWait).
	if len(second.Nodes) != 3 || !second.Nodes[0].Validating || !second.Nodes[1].Validating || second.Nodes[0].Reserved || second.Nodes[0].Committed {
		t.Fatalf("second pass told %+v, want the running command's 2 candidates validating and its replacement held", second.Nodes)
	}
	if !second.ValidatingWait || second.Admission {
		t.Errorf("second pass: ValidatingWait %v, Admission %v; want a pass that lets validating nodes wait uncharged", second.ValidatingWait, second.Admission)
	}
	if !started[0].Admission {
		t.Errorf("command input %+v does not ask to be admitted", started[0])
	}
	replacement := ReplacementClaimName("default", firstCommand, 0)
	if held := second.Nodes[2]; held.NodeClaimName != replacement || held.ReplacementFor != firstCommand || held.Reserved {
		t.Errorf("second pass told %+v about the replacement, want %s held for %s (the name the command starts it under)", held, replacement, firstCommand)
	}
	if started[0].DisruptionWorkflowID != DisruptionWorkflowID(testCluster) || len(started[0].Command.Candidates) != 2 {
		t.Errorf("command input %+v", started[0])
	}
}

// TestDisruptionWorkflowMarksOutliers: the Nodes a pass's answer calls
// outliers are marked (MarkOutliers, sorted), only when they differ from
// the last marked; a pause takes every mark off (changeMarkOutliers).
func TestDisruptionWorkflowMarksOutliers(t *testing.T) {
	h := newHarness(t, DisruptionWorkflowID(testCluster))
	var mu sync.Mutex
	passes := 0
	var marks [][]string
	h.env.RegisterActivityWithOptions(func(context.Context, activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		passes++
		verdicts := []activities.DisruptionVerdict{
			{NodeClaimName: "default-bbbb", NodeName: "ip-b", Outlier: passes <= 2},
			{NodeClaimName: "default-aaaa", NodeName: "ip-a", Outlier: true},
			{NodeClaimName: "default-cccc", NodeName: "ip-c"},
		}
		return activities.ComputeCommandsResponse{Verdicts: verdicts}, nil
	}, activity.RegisterOptions{Name: activities.ComputeCommandsActivity, DisableAlreadyRegisteredCheck: true})
	h.env.RegisterActivityWithOptions(func(_ context.Context, req activities.MarkOutliersRequest) (activities.MarkOutliersResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		marks = append(marks, req.NodeNames)
		return activities.MarkOutliersResponse{Marked: req.NodeNames}, nil
	}, activity.RegisterOptions{Name: activities.MarkOutliersActivity, DisableAlreadyRegisteredCheck: true})
	h.at(5*time.Minute, func() { pauseDisruption(t, h) })
	h.at(time.Hour, func() { h.env.CancelWorkflow() })
	h.env.ExecuteWorkflow(DisruptionWorkflowType, DisruptionInput{Cluster: testCluster})

	mu.Lock()
	defer mu.Unlock()
	if passes < 4 {
		t.Fatalf("%d passes before the pause, want several", passes)
	}
	want := [][]string{{"ip-a", "ip-b"}, {"ip-a"}, nil}
	if !slices.EqualFunc(marks, want, func(a, b []string) bool { return slices.Equal(a, b) }) {
		t.Errorf("MarkOutliers calls %q, want %q (a change each, none for a pass that changes nothing, then the pause's)", marks, want)
	}
}

// pauseDisruption pauses the disruption workflow h runs, as kim for a
// change freeze.
func pauseDisruption(t *testing.T, h *harness) {
	h.env.UpdateWorkflow(UpdatePauseDisruption, "pause-1", &testsuite.TestUpdateCallback{
		OnReject:   func(err error) { t.Errorf("pause rejected: %v", err) },
		OnComplete: func(any, error) {},
	}, PauseRequest{Paused: true, Reason: "change freeze", Requester: "kim"})
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
		view := disruptionView(t, h)
		if len(view.Running) == 0 {
			t.Error("no running command after the first pass")
			return
		}
		h.env.SignalWorkflow(SignalCommandDone, CommandOutcome{CommandID: view.Running[0].ID, Result: CommandSucceeded})
	})
	var secondPass time.Time
	h.at(14*time.Second, func() {
		view := disruptionView(t, h)
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

// TestDisruptionWorkflowTellsDecisionsWhenNodesDrifted: every pass after
// the one that first found a node drifted tells ComputeCommands when that
// was (drift takes the earliest drifted first), the same time while the
// node stays drifted, and nothing once it no longer is.
func TestDisruptionWorkflowTellsDecisionsWhenNodesDrifted(t *testing.T) {
	h := newHarness(t, DisruptionWorkflowID(testCluster))
	captureSignals(h)
	var mu sync.Mutex
	var requests []activities.ComputeCommandsRequest
	var passes []time.Time
	env := h.env
	h.env.RegisterActivityWithOptions(func(_ context.Context, req activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		requests = append(requests, req)
		passes = append(passes, env.Now())
		v := activities.DisruptionVerdict{NodeClaimName: "default-a", NodeName: "node-a", NodePool: "default", Command: -1}
		if n := len(requests); n >= 2 && n <= 4 {
			v.Drifted, v.DriftKind = "AMI ami-a → ami-b", "AMIDrift"
		}
		return activities.ComputeCommandsResponse{Verdicts: []activities.DisruptionVerdict{v}}, nil
	}, activity.RegisterOptions{Name: activities.ComputeCommandsActivity})
	h.at(time.Hour, func() { h.env.CancelWorkflow() })
	h.env.ExecuteWorkflow(DisruptionWorkflowType, DisruptionInput{Cluster: testCluster})

	mu.Lock()
	defer mu.Unlock()
	if len(requests) < 6 {
		t.Fatalf("%d passes in an hour, want at least 6", len(requests))
	}
	since := func(req activities.ComputeCommandsRequest) time.Time {
		for _, n := range req.Nodes {
			if n.NodeClaimName == "default-a" {
				return n.DriftedSince
			}
		}
		return time.Time{}
	}
	// Pass 2 found it drifted; passes 3 to 5 are told so (5 finds it no
	// longer drifted), pass 6 is not.
	for i, req := range requests[:6] {
		want := time.Time{}
		if i >= 2 && i <= 4 {
			want = passes[1]
		}
		if got := since(req); !got.Equal(want) {
			t.Errorf("pass %d: drifted since %v, want %v", i+1, got, want)
		}
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
		if n.Validating {
			reserved++
		}
	}
	if reserved != 2 {
		t.Errorf("the pass after the start told %+v, want the first command's 2 candidates held (validating)", requests[1].Nodes)
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

// TestAdmissionValidatesAgainstTheLedger: a command asks to be admitted
// (changeAdmitAtCommit). The admission's ComputeCommands is told the ledger
// without the command's own candidates and charges committed nodes; while
// the budgets cannot take the command it is busy, once a fresh decision
// takes every candidate it is admitted (and the next pass, at once, is told
// its candidates are committed); a decision that no longer holds with room
// in the budgets is refused, and so is a command the workflow does not run.
func TestAdmissionValidatesAgainstTheLedger(t *testing.T) {
	empty := consolidation()
	empty.Reason, empty.Kind, empty.Replacements = modeldisruption.ReasonEmpty, modeldisruption.KindDelete, nil
	for _, tc := range []struct {
		name    string
		command activities.DisruptionCommand
		// committed: the pass after the admission would not charge the
		// candidates; every admitted command's are held reserved,
		// charged, until they are gone (see ledgerRequest).
		committed bool
		input     DisruptionInput
	}{
		{name: "consolidation", command: consolidation()},
		// An Empty command asks for admission only when it has a
		// validation delay (changeEmptyAdmittedAtStart).
		{name: "empty with a validation delay", command: empty, input: DisruptionInput{EmptyValidationDelay: 5 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) { testAdmission(t, tc.command, tc.committed, tc.input) })
	}
}

func testAdmission(t *testing.T, command activities.DisruptionCommand, committed bool, input DisruptionInput) {
	h := newHarness(t, DisruptionWorkflowID(testCluster))
	var mu sync.Mutex
	var passes, admissions []activities.ComputeCommandsRequest
	passesBeforeAdmission := -1
	admissionAnswers := []activities.ComputeCommandsResponse{
		{Budgets: []activities.DisruptionBudget{{NodePool: "default", Allowed: map[modeldisruption.Reason]int{command.Reason: 1}}}},
		{Commands: []activities.DisruptionCommand{command}},
	}
	h.env.RegisterActivityWithOptions(func(_ context.Context, req activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		if req.Admission {
			admissions = append(admissions, req)
			if len(admissions) == 2 {
				passesBeforeAdmission = len(passes)
			}
			return admissionAnswers[min(len(admissions), len(admissionAnswers))-1], nil
		}
		passes = append(passes, req)
		if len(passes) == 1 {
			return activities.ComputeCommandsResponse{Commands: []activities.DisruptionCommand{command}}, nil
		}
		return activities.ComputeCommandsResponse{}, nil
	}, activity.RegisterOptions{Name: activities.ComputeCommandsActivity, DisableAlreadyRegisteredCheck: true})
	var commandWorkflow string
	h.env.OnWorkflow(DisruptionCommandWorkflowType, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, input CommandInput) (CommandOutcome, error) {
		mu.Lock()
		commandWorkflow = workflow.GetInfo(ctx).WorkflowExecution.ID
		mu.Unlock()
		return CommandOutcome{Result: CommandSucceeded}, nil
	})
	answers := map[string]activities.AdmitCommandResponse{}
	admit := func(at time.Duration, name, id func() string, attempt int) {
		h.at(at, func() {
			h.env.UpdateWorkflow(UpdateAdmitCommand, name(), &testsuite.TestUpdateCallback{
				OnReject: func(err error) { t.Errorf("admission %s rejected: %v", name(), err) },
				OnComplete: func(result any, err error) {
					if err != nil {
						t.Errorf("admission %s failed: %v", name(), err)
						return
					}
					answers[name()] = result.(activities.AdmitCommandResponse)
				},
			}, activities.AdmitCommandRequest{DisruptionWorkflowID: DisruptionWorkflowID(testCluster), CommandID: id(), Attempt: attempt, Command: command})
		})
	}
	commandID := func() string { mu.Lock(); defer mu.Unlock(); return commandWorkflow }
	admit(20*time.Second, func() string { return "busy" }, commandID, 1)
	admit(25*time.Second, func() string { return "admitted" }, commandID, 2)
	admit(30*time.Second, func() string { return "unknown" }, func() string { return "disruption/c1/command-0-99" }, 1)
	h.at(10*time.Minute, func() { h.env.CancelWorkflow() })
	input.Cluster = testCluster
	h.env.ExecuteWorkflow(DisruptionWorkflowType, input)

	mu.Lock()
	defer mu.Unlock()
	if got := answers["busy"]; !got.Busy || got.Admitted || !strings.Contains(got.Why, "allows 1 more "+string(command.Reason)) {
		t.Errorf("first admission answered %+v, want busy: the pool allows 1, the command needs 2", got)
	}
	if got := answers["admitted"]; !got.Admitted {
		t.Errorf("second admission answered %+v, want admitted", got)
	}
	if got := answers["unknown"]; got.Admitted || got.Busy || !strings.Contains(got.Why, "runs no command") {
		t.Errorf("admission of an unknown command answered %+v, want refused", got)
	}
	if len(admissions) != 2 {
		t.Fatalf("%d admission computation(s), want 2 (the unknown command needs none)", len(admissions))
	}
	var own []string
	for _, candidate := range command.Candidates {
		own = append(own, candidate.NodeClaimName)
	}
	for _, req := range admissions {
		if !req.Validation || len(req.Nodes) != 0 {
			t.Errorf("admission told %+v (validation %v), want a validation without the command's own candidates or replacement", req.Nodes, req.Validation)
		}
		// changeAdmitOwnCandidates: the fresh decision may take only them.
		if !slices.Equal(req.Admitting, own) {
			t.Errorf("admission named %v as admitting, want the command's own candidates %v", req.Admitting, own)
		}
	}
	// The pass after the admission comes at once and charges nothing for
	// the admitted command's candidates.
	var after *activities.ComputeCommandsRequest
	if passesBeforeAdmission >= 0 && passesBeforeAdmission < len(passes) {
		after = &passes[passesBeforeAdmission]
	}
	if after == nil || len(after.Nodes) < 2 {
		t.Fatalf("the pass after the admission told %+v, want the command's candidates", after)
	}
	for _, n := range after.Nodes[:2] {
		if n.Committed != committed || n.Reserved == committed || n.Validating {
			t.Errorf("the pass after the admission told %+v, want committed %v (reserved otherwise)", n, committed)
		}
	}
}

// TestAdmissionRefusesADecisionThatNoLongerHolds: with room in the budgets
// and a fresh decision that does not take every candidate, the admission
// is refused (not busy): the command releases its candidates.
func TestAdmissionRefusesADecisionThatNoLongerHolds(t *testing.T) {
	answer := admitOnce(t, activities.ComputeCommandsResponse{Budgets: []activities.DisruptionBudget{{NodePool: "default",
		Allowed: map[modeldisruption.Reason]int{modeldisruption.ReasonUnderutilized: 5}}}})
	if answer.Admitted || answer.Busy || !strings.Contains(answer.Why, "no longer valid") {
		t.Errorf("admission answered %+v, want refused: no longer valid", answer)
	}
}

// admitOnce runs the disruption workflow, whose first pass decides
// consolidation(), and asks it to admit that command once, 20 s later,
// with fresh as the admission's ComputeCommands answer.
func admitOnce(t *testing.T, fresh activities.ComputeCommandsResponse) activities.AdmitCommandResponse {
	t.Helper()
	h := newHarness(t, DisruptionWorkflowID(testCluster))
	h.env.RegisterActivityWithOptions(func(_ context.Context, req activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
		if req.Admission {
			return fresh, nil
		}
		return activities.ComputeCommandsResponse{Commands: []activities.DisruptionCommand{consolidation()}}, nil
	}, activity.RegisterOptions{Name: activities.ComputeCommandsActivity, DisableAlreadyRegisteredCheck: true})
	var mu sync.Mutex
	var command string
	h.env.OnWorkflow(DisruptionCommandWorkflowType, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, _ CommandInput) (CommandOutcome, error) {
		mu.Lock()
		defer mu.Unlock()
		if command == "" {
			command = workflow.GetInfo(ctx).WorkflowExecution.ID
		}
		return CommandOutcome{Result: CommandSucceeded}, nil
	})
	var answer activities.AdmitCommandResponse
	h.at(20*time.Second, func() {
		mu.Lock()
		id := command
		mu.Unlock()
		h.env.UpdateWorkflow(UpdateAdmitCommand, "admit-1", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { t.Errorf("admission rejected: %v", err) },
			OnComplete: func(result any, _ error) { answer, _ = result.(activities.AdmitCommandResponse) },
		}, activities.AdmitCommandRequest{CommandID: id, Attempt: 1, Command: consolidation()})
	})
	h.at(time.Minute, func() { h.env.CancelWorkflow() })
	h.env.ExecuteWorkflow(DisruptionWorkflowType, DisruptionInput{Cluster: testCluster})
	return answer
}

// budgetShort: busy only while nodes already disrupting hold the budget;
// a budget smaller than the command (the pool shrank since it was
// decided) is no reason to wait.
func TestBudgetShort(t *testing.T) {
	underutilized := func(allowed, limit int) []activities.DisruptionBudget {
		return []activities.DisruptionBudget{{NodePool: "default",
			Allowed: map[modeldisruption.Reason]int{modeldisruption.ReasonUnderutilized: allowed},
			Limit:   map[modeldisruption.Reason]int{modeldisruption.ReasonUnderutilized: limit}}}
	}
	cases := []struct {
		name    string
		budgets []activities.DisruptionBudget
		short   bool
	}{
		{name: "room for both candidates", budgets: underutilized(2, 2)},
		{name: "disrupting nodes hold the budget", budgets: underutilized(0, 2), short: true},
		{name: "the budget shrank below the command", budgets: underutilized(1, 1)},
		{name: "another pool's budget", budgets: []activities.DisruptionBudget{{NodePool: "other", Allowed: map[modeldisruption.Reason]int{modeldisruption.ReasonUnderutilized: 0}}}},
		{name: "an answer without limits waits", budgets: []activities.DisruptionBudget{{NodePool: "default", Allowed: map[modeldisruption.Reason]int{modeldisruption.ReasonUnderutilized: 0}}}, short: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := budgetShort(consolidation(), tc.budgets); (got != "") != tc.short {
				t.Errorf("budgetShort = %q, want short %v", got, tc.short)
			}
		})
	}
}

// TestPassAtConsolidateAfter: a pass told that a node held back only by
// consolidateAfter may go in 3 s runs the next pass then, not a poll
// interval later (changeRecheckAtConsolidateAfter); a recheck nearer than
// triggerDebounce waits triggerDebounce; one past the poll waits the poll.
func TestPassAtConsolidateAfter(t *testing.T) {
	h := newHarness(t, DisruptionWorkflowID(testCluster))
	var mu sync.Mutex
	var passes []time.Time
	env := h.env
	rechecks := []time.Duration{3 * time.Second, 500 * time.Millisecond, time.Minute}
	h.env.RegisterActivityWithOptions(func(context.Context, activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		passes = append(passes, env.Now())
		var resp activities.ComputeCommandsResponse
		if n := len(passes); n <= len(rechecks) {
			resp.RecheckAfter = rechecks[n-1]
		}
		return resp, nil
	}, activity.RegisterOptions{Name: activities.ComputeCommandsActivity, DisableAlreadyRegisteredCheck: true})
	h.at(30*time.Second, func() { h.env.CancelWorkflow() })
	h.env.ExecuteWorkflow(DisruptionWorkflowType, DisruptionInput{Cluster: testCluster})

	mu.Lock()
	defer mu.Unlock()
	if len(passes) < 4 {
		t.Fatalf("%d passes, want at least 4", len(passes))
	}
	want := []time.Duration{3 * time.Second, triggerDebounce, DefaultDisruptionPollInterval}
	for i, w := range want {
		if gap := passes[i+1].Sub(passes[i]); gap != w {
			t.Errorf("pass %d came %s after pass %d (told recheck in %s), want %s", i+2, gap, i+1, rechecks[i], w)
		}
	}
}

// TestContinueAsNewKeepsACommandEndDeliveredDuringAnAdmission: a command's
// end signalled while an admission update runs at continue-as-new is in the
// carried ledger (the command is gone from it). It was dropped with the run
// ("Workflow has unhandled signals"), and its candidates stayed charged to
// the budget until the command aged out: at 5,000 pods a 27-node pool's
// scale to zero stopped there.
func TestContinueAsNewKeepsACommandEndDeliveredDuringAnAdmission(t *testing.T) {
	h := newHarness(t, DisruptionWorkflowID(testCluster))
	var mu sync.Mutex
	var commandID string
	passes := 0
	admitted := make(chan activities.AdmitCommandResponse, 1)
	h.env.RegisterActivityWithOptions(func(_ context.Context, req activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		if req.Admission {
			// The command ends (say, another admission's node went and
			// took it over) while this admission computes.
			h.env.SignalWorkflow(SignalCommandDone, CommandOutcome{CommandID: commandID, Result: CommandInvalidated})
			return activities.ComputeCommandsResponse{}, nil
		}
		passes++
		switch passes {
		case 1:
			return activities.ComputeCommandsResponse{Commands: []activities.DisruptionCommand{consolidation()}}, nil
		case 2:
			// The second pass (at once after a start) is the run's last:
			// an admission arrives while it computes, so continue-as-new
			// waits for the admission's handler.
			h.env.UpdateWorkflow(UpdateAdmitCommand, "admit", &testsuite.TestUpdateCallback{
				OnReject:   func(err error) { t.Errorf("admission rejected: %v", err) },
				OnComplete: func(result any, err error) { r, _ := result.(activities.AdmitCommandResponse); admitted <- r },
			}, activities.AdmitCommandRequest{DisruptionWorkflowID: DisruptionWorkflowID(testCluster), CommandID: commandID, Attempt: 1, Command: consolidation()})
		}
		return activities.ComputeCommandsResponse{}, nil
	}, activity.RegisterOptions{Name: activities.ComputeCommandsActivity, DisableAlreadyRegisteredCheck: true})
	h.env.OnWorkflow(DisruptionCommandWorkflowType, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, _ CommandInput) (CommandOutcome, error) {
		mu.Lock()
		commandID = workflow.GetInfo(ctx).WorkflowExecution.ID
		mu.Unlock()
		return CommandOutcome{Result: CommandSucceeded}, nil
	})
	h.env.ExecuteWorkflow(DisruptionWorkflowType, DisruptionInput{Cluster: testCluster, PassesPerRun: 2})

	select {
	case <-admitted:
	default:
		t.Fatalf("the admission did not finish before continue-as-new (run ended: %v)", h.env.GetWorkflowError())
	}
	var next DisruptionInput
	continueAsNewInput(t, h.env.GetWorkflowError(), &next)
	if next.State == nil || next.State.Commands != 1 {
		t.Fatalf("carried state %+v, want the one command started", next.State)
	}
	if len(next.State.Running) != 0 {
		t.Errorf("carried ledger %+v, want the command that ended during the admission gone", next.State.Running)
	}
}

// TestEmptyCommandIsAdmittedByItsPass: an Empty command without a
// validation delay is admitted by the pass that decided it
// (changeEmptyAdmittedAtStart): its input says so and the next pass charges
// its candidates (reserved); a consolidation decided in the same pass still
// waits for its admission (validating).
func TestEmptyCommandIsAdmittedByItsPass(t *testing.T) {
	h := newHarness(t, DisruptionWorkflowID(testCluster))
	var mu sync.Mutex
	var requests []activities.ComputeCommandsRequest
	h.env.RegisterActivityWithOptions(func(_ context.Context, req activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		requests = append(requests, req)
		if len(requests) > 1 {
			return activities.ComputeCommandsResponse{}, nil
		}
		empty := consolidation()
		empty.Reason, empty.Kind, empty.Replacements = modeldisruption.ReasonEmpty, modeldisruption.KindDelete, nil
		empty.Candidates = []activities.DisruptionCandidate{{NodeClaimName: "default-cccc", NodeName: "ip-10-0-0-3", NodePool: "default"}}
		return activities.ComputeCommandsResponse{Commands: []activities.DisruptionCommand{empty, consolidation()}}, nil
	}, activity.RegisterOptions{Name: activities.ComputeCommandsActivity, DisableAlreadyRegisteredCheck: true})
	var started []CommandInput
	h.env.OnWorkflow(DisruptionCommandWorkflowType, mock.Anything, mock.Anything).Return(func(_ workflow.Context, input CommandInput) (CommandOutcome, error) {
		mu.Lock()
		started = append(started, input)
		mu.Unlock()
		return CommandOutcome{Result: CommandSucceeded}, nil
	})
	h.at(time.Minute, func() { h.env.CancelWorkflow() })
	h.env.ExecuteWorkflow(DisruptionWorkflowType, DisruptionInput{Cluster: testCluster})

	mu.Lock()
	defer mu.Unlock()
	if len(started) != 2 || len(requests) < 2 {
		t.Fatalf("%d command(s) started and %d pass(es), want the Empty one and the consolidation, then another pass", len(started), len(requests))
	}
	if !started[0].Admission || !started[0].Admitted {
		t.Errorf("Empty command input: Admission %v, Admitted %v; want admitted by its pass", started[0].Admission, started[0].Admitted)
	}
	if !started[1].Admission || started[1].Admitted {
		t.Errorf("consolidation input: Admission %v, Admitted %v; want it to ask for admission", started[1].Admission, started[1].Admitted)
	}
	held := map[string]activities.DisruptionNodeState{}
	for _, n := range requests[1].Nodes {
		held[n.NodeClaimName] = n
	}
	if n := held["default-cccc"]; !n.Reserved || n.Validating {
		t.Errorf("next pass told %+v about the Empty candidate, want it reserved (charged)", n)
	}
	if n := held["default-aaaa"]; n.Reserved || !n.Validating {
		t.Errorf("next pass told %+v about a consolidation candidate, want it validating", n)
	}
}

// TestAGoneCandidateFreesItsBudgetAtOnce: when a running command says one
// of its candidates is gone (changeReleaseEachNode), the next pass comes at
// once and no longer holds that node for the command; the others stay held.
func TestAGoneCandidateFreesItsBudgetAtOnce(t *testing.T) {
	h := newHarness(t, DisruptionWorkflowID(testCluster))
	var mu sync.Mutex
	type pass struct {
		at  time.Time
		req activities.ComputeCommandsRequest
	}
	var passes []pass
	h.env.RegisterActivityWithOptions(func(_ context.Context, req activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		passes = append(passes, pass{h.env.Now(), req})
		if len(passes) > 1 {
			return activities.ComputeCommandsResponse{}, nil
		}
		empty := consolidation()
		empty.Reason, empty.Kind, empty.Replacements = modeldisruption.ReasonEmpty, modeldisruption.KindDelete, nil
		return activities.ComputeCommandsResponse{Commands: []activities.DisruptionCommand{empty}}, nil
	}, activity.RegisterOptions{Name: activities.ComputeCommandsActivity, DisableAlreadyRegisteredCheck: true})
	h.env.OnWorkflow(DisruptionCommandWorkflowType, mock.Anything, mock.Anything).Return(CommandOutcome{Result: CommandSucceeded}, nil)
	var goneAt time.Time
	h.at(15*time.Second, func() { // the first pass comes at the poll interval (10 s)
		view := disruptionView(t, h)
		if len(view.Running) != 1 {
			t.Errorf("running %+v, want the Empty command", view.Running)
			return
		}
		goneAt = h.env.Now()
		h.env.SignalWorkflow(SignalCommandNodeGone, CommandNodeGone{CommandID: view.Running[0].ID, NodeClaimName: "default-aaaa"})
	})
	h.at(time.Minute, func() { h.env.CancelWorkflow() })
	h.env.ExecuteWorkflow(DisruptionWorkflowType, DisruptionInput{Cluster: testCluster})

	mu.Lock()
	defer mu.Unlock()
	var after *pass
	for i := range passes {
		if !passes[i].at.Before(goneAt) {
			after = &passes[i]
			break
		}
	}
	if after == nil {
		t.Fatal("no pass after the candidate was gone")
	}
	if d := after.at.Sub(goneAt); d > time.Second {
		t.Errorf("next pass %s after the candidate was gone, want at once", d)
	}
	var held []string
	for _, n := range after.req.Nodes {
		held = append(held, n.NodeClaimName)
	}
	if !slices.Equal(held, []string{"default-bbbb"}) {
		t.Errorf("pass after the candidate was gone held %v, want only default-bbbb", held)
	}
}

// disruptionView queries the disruption workflow under test for its state.
func disruptionView(t *testing.T, h *harness) DisruptionStateView {
	t.Helper()
	value, err := h.env.QueryWorkflow(QueryDisruptionState)
	if err != nil {
		t.Fatal(err)
	}
	var view DisruptionStateView
	if err := value.Get(&view); err != nil {
		t.Fatal(err)
	}
	return view
}

// TestAdmissionMarksLaterCommandsDecidedLater (changeAdmitBeforeLater): an
// admission's ledger marks DecidedLater the candidates of the commands
// started after the admitted one that are still validating, and only
// theirs: not those of commands started before it, admitted since, or
// holding their candidates from the start.
func TestAdmissionMarksLaterCommandsDecidedLater(t *testing.T) {
	d := &disruption{state: DisruptionState{Running: []RunningCommand{
		{ID: "earlier", Candidates: []string{"e"}, AdmitsAtCommit: true},
		{ID: "admitting", Candidates: []string{"a"}, AdmitsAtCommit: true},
		{ID: "later", Candidates: []string{"l1", "l2"}, AdmitsAtCommit: true},
		{ID: "later-admitted", Candidates: []string{"la"}, AdmitsAtCommit: true, Admitted: true},
		{ID: "later-reserved", Candidates: []string{"lr"}},
	}}}
	ledger := activities.ComputeCommandsRequest{Admission: true, Nodes: []activities.DisruptionNodeState{
		{NodeClaimName: "e", Validating: true},
		{NodeClaimName: "l1", Validating: true},
		{NodeClaimName: "l2", Validating: true},
		{NodeClaimName: "la", Reserved: true},
		{NodeClaimName: "lr", Reserved: true},
	}}
	d.markDecidedLater(&ledger, "admitting")
	var later []string
	for _, n := range ledger.Nodes {
		if n.DecidedLater {
			later = append(later, n.NodeClaimName)
		}
	}
	if want := []string{"l1", "l2"}; !slices.Equal(later, want) {
		t.Errorf("DecidedLater %v, want %v", later, want)
	}
}

// A request says the drift time of the earliest maxDriftedSinceSent
// drifted nodes only, merged into the ledger's entry for a node it already
// names; the others sort after them anyway.
func TestWithDriftedSinceSendsTheEarliest(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	d := &disruption{state: DisruptionState{DriftedSince: map[string]time.Time{}}}
	for i := range maxDriftedSinceSent + 100 {
		d.state.DriftedSince[fmt.Sprintf("claim-%04d", i)] = start.Add(time.Duration(i) * time.Second)
	}
	request := activities.ComputeCommandsRequest{Nodes: []activities.DisruptionNodeState{
		{NodeClaimName: "claim-0007", Reserved: true}, {NodeClaimName: "claim-0550", Reserved: true}}}
	d.withDriftedSince(&request)

	sent := map[string]activities.DisruptionNodeState{}
	for _, n := range request.Nodes {
		if _, twice := sent[n.NodeClaimName]; twice {
			t.Errorf("%s named twice", n.NodeClaimName)
		}
		sent[n.NodeClaimName] = n
	}
	if got, want := len(request.Nodes), maxDriftedSinceSent+1; got != want {
		t.Errorf("%d nodes in the request, want %d (the earliest %d and the ledger's other)", got, want, maxDriftedSinceSent)
	}
	if n := sent["claim-0007"]; !n.Reserved || !n.DriftedSince.Equal(start.Add(7*time.Second)) {
		t.Errorf("ledger entry of an early drifted node %+v: want it reserved with its drift time", n)
	}
	if n := sent["claim-0550"]; !n.Reserved || !n.DriftedSince.IsZero() {
		t.Errorf("ledger entry of a late drifted node %+v: want it reserved without a drift time", n)
	}
	if n, ok := sent[fmt.Sprintf("claim-%04d", maxDriftedSinceSent-1)]; !ok || n.DriftedSince.IsZero() {
		t.Errorf("the %dth earliest drifted node is not sent: %+v", maxDriftedSinceSent, n)
	}
}
