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
	// Counted by the planner, which re-reads the pods: those scheduled or
	// deleted since they were signalled are not provisionable any more.
	if plan.PodsConsidered > 0 || len(nodes) > 0 {
		p.logger.Info(fmt.Sprintf("Found %d provisionable pods", plan.PodsConsidered), "disruptedNodes", len(nodes))
	}
	summary.Plans, summary.Unschedulable, summary.Deferred = len(plan.Plans), len(plan.Unschedulable), len(plan.Deferred)
	p.settle(plan.Settled...)
	for _, key := range plan.Deferred {
		p.pendingPods[key] = struct{}{}
	}
	if len(plan.DeferredDisruptedNodes) > 0 && changed(p.ctx, changeKeepDeferredDisruptedNodes) {
		for _, node := range plan.DeferredDisruptedNodes {
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
	for _, start := range starts {
		node := activities.InFlightNode{
			NodeClaimName: start.Spec.NodeClaimName,
			NodePool:      start.Spec.NodePool,
			InstanceTypes: instanceTypeNames(start.Spec.InstanceTypeOptions),
			PodKeys:       start.Spec.PodKeys,
			StartedAt:     now,
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
// batching implies.
func (p *provisioner) completeSpec(spec activities.NodeLaunchSpec, index int) activities.NodeLaunchSpec {
	if spec.Cluster == "" {
		spec.Cluster = p.input.Cluster
	}
	if spec.NodeClaimName == "" {
		spec.NodeClaimName = NodeClaimName(spec.NodePool, p.firstRunID, p.batches, index)
	}
	spec.DisruptionDecidesEmpty = spec.DisruptionDecidesEmpty || p.input.DisruptionDecidesEmpty
	if spec.NominationWindow == 0 {
		spec.NominationWindow = activities.NominationWindowFor(p.input.MaxWindow)
	}
	return spec
}

// retryLater puts a failed batch's work back and waits before the next
// batch, so a broken dependency is not hammered. Signals queue meanwhile.
func (p *provisioner) retryLater(pods, nodes []string, err error) {
	for _, key := range pods {
		p.pendingPods[key] = struct{}{}
	}
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
