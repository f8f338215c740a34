package workflows

import (
	"slices"

	"go.temporal.io/sdk/workflow"
)

// provisionerSignals are the provisioning workflow's signal channels.
type provisionerSignals struct {
	podsPending workflow.ReceiveChannel
	replan      workflow.ReceiveChannel
	reconcile   workflow.ReceiveChannel
}

func newProvisionerSignals(ctx workflow.Context) provisionerSignals {
	return provisionerSignals{
		podsPending: workflow.GetSignalChannel(ctx, SignalPodsPending),
		replan:      workflow.GetSignalChannel(ctx, SignalReplan),
		reconcile:   workflow.GetSignalChannel(ctx, SignalReconcile),
	}
}

// listen adds every signal channel to selector; handlers only record work.
func (p *provisioner) listen(selector workflow.Selector) {
	selector.AddReceive(p.signals.podsPending, func(c workflow.ReceiveChannel, _ bool) {
		var pending PodsPending
		c.Receive(p.ctx, &pending)
		p.applyPodsPending(pending)
	})
	selector.AddReceive(p.signals.replan, func(c workflow.ReceiveChannel, _ bool) {
		var replan ReplanRequest
		c.Receive(p.ctx, &replan)
		p.applyReplan(replan)
	})
	selector.AddReceive(p.signals.reconcile, func(c workflow.ReceiveChannel, _ bool) {
		var reconcile ReconcileRequest
		c.Receive(p.ctx, &reconcile)
		p.applyReconcile(reconcile)
	})
}

// absorbPendingSignals applies every signal already delivered without
// blocking.
func (p *provisioner) absorbPendingSignals() {
	for {
		absorbed := false
		var pending PodsPending
		for p.signals.podsPending.ReceiveAsync(&pending) {
			p.applyPodsPending(pending)
			absorbed = true
		}
		var replan ReplanRequest
		for p.signals.replan.ReceiveAsync(&replan) {
			p.applyReplan(replan)
			absorbed = true
		}
		var reconcile ReconcileRequest
		for p.signals.reconcile.ReceiveAsync(&reconcile) {
			p.applyReconcile(reconcile)
			absorbed = true
		}
		if !absorbed {
			return
		}
	}
}

func (p *provisioner) applyPodsPending(pending PodsPending) {
	for _, key := range pending.PodKeys {
		_, pendingAlready := p.pendingPods[key]
		_, inFlight := p.known[key]
		if !pendingAlready && !inFlight {
			p.news = true
			break
		}
	}
	p.addPendingPods(pending.PodKeys)
}

func (p *provisioner) applyReplan(replan ReplanRequest) {
	p.news = true
	if replan.NodeClaimName != "" {
		p.settle(replan.NodeClaimName)
	}
	p.addPendingPods(replan.PodKeys)
	for _, node := range replan.DisruptedNodes {
		p.disruptedNodes[node] = struct{}{}
	}
	p.markUnavailable(replan.UnavailableOfferings)
	p.addReconcileReason(replan.NodeClaimName + ": " + replan.Reason)
}

func (p *provisioner) applyReconcile(reconcile ReconcileRequest) {
	p.news = true
	p.addReconcileReason(reconcile.Reason)
}

func (p *provisioner) addReconcileReason(reason string) {
	if reason == "" {
		reason = "unspecified"
	}
	if slices.Contains(p.reconcileReasons, reason) {
		return
	}
	if len(p.reconcileReasons) == maxReconcileReasons {
		p.reconcileReasons = p.reconcileReasons[1:]
	}
	p.reconcileReasons = append(p.reconcileReasons, reason)
}
