package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/activities"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// WaitForInitialization waits, heartbeating, until the Node is Ready, every
// startup taint (by key and effect) is gone and every requested extended
// resource is allocatable in at least the requested amount. Past
// req.Deadline (zero: no deadline) it returns an InitializationTimeout error
// naming what was still missing. Millwright never removes startup taints;
// the systems that put them there do.
//
// It returns how many workload pods (not DaemonSet, not mirror, not
// terminal) the Node has, so the workflow knows whether it starts empty.
func (a *Activities) WaitForInitialization(ctx context.Context, req activities.WaitForInitializationRequest) (activities.WaitForInitializationResponse, error) {
	if req.NodeName == "" {
		return activities.WaitForInitializationResponse{}, invalidRequest(activities.WaitForInitializationActivity, "nodeName", "empty")
	}
	nodes, err := a.nodeCache(ctx)
	if err != nil {
		return activities.WaitForInitializationResponse{}, err
	}
	started := a.clock.Now()
	err = a.pollUntil(ctx, func(ctx context.Context) (bool, error) {
		node, err := cachedNode(nodes, req.NodeName)
		if err != nil {
			return false, err
		}
		missing := initializationGaps(node, req.StartupTaints, req.ExtendedResources)
		if len(missing) == 0 {
			return true, nil
		}
		heartbeat(ctx, strings.Join(missing, "; "))
		if passed(req.Deadline, a.clock.Now()) {
			return false, activities.NewInitializationTimeoutError(req.NodeName, strings.Join(missing, "; "),
				a.clock.Since(started).Round(time.Second))
		}
		return false, nil
	})
	if err != nil {
		return activities.WaitForInitializationResponse{}, err
	}
	if err := a.labelInitialized(ctx, req.NodeName); err != nil {
		return activities.WaitForInitializationResponse{}, err
	}
	pods, err := a.recentPodsOnNode(ctx, req.NodeName)
	if err != nil {
		return activities.WaitForInitializationResponse{}, err
	}
	workloads := countWorkloadPods(pods)
	a.logger.Sugar().Infow("Node initialized", "node", req.NodeName, "workloadPods", workloads)
	return activities.WaitForInitializationResponse{NonDaemonSetPods: workloads}, nil
}

// labelInitialized stamps the Node millwright.dev/initialized=true, once:
// the disruption decision reads it, so a node that goes NotReady soon after
// it started is judged by repair, not taken for one still initializing.
func (a *Activities) labelInitialized(ctx context.Context, nodeName string) error {
	_, _, err := a.updateNode(ctx, nodeName, func(node *corev1.Node) {
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[apisv1.LabelNodeInitialized] = "true"
	})
	if err != nil {
		return fmt.Errorf("label node %s initialized: %w", nodeName, err)
	}
	return nil
}

// initializationGaps lists what keeps node from being initialized; empty
// means initialized.
func initializationGaps(node *corev1.Node, startupTaints []corev1.Taint, extended corev1.ResourceList) []string {
	if node == nil {
		return []string{"node not found"}
	}
	var missing []string
	if status, reason := nodeReady(node); status != corev1.ConditionTrue {
		missing = append(missing, fmt.Sprintf("Ready condition is %s (%s)", status, reason))
	}
	for _, startup := range startupTaints {
		if hasTaint(node.Spec.Taints, startup) {
			missing = append(missing, fmt.Sprintf("startup taint %s:%s still present", startup.Key, startup.Effect))
		}
	}
	names := make([]string, 0, len(extended))
	for name := range extended {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		requested := extended[corev1.ResourceName(name)]
		allocatable, ok := node.Status.Allocatable[corev1.ResourceName(name)]
		if !ok || allocatable.Sign() <= 0 || allocatable.Cmp(requested) < 0 {
			missing = append(missing, fmt.Sprintf("extended resource %s allocatable %s, want at least %s",
				name, allocatable.String(), requested.String()))
		}
	}
	return missing
}
