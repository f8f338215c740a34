package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
)

// InvalidNodeLaunchSpecErrorType fails a node workflow started with a spec
// that cannot be launched.
const InvalidNodeLaunchSpecErrorType = "InvalidNodeLaunchSpec"

// nodeHistoryEventsBeforeContinueAsNew is a backstop for servers that do not
// suggest continue-as-new; a Ready node mostly receives pod-count signals.
const nodeHistoryEventsBeforeContinueAsNew = 5000

// NodeWorkflow owns one node from launch to termination, with id
// NodeWorkflowID(spec.Cluster, spec.NodeClaimName):
//
//	Launching → Registering → Initializing → Ready → Draining → Terminating → Terminated
//
// A fresh node is started with the spec alone; resume is only passed by the
// workflow itself when it continues as new (from Ready), carrying its state.
func NodeWorkflow(ctx workflow.Context, spec activities.NodeLaunchSpec, resume *NodeState) (NodeResult, error) {
	if err := spec.Validate(); err != nil {
		return NodeResult{}, temporal.NewNonRetryableApplicationError(err.Error(), InvalidNodeLaunchSpecErrorType, nil)
	}
	w := newNodeLifecycle(ctx, spec, resume)
	if err := w.setMessageHandlers(); err != nil {
		return NodeResult{}, err
	}
	return w.run()
}

// nodeLifecycle is one run of a node workflow.
type nodeLifecycle struct {
	ctx        workflow.Context
	logger     log.Logger
	spec       activities.NodeLaunchSpec
	state      *NodeState
	workflowID string

	signals nodeSignals
	// wake lets update handlers, which run in their own coroutine, wake the
	// main loop blocked in a selector.
	wake workflow.Channel
	// outbox holds provisioner notifications decided by message handlers;
	// the main flow sends them, so handlers never block.
	outbox []ReplanRequest
	// notices are signals to disruption commands, sent like outbox.
	notices []commandNotice
	// replanSentForInterruption: the provisioner hears about an
	// interruption once, however many events arrive.
	replanSentForInterruption bool

	// The Ready phase's durable timers: expireAfter, and consolidateAfter
	// while the node is empty (its firing is handled by the Ready loop:
	// the budget check runs an activity, callbacks must stay small).
	expiry   *durableTimer
	emptyTTL *durableTimer

	// claimMirror is the NodeClaim write in flight (of claimMirrorPhase),
	// nil when none is.
	claimMirror      workflow.Future
	claimMirrorPhase string
	// claimStale: a message changed what the NodeClaim's conditions say
	// (drift, a reservation) since the last write; the main flow writes it
	// (flushNodeClaimConditions).
	claimStale bool

	// escalated: an involuntary request (an interruption) arrived after the
	// termination reason was set; it makes the drain involuntary and
	// escalatedDeadline (if set) bounds it.
	escalated         bool
	escalatedDeadline time.Time

	// cancelled: the workflow was cancelled and w.ctx is now a disconnected
	// context, so cleanup can still run activities.
	cancelled bool
}

func newNodeLifecycle(ctx workflow.Context, spec activities.NodeLaunchSpec, resume *NodeState) *nodeLifecycle {
	w := &nodeLifecycle{
		ctx:        ctx,
		spec:       spec,
		workflowID: workflow.GetInfo(ctx).WorkflowExecution.ID,
		signals:    newNodeSignals(ctx),
		wake:       workflow.NewBufferedChannel(ctx, 1),
		expiry:     newDurableTimer(expiryTimerName),
		emptyTTL:   newDurableTimer(emptyTTLTimerName),
	}
	w.logger = log.With(workflow.GetLogger(ctx), "nodeClaim", spec.NodeClaimName, "nodePool", spec.NodePool)
	if resume != nil {
		w.state = readNodeState(resume)
	} else {
		w.state = &NodeState{Version: nodeStateVersion, Phase: PhaseLaunching, CreatedAt: workflow.Now(ctx)}
	}
	return w
}

// nodePhases is the lifecycle, in order: the step that runs each phase.
// A step returns the phase to enter next (its own phase is not allowed);
// only run enters it. Each step lives in the file named after its phase.
var nodePhases = map[Phase]func(*nodeLifecycle) Phase{
	PhaseLaunching:    (*nodeLifecycle).launch,     // node_launch.go
	PhaseRegistering:  (*nodeLifecycle).register,   // node_register.go
	PhaseInitializing: (*nodeLifecycle).initialize, // node_initialize.go
	PhaseReady:        (*nodeLifecycle).ready,      // node_ready.go
	PhaseDraining:     (*nodeLifecycle).drain,      // node_drain.go
	PhaseTerminating:  (*nodeLifecycle).terminate,  // node_terminate.go
}

// continueAsNewPhase is not a phase: the Ready step answers it when the run
// should continue as new, carrying the node, still Ready, to the next run.
const continueAsNewPhase Phase = "(continue as new)"

// run drives the phases until the node is gone.
func (w *nodeLifecycle) run() (NodeResult, error) {
	if w.state.Phase == PhaseLaunching && len(w.state.Decisions) == 0 {
		w.decide("Node workflow started for %d pod(s): %s", len(w.spec.PodKeys), w.spec.LaunchReason)
		w.publish()
		w.mirrorNodeClaim()
	} else {
		w.publish()
	}
	for w.state.Phase != PhaseTerminated {
		w.checkCancelled()
		step, known := nodePhases[w.state.Phase]
		if !known {
			return NodeResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("node state carries unknown phase %q", w.state.Phase), "UnknownPhase", nil)
		}
		next := step(w)
		if next == continueAsNewPhase {
			var err error
			if next, err = w.continueAsNew(); err != nil {
				return NodeResult{}, err
			}
		}
		w.enterPhase(next)
	}
	w.awaitNodeClaimMirror()
	if err := workflow.Await(w.ctx, func() bool { return workflow.AllHandlersFinished(w.ctx) }); err != nil {
		return NodeResult{}, err
	}
	result := NodeResult{NodeClaimName: w.spec.NodeClaimName, Instance: w.state.Instance, NodeName: w.state.NodeName}
	if w.state.Termination != nil {
		result.Termination = *w.state.Termination
	}
	if w.cancelled {
		return result, temporal.NewCanceledError(result)
	}
	return result, nil
}

// enterPhase moves to the next phase and makes it visible.
func (w *nodeLifecycle) enterPhase(phase Phase) {
	if w.state.Phase == phase {
		return
	}
	w.state.Phase = phase
	w.decide("Phase %s", phase)
	if phase == PhaseTerminated && w.state.Termination != nil {
		t := w.state.Termination
		w.logger.Info("Node terminated", "reason", string(t.Reason), "detail", t.Detail)
		// Every ended node settles its in-flight entry and lets the
		// provisioner restore minNodes.
		w.queueReplan(ReplanRequest{Reason: "node terminated: " + string(t.Reason)})
	}
	w.noticePhase(phase)
	w.publish()
	w.mirrorNodeClaim()
	w.flushOutbox()
}

// publish upserts the search attributes and memo that make the node findable
// and explain it.
func (w *nodeLifecycle) publish() {
	updates := []temporal.SearchAttributeUpdate{
		NodePoolAttribute.ValueSet(w.spec.NodePool),
		PhaseAttribute.ValueSet(string(w.state.Phase)),
	}
	if inst := w.state.Instance; inst != nil {
		updates = append(updates,
			InstanceTypeAttribute.ValueSet(inst.InstanceType),
			ZoneAttribute.ValueSet(inst.Zone),
			CapacityTypeAttribute.ValueSet(inst.CapacityType),
			InstanceIDAttribute.ValueSet(inst.InstanceID))
	}
	if w.state.NodeName != "" {
		updates = append(updates, NodeNameAttribute.ValueSet(w.state.NodeName))
	}
	if t := w.state.Termination; t != nil && w.state.Phase.leaving() {
		updates = append(updates, TerminationReasonAttribute.ValueSet(string(t.Reason)))
	}
	if err := workflow.UpsertTypedSearchAttributes(w.ctx, updates...); err != nil {
		w.logger.Warn("Could not upsert search attributes", "error", err)
	}
	memo := map[string]any{MemoLaunchReason: w.launchSummary()}
	if t := w.state.Termination; t != nil {
		memo[MemoTerminationReason] = describeTermination(*t)
	}
	if err := workflow.UpsertMemo(w.ctx, memo); err != nil {
		w.logger.Warn("Could not upsert memo", "error", err)
	}
}

// Memo keys of node workflows.
const (
	MemoLaunchReason      = "launchReason"
	MemoTerminationReason = "terminationReason"
)

// decide records a decision for QueryHistory, bounded so state stays small.
func (w *nodeLifecycle) decide(format string, args ...any) {
	w.state.Decisions = append(w.state.Decisions, Decision{
		At: workflow.Now(w.ctx), Phase: w.state.Phase, Message: fmt.Sprintf(format, args...),
	})
	if extra := len(w.state.Decisions) - maxDecisions; extra > 0 {
		w.state.Decisions = append([]Decision(nil), w.state.Decisions[extra:]...)
		w.state.DroppedDecisions += extra
	}
}

// requestTermination records why the node must go. The first reason wins;
// a later involuntary one still tightens a drain in progress.
func (w *nodeLifecycle) requestTermination(t Termination) {
	if t.RequestedAt.IsZero() {
		t.RequestedAt = workflow.Now(w.ctx)
	}
	if w.state.Termination == nil {
		w.state.Termination = &t
		w.decide("Termination requested: %s", describeTermination(t))
		w.noticeTakeover(t)
		return
	}
	w.decide("Also requested while already terminating (%s): %s", w.state.Termination.Reason, describeTermination(t))
	if !t.Voluntary {
		w.escalated = true
		w.escalatedDeadline = earliest(w.escalatedDeadline, t.Deadline)
	}
}

func (w *nodeLifecycle) terminationRequested() bool { return w.state.Termination != nil }

// queueReplan schedules a signal to the provisioner.
func (w *nodeLifecycle) queueReplan(req ReplanRequest) {
	req.NodeClaimName = w.spec.NodeClaimName
	w.outbox = append(w.outbox, req)
}

// flushOutbox sends queued provisioner signals. A provisioner that is not
// running is not an error: its periodic resync plans every pending pod.
func (w *nodeLifecycle) flushOutbox() {
	w.flushNotices()
	w.flushNodeClaimConditions()
	for len(w.outbox) > 0 {
		req := w.outbox[0]
		w.outbox = w.outbox[1:]
		err := workflow.SignalExternalWorkflow(w.ctx, ProvisionerWorkflowID(w.spec.Cluster), "", SignalReplan, req).Get(w.ctx, nil)
		if err != nil {
			w.logger.Warn("Could not signal the provisioner", "reason", req.Reason, "error", err)
		}
	}
}

// checkCancelled turns a cancellation of the workflow into a termination
// that still cleans up: from then on the workflow runs on a disconnected
// context so its activities are not cancelled too.
func (w *nodeLifecycle) checkCancelled() {
	if w.cancelled || w.ctx.Err() == nil {
		return
	}
	w.cancelled = true
	w.ctx, _ = workflow.NewDisconnectedContext(w.ctx)
	w.requestTermination(Termination{Reason: ReasonCancelled, Detail: "workflow cancellation requested", Requester: "temporal"})
}

// execute runs one activity and waits for it while messages keep flowing.
func (w *nodeLifecycle) execute(options workflow.ActivityOptions, activity string, req, resp any) error {
	future := workflow.ExecuteActivity(workflow.WithActivityOptions(w.ctx, options), activity, req)
	w.awaitStep(future, nil)
	return future.Get(w.ctx, resp)
}

// executeStep is execute, on a context the workflow's cancellation does not
// cancel when outlivesCancel: for steps whose outcome the workflow must
// learn even when it is cancelled meanwhile (a launch that may create an
// instance, the termination of one).
func (w *nodeLifecycle) executeStep(outlivesCancel bool, options workflow.ActivityOptions, activity string, req, resp any) error {
	if !outlivesCancel {
		return w.execute(options, activity, req, resp)
	}
	ctx, _ := workflow.NewDisconnectedContext(w.ctx)
	future := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, options), activity, req)
	w.awaitStep(future, nil)
	return future.Get(ctx, resp)
}

// executeUnless is execute for waits that are pointless once stop() holds:
// it then cancels the activity and reports stopped.
func (w *nodeLifecycle) executeUnless(stop func() bool, options workflow.ActivityOptions, activity string, req, resp any) (stopped bool, err error) {
	ctx, cancel := workflow.WithCancel(workflow.WithActivityOptions(w.ctx, options))
	future := workflow.ExecuteActivity(ctx, activity, req)
	if w.awaitStep(future, stop) {
		cancel()
		_ = future.Get(w.ctx, nil) // the cancellation's outcome changes nothing
		return true, nil
	}
	return false, future.Get(w.ctx, resp)
}

// awaitStep waits for step while handling the node's signals. It returns
// true early when stop (if any) becomes true.
func (w *nodeLifecycle) awaitStep(step workflow.Future, stop func() bool) bool {
	for !step.IsReady() {
		selector := workflow.NewSelector(w.ctx)
		selector.AddFuture(step, func(workflow.Future) {})
		w.listen(selector)
		w.selectAll(selector)
		w.checkCancelled()
		w.flushOutbox()
		if stop != nil && stop() {
			return true
		}
	}
	return false
}

// selectAll waits for the first ready case, then takes every other case
// already ready, so a burst of signals is handled in one go. A cancelled
// workflow stops it: the closed Done channel would stay ready forever.
func (w *nodeLifecycle) selectAll(selector workflow.Selector) {
	selector.Select(w.ctx)
	for w.ctx.Err() == nil && selector.HasPending() {
		selector.Select(w.ctx)
	}
}

func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	default:
		return b
	}
}

func isTimeout(err error) bool {
	var timeoutErr *temporal.TimeoutError
	return errors.As(err, &timeoutErr)
}

// errorDetail is the innermost message of an activity error: the
// activity's own words, without the SDK's wrapping.
func errorDetail(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Error()
	}
	return err.Error()
}
