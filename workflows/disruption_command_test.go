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

	"github.com/millwright/millwright/activities"
	modeldisruption "github.com/millwright/millwright/model/disruption"
)

const testCommandID = "disruption/c1/command-0a0b0c0d-1"

// sentSignal is a signal a workflow under test sent to another workflow.
type sentSignal struct {
	workflowID, name string
	arg              any
}

type signalLog struct {
	mu   sync.Mutex
	sent []sentSignal
}

func (l *signalLog) named(name string) []sentSignal {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []sentSignal
	for _, s := range l.sent {
		if s.name == name {
			out = append(out, s)
		}
	}
	return out
}

// markedAt is when commandWorld's MarkDisruption says it tainted the Nodes.
var markedAt = time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)

// commandWorld answers the command's own activities: every node reserves,
// marking works, and ComputeCommands answers decision (the command itself
// unless a test says otherwise).
type commandWorld struct {
	refuse   []string
	decision []activities.DisruptionCommand
}

func (w commandWorld) register(h *harness) {
	h.env.RegisterActivityWithOptions(func(_ context.Context, req activities.ReserveNodesRequest) (activities.ReserveNodesResponse, error) {
		var resp activities.ReserveNodesResponse
		for _, id := range req.WorkflowIDs {
			if slices.Contains(w.refuse, id) {
				resp.Refused = append(resp.Refused, activities.NodeRefusal{WorkflowID: id, Why: "node is already Draining"})
			} else {
				resp.Accepted = append(resp.Accepted, id)
			}
		}
		return resp, nil
	}, activity.RegisterOptions{Name: activities.ReserveNodesActivity})
	h.env.RegisterActivityWithOptions(func(_ context.Context, req activities.MarkDisruptionRequest) (activities.MarkDisruptionResponse, error) {
		resp := activities.MarkDisruptionResponse{Changed: req.NodeNames}
		if req.Disrupted && !req.Candidate {
			resp.DisruptedAt = markedAt
		}
		return resp, nil
	}, activity.RegisterOptions{Name: activities.MarkDisruptionActivity})
	h.env.RegisterActivityWithOptions(func(context.Context, activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
		return activities.ComputeCommandsResponse{Commands: w.decision}, nil
	}, activity.RegisterOptions{Name: activities.ComputeCommandsActivity, DisableAlreadyRegisteredCheck: true})
}

// captureSignals records every signal sent to another workflow.
func captureSignals(h *harness) *signalLog {
	log := &signalLog{}
	h.env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", mock.Anything, mock.Anything).
		Return(func(_, workflowID, _, name string, arg any) error {
			log.mu.Lock()
			defer log.mu.Unlock()
			log.sent = append(log.sent, sentSignal{workflowID: workflowID, name: name, arg: arg})
			return nil
		}).Maybe()
	return log
}

func consolidation() activities.DisruptionCommand {
	return activities.DisruptionCommand{
		Reason: modeldisruption.ReasonUnderutilized,
		Kind:   modeldisruption.KindReplace,
		Candidates: []activities.DisruptionCandidate{
			{NodeClaimName: "default-aaaa", NodeName: "ip-10-0-0-1", NodePool: "default"},
			{NodeClaimName: "default-bbbb", NodeName: "ip-10-0-0-2", NodePool: "default"},
		},
		Replacements: []activities.NodeLaunchSpec{nodeSpec(func(s *activities.NodeLaunchSpec) { s.NodeClaimName, s.Cluster = "", "" })},
		Message:      "Underutilized: 2 nodes → 1 m5.large saves $0.15/h",
	}
}

func runCommand(t *testing.T, h *harness, cmd activities.DisruptionCommand) CommandOutcome {
	t.Helper()
	return executeCommand(t, h, cmd, false)
}

// executeCommand runs a command workflow to its end; admission: it asks the
// disruption workflow to admit it (changeAdmitAtCommit).
func executeCommand(t *testing.T, h *harness, cmd activities.DisruptionCommand, admission bool) CommandOutcome {
	t.Helper()
	h.env.ExecuteWorkflow(DisruptionCommandWorkflowType, CommandInput{
		Cluster: testCluster, DisruptionWorkflowID: DisruptionWorkflowID(testCluster), Command: cmd,
		ValidationDelay: 15 * time.Second, ReplacementTimeout: 10 * time.Minute, Admission: admission,
	})
	if !h.env.IsWorkflowCompleted() {
		t.Fatal("command workflow did not complete")
	}
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatalf("command workflow failed: %v", err)
	}
	var outcome CommandOutcome
	if err := h.env.GetWorkflowResult(&outcome); err != nil {
		t.Fatal(err)
	}
	return outcome
}

func nodeEvent(h *harness, at time.Duration, claim string, kind NodeEventKind) {
	h.signal(at, SignalCommandNodeEvent, CommandNodeEvent{NodeClaimName: claim, Kind: kind})
}

func TestDisruptionCommandReplacesThenDrains(t *testing.T) {
	h := newHarness(t, testCommandID)
	cmd := consolidation()
	commandWorld{decision: []activities.DisruptionCommand{cmd}}.register(h)
	sent := captureSignals(h)
	replacement := NodeClaimName("default", testCommandID, 0, 0)
	nodeEvent(h, 40*time.Second, replacement, NodeEventReady)
	nodeEvent(h, 2*time.Minute, "default-aaaa", NodeEventTerminated)
	nodeEvent(h, 3*time.Minute, "default-bbbb", NodeEventTerminated)

	outcome := runCommand(t, h, cmd)
	if outcome.Result != CommandSucceeded || outcome.CommandID != testCommandID {
		t.Fatalf("outcome %+v, want Succeeded", outcome)
	}
	starts := h.rec.calls(activities.StartNodeWorkflowsActivity)
	if len(starts) != 1 {
		t.Fatalf("replacements started %d time(s), want once", len(starts))
	}
	spec := starts[0].(*activities.StartNodeWorkflowsRequest).Nodes[0].Spec
	if spec.NodeClaimName != replacement || spec.ReplacementFor != testCommandID || spec.Annotations["millwright.dev/launched-by-consolidation"] == "" {
		t.Errorf("replacement spec %s for %q annotations %v; want %s for the command, stamped as launched by consolidation", spec.NodeClaimName, spec.ReplacementFor, spec.Annotations, replacement)
	}
	marks := h.rec.calls(activities.MarkDisruptionActivity)
	if len(marks) != 1 || !marks[0].(*activities.MarkDisruptionRequest).Disrupted {
		t.Errorf("mark calls %+v, want one taint", marks)
	}
	commits := sent.named(SignalDisruptionCommit)
	if len(commits) != 2 {
		t.Fatalf("commits %+v, want one per candidate", commits)
	}
	if done := sent.named(SignalCommandDone); len(done) != 1 || done[0].workflowID != DisruptionWorkflowID(testCluster) {
		t.Errorf("outcome reported %+v, want once to the disruption workflow", done)
	}
	if len(sent.named(SignalDisruptionRelease)) != 0 {
		t.Error("a successful command released its candidates")
	}
}

func TestDisruptionCommandRollsBackWhenAReplacementFails(t *testing.T) {
	h := newHarness(t, testCommandID)
	cmd := consolidation()
	commandWorld{decision: []activities.DisruptionCommand{cmd}}.register(h)
	sent := captureSignals(h)
	nodeEvent(h, 40*time.Second, NodeClaimName("default", testCommandID, 0, 0), NodeEventFailed)

	outcome := runCommand(t, h, cmd)
	if outcome.Result != CommandRolledBack {
		t.Fatalf("outcome %+v, want RolledBack", outcome)
	}
	marks := h.rec.calls(activities.MarkDisruptionActivity)
	if len(marks) != 2 || marks[1].(*activities.MarkDisruptionRequest).Disrupted {
		t.Errorf("mark calls %+v, want taint then untaint", marks)
	}
	if n := len(sent.named(SignalDisruptionRelease)); n != 2 {
		t.Errorf("%d release(s), want one per candidate", n)
	}
	if n := len(sent.named(SignalDisruptionCommit)); n != 0 {
		t.Errorf("%d commit(s) after a failed replacement", n)
	}
	if drains := sent.named(SignalDrain); len(drains) != 1 {
		t.Errorf("drains %+v, want the uninitialized replacement stopped", drains)
	}
}

func TestDisruptionCommandRollsBackWhenReplacementsNeverInitialize(t *testing.T) {
	h := newHarness(t, testCommandID)
	cmd := consolidation()
	commandWorld{decision: []activities.DisruptionCommand{cmd}}.register(h)
	sent := captureSignals(h)
	outcome := runCommand(t, h, cmd)
	if outcome.Result != CommandRolledBack || len(sent.named(SignalDrain)) != 1 {
		t.Fatalf("outcome %+v, drains %d; want RolledBack with the replacement stopped", outcome, len(sent.named(SignalDrain)))
	}
}

func TestDisruptionCommandStopsBeforeActing(t *testing.T) {
	cases := []struct {
		name     string
		world    commandWorld
		setup    func(h *harness)
		want     CommandResult
		releases int
	}{
		{
			name:     "a candidate refuses the reservation",
			world:    commandWorld{refuse: []string{NodeWorkflowID(testCluster, "default-bbbb")}, decision: []activities.DisruptionCommand{consolidation()}},
			want:     CommandRejected,
			releases: 1,
		},
		{
			name:     "the decision no longer holds after the validation delay",
			world:    commandWorld{},
			want:     CommandInvalidated,
			releases: 2,
		},
		{
			name:  "a candidate is taken over during the validation delay",
			world: commandWorld{decision: []activities.DisruptionCommand{consolidation()}},
			setup: func(h *harness) {
				nodeEvent(h, 5*time.Second, "default-aaaa", NodeEventTakenOver)
			},
			want:     CommandInvalidated,
			releases: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testCommandID)
			tc.world.register(h)
			sent := captureSignals(h)
			if tc.setup != nil {
				tc.setup(h)
			}
			outcome := runCommand(t, h, consolidation())
			if outcome.Result != tc.want {
				t.Fatalf("outcome %+v, want %s", outcome, tc.want)
			}
			if n := len(sent.named(SignalDisruptionRelease)); n != tc.releases {
				t.Errorf("%d release(s), want %d", n, tc.releases)
			}
			if n := len(h.rec.calls(activities.StartNodeWorkflowsActivity)) + len(h.rec.calls(activities.MarkDisruptionActivity)); n != 0 {
				t.Errorf("%d launch/mark call(s) before the command was valid", n)
			}
		})
	}
}

// admissionWorld answers AdmitCommand with answers, in turn (the last one
// repeated).
func admissionWorld(h *harness, answers ...activities.AdmitCommandResponse) *[]activities.AdmitCommandRequest {
	var mu sync.Mutex
	asked := &[]activities.AdmitCommandRequest{}
	h.env.RegisterActivityWithOptions(func(_ context.Context, req activities.AdmitCommandRequest) (activities.AdmitCommandResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		h.admissionTimes = append(h.admissionTimes, h.env.Now())
		*asked = append(*asked, req)
		return answers[min(len(*asked), len(answers))-1], nil
	}, activity.RegisterOptions{Name: activities.AdmitCommandActivity, DisableAlreadyRegisteredCheck: true})
	return asked
}

func runAdmittedCommand(t *testing.T, h *harness, cmd activities.DisruptionCommand) CommandOutcome {
	t.Helper()
	return executeCommand(t, h, cmd, true)
}

// TestAdmittedCommandAsksAgainWhileBusy: a command that asks to be
// admitted (changeAdmitAtCommit) does not validate on its own; while the
// budgets cannot take it, it asks again every admissionRetryInterval with
// a new attempt number, then marks, launches and drains once admitted.
func TestAdmittedCommandAsksAgainWhileBusy(t *testing.T) {
	h := newHarness(t, testCommandID)
	cmd := consolidation()
	commandWorld{}.register(h) // ComputeCommands answers nothing: it must not be asked
	asked := admissionWorld(h,
		activities.AdmitCommandResponse{Busy: true, Why: "NodePool default allows 0 more Underutilized disruption(s) now, the command needs 2"},
		activities.AdmitCommandResponse{Busy: true, Why: "still busy"},
		activities.AdmitCommandResponse{Admitted: true})
	captureSignals(h)
	// A command ended 1 s after the first busy answer: the second request
	// comes at once, not after admissionRetryInterval.
	h.signal(16*time.Second, SignalAdmissionRetry, AdmissionRetry{Ended: "disruption/c1/command-0a0b0c0d-0"})
	replacement := NodeClaimName("default", testCommandID, 0, 0)
	nodeEvent(h, time.Minute, replacement, NodeEventReady)
	nodeEvent(h, 2*time.Minute, "default-aaaa", NodeEventTerminated)
	nodeEvent(h, 3*time.Minute, "default-bbbb", NodeEventTerminated)

	outcome := runAdmittedCommand(t, h, cmd)
	if outcome.Result != CommandSucceeded {
		t.Fatalf("outcome %+v, want Succeeded", outcome)
	}
	if len(*asked) != 3 {
		t.Fatalf("asked to be admitted %d time(s), want 3 (busy, busy, admitted)", len(*asked))
	}
	for i, req := range *asked {
		if req.Attempt != i+1 || req.CommandID != testCommandID || req.DisruptionWorkflowID != DisruptionWorkflowID(testCluster) || len(req.Command.Candidates) != 2 {
			t.Errorf("admission request %d: %+v", i+1, req)
		}
	}
	if n := len(h.rec.calls(activities.ComputeCommandsActivity)); n != 0 {
		t.Errorf("the command asked ComputeCommands %d time(s); the disruption workflow validates it", n)
	}
	if gaps := []time.Duration{h.admissionTimes[1].Sub(h.admissionTimes[0]), h.admissionTimes[2].Sub(h.admissionTimes[1])}; gaps[0] > 2*time.Second || gaps[1] != admissionRetryInterval {
		t.Errorf("admission requests %v apart, want the second at once after the retry signal, the third %s later", gaps, admissionRetryInterval)
	}
	if n := len(h.rec.calls(activities.StartNodeWorkflowsActivity)); n != 1 {
		t.Errorf("replacements started %d time(s), want once after the admission", n)
	}
	// The soft candidate taint while waiting, then the disrupted taint.
	var marks []string
	for _, call := range h.rec.calls(activities.MarkDisruptionActivity) {
		mark := call.(*activities.MarkDisruptionRequest)
		marks = append(marks, fmt.Sprintf("candidate=%v disrupted=%v", mark.Candidate, mark.Disrupted))
	}
	if want := []string{"candidate=true disrupted=true", "candidate=false disrupted=true"}; !slices.Equal(marks, want) {
		t.Errorf("marks %v, want %v", marks, want)
	}
}

// TestRefusedAdmissionReleasesTheCandidates: a decision that no longer
// holds, or budgets that stay used up past admissionPatience, ends the
// command Invalidated with its candidates released and nothing marked.
func TestRefusedAdmissionReleasesTheCandidates(t *testing.T) {
	cases := []struct {
		name   string
		answer activities.AdmitCommandResponse
		want   string
	}{
		{name: "no longer holds", answer: activities.AdmitCommandResponse{Why: "no longer valid: default-aaaa is not Underutilized any more"}, want: "no longer valid"},
		{name: "busy past patience", answer: activities.AdmitCommandResponse{Busy: true, Why: "NodePool default allows 0 more"}, want: "not admitted within 2m"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testCommandID)
			commandWorld{}.register(h)
			asked := admissionWorld(h, tc.answer)
			sent := captureSignals(h)
			outcome := runAdmittedCommand(t, h, consolidation())
			if outcome.Result != CommandInvalidated || !strings.Contains(outcome.Detail, tc.want) {
				t.Fatalf("outcome %+v, want Invalidated: %s…", outcome, tc.want)
			}
			if n := len(sent.named(SignalDisruptionRelease)); n != 2 {
				t.Errorf("%d release(s), want one per candidate", n)
			}
			// Only the soft candidate taint, put on for the wait and taken off.
			var soft []bool
			for _, call := range h.rec.calls(activities.MarkDisruptionActivity) {
				mark := call.(*activities.MarkDisruptionRequest)
				if !mark.Candidate {
					t.Errorf("mark %+v without an admission", mark)
				}
				soft = append(soft, mark.Disrupted)
			}
			if !slices.Equal(soft, []bool{true, false}) {
				t.Errorf("candidate taint calls %v, want on, then off", soft)
			}
			if n := len(h.rec.calls(activities.StartNodeWorkflowsActivity)); n != 0 {
				t.Errorf("%d launch call(s) without an admission", n)
			}
			if want := int(admissionPatience/admissionRetryInterval) + 1; tc.answer.Busy && (len(*asked) < want-1 || len(*asked) > want+1) {
				t.Errorf("asked %d time(s) in %s, want one every %s (%d)", len(*asked), admissionPatience, admissionRetryInterval, want)
			}
		})
	}
}

// emptyOfThree is an Empty command over three nodes of the default pool.
func emptyOfThree() activities.DisruptionCommand {
	return activities.DisruptionCommand{Reason: modeldisruption.ReasonEmpty, Kind: modeldisruption.KindDelete, Message: "Empty: 3 nodes",
		Candidates: []activities.DisruptionCandidate{
			{NodeClaimName: "default-aaaa", NodeName: "ip-10-0-0-1", NodePool: "default"},
			{NodeClaimName: "default-bbbb", NodeName: "ip-10-0-0-2", NodePool: "default"},
			{NodeClaimName: "default-cccc", NodeName: "ip-10-0-0-3", NodePool: "default"},
		}}
}

// TestEmptyCommandAdmittedAtStart: an Empty command the pass admitted
// (changeEmptyAdmittedAtStart) asks for no admission and validates nothing
// itself: it reserves, marks, tells every candidate to go
// (changeCommitTogether) and succeeds once each is gone.
func TestEmptyCommandAdmittedAtStart(t *testing.T) {
	h := newHarness(t, testCommandID)
	commandWorld{}.register(h)
	asked := admissionWorld(h, activities.AdmitCommandResponse{Busy: true, Why: "must not be asked"})
	sent := captureSignals(h)
	cmd := emptyOfThree()
	for i, claim := range []string{"default-aaaa", "default-bbbb", "default-cccc"} {
		nodeEvent(h, time.Duration(i+1)*time.Second, claim, NodeEventTerminated)
	}
	h.env.ExecuteWorkflow(DisruptionCommandWorkflowType, CommandInput{
		Cluster: testCluster, DisruptionWorkflowID: DisruptionWorkflowID(testCluster), Command: cmd,
		ReplacementTimeout: 10 * time.Minute, Admission: true, Admitted: true,
	})
	if !h.env.IsWorkflowCompleted() || h.env.GetWorkflowError() != nil {
		t.Fatalf("command workflow did not succeed: %v", h.env.GetWorkflowError())
	}
	var outcome CommandOutcome
	if err := h.env.GetWorkflowResult(&outcome); err != nil || outcome.Result != CommandSucceeded {
		t.Fatalf("outcome %+v (%v), want Succeeded", outcome, err)
	}
	if len(*asked) != 0 {
		t.Errorf("asked to be admitted %d time(s), want none", len(*asked))
	}
	if n := len(h.rec.calls(activities.ComputeCommandsActivity)); n != 0 {
		t.Errorf("validated %d time(s) on its own, want none", n)
	}
	var committed []string
	for _, s := range sent.named(SignalDisruptionCommit) {
		committed = append(committed, s.workflowID)
		// The node's drain counts its confirmation from the mark.
		if got := s.arg.(CommandSignal).DisruptedAt; !got.Equal(markedAt) {
			t.Errorf("commit to %s says the taint went on at %v, want the mark's %v", s.workflowID, got, markedAt)
		}
	}
	// Sent together: the test environment delivers them in any order.
	slices.Sort(committed)
	want := []string{NodeWorkflowID(testCluster, "default-aaaa"), NodeWorkflowID(testCluster, "default-bbbb"), NodeWorkflowID(testCluster, "default-cccc")}
	if !slices.Equal(committed, want) {
		t.Errorf("committed %v, want %v", committed, want)
	}
	var marks []string
	for _, call := range h.rec.calls(activities.MarkDisruptionActivity) {
		mark := call.(*activities.MarkDisruptionRequest)
		marks = append(marks, fmt.Sprintf("candidate=%v disrupted=%v", mark.Candidate, mark.Disrupted))
	}
	if !slices.Equal(marks, []string{"candidate=false disrupted=true"}) {
		t.Errorf("marks %v, want the disrupted taint only", marks)
	}
}

// TestCommittedCommandTellsEachGoneCandidate: once committed, a command
// tells the disruption workflow each candidate that is gone while others
// still drain (changeReleaseEachNode); its end covers the last one.
func TestCommittedCommandTellsEachGoneCandidate(t *testing.T) {
	h := newHarness(t, testCommandID)
	commandWorld{}.register(h)
	sent := captureSignals(h)
	cmd := emptyOfThree()
	nodeEvent(h, time.Second, "default-bbbb", NodeEventTerminated)
	nodeEvent(h, 2*time.Second, "default-aaaa", NodeEventTerminated)
	nodeEvent(h, 3*time.Second, "default-cccc", NodeEventTerminated)
	h.env.ExecuteWorkflow(DisruptionCommandWorkflowType, CommandInput{
		Cluster: testCluster, DisruptionWorkflowID: DisruptionWorkflowID(testCluster), Command: cmd,
		ReplacementTimeout: 10 * time.Minute, Admission: true, Admitted: true,
	})
	if !h.env.IsWorkflowCompleted() || h.env.GetWorkflowError() != nil {
		t.Fatalf("command workflow did not succeed: %v", h.env.GetWorkflowError())
	}
	var told []string
	for _, s := range sent.named(SignalCommandNodeGone) {
		gone := s.arg.(CommandNodeGone)
		if s.workflowID != DisruptionWorkflowID(testCluster) || gone.CommandID != testCommandID {
			t.Errorf("told %s %+v, want the disruption workflow about %s", s.workflowID, gone, testCommandID)
		}
		told = append(told, gone.NodeClaimName)
	}
	if want := []string{"default-bbbb", "default-aaaa"}; !slices.Equal(told, want) {
		t.Errorf("told of gone candidates %v, want %v as they went (the end covers the last)", told, want)
	}
	if n := len(sent.named(SignalCommandDone)); n != 1 {
		t.Errorf("%d end signal(s), want 1", n)
	}
}
