package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
)

// maxUnschedulableLogged bounds the per-pod log lines of one batch.
const maxUnschedulableLogged = 20

// Bounds of what the provisioner carries and sends, so every payload (the
// Plan and StartNodeWorkflows requests and responses, the continue-as-new
// input) stays far below Temporal's limits whatever the backlog
// (TestProvisionerPayloadsStayBoundedAt20000PendingPods).
const (
	// maxPendingPodKeys: beyond it the keys are dropped for a plan of
	// every pending pod (a resync), which the planner finds itself.
	maxPendingPodKeys = 1000
	// maxInFlightPodKeys and maxInFlightNodes bound the in-flight state:
	// when it is full, a batch plans one node at most until launched nodes
	// register (the planner settles them) and make room.
	maxInFlightPodKeys = 5000
	maxInFlightNodes   = 1000
	// maxInFlightInstanceTypes are kept per in-flight node: its cheapest
	// options, which are the smallest, so its room is not overstated.
	maxInFlightInstanceTypes = 10
)

// placedPodsRecheck is how soon every pending pod is planned again after a
// batch placed pods in the room of existing or in-flight nodes
// (changeReplanPlacedPods). Karpenter's provisioner runs every 10 s while
// a pod is provisionable; kube-scheduler's back-off for a pod it found no
// node for reaches 10 s, so a pod given room usually binds within 20 s,
// and a re-plan sooner would mostly place it there again.
const placedPodsRecheck = 30 * time.Second

// inFlightFullWait spaces batches while the in-flight state is full.
const inFlightFullWait = 5 * time.Second

// inFlightRoom is how many node plans and planned pods the in-flight state
// has room for; pods -1 means none (only pod-less minNodes plans, bounded
// by the pools' minNodes, may go).
func (p *provisioner) inFlightRoom() (nodePlans, pods int) {
	podKeys := 0
	for _, node := range p.inFlight {
		podKeys += len(node.PodKeys)
	}
	nodeRoom := maxInFlightNodes - len(p.inFlight)
	pods = maxInFlightPodKeys - podKeys
	if pods <= 0 || nodeRoom <= 0 {
		pods = -1
	}
	return min(p.input.MaxNodePlansPerBatch, max(1, nodeRoom)), pods
}

// addPendingPods queues pods for the next batch; past maxPendingPodKeys
// the next batch plans every pending pod instead of carrying their keys.
func (p *provisioner) addPendingPods(keys []string) {
	for _, key := range keys {
		p.pendingPods[key] = struct{}{}
	}
	if len(p.pendingPods) > maxPendingPodKeys && changed(p.ctx, changeBoundedPayloads) {
		p.pendingPods = map[string]struct{}{}
		p.resync = true
	}
}

// runBatch plans everything pending and starts a node workflow per plan.
func (p *provisioner) runBatch() {
	now := workflow.Now(p.ctx)
	p.pruneUnavailable(now)
	p.pruneInFlight(now)
	if p.resyncTimer != nil && p.resyncTimer.IsReady() {
		p.resyncDue()
	}
	if len(p.unstarted) > 0 && (!p.retryUnstarted() || !p.hasWork()) {
		return
	}

	pods, nodes := sortedKeys(p.pendingPods), sortedKeys(p.disruptedNodes)
	request := activities.PlanRequest{
		Cluster:              p.input.Cluster,
		PodKeys:              pods,
		DisruptedNodes:       nodes,
		AllPending:           p.resync,
		InFlight:             p.inFlight,
		UnavailableOfferings: p.unavailable,
		MaxNodePlans:         p.input.MaxNodePlansPerBatch,
	}
	inFlightFull := false
	if changed(p.ctx, changeBoundedPayloads) {
		request.MaxNodePlans, request.MaxPlannedPods = p.inFlightRoom()
		inFlightFull = request.MaxPlannedPods < maxInFlightPodKeys/10
	}
	p.logger.Debug("Planning a batch", "signalledPods", len(pods),
		"disruptedNodes", len(nodes), "resync", p.resync, "reconcile", p.reconcileReasons)
	// The batch owns this work now; what arrives from here on is the next
	// batch's.
	p.pendingPods, p.disruptedNodes = map[string]struct{}{}, map[string]struct{}{}
	reasons, resync := p.reconcileReasons, p.resync
	p.reconcileReasons, p.resync = nil, false
	p.batches++
	summary := &BatchSummary{Sequence: p.batches, At: now, Pods: len(pods)}
	p.lastBatch = summary

	var plan activities.PlanResponse
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(p.ctx, planOptions()), activities.PlanActivity, request).Get(p.ctx, &plan)
	if err != nil {
		summary.Error = "plan: " + err.Error()
		if changed(p.ctx, changeKeepReasonsOnFailedPlan) {
			// minNodes and a resync must not wait for the next timer.
			for _, reason := range reasons {
				p.addReconcileReason(reason)
			}
			p.resync = p.resync || resync
		}
		p.retryLater(pods, nodes, err)
		return
	}
	summary.PodsConsidered, summary.PlacedOnExisting = plan.PodsConsidered, plan.PlacedOnExisting
	if plan.PlacedInRoom > 0 && p.input.ResyncInterval > 0 && changed(p.ctx, changeReplanPlacedPods) {
		p.resyncBy(now.Add(placedPodsRecheck))
	}
	// Counted by the planner, which re-reads the pods: those scheduled or
	// deleted since they were signalled are not provisionable any more.
	if plan.PodsConsidered > 0 || len(nodes) > 0 {
		p.logger.Info(fmt.Sprintf("Found %d provisionable pods", plan.PodsConsidered), "disruptedNodes", len(nodes))
	}
	summary.Plans, summary.Unschedulable, summary.Deferred = len(plan.Plans), max(len(plan.Unschedulable), plan.UnschedulableCount), len(plan.Deferred)
	p.settle(plan.Settled...)
	p.deferredWork = len(plan.Deferred) > 0 || plan.DeferredMore || len(plan.DeferredDisruptedNodes) > 0
	p.addPendingPods(plan.Deferred)
	if plan.DeferredMore {
		p.resync = true // more were deferred than listed
	}
	if inFlightFull && (len(plan.Deferred) > 0 || plan.DeferredMore) {
		// Planning again before launched nodes register would only plan
		// one node per pass.
		defer func() { _ = workflow.Sleep(p.ctx, inFlightFullWait) }()
	}
	if len(plan.DeferredDisruptedNodes) > 0 && changed(p.ctx, changeKeepDeferredDisruptedNodes) {
		// All of the batch's disrupted nodes, not only those with deferred
		// pods: one whose pods were all planned must still offer no room
		// (it may not be tainted yet); its pods are in flight now, so they
		// are not planned twice.
		for _, node := range nodes {
			p.disruptedNodes[node] = struct{}{}
		}
	}
	p.logUnschedulable(plan.Unschedulable)
	for _, skipped := range plan.Skipped {
		p.logger.Warn(fmt.Sprintf("%s %s skipped by planning: %s", skipped.Kind, skipped.Name, skipped.Reason))
	}
	if len(plan.Plans) == 0 {
		return
	}

	starts := make([]activities.NodeWorkflowStart, len(plan.Plans))
	for i, spec := range plan.Plans {
		spec = p.completeSpec(spec, i)
		p.logger.Info(fmt.Sprintf("Computed packing for %d pod(s) with instance type option(s) %s",
			len(spec.PodKeys), optionNames(spec.InstanceTypeOptions, 20)),
			"nodeClaim", spec.NodeClaimName, "nodePool", spec.NodePool)
		starts[i] = activities.NodeWorkflowStart{WorkflowID: NodeWorkflowID(spec.Cluster, spec.NodeClaimName), Spec: spec}
	}
	started, err := p.startNodeWorkflows(starts)
	if err != nil {
		summary.Error = "start node workflows: " + err.Error()
		if !isNonRetryable(err) && changed(p.ctx, changeRetryStartsWithSameNames) {
			// Some of them may have started: they own their pods from now
			// on, and the rest start under the same names later.
			p.recordInFlight(starts, now)
			p.unstarted = starts
			p.backOff(err)
			return
		}
		var planned []string
		for _, start := range starts {
			planned = append(planned, start.Spec.PodKeys...)
		}
		p.retryLater(planned, nil, err)
		return
	}
	summary.Started, summary.AlreadyExisted = len(started.Started), len(started.AlreadyExisted)
	// Started or already existing, a workflow now owns each plan.
	p.recordInFlight(starts, now)
}

func (p *provisioner) startNodeWorkflows(starts []activities.NodeWorkflowStart) (activities.StartNodeWorkflowsResponse, error) {
	var started activities.StartNodeWorkflowsResponse
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(p.ctx, startNodeWorkflowsOptions()), activities.StartNodeWorkflowsActivity,
		activities.StartNodeWorkflowsRequest{WorkflowType: NodeWorkflowType, TaskQueue: p.nodeTaskQueue(), Nodes: starts}).Get(p.ctx, &started)
	return started, err
}

// retryUnstarted starts again, under the same names, the node workflows of
// a batch whose StartNodeWorkflows failed; those that did start are
// reported as already existing. It reports whether the batch may go on to
// plan: false when the start failed again (after backing off).
func (p *provisioner) retryUnstarted() bool {
	starts := p.unstarted
	started, err := p.startNodeWorkflows(starts)
	switch {
	case err == nil:
		p.logger.Info("Started the node workflows of a failed batch", "started", len(started.Started), "alreadyExisted", len(started.AlreadyExisted))
		p.unstarted = nil
		return true
	case isNonRetryable(err):
		// Nothing starts these: let their pods be planned again.
		p.logger.Error("Giving up on the node workflows of a failed batch", "error", err)
		p.unstarted = nil
		for _, start := range starts {
			p.settle(start.Spec.NodeClaimName)
			for _, key := range start.Spec.PodKeys {
				p.pendingPods[key] = struct{}{}
			}
		}
		return true
	}
	p.backOff(err)
	return false
}

// recordInFlight counts each start's node as in flight until its Node
// registers, its workflow asks for a replan, or it can no longer register.
func (p *provisioner) recordInFlight(starts []activities.NodeWorkflowStart, now time.Time) {
	withDeadline := changed(p.ctx, changeInFlightUntilRegistration)
	bounded := changed(p.ctx, changeBoundedPayloads)
	for _, start := range starts {
		node := activities.InFlightNode{
			NodeClaimName: start.Spec.NodeClaimName,
			NodePool:      start.Spec.NodePool,
			InstanceTypes: instanceTypeNames(start.Spec.InstanceTypeOptions),
			PodKeys:       start.Spec.PodKeys,
			StartedAt:     now,
		}
		if bounded && len(node.InstanceTypes) > maxInFlightInstanceTypes {
			node.InstanceTypes = node.InstanceTypes[:maxInFlightInstanceTypes]
		}
		if withDeadline {
			node.Until = now.Add(inFlightBound(start.Spec))
		}
		p.inFlight = append(p.inFlight, node)
	}
}

// inFlightBound is how long a started node may stay unregistered: its
// launch may retry for launchOptions' schedule-to-close, then the node
// workflow waits its registration timeout before giving up; a minute more
// lets its replan signal arrive first.
func inFlightBound(spec activities.NodeLaunchSpec) time.Duration {
	registration := spec.RegistrationTimeout
	if registration <= 0 {
		registration = activities.DefaultRegistrationTimeout
	}
	return launchOptions().ScheduleToCloseTimeout + registration + time.Minute
}

func isNonRetryable(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.NonRetryable()
}

// completeSpec fills what the planner may leave to the provisioner: the
// cluster, a deterministic node claim name and the nomination window its
// batching implies. Every node it starts leaves its emptiness to the
// disruption workflow (changeEmptyByDisruptionDefault), so a pool's empty
// nodes go together up to the budget instead of one Lease turn each.
func (p *provisioner) completeSpec(spec activities.NodeLaunchSpec, index int) activities.NodeLaunchSpec {
	if spec.Cluster == "" {
		spec.Cluster = p.input.Cluster
	}
	if spec.NodeClaimName == "" {
		spec.NodeClaimName = NodeClaimName(spec.NodePool, p.firstRunID, p.batches, index)
	}
	spec.DisruptionDecidesEmpty = spec.DisruptionDecidesEmpty || p.input.DisruptionDecidesEmpty ||
		changed(p.ctx, changeEmptyByDisruptionDefault)
	if spec.NominationWindow == 0 {
		spec.NominationWindow = activities.NominationWindowFor(p.input.MaxWindow)
	}
	return spec
}

// retryLater puts a failed batch's work back and waits before the next
// batch, so a broken dependency is not hammered. Signals queue meanwhile.
func (p *provisioner) retryLater(pods, nodes []string, err error) {
	p.addPendingPods(pods)
	for _, node := range nodes {
		p.disruptedNodes[node] = struct{}{}
	}
	p.backOff(err)
}

func (p *provisioner) backOff(err error) {
	p.logger.Error("Batch failed; retrying later", "error", err, "retryIn", formatDuration(planFailureBackoff))
	_ = workflow.Sleep(p.ctx, planFailureBackoff)
}

func (p *provisioner) logUnschedulable(pods []activities.UnschedulablePod) {
	for i, pod := range pods {
		if i == maxUnschedulableLogged {
			p.logger.Warn(fmt.Sprintf("%d more unschedulable pod(s) not logged", len(pods)-i))
			return
		}
		p.logger.Warn("Pod is unschedulable", "pod", pod.PodKey, "reason", pod.Reason)
	}
}

func (p *provisioner) nodeTaskQueue() string {
	if p.input.NodeTaskQueue != "" {
		return p.input.NodeTaskQueue
	}
	return workflow.GetInfo(p.ctx).TaskQueueName
}

// settle stops counting node claims as in flight.
func (p *provisioner) settle(nodeClaims ...string) {
	if len(nodeClaims) == 0 {
		return
	}
	p.inFlight = slices.DeleteFunc(p.inFlight, func(node activities.InFlightNode) bool {
		return slices.Contains(nodeClaims, node.NodeClaimName)
	})
}

// pruneInFlight forgets in-flight entries whose node can no longer be
// registering: by then it registered or ended, and a lost signal must not
// pin capacity forever. Entries recorded with a deadline (Until) keep it;
// older ones are kept for InFlightTTL.
func (p *provisioner) pruneInFlight(now time.Time) {
	p.inFlight = slices.DeleteFunc(p.inFlight, func(node activities.InFlightNode) bool {
		if !node.Until.IsZero() {
			return now.After(node.Until)
		}
		return now.Sub(node.StartedAt) > p.input.InFlightTTL
	})
}

func (p *provisioner) pruneUnavailable(now time.Time) {
	p.unavailable = slices.DeleteFunc(p.unavailable, func(offering activities.UnavailableOffering) bool {
		return !offering.Until.After(now)
	})
}

// markUnavailable records offerings without capacity, keeping the latest
// expiry per offering.
func (p *provisioner) markUnavailable(offerings []activities.UnavailableOffering) {
	for _, offering := range offerings {
		i := slices.IndexFunc(p.unavailable, func(known activities.UnavailableOffering) bool {
			return known.OfferingKey == offering.OfferingKey
		})
		switch {
		case i < 0:
			p.unavailable = append(p.unavailable, offering)
		case offering.Until.After(p.unavailable[i].Until):
			p.unavailable[i].Until = offering.Until
		}
	}
}

func instanceTypeNames(options []activities.InstanceTypeOption) []string {
	names := make([]string, len(options))
	for i, option := range options {
		names[i] = option.Name
	}
	return names
}
