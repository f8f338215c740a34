package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// nominateConcurrency bounds the pod writes of one node's nominations; the
// worker's client rate limiter bounds them all.
const nominateConcurrency = 8

// nominatePlannedPods sets status.nominatedNodeName to node on each planned
// pod that is still pending and not nominated elsewhere. kube-scheduler
// (NominatedNodeNameForExpectation, on by default since Kubernetes 1.35)
// tries a pod's nominated node first and, when it places any other pod of
// the same or lower priority, counts the nominated pods as already there:
// without it, the first pending pods in its queue take a new node's room,
// the pods it was launched for stay pending and are planned again, on a
// later node (the tail of pod → launch latency). It runs before the
// unregistered taint comes off, so the nominations are in place when the
// scheduler first considers the node. Best effort: a pod gone, bound or
// changed meanwhile is skipped, and the scheduler clears a nomination that
// did not work out.
func (a *Activities) nominatePlannedPods(ctx context.Context, node string, podKeys []string) (int, error) {
	if len(podKeys) == 0 {
		return 0, nil
	}
	group, ctx := errgroup.WithContext(ctx)
	group.SetLimit(nominateConcurrency)
	nominated := make([]bool, len(podKeys))
	for i, key := range podKeys {
		namespace, name, ok := strings.Cut(key, "/")
		if !ok || namespace == "" || name == "" {
			continue
		}
		group.Go(func() error {
			done, err := a.nominatePod(ctx, namespace, name, node)
			nominated[i] = done
			return err
		})
	}
	err := group.Wait()
	count := 0
	for _, done := range nominated {
		if done {
			count++
		}
	}
	return count, err
}

// nominatePod nominates one pending pod, guarded by the resourceVersion it
// was read at: a conflict means the pod moved on (bound, usually) and is
// left alone.
func (a *Activities) nominatePod(ctx context.Context, namespace, name, node string) (bool, error) {
	pods := a.clientset.CoreV1().Pods(namespace)
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read pod %s/%s to nominate it for node %s: %w", namespace, name, node, err)
	}
	if !nominatable(pod, node) {
		return false, nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": pod.ResourceVersion},
		"status":   map[string]any{"nominatedNodeName": node},
	})
	if err != nil {
		return false, err
	}
	_, err = pods.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("nominate pod %s/%s for node %s: %w", namespace, name, node, err)
	}
	return true, nil
}

// nominatable: pending, not being deleted, not nominated for another node
// (the scheduler's own nomination, after a preemption, stands).
func nominatable(pod *corev1.Pod, node string) bool {
	return pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && !isTerminal(pod) &&
		(pod.Status.NominatedNodeName == "" || pod.Status.NominatedNodeName == node)
}

func (a *Activities) logNominations(node string, planned, nominated int, err error) {
	if err != nil {
		a.logger.Warn("Could not nominate every planned pod for the node", zap.String("node", node), zap.Int("planned", planned), zap.Int("nominated", nominated), zap.Error(err))
		return
	}
	if nominated > 0 {
		a.logger.Info("Nominated pending pods for the node", zap.String("node", node), zap.Int("planned", planned), zap.Int("nominated", nominated))
	}
}
