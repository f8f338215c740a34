package workflows

import (
	"fmt"
	"slices"
	"time"

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
	p.reconcileReasons, p.resync = nil, false
	p.batches++
	summary := &BatchSummary{Sequence: p.batches, At: now, Pods: len(pods)}
	p.lastBatch = summary

	var plan activities.PlanResponse
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(p.ctx, planOptions()), activities.PlanActivity, request).Get(p.ctx, &plan)
	if err != nil {
		summary.Error = "plan: " + err.Error()
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
	var started activities.StartNodeWorkflowsResponse
	err = workflow.ExecuteActivity(workflow.WithActivityOptions(p.ctx, startNodeWorkflowsOptions()), activities.StartNodeWorkflowsActivity,
		activities.StartNodeWorkflowsRequest{WorkflowType: NodeWorkflowType, TaskQueue: p.nodeTaskQueue(), Nodes: starts}).Get(p.ctx, &started)
	if err != nil {
		summary.Error = "start node workflows: " + err.Error()
		var planned []string
		for _, start := range starts {
			planned = append(planned, start.Spec.PodKeys...)
		}
		p.retryLater(planned, nil, err)
		return
	}
	summary.Started, summary.AlreadyExisted = len(started.Started), len(started.AlreadyExisted)
	for _, start := range starts {
		// Started or already existing, a workflow now owns this plan.
		p.inFlight = append(p.inFlight, activities.InFlightNode{
			NodeClaimName: start.Spec.NodeClaimName,
			NodePool:      start.Spec.NodePool,
			InstanceTypes: instanceTypeNames(start.Spec.InstanceTypeOptions),
			PodKeys:       start.Spec.PodKeys,
			StartedAt:     now,
		})
	}
}

// completeSpec fills what the planner may leave to the provisioner: the
// cluster and a deterministic node claim name.
func (p *provisioner) completeSpec(spec activities.NodeLaunchSpec, index int) activities.NodeLaunchSpec {
	if spec.Cluster == "" {
		spec.Cluster = p.input.Cluster
	}
	if spec.NodeClaimName == "" {
		spec.NodeClaimName = NodeClaimName(spec.NodePool, p.firstRunID, p.batches, index)
	}
	return spec
}

// retryLater puts a failed batch's work back and waits before the next
// batch, so a broken dependency is not hammered. Signals queue meanwhile.
func (p *provisioner) retryLater(pods, nodes []string, err error) {
	p.logger.Error("Batch failed; retrying later", "error", err, "retryIn", formatDuration(planFailureBackoff))
	for _, key := range pods {
		p.pendingPods[key] = struct{}{}
	}
	for _, node := range nodes {
		p.disruptedNodes[node] = struct{}{}
	}
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

// pruneInFlight forgets in-flight entries older than InFlightTTL: by then
// their node registered or ended, and a lost signal must not pin capacity
// forever.
func (p *provisioner) pruneInFlight(now time.Time) {
	p.inFlight = slices.DeleteFunc(p.inFlight, func(node activities.InFlightNode) bool {
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
