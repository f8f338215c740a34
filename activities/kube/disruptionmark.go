package kube

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/events"
)

// MarkDisruption taints or untaints the Nodes of a disruption command (see
// activities.DisruptionCommandActivities). Untainting leaves a cordoned
// Node alone: its drain owns the taint now.
func (a *Activities) MarkDisruption(ctx context.Context, req activities.MarkDisruptionRequest) (activities.MarkDisruptionResponse, error) {
	var resp activities.MarkDisruptionResponse
	for _, name := range req.NodeNames {
		if name == "" {
			return resp, invalidRequest(activities.MarkDisruptionActivity, "nodeNames", "has an empty name")
		}
		skipped := false
		node, changed, err := a.updateNode(ctx, name, func(node *corev1.Node) {
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
		switch {
		case apierrors.IsNotFound(err):
			resp.Skipped = append(resp.Skipped, name)
			continue
		case err != nil:
			return resp, fmt.Errorf("mark Node %s for disruption command %s: %w", name, req.CommandID, err)
		case skipped:
			resp.Skipped = append(resp.Skipped, name)
		case changed:
			resp.Changed = append(resp.Changed, name)
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
	}
	if req.Disrupted && !req.Candidate {
		resp.DisruptedAt = a.clock.Now()
	}
	return resp, nil
}
