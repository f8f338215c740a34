package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/activities"
)

// outlierTaint keeps kube-scheduler's pods off a node consolidation means
// to take first, when it has a choice (activities.OutlierTaintKey).
var outlierTaint = corev1.Taint{Key: activities.OutlierTaintKey, Effect: corev1.TaintEffectPreferNoSchedule}

// MarkOutliers taints the Nodes req names with the outlier taint and takes
// it off every other Node (see activities.DisruptionCommandActivities),
// up to maxConcurrentMarks Nodes at a time.
func (a *Activities) MarkOutliers(ctx context.Context, req activities.MarkOutliersRequest) (activities.MarkOutliersResponse, error) {
	var resp activities.MarkOutliersResponse
	want := make(map[string]bool, len(req.NodeNames))
	for _, name := range req.NodeNames {
		if name == "" {
			return resp, invalidRequest(activities.MarkOutliersActivity, "nodeNames", "has an empty name")
		}
		want[name] = true
	}
	nodes, err := a.listNodes(ctx)
	if err != nil {
		return resp, fmt.Errorf("list Nodes to mark outliers: %w", err)
	}
	var untaint []string
	for _, node := range nodes {
		if !want[node.Name] && hasTaint(node.Spec.Taints, outlierTaint) {
			untaint = append(untaint, node.Name)
		}
	}
	names := append(slices.Sorted(maps.Keys(want)), untaint...)
	changed := make([]bool, len(names))
	group, groupCtx := errgroup.WithContext(ctx)
	group.SetLimit(maxConcurrentMarks)
	for i, name := range names {
		group.Go(func() error {
			_, did, err := a.updateNode(groupCtx, name, func(node *corev1.Node) {
				if want[name] {
					node.Spec.Taints = addMissingTaints(node.Spec.Taints, outlierTaint)
				} else {
					node.Spec.Taints = removeTaintKey(node.Spec.Taints, activities.OutlierTaintKey)
				}
			})
			switch {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return fmt.Errorf("mark Node %s outlier=%v: %w", name, want[name], err)
			}
			changed[i] = did
			return nil
		})
	}
	if err := group.Wait(); err != nil {
		return resp, err
	}
	for i, name := range names {
		switch {
		case !changed[i]:
		case want[name]:
			resp.Marked = append(resp.Marked, name)
		default:
			resp.Unmarked = append(resp.Unmarked, name)
		}
	}
	if len(resp.Marked)+len(resp.Unmarked) > 0 {
		a.logger.Info("Marked consolidation outliers", zap.Strings("marked", resp.Marked), zap.Strings("unmarked", resp.Unmarked))
	}
	return resp, nil
}

// listNodes lists the Nodes from the API server, not the informer's
// cache: a Node tainted by the last call may not be in the cache yet, and
// would keep its taint. MarkOutliers runs only when the outliers change (a
// few times in a scale-down), so the List is rare.
func (a *Activities) listNodes(ctx context.Context) ([]*corev1.Node, error) {
	list, err := a.clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}
