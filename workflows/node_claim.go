package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
)

// mirrorNodeClaim writes the node's state, as of the phase it just entered,
// to its NodeClaim (the UpsertNodeClaim activity), so `kubectl get
// nodeclaims` shows every node. The NodeClaim is a mirror, never read back:
// a failed write is logged and the lifecycle goes on (the next phase writes
// it again). Runs recorded before changeNodeClaimMirror write nothing.
//
// Since changeNodeClaimMirrorAsync the write runs beside the lifecycle
// instead of in front of it: the launch does not wait for the NodeClaim
// (at 100 nodes at once each write took 10–20 s, before every phase). One
// write is in flight at a time, in phase order: a phase entered while the
// last write runs waits for it first; the run waits for the last one
// before it ends or continues as new (awaitNodeClaimMirror).
func (w *nodeLifecycle) mirrorNodeClaim() {
	w.claimStale = false
	if !changed(w.ctx, changeNodeClaimMirror) {
		return
	}
	if !changed(w.ctx, changeNodeClaimMirrorAsync) {
		var resp activities.UpsertNodeClaimResponse
		if err := w.execute(nodeClaimOptions(), activities.UpsertNodeClaimActivity, w.nodeClaimRequest(), &resp); err != nil {
			w.logger.Warn("Could not write the NodeClaim", "phase", string(w.state.Phase), "error", err)
		}
		return
	}
	w.awaitNodeClaimMirror()
	phase := string(w.state.Phase)
	w.claimMirror = workflow.ExecuteActivity(workflow.WithActivityOptions(w.ctx, nodeClaimOptions()), activities.UpsertNodeClaimActivity, w.nodeClaimRequest())
	w.claimMirrorPhase = phase
}

// flushNodeClaimConditions writes the NodeClaim when a message changed its
// conditions (claimStale: a drift notice, a reservation or its release)
// since the last write, so `kubectl get nodeclaim -o yaml` shows Drifted
// while the node is Ready, not only at its next phase. Runs on the main
// flow (message handlers never block); like a phase's write it waits for
// the write in flight first. Runs recorded before changeNodeClaimConditions,
// or that mirror synchronously, wait for the next phase.
func (w *nodeLifecycle) flushNodeClaimConditions() {
	if !w.claimStale {
		return
	}
	w.claimStale = false
	if w.state.Phase == PhaseTerminated || !changed(w.ctx, changeNodeClaimConditions) {
		return
	}
	if !changed(w.ctx, changeNodeClaimMirror) || !changed(w.ctx, changeNodeClaimMirrorAsync) {
		return
	}
	w.mirrorNodeClaim()
}

// awaitNodeClaimMirror waits for the NodeClaim write in flight, if any.
func (w *nodeLifecycle) awaitNodeClaimMirror() {
	if w.claimMirror == nil {
		return
	}
	future, phase := w.claimMirror, w.claimMirrorPhase
	w.claimMirror = nil
	var resp activities.UpsertNodeClaimResponse
	if err := future.Get(w.ctx, &resp); err != nil {
		w.logger.Warn("Could not write the NodeClaim", "phase", phase, "error", err)
	}
}

func (w *nodeLifecycle) nodeClaimRequest() activities.UpsertNodeClaimRequest {
	req := activities.UpsertNodeClaimRequest{
		NodeClaimName:          w.spec.NodeClaimName,
		WorkflowID:             w.workflowID,
		NodePool:               w.spec.NodePool,
		NodeClassName:          w.spec.NodeClassName,
		Phase:                  string(w.state.Phase),
		At:                     workflow.Now(w.ctx),
		Labels:                 w.nodeLabels(),
		Requirements:           w.spec.Requirements,
		Taints:                 w.spec.Taints,
		StartupTaints:          w.spec.StartupTaints,
		ExpireAfter:            w.spec.ExpireAfter,
		TerminationGracePeriod: w.spec.TerminationGracePeriod,
		Instance:               w.state.Instance,
		NodeName:               w.state.NodeName,
		CreatedAt:              w.state.CreatedAt,
		RegisteredAt:           w.state.RegisteredAt,
		InitializedAt:          w.state.InitializedAt,
	}
	if w.state.Phase == PhaseLaunching {
		req.PodKeys = w.spec.PodKeys
	}
	if changed(w.ctx, changeDriftStamps) {
		req.Annotations = w.nodeAnnotations()
	}
	if t := w.state.Termination; t != nil {
		req.Termination = &activities.NodeClaimTermination{Reason: string(t.Reason), Detail: t.Detail, Voluntary: t.Voluntary}
	}
	if d := w.state.Drift; d != nil {
		req.Drift = &activities.NodeClaimCause{Reason: d.Kind, Message: d.Message}
	}
	if r := w.state.Reservation; r != nil {
		req.Disruption = &activities.NodeClaimCause{Reason: r.Reason, Message: r.Message}
	}
	return req
}
