package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
)

// Provisioner defaults; ProvisionerInput overrides each.
const (
	DefaultIdleWindow           = time.Second
	DefaultMaxWindow            = 10 * time.Second
	DefaultResyncInterval       = 5 * time.Minute
	DefaultBatchesPerRun        = 200
	DefaultMaxNodePlansPerBatch = 50
	// DefaultInFlightTTL outlives the default registration timeout, after
	// which a node is either registered (settled by Plan) or gone (settled
	// by its replan signal); the TTL only catches a lost signal. It applies
	// to in-flight entries recorded before they carried their own deadline
	// (InFlightNode.Until, from the node's registration timeout).
	DefaultInFlightTTL = 30 * time.Minute
)

// planFailureBackoff spaces batches whose planning failed after all retries
// so a broken planner is not hammered; signals keep queueing meanwhile.
const planFailureBackoff = 30 * time.Second

// provisionerHistoryEventsBeforeContinueAsNew backs up the server's
// suggestion.
const provisionerHistoryEventsBeforeContinueAsNew = 10000

// InvalidProvisionerInputErrorType fails a provisioner started with unusable
// input.
const InvalidProvisionerInputErrorType = "InvalidProvisionerInput"

// ProvisionerInput configures the provisioning workflow of one cluster. The
// worker starts it with SignalWithStart; zero durations and counts take the
// defaults above.
type ProvisionerInput struct {
	Cluster string `json:"cluster"`
	// IdleWindow closes a batch when no new trigger arrived for this long.
	IdleWindow time.Duration `json:"idleWindow,omitempty"`
	// MaxWindow closes a batch this long after its first trigger, however
	// busy.
	MaxWindow time.Duration `json:"maxWindow,omitempty"`
	// ResyncInterval runs a planning pass over every pending pod (and the
	// pools' minNodes) even without signals; negative disables it.
	ResyncInterval time.Duration `json:"resyncInterval,omitempty"`
	// BatchesPerRun continues as new after this many batches.
	BatchesPerRun int `json:"batchesPerRun,omitempty"`
	// MaxNodePlansPerBatch bounds the node plans (and so the payload size)
	// of one batch; the rest are planned in the next batch.
	MaxNodePlansPerBatch int           `json:"maxNodePlansPerBatch,omitempty"`
	InFlightTTL          time.Duration `json:"inFlightTTL,omitempty"`
	// NodeTaskQueue runs node workflows; empty means the provisioner's own.
	NodeTaskQueue string `json:"nodeTaskQueue,omitempty"`
	// DisruptionDecidesEmpty is copied into every spec: the disruption
	// workflow, not each node workflow, decides when empty nodes go. Every
	// provisioner does so since changeEmptyByDisruptionDefault; the field
	// stays for runs started before it.
	DisruptionDecidesEmpty bool `json:"disruptionDecidesEmpty,omitempty"`

	// State is carried across continue-as-new; nil on a fresh start.
	State *ProvisionerState `json:"state,omitempty"`
}

func (in ProvisionerInput) withDefaults() ProvisionerInput {
	if in.IdleWindow <= 0 {
		in.IdleWindow = DefaultIdleWindow
	}
	if in.MaxWindow <= 0 {
		in.MaxWindow = DefaultMaxWindow
	}
	if in.ResyncInterval == 0 {
		in.ResyncInterval = DefaultResyncInterval
	}
	if in.BatchesPerRun <= 0 {
		in.BatchesPerRun = DefaultBatchesPerRun
	}
	if in.MaxNodePlansPerBatch <= 0 {
		in.MaxNodePlansPerBatch = DefaultMaxNodePlansPerBatch
	}
	if in.InFlightTTL <= 0 {
		in.InFlightTTL = DefaultInFlightTTL
	}
	return in
}

// Validate names the first unusable field.
func (in ProvisionerInput) Validate() error {
	switch {
	case in.Cluster == "":
		return fmt.Errorf("provisioner input: cluster is empty")
	case in.IdleWindow > 0 && in.MaxWindow > 0 && in.IdleWindow > in.MaxWindow:
		return fmt.Errorf("provisioner input: idleWindow %s is longer than maxWindow %s", in.IdleWindow, in.MaxWindow)
	}
	return nil
}

// provisionerStateVersion is the ProvisionerState shape this code writes;
// readProvisionerState reads every older one. Version 1 (v0.2) is the
// first; a state without a version (0) predates the field and reads as 1.
const provisionerStateVersion = 1

// readProvisionerState takes the state the last run carried: an older
// version is brought to today's shape; a newer one fails the workflow task
// (see refuseNewerState).
func readProvisionerState(carried *ProvisionerState) *ProvisionerState {
	state := *carried
	refuseNewerState("provisioner", state.Version, provisionerStateVersion)
	// Versions 0 (before the field) and 1 are today's shape.
	state.Version = provisionerStateVersion
	return &state
}

// maxReconcileReasons bounds the reasons kept for the next batch.
const maxReconcileReasons = 10

// ProvisionerState is what the provisioner carries across continue-as-new:
// work not yet planned (nothing a signal delivered is lost), the nodes in
// flight and the offerings known to have no capacity.
type ProvisionerState struct {
	Version int `json:"version"`
	// Batches numbers batches for the whole life of the provisioner; node
	// claim names derive from it.
	Batches              int64                            `json:"batches"`
	PendingPods          []string                         `json:"pendingPods,omitempty"`
	DisruptedNodes       []string                         `json:"disruptedNodes,omitempty"`
	ReconcileReasons     []string                         `json:"reconcileReasons,omitempty"`
	Resync               bool                             `json:"resync,omitempty"`
	NextResyncAt         time.Time                        `json:"nextResyncAt,omitzero"`
	InFlight             []activities.InFlightNode        `json:"inFlight,omitempty"`
	UnavailableOfferings []activities.UnavailableOffering `json:"unavailableOfferings,omitempty"`
	LastBatch            *BatchSummary                    `json:"lastBatch,omitempty"`
	// UnstartedNodes are the node workflows of a batch whose start failed;
	// they are started again under the same names before the next plan.
	UnstartedNodes []activities.NodeWorkflowStart `json:"unstartedNodes,omitempty"`
}

// BatchSummary describes the last batch, for QueryProvisionerState.
type BatchSummary struct {
	Sequence         int64     `json:"sequence"`
	At               time.Time `json:"at"`
	Pods             int       `json:"pods"`
	PodsConsidered   int       `json:"podsConsidered"`
	PlacedOnExisting int       `json:"placedOnExisting"`
	Plans            int       `json:"plans"`
	Started          int       `json:"started"`
	AlreadyExisted   int       `json:"alreadyExisted"`
	Unschedulable    int       `json:"unschedulable"`
	Deferred         int       `json:"deferred"`
	Error            string    `json:"error,omitempty"`
}

// ProvisionerStateView answers QueryProvisionerState.
type ProvisionerStateView struct {
	Cluster              string                           `json:"cluster"`
	PendingPods          int                              `json:"pendingPods"`
	DisruptedNodes       []string                         `json:"disruptedNodes,omitempty"`
	ReconcileReasons     []string                         `json:"reconcileReasons,omitempty"`
	InFlight             []activities.InFlightNode        `json:"inFlight,omitempty"`
	UnavailableOfferings []activities.UnavailableOffering `json:"unavailableOfferings,omitempty"`
	Batches              int64                            `json:"batches"`
	LastBatch            *BatchSummary                    `json:"lastBatch,omitempty"`
	NextResyncAt         time.Time                        `json:"nextResyncAt,omitzero"`
}

// ProvisionerWorkflow turns pending pods into node workflows for one
// cluster, with id ProvisionerWorkflowID(cluster). It batches triggers,
// plans each batch with the Plan activity and starts one NodeWorkflow per
// plan with the StartNodeWorkflows activity. It runs forever, continuing as
// new to keep its history short.
func ProvisionerWorkflow(ctx workflow.Context, input ProvisionerInput) error {
	if err := input.Validate(); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), InvalidProvisionerInputErrorType, nil)
	}
	p := newProvisioner(ctx, input.withDefaults())
	if err := workflow.SetQueryHandler(ctx, QueryProvisionerState, p.stateView); err != nil {
		return err
	}
	return p.run()
}

type provisioner struct {
	ctx        workflow.Context
	logger     log.Logger
	input      ProvisionerInput
	firstRunID string

	signals provisionerSignals

	batches int64
	// deferredWork: the last batch's plan deferred pods or disrupted
	// nodes to the next batch.
	deferredWork bool
	// news: a signal since collectBatch last looked brought work not
	// already known (known: the in-flight pods while it collects).
	news             bool
	known            map[string]struct{}
	pendingPods      map[string]struct{}
	disruptedNodes   map[string]struct{}
	reconcileReasons []string
	resync           bool
	inFlight         []activities.InFlightNode
	unstarted        []activities.NodeWorkflowStart
	unavailable      []activities.UnavailableOffering
	lastBatch        *BatchSummary

	resyncTimer  workflow.Future
	cancelResync workflow.CancelFunc
	nextResyncAt time.Time
}

func newProvisioner(ctx workflow.Context, input ProvisionerInput) *provisioner {
	p := &provisioner{
		ctx:            ctx,
		logger:         log.With(workflow.GetLogger(ctx), "cluster", input.Cluster),
		input:          input,
		firstRunID:     workflow.GetInfo(ctx).FirstRunID,
		signals:        newProvisionerSignals(ctx),
		pendingPods:    map[string]struct{}{},
		disruptedNodes: map[string]struct{}{},
	}
	if input.State != nil {
		carried := readProvisionerState(input.State)
		p.batches = carried.Batches
		for _, key := range carried.PendingPods {
			p.pendingPods[key] = struct{}{}
		}
		for _, node := range carried.DisruptedNodes {
			p.disruptedNodes[node] = struct{}{}
		}
		p.reconcileReasons = carried.ReconcileReasons
		p.resync = carried.Resync
		p.nextResyncAt = carried.NextResyncAt
		p.inFlight = carried.InFlight
		p.unavailable = carried.UnavailableOfferings
		p.lastBatch = carried.LastBatch
		p.unstarted = carried.UnstartedNodes
	} else {
		// The first pass restores every pool's minNodes and picks up pods
		// that went pending while no provisioner ran.
		p.resync = true
	}
	p.input.State = nil
	return p
}

func (p *provisioner) run() error {
	for batchesThisRun := 1; ; batchesThisRun++ {
		// Work a batch deferred (past MaxNodePlansPerBatch) has had its
		// window: it is planned at once, with whatever arrived meanwhile,
		// not after a new one (a 1,000-pod burst needing five batches
		// waited up to 10 s before each).
		signalled := p.waitForWork()
		if signalled && !(p.deferredWork && changed(p.ctx, changeDeferredPlannedAtOnce)) {
			p.collectBatch()
		}
		p.deferredWork = false
		p.runBatch()
		if p.shouldContinueAsNew(batchesThisRun) {
			return p.continueAsNew()
		}
	}
}

func (p *provisioner) hasWork() bool {
	return len(p.pendingPods) > 0 || len(p.disruptedNodes) > 0 || len(p.reconcileReasons) > 0 || p.resync || len(p.unstarted) > 0
}

// waitForWork blocks until there is something to plan. It reports whether a
// signal (rather than only the resync timer) started the batch, i.e.
// whether more triggers are likely to follow and are worth batching.
func (p *provisioner) waitForWork() (signalled bool) {
	if p.hasWork() {
		return len(p.pendingPods) > 0 || len(p.disruptedNodes) > 0 || len(p.reconcileReasons) > 0
	}
	for !p.hasWork() {
		selector := workflow.NewSelector(p.ctx)
		p.listen(selector)
		if timer := p.resyncFuture(); timer != nil {
			selector.AddFuture(timer, func(workflow.Future) { p.resyncDue() })
		}
		selector.Select(p.ctx)
		for selector.HasPending() {
			selector.Select(p.ctx)
		}
	}
	return len(p.pendingPods) > 0 || len(p.disruptedNodes) > 0 || len(p.reconcileReasons) > 0
}

// resyncFuture arms the resync timer at its absolute deadline (carried
// across continue-as-new) when it is not armed.
func (p *provisioner) resyncFuture() workflow.Future {
	if p.input.ResyncInterval < 0 {
		return nil
	}
	if p.resyncTimer == nil {
		now := workflow.Now(p.ctx)
		if p.nextResyncAt.IsZero() {
			p.nextResyncAt = now.Add(p.input.ResyncInterval)
		}
		// A child context records no command; it lets resyncBy cancel
		// the timer for an earlier one.
		ctx, cancel := workflow.WithCancel(p.ctx)
		p.resyncTimer, p.cancelResync = workflow.NewTimerWithOptions(ctx, p.nextResyncAt.Sub(now), workflow.TimerOptions{Summary: "resync"}), cancel
	}
	return p.resyncTimer
}

// resyncBy brings the next resync forward to at, when it is later.
func (p *provisioner) resyncBy(at time.Time) {
	if !p.nextResyncAt.IsZero() && !at.Before(p.nextResyncAt) {
		return
	}
	p.nextResyncAt = at
	if p.resyncTimer != nil && !p.resyncTimer.IsReady() {
		p.cancelResync()
		p.resyncTimer = nil
	}
}

func (p *provisioner) resyncDue() {
	p.resyncTimer, p.cancelResync = nil, nil
	p.nextResyncAt = time.Time{}
	p.resync = true
}

// collectBatch keeps the batch open until IdleWindow passes without a new
// trigger or MaxWindow passes in all, like Karpenter's batcher.
//
// Only news restarts the idle window: a pod not already pending or in
// flight, a replan or a reconcile. The scheduler rewrites a pending pod's
// condition on every retry and both workers signal it, so repeats kept the
// window open to its 10 s maximum long after the last new pod (in a
// 1,000-pod burst, every batch after the first 20 s).
func (p *provisioner) collectBatch() {
	p.logger.Info("Waiting to batch additional pods")
	onlyNewsExtends := changed(p.ctx, changeIdleWindowOnNews)
	if onlyNewsExtends {
		p.known = p.inFlightPodKeys()
		defer func() { p.known = nil }()
	}
	maxCtx, cancelMax := workflow.WithCancel(p.ctx)
	defer cancelMax()
	maxWindow := workflow.NewTimerWithOptions(maxCtx, p.input.MaxWindow, workflow.TimerOptions{Summary: "batch max window"})
	for closed := false; !closed; {
		idleCtx, cancelIdle := workflow.WithCancel(p.ctx)
		idle := workflow.NewTimerWithOptions(idleCtx, p.input.IdleWindow, workflow.TimerOptions{Summary: "batch idle window"})
		for news := false; !closed && !news; {
			p.news = false
			selector := workflow.NewSelector(p.ctx)
			p.listen(selector)
			selector.AddFuture(idle, func(workflow.Future) { closed = true })
			selector.AddFuture(maxWindow, func(workflow.Future) { closed = true })
			selector.Select(p.ctx)
			for selector.HasPending() {
				selector.Select(p.ctx)
			}
			news = p.news || !onlyNewsExtends
		}
		cancelIdle()
	}
}

// inFlightPodKeys are the pods the in-flight nodes were launched for.
func (p *provisioner) inFlightPodKeys() map[string]struct{} {
	keys := map[string]struct{}{}
	for _, node := range p.inFlight {
		for _, key := range node.PodKeys {
			keys[key] = struct{}{}
		}
	}
	return keys
}

func (p *provisioner) shouldContinueAsNew(batchesThisRun int) bool {
	info := workflow.GetInfo(p.ctx)
	return batchesThisRun >= p.input.BatchesPerRun ||
		info.GetContinueAsNewSuggested() ||
		info.GetCurrentHistoryLength() >= provisionerHistoryEventsBeforeContinueAsNew
}

// continueAsNew takes every signal already delivered into the carried state
// first: the server refuses to close a run that has unread signals, and
// anything read here travels in the new run's input.
func (p *provisioner) continueAsNew() error {
	p.absorbPendingSignals()
	if err := workflow.Await(p.ctx, func() bool { return workflow.AllHandlersFinished(p.ctx) }); err != nil {
		return err
	}
	next := p.input
	next.State = p.snapshot()
	p.logger.Info("Continuing as new", "batches", p.batches, "pendingPods", len(next.State.PendingPods))
	return workflow.NewContinueAsNewError(p.ctx, ProvisionerWorkflowType, next)
}

func (p *provisioner) snapshot() *ProvisionerState {
	return &ProvisionerState{
		Version:              provisionerStateVersion,
		Batches:              p.batches,
		PendingPods:          sortedKeys(p.pendingPods),
		DisruptedNodes:       sortedKeys(p.disruptedNodes),
		ReconcileReasons:     p.reconcileReasons,
		Resync:               p.resync,
		NextResyncAt:         p.nextResyncAt,
		InFlight:             p.inFlight,
		UnavailableOfferings: p.unavailable,
		LastBatch:            p.lastBatch,
		UnstartedNodes:       p.unstarted,
	}
}

func (p *provisioner) stateView() (ProvisionerStateView, error) {
	return ProvisionerStateView{
		Cluster:              p.input.Cluster,
		PendingPods:          len(p.pendingPods),
		DisruptedNodes:       sortedKeys(p.disruptedNodes),
		ReconcileReasons:     p.reconcileReasons,
		InFlight:             p.inFlight,
		UnavailableOfferings: p.unavailable,
		Batches:              p.batches,
		LastBatch:            p.lastBatch,
		NextResyncAt:         p.nextResyncAt,
	}, nil
}

func sortedKeys(set map[string]struct{}) []string {
	keys := make([]string, 0, len(set))
	for key := range set {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	return keys
}
