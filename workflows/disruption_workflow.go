package workflows

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
	modeldisruption "github.com/millwright/millwright/model/disruption"
)

// Disruption workflow defaults; DisruptionInput overrides each.
const (
	// DefaultDisruptionPollInterval is how often the cluster is looked at
	// without a trigger: Karpenter's disruption loop polls every 10 s.
	DefaultDisruptionPollInterval = 10 * time.Second
	// DefaultValidationDelay is how long a command waits before it checks
	// that its decision still holds (Karpenter: 15 s).
	DefaultValidationDelay = 15 * time.Second
	// DefaultReplacementTimeout bounds launch-to-initialized of a
	// command's replacements; past it the command rolls back.
	DefaultReplacementTimeout = 20 * time.Minute
	// DefaultMaxCommandsPerPass bounds one ComputeCommands answer.
	DefaultMaxCommandsPerPass = 20
	// DefaultDisruptionPassesPerRun continues as new after this many passes.
	DefaultDisruptionPassesPerRun = 300
	// triggerDebounce: a trigger brings the next pass this close, so a
	// burst of pod deletions makes one pass, not one each.
	triggerDebounce = 2 * time.Second
	// maxCommandAge forgets a command that never reported its end (it was
	// terminated by hand): its candidates are free for new decisions.
	maxCommandAge = 12 * time.Hour
	// maxRecentOutcomes bounds the outcomes kept for the state query.
	maxRecentOutcomes = 20
	// maxDriftNoticesPerPass bounds the SignalDrifted sent by one pass
	// (the rest go with the next passes), so a new AMI drifting every
	// node does not fill one workflow task.
	maxDriftNoticesPerPass = 100
	// maxDriftedSinceSent bounds the drifted nodes a ComputeCommands
	// request says the drift time of: the earliest ones. The rest come
	// after them anyway (an unknown time sorts last), and a new AMI
	// drifting 5,000 nodes would otherwise add ~375 KB to every request
	// recorded in the history.
	maxDriftedSinceSent = 500
)

// InvalidDisruptionInputErrorType fails a disruption workflow started with
// unusable input.
const InvalidDisruptionInputErrorType = "InvalidDisruptionInput"

// DisruptionInput configures the disruption workflow of one cluster; the
// worker starts it with SignalWithStart. Zero values take the defaults.
type DisruptionInput struct {
	Cluster         string        `json:"cluster"`
	PollInterval    time.Duration `json:"pollInterval,omitempty"`
	ValidationDelay time.Duration `json:"validationDelay,omitempty"`
	// EmptyValidationDelay is an Empty command's wait before it validates
	// (default 0: at once; see changeEmptyValidatesAtOnce).
	EmptyValidationDelay time.Duration                `json:"emptyValidationDelay,omitempty"`
	ReplacementTimeout   time.Duration                `json:"replacementTimeout,omitempty"`
	MaxCommandsPerPass   int                          `json:"maxCommandsPerPass,omitempty"`
	PassesPerRun         int                          `json:"passesPerRun,omitempty"`
	Options              activities.DisruptionOptions `json:"options"`
	// NodeTaskQueue runs node and command workflows; empty means this
	// workflow's own.
	NodeTaskQueue string `json:"nodeTaskQueue,omitempty"`
	// State is carried across continue-as-new; nil on a fresh start.
	State *DisruptionState `json:"state,omitempty"`
}

func (in DisruptionInput) withDefaults() DisruptionInput {
	if in.PollInterval <= 0 {
		in.PollInterval = DefaultDisruptionPollInterval
	}
	if in.ValidationDelay <= 0 {
		in.ValidationDelay = DefaultValidationDelay
	}
	if in.ReplacementTimeout <= 0 {
		in.ReplacementTimeout = DefaultReplacementTimeout
	}
	if in.MaxCommandsPerPass <= 0 {
		in.MaxCommandsPerPass = DefaultMaxCommandsPerPass
	}
	if in.PassesPerRun <= 0 {
		in.PassesPerRun = DefaultDisruptionPassesPerRun
	}
	return in
}

// Validate names the first unusable field.
func (in DisruptionInput) Validate() error {
	if in.Cluster == "" {
		return fmt.Errorf("disruption input: cluster is empty")
	}
	return nil
}

// disruptionStateVersion versions DisruptionState across continue-as-new.
const disruptionStateVersion = 1

// DisruptionState is what the disruption workflow carries across
// continue-as-new: the ledger of running commands (their candidates count as
// disrupting in every decision, even before anything shows on the Nodes),
// the pause, and what the last passes did.
type DisruptionState struct {
	Version int `json:"version"`
	// Commands numbers commands for the workflow's whole life; command ids
	// derive from it.
	Commands     int64            `json:"commands"`
	Paused       bool             `json:"paused,omitempty"`
	PausedBy     string           `json:"pausedBy,omitempty"`
	PausedReason string           `json:"pausedReason,omitempty"`
	Running      []RunningCommand `json:"running,omitempty"`
	Recent       []CommandOutcome `json:"recent,omitempty"`
	NextPassAt   time.Time        `json:"nextPassAt,omitzero"`
	LastPass     *DisruptionPass  `json:"lastPass,omitempty"`
	// Drifted is what each drifted node's workflow was last told
	// (SignalDrifted), by node claim.
	Drifted map[string]DriftNotice `json:"drifted,omitempty"`
	// DriftedSince is when a pass first found each drifted node so, by
	// node claim (since changeDriftOrder); every decision is told, and
	// drift takes the earliest first, as Karpenter orders by its Drifted
	// condition's transition.
	DriftedSince map[string]time.Time `json:"driftedSince,omitempty"`
	// Outliers are the Nodes MarkOutliers last tainted (sorted).
	Outliers []string `json:"outliers,omitempty"`
}

// RunningCommand is a command started and not yet reported done.
type RunningCommand struct {
	ID      string    `json:"id"`
	Reason  string    `json:"reason"`
	Kind    string    `json:"kind"`
	Message string    `json:"message"`
	Started time.Time `json:"started"`
	// Candidates are the node claims it disrupts.
	Candidates []string `json:"candidates"`
	// Replacements are the node claims it launches (ReplacementClaimName);
	// none is a candidate while it runs (changeReplacementsHeld).
	Replacements []string `json:"replacements,omitempty"`
	// AdmitsAtCommit: the command asks to be admitted (UpdateAdmitCommand)
	// once its validation delay is over, and its candidates use the
	// budget only from its admission (Admitted) on (changeAdmitAtCommit).
	// Otherwise they use it from the command's start.
	AdmitsAtCommit bool `json:"admitsAtCommit,omitempty"`
	Admitted       bool `json:"admitted,omitempty"`
}

// DisruptionPass summarises one look at the cluster.
type DisruptionPass struct {
	At              time.Time `json:"at"`
	Commands        int       `json:"commands"`
	Started         []string  `json:"started,omitempty"`
	NodesConsidered int       `json:"nodesConsidered"`
	Candidates      int       `json:"candidates"`
	Error           string    `json:"error,omitempty"`
}

// DisruptionStateView answers QueryDisruptionState and UpdatePauseDisruption.
type DisruptionStateView struct {
	Cluster      string           `json:"cluster"`
	Paused       bool             `json:"paused"`
	PausedBy     string           `json:"pausedBy,omitempty"`
	PausedReason string           `json:"pausedReason,omitempty"`
	Running      []RunningCommand `json:"running,omitempty"`
	Recent       []CommandOutcome `json:"recent,omitempty"`
	NextPassAt   time.Time        `json:"nextPassAt,omitzero"`
	LastPass     *DisruptionPass  `json:"lastPass,omitempty"`
	Commands     int64            `json:"commands"`
	// Decided is the last pass's answer: the commands it decided (started
	// or not) and every node's verdict. Not carried across continue-as-new.
	Decided  []activities.DisruptionCommand `json:"decided,omitempty"`
	Verdicts []activities.DisruptionVerdict `json:"verdicts,omitempty"`
	Budgets  []activities.DisruptionBudget  `json:"budgets,omitempty"`
}

// DisruptionWorkflow decides the voluntary disruptions of one cluster, with
// id DisruptionWorkflowID(cluster): on a trigger or its poll timer it asks
// the read-only ComputeCommands activity what to do now, and starts one
// DisruptionCommandWorkflow per command (abandoned on close, so a command
// outlives continue-as-new and reports its end by signal). Its state is the
// budget ledger: the candidates of running commands count as disrupting in
// every later decision. Paused, it starts no command. It runs forever.
func DisruptionWorkflow(ctx workflow.Context, input DisruptionInput) error {
	if err := input.Validate(); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), InvalidDisruptionInputErrorType, nil)
	}
	d := newDisruption(ctx, input.withDefaults())
	if err := workflow.SetQueryHandler(ctx, QueryDisruptionState, d.view); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdatePauseDisruption, d.handlePause,
		workflow.UpdateHandlerOptions{Description: "pause or resume disruption"}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateAdmitCommand, d.handleAdmit,
		workflow.UpdateHandlerOptions{Description: "admit a validated disruption command", Validator: validateAdmit}); err != nil {
		return err
	}
	return d.run()
}

type disruption struct {
	ctx        workflow.Context
	logger     log.Logger
	input      DisruptionInput
	firstRunID string
	state      DisruptionState

	triggers workflow.ReceiveChannel
	done     workflow.ReceiveChannel
	// gone carries SignalCommandNodeGone; read only when releaseEachNode
	// (decided once, when the run starts: changeReleaseEachNode).
	gone            workflow.ReceiveChannel
	releaseEachNode bool
	wake            workflow.Channel
	// triggered: a trigger arrived since the last pass; passNow: a
	// command ended, so the next pass is due at once.
	triggered, passNow bool
	// startedInPass: the last pass started a command, so the next is due
	// at once unless refusedSincePass (changePassAfterStart).
	startedInPass, refusedSincePass bool
	// lastAnswer is the last pass's answer, for the state query only.
	lastAnswer activities.ComputeCommandsResponse
	// computing: a pass or an admission is deciding; the other waits, so
	// each decides from a ledger nothing changes under it.
	computing bool
	// busy are the commands last answered busy (waiting for budget), and
	// retryBusy names a command that ended since, so they are told to ask again
	// (SignalAdmissionRetry). Not carried across continue-as-new: a
	// command also asks again on its own timer.
	busy      []string
	retryBusy string
}

func newDisruption(ctx workflow.Context, input DisruptionInput) *disruption {
	d := &disruption{
		ctx:        ctx,
		logger:     log.With(workflow.GetLogger(ctx), "cluster", input.Cluster),
		input:      input,
		firstRunID: workflow.GetInfo(ctx).FirstRunID,
		triggers:   workflow.GetSignalChannel(ctx, SignalDisruptionTrigger),
		done:       workflow.GetSignalChannel(ctx, SignalCommandDone),
		gone:       workflow.GetSignalChannel(ctx, SignalCommandNodeGone),
		wake:       workflow.NewBufferedChannel(ctx, 1),
		state:      DisruptionState{Version: disruptionStateVersion},
	}
	if carried := input.State; carried != nil {
		d.state = *carried
		d.state.Version = disruptionStateVersion
	}
	d.input.State = nil
	d.releaseEachNode = changed(ctx, changeReleaseEachNode)
	return d
}

func (d *disruption) run() error {
	for passes := 1; ; passes++ {
		d.waitForPass()
		if err := d.ctx.Err(); err != nil && changed(d.ctx, changeDisruptionEndsWhenCancelled) {
			return temporal.NewCanceledError("disruption workflow cancelled")
		}
		d.pass()
		if d.shouldContinueAsNew(passes) {
			return d.continueAsNew()
		}
	}
}

// waitForPass blocks until the next pass is due and disruption is not
// paused. A trigger brings a far pass forward to triggerDebounce from now.
func (d *disruption) waitForPass() {
	for d.ctx.Err() == nil || !changed(d.ctx, changeDisruptionEndsWhenCancelled) {
		now := workflow.Now(d.ctx)
		if d.state.NextPassAt.IsZero() {
			d.state.NextPassAt = now.Add(d.input.PollInterval)
		}
		if d.triggered && d.state.NextPassAt.After(now.Add(triggerDebounce)) {
			d.state.NextPassAt = now.Add(triggerDebounce)
		}
		if d.passNow || d.passAfterStartDue() {
			d.state.NextPassAt = now
		}
		if d.state.Paused {
			d.markOutliers(nil)
		}
		if !d.state.Paused && !d.state.NextPassAt.After(now) {
			d.triggered, d.passNow = false, false
			d.startedInPass, d.refusedSincePass = false, false
			d.state.NextPassAt = time.Time{}
			return
		}
		timerCtx, cancel := workflow.WithCancel(d.ctx)
		selector := workflow.NewSelector(d.ctx)
		d.listen(selector)
		if !d.state.Paused {
			timer := workflow.NewTimerWithOptions(timerCtx, d.state.NextPassAt.Sub(now), workflow.TimerOptions{Summary: "next disruption pass"})
			selector.AddFuture(timer, func(workflow.Future) {})
		}
		selector.Select(d.ctx)
		for selector.HasPending() {
			selector.Select(d.ctx)
		}
		cancel()
		d.tellBusy()
	}
}

// passAfterStartDue: the last pass started a command and none was refused
// since, so the next pass is due at once (changePassAfterStart).
func (d *disruption) passAfterStartDue() bool {
	return d.startedInPass && !d.refusedSincePass
}

func (d *disruption) listen(selector workflow.Selector) {
	selector.AddReceive(d.triggers, func(c workflow.ReceiveChannel, _ bool) {
		var trigger DisruptionTrigger
		c.Receive(d.ctx, &trigger)
		d.triggered = true
	})
	selector.AddReceive(d.done, func(c workflow.ReceiveChannel, _ bool) {
		var outcome CommandOutcome
		c.Receive(d.ctx, &outcome)
		d.commandDone(outcome)
	})
	selector.AddReceive(d.wake, func(c workflow.ReceiveChannel, _ bool) { c.Receive(d.ctx, nil) })
	if d.releaseEachNode {
		selector.AddReceive(d.gone, func(c workflow.ReceiveChannel, _ bool) {
			var gone CommandNodeGone
			c.Receive(d.ctx, &gone)
			d.nodeGone(gone)
		})
	}
}

func (d *disruption) absorbPendingSignals() {
	for {
		absorbed := false
		var trigger DisruptionTrigger
		for d.triggers.ReceiveAsync(&trigger) {
			d.triggered, absorbed = true, true
		}
		var outcome CommandOutcome
		for d.done.ReceiveAsync(&outcome) {
			d.commandDone(outcome)
			absorbed = true
		}
		var gone CommandNodeGone
		for d.releaseEachNode && d.gone.ReceiveAsync(&gone) {
			d.nodeGone(gone)
			absorbed = true
		}
		if !absorbed {
			return
		}
	}
}

func (d *disruption) commandDone(outcome CommandOutcome) {
	i := slices.IndexFunc(d.state.Running, func(c RunningCommand) bool { return c.ID == outcome.CommandID })
	if i < 0 {
		return // reported twice, or forgotten after maxCommandAge
	}
	d.state.Running = slices.Delete(d.state.Running, i, i+1)
	d.logger.Info("Disruption command ended", "command", outcome.CommandID, "result", string(outcome.Result), "detail", outcome.Detail)
	d.state.Recent = append(d.state.Recent, outcome)
	if extra := len(d.state.Recent) - maxRecentOutcomes; extra > 0 {
		d.state.Recent = slices.Clone(d.state.Recent[extra:])
	}
	// Its end changes what is disruptable (budget freed, nodes gone).
	if !outcome.Result.acted() && changed(d.ctx, changeRefusedCommandWaitsForPoll) {
		// Nothing changed; the same decision passed again at once would
		// be refused again, in a loop.
		d.refusedSincePass = true
		return
	}
	d.triggered = true
	if changed(d.ctx, changeCommandEndPassesAtOnce) {
		d.passNow = true
	}
	if len(d.busy) > 0 {
		d.retryBusy = outcome.CommandID
	}
}

// nodeGone takes a gone candidate off its running command in the ledger,
// so the budget it held is free for the next pass, which comes at once
// (changeReleaseEachNode).
func (d *disruption) nodeGone(gone CommandNodeGone) {
	running := d.runningCommand(gone.CommandID)
	if running == nil {
		return // ended meanwhile, or forgotten
	}
	i := slices.Index(running.Candidates, gone.NodeClaimName)
	if i < 0 {
		return
	}
	running.Candidates = slices.Delete(slices.Clone(running.Candidates), i, i+1)
	d.triggered, d.passNow = true, true
	if len(d.busy) > 0 {
		d.retryBusy = gone.CommandID
	}
}

// tellBusy signals the commands answered busy to ask again (a command
// ended: budget may be free). A command that is gone is no error.
func (d *disruption) tellBusy() {
	if d.retryBusy == "" {
		return
	}
	busy, ended := d.busy, d.retryBusy
	d.busy, d.retryBusy = nil, ""
	futures := make([]workflow.Future, len(busy))
	for i, id := range busy {
		futures[i] = workflow.SignalExternalWorkflow(d.ctx, id, "", SignalAdmissionRetry, AdmissionRetry{Ended: ended})
	}
	for i, f := range futures {
		if err := f.Get(d.ctx, nil); err != nil {
			d.logger.Debug("Could not tell a command to ask for admission again", "command", busy[i], "error", err)
		}
	}
}

// pass asks what to do now and starts a command per decision whose
// candidates no running command holds.
func (d *disruption) pass() {
	if !d.lock(d.ctx) {
		return
	}
	defer d.unlock()
	now := workflow.Now(d.ctx)
	d.forgetStaleCommands(now)
	summary := &DisruptionPass{At: now}
	d.state.LastPass = summary
	var answer activities.ComputeCommandsResponse
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(d.ctx, computeCommandsOptions()),
		activities.ComputeCommandsActivity, d.computeRequest()).Get(d.ctx, &answer)
	if err != nil {
		summary.Error = "compute commands: " + err.Error()
		d.logger.Error("Computing disruption commands failed; retrying at the next pass", "error", err)
		return
	}
	d.lastAnswer = answer
	d.recheckAfter(answer.RecheckAfter)
	d.noticeDrift(answer.Verdicts)
	d.markOutliers(outliersOf(answer.Verdicts))
	summary.Commands, summary.NodesConsidered = len(answer.Commands), answer.NodesConsidered
	for _, verdict := range answer.Verdicts {
		if verdict.Candidate {
			summary.Candidates++
		}
	}
	for _, command := range answer.Commands {
		if d.state.Paused {
			return // paused by an update while this pass ran
		}
		if d.holdsAny(command) {
			continue
		}
		if id, ok := d.startCommand(command); ok {
			summary.Started = append(summary.Started, id)
		}
	}
	if len(summary.Started) > 0 && changed(d.ctx, changePassAfterStart) {
		// What the budget has left after these is decided at once.
		d.startedInPass = true
	}
}

// recheckAfter brings the next pass forward to when a node held back only
// by consolidateAfter may go (after, from now; at least triggerDebounce
// away, so a node just short of it does not bring a pass per task), when
// that is before the next poll.
func (d *disruption) recheckAfter(after time.Duration) {
	if after <= 0 || !changed(d.ctx, changeRecheckAtConsolidateAfter) {
		return
	}
	now := workflow.Now(d.ctx)
	at := now.Add(max(after, triggerDebounce))
	next := d.state.NextPassAt
	if next.IsZero() {
		next = now.Add(d.input.PollInterval)
	}
	if at.Before(next) {
		d.state.NextPassAt = at
	}
}

// markOutliers has MarkOutliers taint the Nodes named and untaint the rest
// when they differ from the last marked (changeMarkOutliers). A failure is
// logged and left to the next pass.
func (d *disruption) markOutliers(names []string) {
	if slices.Equal(names, d.state.Outliers) || !changed(d.ctx, changeMarkOutliers) {
		return
	}
	opts := workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: time.Minute,
		Summary:                "mark outliers",
	}
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(d.ctx, opts), activities.MarkOutliersActivity,
		activities.MarkOutliersRequest{NodeNames: names}).Get(d.ctx, nil)
	if err != nil {
		d.logger.Warn("Could not mark the consolidation outliers; trying again after the next pass", "outliers", names, "error", err)
		return
	}
	d.state.Outliers = names
}

// outliersOf are the names of the Nodes verdicts call outliers, sorted.
func outliersOf(verdicts []activities.DisruptionVerdict) []string {
	var names []string
	for _, v := range verdicts {
		if v.Outlier && v.NodeName != "" {
			names = append(names, v.NodeName)
		}
	}
	slices.Sort(names)
	return names
}

// noticeDrift tells each node workflow whose drift changed since the last
// pass what drifted (SignalDrifted), at most maxDriftNoticesPerPass a pass.
// Nodes no verdict names any more (gone) are forgotten.
func (d *disruption) noticeDrift(verdicts []activities.DisruptionVerdict) {
	if !changed(d.ctx, changeDriftNotices) {
		return
	}
	since := changed(d.ctx, changeDriftOrder)
	now := workflow.Now(d.ctx)
	seen := make(map[string]bool, len(verdicts))
	var sent []workflow.Future
	var sentTo []string
	for _, v := range verdicts {
		if v.NodeClaimName == "" {
			continue
		}
		seen[v.NodeClaimName] = true
		want := DriftNotice{Kind: v.DriftKind, Message: v.Drifted}
		if want.Kind == "" && want.Message != "" {
			want.Kind = string(ReasonDrifted)
		}
		if since {
			d.noteDriftedSince(v.NodeClaimName, want.Kind != "", now)
		}
		if want == d.state.Drifted[v.NodeClaimName] || len(sent) >= maxDriftNoticesPerPass {
			continue
		}
		id := NodeWorkflowID(d.input.Cluster, v.NodeClaimName)
		sent = append(sent, workflow.SignalExternalWorkflow(d.ctx, id, "", SignalDrifted, want))
		sentTo = append(sentTo, id)
		if want.Kind == "" {
			delete(d.state.Drifted, v.NodeClaimName)
			continue
		}
		if d.state.Drifted == nil {
			d.state.Drifted = map[string]DriftNotice{}
		}
		d.state.Drifted[v.NodeClaimName] = want
	}
	for claim := range d.state.Drifted {
		if !seen[claim] {
			delete(d.state.Drifted, claim)
		}
	}
	for claim := range d.state.DriftedSince {
		if !seen[claim] {
			delete(d.state.DriftedSince, claim)
		}
	}
	for i, f := range sent {
		if err := f.Get(d.ctx, nil); err != nil {
			d.logger.Debug("Could not tell a node workflow about its drift", "workflow", sentTo[i], "error", err)
		}
	}
}

// computeRequest tells a pass's ComputeCommands what the cluster does not
// show yet: the nodes running commands hold.
func (d *disruption) computeRequest() activities.ComputeCommandsRequest {
	return d.ledgerRequest(false, "")
}

// ledgerRequest is ComputeCommands' request with the ledger: every running
// command's candidates held (validating for commands waiting to be
// admitted, reserved otherwise) and their replacements no candidates. An
// admission (of command except, whose own candidates are left to the
// cluster's view) charges the budgets for reserved candidates; a pass for
// reserved ones, and since changeValidatingWait keeps validating ones in
// the pools' waiting ledgers (at most one budget's worth) instead of
// charging them.
func (d *disruption) ledgerRequest(admission bool, except string) activities.ComputeCommandsRequest {
	request := activities.ComputeCommandsRequest{Cluster: d.input.Cluster, Options: d.input.Options, MaxCommands: d.input.MaxCommandsPerPass}
	request.Validation, request.Admission = admission, admission
	if !admission && changed(d.ctx, changeValidatingWait) {
		request.ValidatingWait = true
	}
	for _, command := range d.state.Running {
		if command.ID == except {
			continue
		}
		for _, claim := range command.Candidates {
			state := activities.DisruptionNodeState{NodeClaimName: claim}
			switch {
			case !command.AdmitsAtCommit:
				state.Reserved = true
			case command.Admitted:
				// Charged by passes too (not Committed): a consolidation
				// decided while an admitted command's pods move counts on
				// room kube-scheduler gives them (on mixed-600, 8 of 18
				// such decisions were invalidated), and Empty decisions
				// taken while the last ones go were sized for a pool that
				// shrank by then and refused (scale to zero of the basic
				// scenario took 2m38s instead of 1m50s).
				state.Reserved = true
			default:
				state.Validating = true
			}
			request.Nodes = append(request.Nodes, state)
		}
	}
	if changed(d.ctx, changeReplacementsHeld) {
		for _, command := range d.state.Running {
			if command.ID == except {
				continue
			}
			for _, claim := range command.Replacements {
				request.Nodes = append(request.Nodes, activities.DisruptionNodeState{NodeClaimName: claim, ReplacementFor: command.ID})
			}
		}
	}
	d.withDriftedSince(&request)
	return request
}

// noteDriftedSince keeps when claim was first found drifted while it is.
func (d *disruption) noteDriftedSince(claim string, drifted bool, now time.Time) {
	if !drifted {
		delete(d.state.DriftedSince, claim)
		return
	}
	if _, known := d.state.DriftedSince[claim]; known {
		return
	}
	if d.state.DriftedSince == nil {
		d.state.DriftedSince = map[string]time.Time{}
	}
	d.state.DriftedSince[claim] = now
}

// withDriftedSince tells request when the earliest drifted nodes (at most
// maxDriftedSinceSent) were first found so, beside what the ledger says of
// them.
func (d *disruption) withDriftedSince(request *activities.ComputeCommandsRequest) {
	if len(d.state.DriftedSince) == 0 {
		return
	}
	at := make(map[string]int, len(request.Nodes))
	for i, n := range request.Nodes {
		at[n.NodeClaimName] = i
	}
	claims := slices.SortedFunc(maps.Keys(d.state.DriftedSince), func(a, b string) int {
		if c := d.state.DriftedSince[a].Compare(d.state.DriftedSince[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	for _, claim := range claims[:min(len(claims), maxDriftedSinceSent)] {
		if i, ok := at[claim]; ok {
			request.Nodes[i].DriftedSince = d.state.DriftedSince[claim]
			continue
		}
		request.Nodes = append(request.Nodes, activities.DisruptionNodeState{NodeClaimName: claim, DriftedSince: d.state.DriftedSince[claim]})
	}
}

func (d *disruption) holdsAny(command activities.DisruptionCommand) bool {
	for _, running := range d.state.Running {
		for _, candidate := range command.Candidates {
			if slices.Contains(running.Candidates, candidate.NodeClaimName) {
				return true
			}
		}
	}
	return false
}

// startCommand starts the command's workflow and records it in the ledger.
func (d *disruption) startCommand(command activities.DisruptionCommand) (string, bool) {
	d.state.Commands++
	id := DisruptionCommandWorkflowID(d.input.Cluster, d.firstRunID, d.state.Commands)
	options := workflow.ChildWorkflowOptions{
		WorkflowID:            id,
		TaskQueue:             d.taskQueue(),
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}
	input := CommandInput{
		Cluster:              d.input.Cluster,
		DisruptionWorkflowID: workflow.GetInfo(d.ctx).WorkflowExecution.ID,
		Command:              command,
		ValidationDelay:      d.validationDelay(command),
		ReplacementTimeout:   d.input.ReplacementTimeout,
		NodeTaskQueue:        d.taskQueue(),
		Options:              d.input.Options,
		Admission:            changed(d.ctx, changeAdmitAtCommit),
	}
	if input.Admission && input.ValidationDelay == 0 && command.Reason == modeldisruption.ReasonEmpty &&
		changed(d.ctx, changeEmptyAdmittedAtStart) {
		// The pass decided it within its budget a moment ago: asking again
		// would decide the same, one round trip later.
		input.Admitted = true
	}
	child := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(d.ctx, options), DisruptionCommandWorkflowType, input)
	if err := child.GetChildWorkflowExecution().Get(d.ctx, nil); err != nil {
		d.logger.Error("Could not start a disruption command", "command", id, "error", err)
		return "", false
	}
	running := RunningCommand{ID: id, Reason: string(command.Reason), Kind: string(command.Kind), Message: command.Message,
		Started: workflow.Now(d.ctx), AdmitsAtCommit: input.Admission, Admitted: input.Admitted}
	for _, candidate := range command.Candidates {
		running.Candidates = append(running.Candidates, candidate.NodeClaimName)
	}
	for i, spec := range command.Replacements {
		running.Replacements = append(running.Replacements, ReplacementClaimName(spec.NodePool, id, i))
	}
	d.state.Running = append(d.state.Running, running)
	d.logger.Info("Disruption command started", "command", id, "reason", string(command.Reason), "kind", string(command.Kind), "message", command.Message)
	return id, true
}

// validationDelay is how long command waits before it validates: an Empty
// command at once (EmptyValidationDelay), any other ValidationDelay.
func (d *disruption) validationDelay(command activities.DisruptionCommand) time.Duration {
	if command.Reason == modeldisruption.ReasonEmpty && changed(d.ctx, changeEmptyValidatesAtOnce) {
		return max(d.input.EmptyValidationDelay, 0)
	}
	return d.input.ValidationDelay
}

func (d *disruption) forgetStaleCommands(now time.Time) {
	d.state.Running = slices.DeleteFunc(d.state.Running, func(c RunningCommand) bool {
		if now.Sub(c.Started) < maxCommandAge {
			return false
		}
		d.logger.Warn("Forgetting a disruption command that never reported its end", "command", c.ID, "started", c.Started)
		return true
	})
}

func (d *disruption) taskQueue() string {
	if d.input.NodeTaskQueue != "" {
		return d.input.NodeTaskQueue
	}
	return workflow.GetInfo(d.ctx).TaskQueueName
}

func (d *disruption) handlePause(_ workflow.Context, request PauseRequest) (DisruptionStateView, error) {
	if d.state.Paused != request.Paused {
		d.state.Paused, d.state.PausedBy, d.state.PausedReason = request.Paused, "", ""
		if request.Paused {
			d.state.PausedBy, d.state.PausedReason = requesterOrUnknown(request.Requester), request.Reason
			d.logger.Info("Disruption paused", "by", d.state.PausedBy, "reason", request.Reason)
		} else {
			d.logger.Info("Disruption resumed", "by", requesterOrUnknown(request.Requester))
			d.triggered = true
		}
		d.wake.SendAsync(true)
	}
	return d.view()
}

func (d *disruption) view() (DisruptionStateView, error) {
	return DisruptionStateView{
		Cluster:      d.input.Cluster,
		Paused:       d.state.Paused,
		PausedBy:     d.state.PausedBy,
		PausedReason: d.state.PausedReason,
		Running:      d.state.Running,
		Recent:       d.state.Recent,
		NextPassAt:   d.state.NextPassAt,
		LastPass:     d.state.LastPass,
		Commands:     d.state.Commands,
		Decided:      d.lastAnswer.Commands,
		Verdicts:     d.lastAnswer.Verdicts,
		Budgets:      d.lastAnswer.Budgets,
	}, nil
}

func (d *disruption) shouldContinueAsNew(passes int) bool {
	info := workflow.GetInfo(d.ctx)
	return passes >= d.input.PassesPerRun || info.GetContinueAsNewSuggested() ||
		info.GetCurrentHistoryLength() >= provisionerHistoryEventsBeforeContinueAsNew
}

// continueAsNew carries the ledger once every signal delivered is in it and
// every update handler has finished.
func (d *disruption) continueAsNew() error {
	d.absorbPendingSignals()
	if err := workflow.Await(d.ctx, func() bool { return workflow.AllHandlersFinished(d.ctx) }); err != nil {
		return err
	}
	if changed(d.ctx, changeAbsorbSignalsAfterHandlers) {
		// Signals delivered while a handler finished (a command's end
		// during an admission) would be lost with this run.
		d.absorbPendingSignals()
	}
	next := d.input
	state := d.state
	if (d.triggered || d.passAfterStartDue()) && state.NextPassAt.IsZero() {
		state.NextPassAt = workflow.Now(d.ctx)
	}
	next.State = &state
	d.logger.Info("Continuing as new", "commands", d.state.Commands, "running", len(d.state.Running))
	return workflow.NewContinueAsNewError(d.ctx, DisruptionWorkflowType, next)
}
