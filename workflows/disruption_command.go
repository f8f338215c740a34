package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	modeldisruption "github.com/millwright/millwright/model/disruption"
)

// CommandInput is one disruption decision to carry out.
type CommandInput struct {
	Cluster string `json:"cluster"`
	// DisruptionWorkflowID is told the outcome (SignalCommandDone).
	DisruptionWorkflowID string                       `json:"disruptionWorkflowID"`
	Command              activities.DisruptionCommand `json:"command"`
	ValidationDelay      time.Duration                `json:"validationDelay"`
	ReplacementTimeout   time.Duration                `json:"replacementTimeout"`
	NodeTaskQueue        string                       `json:"nodeTaskQueue"`
	Options              activities.DisruptionOptions `json:"options"`
	// Admission: after the validation delay the command asks the
	// disruption workflow to admit it (UpdateAdmitCommand) instead of
	// validating on its own (changeAdmitAtCommit).
	Admission bool `json:"admission,omitempty"`
	// Admitted: the pass that decided the command admitted it
	// (changeEmptyAdmittedAtStart); it asks for no admission.
	Admitted bool `json:"admitted,omitempty"`
}

// Admission's pace: a command the budgets cannot take yet asks again when
// the disruption workflow says a command ended (SignalAdmissionRetry), or
// after admissionRetryInterval, for at most admissionPatience after its
// first request; past that its decision is too old to trust and it gives
// up.
const (
	admissionRetryInterval = 5 * time.Second
	admissionPatience      = 2 * time.Minute
)

// Command steps, in order, as QueryCommandState shows them.
const (
	StepReserve     = "Reserve"
	StepValidate    = "Validate"
	StepMark        = "Mark"
	StepReplace     = "Replace"
	StepDrain       = "Drain"
	StepRollingBack = "RollingBack"
	StepDone        = "Done"
)

// CommandStateView answers QueryCommandState.
type CommandStateView struct {
	Step         string                       `json:"step"`
	Command      activities.DisruptionCommand `json:"command"`
	Replacements []string                     `json:"replacements,omitempty"`
	Ready        []string                     `json:"ready,omitempty"`
	Gone         []string                     `json:"gone,omitempty"`
	TakenOver    []string                     `json:"takenOver,omitempty"`
	Decisions    []Decision                   `json:"decisions,omitempty"`
	Outcome      *CommandOutcome              `json:"outcome,omitempty"`
}

// DisruptionCommandWorkflow carries out one command, with id
// DisruptionCommandWorkflowID: reserve every candidate (the node workflows'
// reserve update), wait ValidationDelay and check that the decision still
// holds — by the disruption workflow's admission (Admission: validated
// against its ledger, and within the budgets, which the candidates use
// from then on), or for commands started before that by ComputeCommands
// alone — taint the candidates, launch the replacements
// through StartNodeWorkflows (names derived from this workflow's id, so a
// retry starts nothing twice, and the ClientToken from each node workflow's
// id) and wait until each is initialized, then commit: every candidate
// drains and terminates. A step that fails rolls back deliberately: the
// candidates are untainted and released, replacements not yet initialized
// are drained. A worker killed at any step resumes at that step.
func DisruptionCommandWorkflow(ctx workflow.Context, input CommandInput) (CommandOutcome, error) {
	c := &command{
		ctx:    ctx,
		input:  input,
		id:     workflow.GetInfo(ctx).WorkflowExecution.ID,
		events: workflow.GetSignalChannel(ctx, SignalCommandNodeEvent),
		view:   CommandStateView{Command: input.Command},
		nodes:  map[string]NodeEventKind{},
	}
	c.logger = log.With(workflow.GetLogger(ctx), "command", c.id, "reason", string(input.Command.Reason))
	if err := workflow.SetQueryHandler(ctx, QueryCommandState, func() (CommandStateView, error) { return c.view, nil }); err != nil {
		return CommandOutcome{}, err
	}
	if len(input.Command.Candidates) == 0 {
		return CommandOutcome{}, temporal.NewNonRetryableApplicationError("disruption command has no candidates", InvalidDisruptionInputErrorType, nil)
	}
	outcome := c.run()
	outcome.CommandID = c.id
	c.view.Outcome, c.view.Step = &outcome, StepDone
	c.decide("%s: %s", outcome.Result, outcome.Detail)
	if input.DisruptionWorkflowID != "" {
		err := workflow.SignalExternalWorkflow(ctx, input.DisruptionWorkflowID, "", SignalCommandDone, outcome).Get(ctx, nil)
		if err != nil {
			c.logger.Warn("Could not report to the disruption workflow", "error", err)
		}
	}
	return outcome, nil
}

type command struct {
	ctx    workflow.Context
	logger log.Logger
	input  CommandInput
	id     string
	events workflow.ReceiveChannel
	view   CommandStateView
	// nodes is the last event each node claim (candidate or replacement)
	// reported.
	nodes map[string]NodeEventKind
	// disruptedAt is when mark(true) had tainted the candidates.
	disruptedAt time.Time
}

func (c *command) run() CommandOutcome {
	cmd := c.input.Command
	c.decide("Started: %s", cmd.Message)

	c.view.Step = StepReserve
	reserved, refused := c.reserve()
	if len(refused) > 0 {
		c.release(reserved, "another candidate refused: "+refused[0].Why)
		return CommandOutcome{Result: CommandRejected, Detail: refused[0].WorkflowID + ": " + refused[0].Why}
	}

	c.view.Step = StepValidate
	if c.softTainted() {
		// Soft-tainted while it waits, so the pods of nodes draining
		// meanwhile land elsewhere (see activities.CandidateTaintKey).
		c.markCandidates(true)
	}
	validate := c.validate
	switch {
	case c.admits() && c.input.Admitted:
		validate = c.admittedAtStart
	case c.admits():
		validate = c.admit
	}
	why := c.takenOverAfter(c.input.ValidationDelay)
	if why == "" {
		why = validate()
	}
	if why != "" {
		if c.softTainted() {
			c.markCandidates(false)
		}
		c.release(c.candidateClaims(), why)
		return CommandOutcome{Result: CommandInvalidated, Detail: why}
	}

	c.view.Step = StepMark
	c.mark(true)

	if len(cmd.Replacements) > 0 {
		c.view.Step = StepReplace
		if why := c.replace(); why != "" {
			c.rollBack(why)
			return CommandOutcome{Result: CommandRolledBack, Detail: why}
		}
	}

	c.view.Step = StepDrain
	c.commit()
	return CommandOutcome{Result: CommandSucceeded, Detail: cmd.Message}
}

func (c *command) decide(format string, args ...any) {
	c.view.Decisions = append(c.view.Decisions, Decision{At: workflow.Now(c.ctx), Message: fmt.Sprintf(format, args...)})
}

func (c *command) candidateClaims() []string {
	claims := make([]string, len(c.input.Command.Candidates))
	for i, candidate := range c.input.Command.Candidates {
		claims[i] = candidate.NodeClaimName
	}
	return claims
}

func (c *command) nodeWorkflowID(claim string) string { return NodeWorkflowID(c.input.Cluster, claim) }

// reserve asks every candidate's node workflow to hold its node.
func (c *command) reserve() (reserved []string, refused []activities.NodeRefusal) {
	request := activities.ReserveNodesRequest{CommandID: c.id, Reason: string(c.input.Command.Reason), Message: c.input.Command.Message}
	for _, claim := range c.candidateClaims() {
		request.WorkflowIDs = append(request.WorkflowIDs, c.nodeWorkflowID(claim))
	}
	var answer activities.ReserveNodesResponse
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(c.ctx, shortOptions("reserve candidates")), activities.ReserveNodesActivity, request).Get(c.ctx, &answer)
	if err != nil {
		return nil, []activities.NodeRefusal{{WorkflowID: "(all)", Why: "reserving failed: " + errorDetail(err)}}
	}
	for _, id := range answer.Accepted {
		_, claim, _ := ParseNodeWorkflowID(id)
		reserved = append(reserved, claim)
	}
	c.decide("Reserved %d candidate(s); %d refused", len(answer.Accepted), len(answer.Refused))
	return reserved, answer.Refused
}

// sleep waits d while recording node events; no wait at all for 0.
func (c *command) sleep(d time.Duration) { c.sleepFor(d, "validation delay") }

func (c *command) sleepFor(d time.Duration, summary string) {
	if d <= 0 {
		return
	}
	timer := workflow.NewTimerWithOptions(c.ctx, d, workflow.TimerOptions{Summary: summary})
	c.awaitEvents(func() bool { return timer.IsReady() }, timer)
}

// awaitEvents records node events until done holds; wake (if any) is a
// future whose readiness may make done hold.
func (c *command) awaitEvents(done func() bool, wake workflow.Future, also ...func(workflow.Selector)) {
	for !done() {
		selector := workflow.NewSelector(c.ctx)
		for _, add := range also {
			add(selector)
		}
		selector.AddReceive(c.events, func(ch workflow.ReceiveChannel, _ bool) {
			var event CommandNodeEvent
			ch.Receive(c.ctx, &event)
			c.record(event)
		})
		if wake != nil {
			selector.AddFuture(wake, func(workflow.Future) {})
		}
		selector.Select(c.ctx)
	}
}

func (c *command) record(event CommandNodeEvent) {
	if c.nodes[event.NodeClaimName] == NodeEventTerminated {
		return
	}
	c.nodes[event.NodeClaimName] = event.Kind
	c.decide("%s %s: %s", event.NodeClaimName, event.Kind, event.Detail)
	switch event.Kind {
	case NodeEventReady:
		c.view.Ready = append(c.view.Ready, event.NodeClaimName)
	case NodeEventTakenOver:
		c.view.TakenOver = append(c.view.TakenOver, event.NodeClaimName)
	case NodeEventTerminated:
		c.view.Gone = append(c.view.Gone, event.NodeClaimName)
	}
}

// takenOverAfter waits d and names a candidate something else is ending by
// then, if any.
func (c *command) takenOverAfter(d time.Duration) string {
	c.sleep(d)
	return c.takenOver()
}

// takenOver names a candidate something else is ending, if any.
func (c *command) takenOver() string {
	for _, claim := range c.candidateClaims() {
		if kind := c.nodes[claim]; kind == NodeEventTakenOver || kind == NodeEventTerminated {
			return fmt.Sprintf("candidate %s was taken over before the command acted", claim)
		}
	}
	return ""
}

// validate asks ComputeCommands again and reports why the command no longer
// holds ("" when it does): a command of the same reason must still take
// every candidate, with no more replacements.
func (c *command) validate() string {
	var answer activities.ComputeCommandsResponse
	request := activities.ComputeCommandsRequest{Cluster: c.input.Cluster, Options: c.input.Options, Validation: true}
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(c.ctx, computeCommandsOptions()), activities.ComputeCommandsActivity, request).Get(c.ctx, &answer)
	if err != nil {
		return "validation failed: " + errorDetail(err)
	}
	if changed(c.ctx, changeReplacementsStillFit) {
		narrowed, why := freshHolds(c.input.Command, answer.Commands)
		if why != "" {
			return why
		}
		c.useReplacements(narrowed)
	} else if why := stillHolds(c.input.Command, answer.Commands); why != "" {
		return why
	}
	c.decide("Validated after %s", formatDuration(c.input.ValidationDelay))
	return ""
}

// useReplacements launches narrowed (the command's replacements with only
// the offerings that still fit, see freshHolds) instead of the decision's.
func (c *command) useReplacements(narrowed []activities.NodeLaunchSpec) {
	if len(narrowed) != len(c.input.Command.Replacements) {
		return
	}
	if text := narrowedText(c.input.Command.Replacements, narrowed); text != "" {
		c.input.Command.Replacements = narrowed
		c.view.Command.Replacements = narrowed
		c.logger.Info("Replacements narrowed at validation", "change", text)
		c.decide("Replacement options narrowed to those that still fit the pods: %s", text)
	}
}

// admittedAtStart: the pass that decided the command admitted it with the
// budget it charged; only a candidate taken over since stops it.
func (c *command) admittedAtStart() string {
	if why := c.takenOver(); why != "" {
		return why
	}
	c.decide("Admitted by the pass that decided it")
	return ""
}

// admit asks the disruption workflow to admit the command (see
// disruption_admission.go), again every admissionRetryInterval while the
// budgets cannot take it yet, and reports why it was not admitted ("" when
// it was).
func (c *command) admit() string {
	first := workflow.Now(c.ctx)
	options := shortOptions("admit command")
	for attempt := 1; ; attempt++ {
		var answer activities.AdmitCommandResponse
		request := activities.AdmitCommandRequest{DisruptionWorkflowID: c.input.DisruptionWorkflowID, CommandID: c.id,
			Attempt: attempt, Command: c.input.Command}
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(c.ctx, options), activities.AdmitCommandActivity, request).Get(c.ctx, &answer)
		if err != nil {
			return "admission failed: " + errorDetail(err)
		}
		waited := workflow.Now(c.ctx).Sub(first)
		switch {
		case answer.Admitted:
			c.decide("Validated after %s and admitted (attempt %d)", formatDuration(c.input.ValidationDelay), attempt)
			c.useReplacements(answer.Replacements)
			return ""
		case !answer.Busy:
			return answer.Why
		case waited >= admissionPatience:
			return fmt.Sprintf("not admitted within %s: %s", formatDuration(admissionPatience), answer.Why)
		}
		if attempt == 1 {
			c.decide("Waiting to be admitted: %s", answer.Why)
		}
		c.awaitAdmissionRetry()
		if why := c.takenOver(); why != "" {
			return why
		}
	}
}

// awaitAdmissionRetry waits admissionRetryInterval, or less when the
// disruption workflow says a command ended, recording node events.
func (c *command) awaitAdmissionRetry() {
	retry := workflow.GetSignalChannel(c.ctx, SignalAdmissionRetry)
	timerCtx, cancel := workflow.WithCancel(c.ctx)
	defer cancel()
	timer := workflow.NewTimerWithOptions(timerCtx, admissionRetryInterval, workflow.TimerOptions{Summary: "admission retry"})
	told := false
	c.awaitEvents(func() bool { return told || timer.IsReady() }, timer, func(s workflow.Selector) {
		s.AddReceive(retry, func(ch workflow.ReceiveChannel, _ bool) {
			var retry AdmissionRetry
			ch.Receive(c.ctx, &retry)
			told = true
		})
	})
	var more AdmissionRetry
	for retry.ReceiveAsync(&more) {
	}
}

// candidateNodeNames are the candidates' Nodes (those registered).
func (c *command) candidateNodeNames() []string {
	var names []string
	for _, candidate := range c.input.Command.Candidates {
		if candidate.NodeName != "" {
			names = append(names, candidate.NodeName)
		}
	}
	return names
}

// admits: the command asks the disruption workflow to admit it.
func (c *command) admits() bool { return c.input.Admission && c.input.DisruptionWorkflowID != "" }

// softTainted: its candidates carry the candidate taint while it waits.
func (c *command) softTainted() bool { return c.admits() && c.input.ValidationDelay > 0 }

// markCandidates adds (or removes) the soft candidate taint on the
// candidates' Nodes.
func (c *command) markCandidates(add bool) {
	names := c.candidateNodeNames()
	var answer activities.MarkDisruptionResponse
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(c.ctx, shortOptions("mark candidates")), activities.MarkDisruptionActivity,
		activities.MarkDisruptionRequest{NodeNames: names, Disrupted: add, Candidate: true, CommandID: c.id,
			Reason: string(c.input.Command.Reason)}).Get(c.ctx, &answer)
	if err != nil {
		c.decide("Marking the candidates (candidate taint %v) failed: %s", add, errorDetail(err))
		return
	}
	c.decide("Candidate taint %v on %d Node(s)", add, len(answer.Changed))
}

// mark taints (or untaints) the candidates' Nodes.
func (c *command) mark(disrupted bool) {
	names := c.candidateNodeNames()
	var answer activities.MarkDisruptionResponse
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(c.ctx, shortOptions("mark candidates")), activities.MarkDisruptionActivity,
		activities.MarkDisruptionRequest{NodeNames: names, Disrupted: disrupted, CommandID: c.id,
			Message: c.input.Command.Message, Replacing: len(c.input.Command.Replacements) > 0,
			Reason: string(c.input.Command.Reason)}).Get(c.ctx, &answer)
	if err != nil {
		c.decide("Marking the candidates (disrupted=%v) failed: %s", disrupted, errorDetail(err))
		return
	}
	c.decide("Marked %d candidate Node(s) disrupted=%v", len(answer.Changed), disrupted)
	if disrupted {
		c.disruptedAt = answer.DisruptedAt
	}
}

// replace starts the replacements and waits until each is initialized. It
// reports why it gave up ("" when all are Ready).
func (c *command) replace() string {
	now := workflow.Now(c.ctx)
	starts := make([]activities.NodeWorkflowStart, len(c.input.Command.Replacements))
	for i, spec := range c.input.Command.Replacements {
		spec.Cluster = c.input.Cluster
		spec.NodeClaimName = ReplacementClaimName(spec.NodePool, c.id, i)
		spec.ReplacementFor = c.id
		spec.DisruptionDecidesEmpty = true
		if spec.NominationWindow == 0 {
			spec.NominationWindow = activities.DefaultNominationWindow
		}
		if c.input.Command.Reason == modeldisruption.ReasonUnderutilized {
			spec.Annotations = mapWith(spec.Annotations, apisv1.AnnotationLaunchedByConsolidation, now.UTC().Format(time.RFC3339))
		}
		if spec.LaunchReason == "" {
			spec.LaunchReason = "replacement for " + c.id + ": " + c.input.Command.Message
		}
		starts[i] = activities.NodeWorkflowStart{WorkflowID: NodeWorkflowID(spec.Cluster, spec.NodeClaimName), Spec: spec}
		c.view.Replacements = append(c.view.Replacements, spec.NodeClaimName)
	}
	var started activities.StartNodeWorkflowsResponse
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(c.ctx, startNodeWorkflowsOptions()), activities.StartNodeWorkflowsActivity,
		activities.StartNodeWorkflowsRequest{WorkflowType: NodeWorkflowType, TaskQueue: c.taskQueue(), Nodes: starts}).Get(c.ctx, &started)
	if err != nil {
		return "starting the replacements failed: " + errorDetail(err)
	}
	c.logger.Info("Launching replacements", "replacements", c.view.Replacements)
	c.decide("Launching %d replacement(s) %s", len(starts), strings.Join(c.view.Replacements, ", "))

	timeoutCtx, cancel := workflow.WithCancel(c.ctx)
	defer cancel()
	timeout := workflow.NewTimerWithOptions(timeoutCtx, c.input.ReplacementTimeout, workflow.TimerOptions{Summary: "replacements initialized"})
	settled := func() bool { return timeout.IsReady() || c.replacementFailed() != "" || c.replacementsReady() }
	c.awaitEvents(settled, timeout)
	switch {
	case c.replacementFailed() != "":
		return c.replacementFailed()
	case !c.replacementsReady():
		return fmt.Sprintf("replacements not initialized within %s", formatDuration(c.input.ReplacementTimeout))
	}
	c.decide("Replacements initialized")
	return ""
}

func (c *command) replacementsReady() bool {
	for _, claim := range c.view.Replacements {
		if c.nodes[claim] != NodeEventReady {
			return false
		}
	}
	return true
}

func (c *command) replacementFailed() string {
	for _, claim := range c.view.Replacements {
		if c.nodes[claim] == NodeEventFailed {
			return "replacement " + claim + " failed"
		}
	}
	return ""
}

// commit tells every candidate to go and waits until each is gone.
func (c *command) commit() {
	if changed(c.ctx, changeCommitTogether) {
		c.commitTogether()
	} else {
		for _, claim := range c.candidateClaims() {
			if c.nodes[claim] == NodeEventTerminated {
				continue
			}
			err := workflow.SignalExternalWorkflow(c.ctx, c.nodeWorkflowID(claim), "", SignalDisruptionCommit, CommandSignal{CommandID: c.id}).Get(c.ctx, nil)
			if err != nil {
				// The node workflow is gone: so is the node.
				c.record(CommandNodeEvent{NodeClaimName: claim, Kind: NodeEventTerminated, Detail: "node workflow gone: " + err.Error()})
			}
		}
	}
	c.logger.Info("Disrupting candidates", "candidates", c.candidateClaims())
	c.decide("Committed: draining %d candidate(s)", len(c.input.Command.Candidates))
	allGone := func() bool {
		for _, claim := range c.candidateClaims() {
			if c.nodes[claim] != NodeEventTerminated {
				return false
			}
		}
		return true
	}
	if !changed(c.ctx, changeReleaseEachNode) || c.input.DisruptionWorkflowID == "" {
		c.awaitEvents(allGone, nil)
		return
	}
	told := map[string]bool{}
	for {
		// Events that came together are told together, and not at all
		// when they were the last.
		var event CommandNodeEvent
		for c.events.ReceiveAsync(&event) {
			c.record(event)
		}
		if allGone() {
			return // the command's end tells the rest
		}
		c.tellGone(c.goneUntold(told), told)
		c.awaitEvents(func() bool { return allGone() || len(c.goneUntold(told)) > 0 }, nil)
	}
}

// goneUntold lists the candidates gone that the disruption workflow was not
// told of yet, in candidate order.
func (c *command) goneUntold(told map[string]bool) []string {
	var gone []string
	for _, claim := range c.candidateClaims() {
		if c.nodes[claim] == NodeEventTerminated && !told[claim] {
			gone = append(gone, claim)
		}
	}
	return gone
}

// tellGone tells the disruption workflow that claims are gone, so their
// budget is free before the command's last node is (changeReleaseEachNode).
func (c *command) tellGone(claims []string, told map[string]bool) {
	sent := make([]workflow.Future, len(claims))
	for i, claim := range claims {
		told[claim] = true
		sent[i] = workflow.SignalExternalWorkflow(c.ctx, c.input.DisruptionWorkflowID, "", SignalCommandNodeGone,
			CommandNodeGone{CommandID: c.id, NodeClaimName: claim})
	}
	for i, f := range sent {
		if err := f.Get(c.ctx, nil); err != nil {
			c.logger.Warn("Could not tell the disruption workflow a candidate is gone", "nodeClaim", claims[i], "error", err)
		}
	}
}

// commitTogether tells every candidate still there to go, all at once,
// then takes the answers: a node workflow that is gone is a node gone.
func (c *command) commitTogether() {
	var claims []string
	var sent []workflow.Future
	for _, claim := range c.candidateClaims() {
		if c.nodes[claim] == NodeEventTerminated {
			continue
		}
		claims = append(claims, claim)
		sent = append(sent, workflow.SignalExternalWorkflow(c.ctx, c.nodeWorkflowID(claim), "", SignalDisruptionCommit,
			CommandSignal{CommandID: c.id, DisruptedAt: c.disruptedAt}))
	}
	for i, f := range sent {
		if err := f.Get(c.ctx, nil); err != nil {
			c.record(CommandNodeEvent{NodeClaimName: claims[i], Kind: NodeEventTerminated, Detail: "node workflow gone: " + err.Error()})
		}
	}
}

// release frees the reserved candidates.
func (c *command) release(claims []string, why string) {
	for _, claim := range claims {
		err := workflow.SignalExternalWorkflow(c.ctx, c.nodeWorkflowID(claim), "", SignalDisruptionRelease, CommandSignal{CommandID: c.id, Why: why}).Get(c.ctx, nil)
		if err != nil {
			c.logger.Warn("Could not release a candidate", "nodeClaim", claim, "error", err)
		}
	}
	c.logger.Info("Released candidates", "why", why)
}

// rollBack undoes a command whose replacements failed: the candidates are
// untainted and released, and replacements not initialized are drained.
func (c *command) rollBack(why string) {
	c.view.Step = StepRollingBack
	c.logger.Warn("Rolling back disruption command", "why", why)
	c.decide("Rolling back: %s", why)
	c.mark(false)
	if c.softTainted() {
		c.markCandidates(false)
	}
	c.release(c.candidateClaims(), why)
	for _, claim := range c.view.Replacements {
		if slices.Contains(c.view.Ready, claim) {
			continue
		}
		err := workflow.SignalExternalWorkflow(c.ctx, c.nodeWorkflowID(claim), "", SignalDrain,
			DrainRequest{Reason: "rollback of " + c.id + ": " + why, Requester: c.id}).Get(c.ctx, nil)
		if err != nil {
			c.logger.Warn("Could not stop a replacement", "nodeClaim", claim, "error", err)
		}
	}
}

func (c *command) taskQueue() string {
	if c.input.NodeTaskQueue != "" {
		return c.input.NodeTaskQueue
	}
	return workflow.GetInfo(c.ctx).TaskQueueName
}

func mapWith(m map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	out[key] = value
	return out
}
