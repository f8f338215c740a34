package kube

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/events"
)

// MarkDisruption taints or untaints the Nodes of a disruption command (see
// activities.DisruptionCommandActivities), up to maxConcurrentMarks Nodes at
// a time (one after the other, a 10-node command waited 2–3 s for its
// marks in a 5,000-pod scale-down), and answers in req's order. Untainting
// leaves a cordoned Node alone: its drain owns the taint now.
func (a *Activities) MarkDisruption(ctx context.Context, req activities.MarkDisruptionRequest) (activities.MarkDisruptionResponse, error) {
	var resp activities.MarkDisruptionResponse
	for _, name := range req.NodeNames {
		if name == "" {
			return resp, invalidRequest(activities.MarkDisruptionActivity, "nodeNames", "has an empty name")
		}
	}
	outcomes := make([]markOutcome, len(req.NodeNames))
	group, groupCtx := errgroup.WithContext(ctx)
	group.SetLimit(maxConcurrentMarks)
	for i, name := range req.NodeNames {
		group.Go(func() error {
			var err error
			outcomes[i], err = a.markNode(groupCtx, req, name)
			return err
		})
	}
	if err := group.Wait(); err != nil {
		return resp, err
	}
	for i, name := range req.NodeNames {
		switch outcomes[i] {
		case markSkipped:
			resp.Skipped = append(resp.Skipped, name)
		case markChanged:
			resp.Changed = append(resp.Changed, name)
		}
	}
	if req.Disrupted && !req.Candidate {
		resp.DisruptedAt = a.clock.Now()
	}
	return resp, nil
}

// maxConcurrentMarks bounds the Node writes one MarkDisruption has in
// flight.
const maxConcurrentMarks = 16

// markOutcome is what MarkDisruption did to one Node.
type markOutcome int

const (
	markUnchanged markOutcome = iota
	markChanged
	markSkipped // gone, or (untainting) cordoned by a drain
)

// markNode taints or untaints one Node for req and publishes the command's
// events on it.
func (a *Activities) markNode(ctx context.Context, req activities.MarkDisruptionRequest, name string) (markOutcome, error) {
	skipped := false
	node, changed, err := a.updateNode(ctx, name, func(node *corev1.Node) {
		skipped = false
		switch {
		case req.Candidate && req.Disrupted:
			node.Spec.Taints = addMissingTaints(node.Spec.Taints, candidateTaint)
		case req.Candidate:
			node.Spec.Taints = removeTaintKey(node.Spec.Taints, activities.CandidateTaintKey)
		case req.Disrupted:
			node.Spec.Taints = addMissingTaints(node.Spec.Taints, disruptedTaint)
		case node.Spec.Unschedulable || node.DeletionTimestamp != nil:
			skipped = true
		default:
			node.Spec.Taints = removeTaintKey(node.Spec.Taints, activities.DisruptedTaintKey)
		}
	})
	outcome := markUnchanged
	switch {
	case apierrors.IsNotFound(err):
		return markSkipped, nil
	case err != nil:
		return markUnchanged, fmt.Errorf("mark Node %s for disruption command %s: %w", name, req.CommandID, err)
	case skipped:
		outcome = markSkipped
	case changed:
		outcome = markChanged
		a.logger.Info("Marked node for disruption", zap.String("node", name), zap.Bool("disrupted", req.Disrupted),
			zap.Bool("candidate", req.Candidate), zap.String("command", req.CommandID))
	}
	if req.Disrupted && !req.Candidate && node != nil && req.Message != "" {
		ref := events.NodeRef(node.Name, node.UID)
		if req.Replacing {
			a.events.Publish(events.DisruptionLaunchingEvent(ref, node.Name, req.CommandID, req.Message))
		}
		a.events.Publish(events.DisruptionTerminatingEvent(ref, node.Name, req.CommandID, req.Message))
	}
	return outcome, nil
}
