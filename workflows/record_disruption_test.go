//go:build recordhistories

package workflows

// Records the disruption workflow, its command workflows and the node
// workflows they reserve, commit, release and launch (see
// record_histories_test.go for how a release is recorded).
//
// The command activities that reach other workflows (ReserveNodes,
// AdmitCommand, StartNodeWorkflows for replacements) send the same updates
// and starts as activities/nodeworkflows does, to the recording server;
// that package imports this one, so it cannot be used here. ComputeCommands
// answers from a script the recording sets once the nodes are Ready.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
	modeldisruption "github.com/millwright/millwright/model/disruption"
)

// commandWorldOnServer is what the disruption activities of the recording
// world share: the server's client and the scripted decisions.
type commandWorldOnServer struct {
	client client.Client

	mu sync.Mutex
	// script are the decisions ComputeCommands answers; a pass answers
	// each once (so a rolled-back decision is not taken again), a
	// validation or admission while none of its candidates terminated.
	script []scriptedCommand
	// verdicts and recheckAfter go with every pass's answer.
	verdicts     []activities.DisruptionVerdict
	recheckAfter time.Duration
	// busyOnce: the first admission of a command with this reason is told
	// the budget is used up.
	busyOnce modeldisruption.Reason
	gone     map[string]bool
}

type scriptedCommand struct {
	command activities.DisruptionCommand
	issued  bool
}

func newCommandWorldOnServer(c client.Client) *commandWorldOnServer {
	return &commandWorldOnServer{client: c, gone: map[string]bool{}}
}

func (w *commandWorldOnServer) decide(busyOnce modeldisruption.Reason, verdicts []activities.DisruptionVerdict, recheckAfter time.Duration, commands ...activities.DisruptionCommand) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.busyOnce = busyOnce
	for _, command := range commands {
		w.script = append(w.script, scriptedCommand{command: command})
	}
	w.verdicts, w.recheckAfter = verdicts, recheckAfter
}

func (w *commandWorldOnServer) terminated(claim string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gone[claim] = true
}

func (w *commandWorldOnServer) answer(req activities.ComputeCommandsRequest) activities.ComputeCommandsResponse {
	w.mu.Lock()
	defer w.mu.Unlock()
	var answer activities.ComputeCommandsResponse
	for i := range w.script {
		scripted := &w.script[i]
		if slices.ContainsFunc(scripted.command.Candidates, func(c activities.DisruptionCandidate) bool { return w.gone[c.NodeClaimName] }) {
			continue
		}
		if req.Admission && scripted.command.Reason == w.busyOnce && asks(req, scripted.command) {
			w.busyOnce = ""
			answer.Budgets = append(answer.Budgets, activities.DisruptionBudget{
				NodePool: scripted.command.Candidates[0].NodePool, Nodes: 4, Disrupting: 1,
				Allowed: map[modeldisruption.Reason]int{scripted.command.Reason: 0},
				Limit:   map[modeldisruption.Reason]int{scripted.command.Reason: 1},
			})
			continue
		}
		if !req.Validation && !req.Admission {
			if scripted.issued {
				continue
			}
			scripted.issued = true
		}
		answer.Commands = append(answer.Commands, scripted.command)
	}
	answer.NodesConsidered = len(req.Nodes) + len(w.script)
	if !req.Validation {
		answer.Verdicts, answer.RecheckAfter = w.verdicts, w.recheckAfter
	}
	return answer
}

// asks: the admission request is command's own (the ledger leaves out
// only the asking command's candidates; every command runs until it ended).
func asks(req activities.ComputeCommandsRequest, command activities.DisruptionCommand) bool {
	return !slices.ContainsFunc(req.Nodes, func(n activities.DisruptionNodeState) bool {
		return n.NodeClaimName == command.Candidates[0].NodeClaimName
	})
}

func (w recordingWorld) ComputeCommands(_ context.Context, req activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
	return w.commands.answer(req), nil
}

// ReserveNodes sends the reserve update to each node workflow, as
// nodeworkflows.Starter.ReserveNodes does.
func (w recordingWorld) ReserveNodes(ctx context.Context, req activities.ReserveNodesRequest) (activities.ReserveNodesResponse, error) {
	var resp activities.ReserveNodesResponse
	for _, id := range req.WorkflowIDs {
		handle, err := w.commands.client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			UpdateID: req.CommandID + "/reserve", WorkflowID: id, UpdateName: UpdateReserve,
			Args:         []any{ReserveRequest{CommandID: req.CommandID, Reason: req.Reason, Message: req.Message}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		var result ReserveResult
		if err == nil {
			err = handle.Get(ctx, &result)
		}
		var appErr *temporal.ApplicationError
		var notFound *serviceerror.NotFound
		switch {
		case errors.As(err, &appErr):
			resp.Refused = append(resp.Refused, activities.NodeRefusal{WorkflowID: id, Why: appErr.Error()})
		case errors.As(err, &notFound):
			resp.Refused = append(resp.Refused, activities.NodeRefusal{WorkflowID: id, Why: "node workflow is not running"})
		case err != nil:
			return resp, err
		default:
			resp.Accepted = append(resp.Accepted, id)
		}
	}
	return resp, nil
}

// AdmitCommand sends the admit update to the disruption workflow, as
// nodeworkflows.Starter.AdmitCommand does.
func (w recordingWorld) AdmitCommand(ctx context.Context, req activities.AdmitCommandRequest) (activities.AdmitCommandResponse, error) {
	var resp activities.AdmitCommandResponse
	handle, err := w.commands.client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		UpdateID: fmt.Sprintf("%s/admit/%d", req.CommandID, req.Attempt), WorkflowID: req.DisruptionWorkflowID,
		UpdateName: UpdateAdmitCommand, Args: []any{req}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = handle.Get(ctx, &resp)
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return activities.AdmitCommandResponse{Why: appErr.Error()}, nil
	}
	return resp, err
}

func (recordingWorld) MarkOutliers(_ context.Context, req activities.MarkOutliersRequest) (activities.MarkOutliersResponse, error) {
	return activities.MarkOutliersResponse{Marked: req.NodeNames}, nil
}

func (recordingWorld) MarkDisruption(_ context.Context, req activities.MarkDisruptionRequest) (activities.MarkDisruptionResponse, error) {
	return activities.MarkDisruptionResponse{Changed: req.NodeNames}, nil
}

// StartNodeWorkflows starts a command's replacements for real (they report
// Ready or Failed to it); the provisioner's nodes are only acknowledged,
// as in fakeWorld.
func (w recordingWorld) StartNodeWorkflows(ctx context.Context, req activities.StartNodeWorkflowsRequest) (activities.StartNodeWorkflowsResponse, error) {
	var resp activities.StartNodeWorkflowsResponse
	for _, node := range req.Nodes {
		if node.Spec.ReplacementFor != "" {
			_, err := w.commands.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: node.WorkflowID, TaskQueue: req.TaskQueue},
				req.WorkflowType, node.Spec, (*NodeState)(nil))
			var started *serviceerror.WorkflowExecutionAlreadyStarted
			if errors.As(err, &started) {
				resp.AlreadyExisted = append(resp.AlreadyExisted, node.WorkflowID)
				continue
			}
			if err != nil {
				return resp, err
			}
		}
		resp.Started = append(resp.Started, node.WorkflowID)
	}
	return resp, nil
}

// recordDisruption: one disruption workflow decides, over a few passes,
// an Empty delete, an Underutilized replace that succeeds, one whose
// replacement finds no capacity (rolled back) and a Drifted replace first
// told the budget is used up; it tells a node its drift, is paused and
// resumed, and continues as new with its commands still running. Every
// workflow involved is recorded.
func recordDisruption(r *recording) {
	t, ctx, c := r.t, r.ctx, r.c
	nodes := map[string]client.WorkflowRun{}
	for _, name := range []string{"default-cmd-empty", "default-cmd-replace", "default-cmd-rollback", "default-cmd-drift"} {
		nodes[name] = r.startNode(name, func(s *activities.NodeLaunchSpec) { s.DisruptionDecidesEmpty = true })
	}
	for _, run := range nodes {
		r.waitForPhase(run, PhaseReady)
	}

	disruptionID := DisruptionWorkflowID(testCluster)
	first := r.start(disruptionID, DisruptionWorkflowType, DisruptionInput{
		Cluster: testCluster, PollInterval: 500 * time.Millisecond, ValidationDelay: time.Second,
		ReplacementTimeout: time.Minute, PassesPerRun: 40,
	})
	pause := func(paused bool) {
		handle, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: disruptionID, UpdateName: UpdatePauseDisruption, WaitForStage: client.WorkflowUpdateStageCompleted,
			Args: []any{PauseRequest{Paused: paused, Reason: "recording", Requester: "alice"}},
		})
		if err == nil {
			err = handle.Get(ctx, nil)
		}
		if err != nil {
			t.Fatalf("pause=%v: %v", paused, err)
		}
	}
	pause(true)

	candidate := func(claim string) activities.DisruptionCandidate {
		return activities.DisruptionCandidate{NodeClaimName: claim, NodeName: "ip-" + claim, NodePool: "default",
			InstanceType: "m5.large", CapacityType: activities.CapacityTypeSpot, PricePerHour: 0.04}
	}
	replacement := func(pool string) activities.NodeLaunchSpec {
		spec := nodeSpec()
		spec.NodeClaimName, spec.Cluster, spec.NodePool, spec.PodKeys = "", "", pool, nil
		spec.InstanceTypeOptions = spec.InstanceTypeOptions[:1]
		return spec
	}
	r.commands.decide(modeldisruption.ReasonDrifted, []activities.DisruptionVerdict{
		{NodeClaimName: "default-cmd-drift", NodeName: "ip-default-cmd-drift", NodePool: "default", Candidate: true, Command: 3,
			Drifted: "AMI ami-0a → ami-0b", DriftKind: "AMIDrift"},
		{NodeClaimName: "default-cmd-empty", NodeName: "ip-default-cmd-empty", NodePool: "default", Candidate: true, Command: 0},
	}, 3*time.Second,
		activities.DisruptionCommand{Reason: modeldisruption.ReasonEmpty, Kind: modeldisruption.KindDelete,
			Candidates: []activities.DisruptionCandidate{candidate("default-cmd-empty")}, SavingsPerHour: 0.04, Message: "Empty: 1 node"},
		activities.DisruptionCommand{Reason: modeldisruption.ReasonUnderutilized, Kind: modeldisruption.KindReplace,
			Candidates: []activities.DisruptionCandidate{candidate("default-cmd-replace")}, Replacements: []activities.NodeLaunchSpec{replacement("default")},
			SavingsPerHour: 0.01, Message: "Underutilized: 1 node → 1 m5.large saves $0.01/h"},
		// Its replacement's pool name makes the recording world find no
		// capacity for it.
		activities.DisruptionCommand{Reason: modeldisruption.ReasonUnderutilized, Kind: modeldisruption.KindReplace,
			Candidates: []activities.DisruptionCandidate{candidate("default-cmd-rollback")}, Replacements: []activities.NodeLaunchSpec{replacement("ice-all")},
			SavingsPerHour: 0.01, Message: "Underutilized: 1 node → 1 m5.large saves $0.01/h"},
		activities.DisruptionCommand{Reason: modeldisruption.ReasonDrifted, Kind: modeldisruption.KindReplace,
			Candidates: []activities.DisruptionCandidate{candidate("default-cmd-drift")}, Replacements: []activities.NodeLaunchSpec{replacement("default")},
			Message: "Drifted: AMI ami-0a → ami-0b"},
	)
	pause(false)
	r.signal(first, SignalDisruptionTrigger, DisruptionTrigger{Reason: "recording"})

	// The four commands, started by the first passes.
	commandIDs := make([]string, 4)
	for i := range commandIDs {
		commandIDs[i] = DisruptionCommandWorkflowID(testCluster, first.GetRunID(), int64(i+1))
	}
	outcomes := make([]CommandOutcome, len(commandIDs))
	var wg sync.WaitGroup
	for i, id := range commandIDs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			waitFor(t, ctx, "command "+id+" started", func() bool {
				_, err := c.DescribeWorkflowExecution(ctx, id, "")
				return err == nil
			})
			run := c.GetWorkflow(ctx, id, "")
			if err := run.Get(ctx, &outcomes[i]); err != nil {
				t.Errorf("command %s: %v", id, err)
				return
			}
			r.save(run, []string{"command_empty_delete", "command_replace_then_drain", "command_replacement_failed_rolled_back", "command_busy_then_admitted"}[i])
		}()
	}

	// The first run continues as new while the commands run (or after).
	var continued *workflow.ContinueAsNewError
	if err := first.GetWithOptions(ctx, nil, client.WorkflowRunGetOptions{DisableFollowingRuns: true}); !errors.As(err, &continued) {
		t.Fatalf("disruption workflow's first run ended with %v, want continue-as-new", err)
	}
	r.save(first, "disruption_commands_and_continue_as_new")
	continuedAt := time.Now()
	wg.Wait()
	for i, want := range []CommandResult{CommandSucceeded, CommandSucceeded, CommandRolledBack, CommandSucceeded} {
		if outcomes[i].Result != want {
			t.Errorf("command %s ended %s (%s), want %s", commandIDs[i], outcomes[i].Result, outcomes[i].Detail, want)
		}
	}

	// The candidates: gone for their command's reason, or released.
	for name, reason := range map[string]TerminationReason{
		"default-cmd-empty": ReasonEmpty, "default-cmd-replace": ReasonUnderutilized, "default-cmd-drift": ReasonDrifted,
	} {
		r.finish(nodes[name], reason, false)
	}
	r.save(nodes["default-cmd-empty"], "node_reserved_then_deleted_empty")
	r.save(nodes["default-cmd-replace"], "node_reserved_then_replaced")
	r.save(nodes["default-cmd-drift"], "node_drift_notice_then_replaced")
	rolledBack := nodes["default-cmd-rollback"]
	r.waitForPhase(rolledBack, PhaseReady)
	r.drainUpdate(rolledBack, "after its command rolled back")
	r.finish(rolledBack, ReasonDrained, false)
	r.save(rolledBack, "node_reserved_then_released")

	// The replacements: the one that found no capacity, and a Ready one a
	// person drains.
	failed := c.GetWorkflow(ctx, NodeWorkflowID(testCluster, ReplacementClaimName("ice-all", commandIDs[2], 0)), "")
	r.finish(failed, ReasonInsufficientCapacity, false)
	r.save(failed, "node_replacement_without_capacity")
	ready := c.GetWorkflow(ctx, NodeWorkflowID(testCluster, ReplacementClaimName("default", commandIDs[1], 0)), "")
	r.waitForPhase(ready, PhaseReady)
	r.drainUpdate(ready, "recording done")
	r.finish(ready, ReasonDrained, false)
	r.save(ready, "node_replacement_launched_by_command")
	drift := c.GetWorkflow(ctx, NodeWorkflowID(testCluster, ReplacementClaimName("default", commandIDs[3], 0)), "")
	r.waitForPhase(drift, PhaseReady)
	if err := c.TerminateWorkflow(ctx, drift.GetID(), "", "recording done"); err != nil {
		t.Fatalf("terminate %s: %v", drift.GetID(), err)
	}

	// The next run: the commands' ends reached it; a pass or two.
	next := c.GetWorkflow(ctx, disruptionID, "")
	waitFor(t, ctx, "the next run's passes", func() bool {
		value, err := c.QueryWorkflow(ctx, next.GetID(), next.GetRunID(), QueryDisruptionState)
		if err != nil {
			return false
		}
		var view DisruptionStateView
		return value.Get(&view) == nil && len(view.Running) == 0 && len(view.Recent) == len(commandIDs) &&
			view.LastPass != nil && view.LastPass.At.After(continuedAt)
	})
	if err := c.TerminateWorkflow(ctx, next.GetID(), next.GetRunID(), "recording done"); err != nil {
		t.Fatalf("terminate disruption workflow: %v", err)
	}
	r.save(next, "disruption_resumed_after_continue_as_new")
}
