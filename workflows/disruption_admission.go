package workflows

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
)

// Admission (changeAdmitAtCommit): a command validates and takes its budget
// in the disruption workflow, one admission or pass at a time, so that
//   - its validation sees every other running command's candidates as held,
//     as its decision did (a command validating on its own saw them free,
//     decided differently and invalidated itself), and the pods of those
//     decided after it where they are, as they were when it was decided;
//   - its candidates use the budget only once it is admitted, so the next
//     decisions wait out their validation delay while the admitted ones
//     drain, and two commands admitted one after the other never together
//     exceed a budget.

// validateAdmit rejects an admission request that names no command.
func validateAdmit(_ workflow.Context, request activities.AdmitCommandRequest) error {
	if request.CommandID == "" {
		return errors.New("admit command: commandID is empty")
	}
	if len(request.Command.Candidates) == 0 {
		return errors.New("admit command " + request.CommandID + ": the command has no candidates")
	}
	return nil
}

// handleAdmit answers UpdateAdmitCommand: the command is admitted when a
// fresh decision over the ledger (its own candidates left to the cluster's
// view, the other commands' held, admitted ones charged to the budgets)
// still takes every candidate for the same reason; busy when the decision
// could not take them because the budgets are used up for now; refused
// otherwise. An admitted command counts as disrupting from then on, and
// the next pass is due at once (the budget it held while validating is
// free for new decisions).
func (d *disruption) handleAdmit(ctx workflow.Context, request activities.AdmitCommandRequest) (activities.AdmitCommandResponse, error) {
	if !d.lock(ctx) {
		return activities.AdmitCommandResponse{}, ctx.Err()
	}
	defer d.unlock()
	running := d.runningCommand(request.CommandID)
	switch {
	case running == nil:
		return activities.AdmitCommandResponse{Why: "the disruption workflow runs no command " + request.CommandID}, nil
	case running.Admitted:
		return activities.AdmitCommandResponse{Admitted: true}, nil
	}
	ledger := d.ledgerRequest(true, request.CommandID)
	if changed(ctx, changeAdmitOwnCandidates) {
		for _, candidate := range request.Command.Candidates {
			ledger.Admitting = append(ledger.Admitting, candidate.NodeClaimName)
		}
	}
	if changed(ctx, changeAdmitBeforeLater) {
		d.markDecidedLater(&ledger, request.CommandID)
	}
	narrows := changed(ctx, changeReplacementsStillFit)
	var answer activities.ComputeCommandsResponse
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, computeCommandsOptions()),
		activities.ComputeCommandsActivity, ledger).Get(ctx, &answer)
	if err != nil {
		return activities.AdmitCommandResponse{Busy: true, Why: "validation failed: " + errorDetail(err)}, nil
	}
	var narrowed []activities.NodeLaunchSpec
	var why string
	if narrows {
		narrowed, why = freshHolds(request.Command, answer.Commands)
		if why != "" || narrowedText(request.Command.Replacements, narrowed) == "" {
			narrowed = nil
		}
	} else {
		why = stillHolds(request.Command, answer.Commands)
	}
	if why != "" {
		if short := budgetShort(request.Command, answer.Budgets); short != "" {
			if !slices.Contains(d.busy, request.CommandID) {
				d.busy = append(d.busy, request.CommandID)
			}
			return activities.AdmitCommandResponse{Busy: true, Why: short}, nil
		}
		return activities.AdmitCommandResponse{Why: why + verdictsOf(request.Command, answer.Verdicts)}, nil
	}
	// Looked up again: the command may have ended while the activity ran.
	if running = d.runningCommand(request.CommandID); running == nil {
		return activities.AdmitCommandResponse{Why: "the disruption workflow runs no command " + request.CommandID}, nil
	}
	running.Admitted = true
	d.logger.Info("Disruption command admitted", "command", request.CommandID)
	d.passNow = true
	d.wake.SendAsync(true)
	return activities.AdmitCommandResponse{Admitted: true, Replacements: narrowed}, nil
}

// markDecidedLater marks, in an admission's ledger, the candidates of the
// commands started after the one being admitted (Running keeps start
// order) that are still validating: their pods stay put in its fresh
// decision (activities.DisruptionNodeState.DecidedLater).
func (d *disruption) markDecidedLater(ledger *activities.ComputeCommandsRequest, admitting string) {
	i := slices.IndexFunc(d.state.Running, func(c RunningCommand) bool { return c.ID == admitting })
	if i < 0 {
		return
	}
	later := map[string]bool{}
	for _, command := range d.state.Running[i+1:] {
		if command.AdmitsAtCommit && !command.Admitted {
			for _, claim := range command.Candidates {
				later[claim] = true
			}
		}
	}
	for k := range ledger.Nodes {
		if state := &ledger.Nodes[k]; state.Validating && later[state.NodeClaimName] {
			state.DecidedLater = true
		}
	}
}

func (d *disruption) runningCommand(id string) *RunningCommand {
	i := slices.IndexFunc(d.state.Running, func(c RunningCommand) bool { return c.ID == id })
	if i < 0 {
		return nil
	}
	return &d.state.Running[i]
}

// lock waits until no pass or admission is deciding and takes the turn;
// false when ctx is done first.
func (d *disruption) lock(ctx workflow.Context) bool {
	if err := workflow.Await(ctx, func() bool { return !d.computing }); err != nil {
		return false
	}
	d.computing = true
	return true
}

func (d *disruption) unlock() { d.computing = false }

// budgetShort says which of the command's pools allows fewer disruptions
// for its reason than it has candidates there while nodes already
// disrupting are still going ("" when none does). A pool whose budget
// itself is smaller than that (it shrank with the pool since the command
// was decided) is not short for now but for good: it is not named, and
// the decision, which could not take every candidate, is refused.
func budgetShort(command activities.DisruptionCommand, budgets []activities.DisruptionBudget) string {
	need := map[string]int{}
	for _, candidate := range command.Candidates {
		need[candidate.NodePool]++
	}
	var short []string
	for _, b := range budgets {
		n := need[b.NodePool]
		allowed, governed := b.Allowed[command.Reason]
		limit, limited := b.Limit[command.Reason]
		if n > 0 && governed && allowed < n && (!limited || limit >= n) {
			short = append(short, fmt.Sprintf("NodePool %s allows %d more %s disruption(s) now, the command needs %d", b.NodePool, allowed, command.Reason, n))
		}
	}
	sort.Strings(short)
	if len(short) == 0 {
		return ""
	}
	return short[0]
}

// verdictsOf is what the fresh decision said of the command's candidates
// that it did not take (" (node: why; …)"), so a refusal says why.
func verdictsOf(command activities.DisruptionCommand, verdicts []activities.DisruptionVerdict) string {
	mine := map[string]bool{}
	for _, candidate := range command.Candidates {
		mine[candidate.NodeClaimName] = true
	}
	var said []string
	for _, v := range verdicts {
		if mine[v.NodeClaimName] && v.Command < 0 && v.Message != "" {
			said = append(said, v.NodeName+": "+v.Message)
		}
	}
	if len(said) == 0 {
		return ""
	}
	return " (" + strings.Join(said, "; ") + ")"
}
