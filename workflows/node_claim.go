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
func (w *nodeLifecycle) mirrorNodeClaim() {
	if !changed(w.ctx, changeNodeClaimMirror) {
		return
	}
	var resp activities.UpsertNodeClaimResponse
	if err := w.execute(nodeClaimOptions(), activities.UpsertNodeClaimActivity, w.nodeClaimRequest(), &resp); err != nil {
		w.logger.Warn("Could not write the NodeClaim", "phase", string(w.state.Phase), "error", err)
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
	return req
}
