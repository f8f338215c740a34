package status

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/kube"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// NodePoolFinalizer holds a deleted NodePool until its nodes are gone, as
// Karpenter's termination finalizer does: deleting a pool drains and
// terminates its nodes (each NodeClaim deleted, which its node workflow
// honours like `kubectl delete nodeclaim`), then lets the pool go.
const NodePoolFinalizer = activities.TerminationFinalizer

// terminationRecheck is how soon a deleted pool whose nodes are still
// leaving is looked at again (NodeClaim and Node events also bring it).
const terminationRecheck = 10 * time.Second

// nodeClaimPoolIndex indexes NodeClaims by their NodePool label.
const nodeClaimPoolIndex = "status.millwright.dev/nodeclaim-nodepool"

func nodePoolOfClaim(obj any) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GetLabels()[apisv1.LabelNodePool] == "" {
		return nil, nil
	}
	return []string{u.GetLabels()[apisv1.LabelNodePool]}, nil
}

// ensureFinalizer adds NodePoolFinalizer to a live pool that lacks it.
func (c *nodePoolController) ensureFinalizer(ctx context.Context, u *unstructured.Unstructured) error {
	if slices.Contains(u.GetFinalizers(), NodePoolFinalizer) {
		return nil
	}
	return c.patchFinalizers(ctx, u, append(slices.Clone(u.GetFinalizers()), NodePoolFinalizer))
}

// terminate drives a deleted pool's nodes out: every NodeClaim of the pool
// is deleted (its node workflow drains and terminates the node), every
// Node of the pool without a NodeClaim is deleted (its workflow does the
// same); once neither is left the finalizer goes.
func (c *nodePoolController) terminate(ctx context.Context, u *unstructured.Unstructured) (time.Duration, error) {
	name := u.GetName()
	if !slices.Contains(u.GetFinalizers(), NodePoolFinalizer) {
		return 0, nil
	}
	var claims []any
	if c.claims != nil {
		var err error
		if claims, err = c.claims.GetIndexer().ByIndex(nodeClaimPoolIndex, name); err != nil {
			return 0, err
		}
	}
	claimed := map[string]bool{}
	for _, item := range claims {
		claim, ok := item.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		claimed[claim.GetName()] = true
		if claim.GetDeletionTimestamp() != nil {
			continue
		}
		err := c.dynamic.Resource(kube.NodeClaimResource).Delete(ctx, claim.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("deleting NodeClaim %s of deleted NodePool %s: %w", claim.GetName(), name, err)
		}
		c.logger.Info("Deleting NodeClaim of a deleted NodePool", zap.String("nodePool", name), zap.String("nodeClaim", claim.GetName()))
	}
	nodes, err := c.nodesOf(name)
	if err != nil {
		return 0, err
	}
	for _, node := range nodes {
		if node.DeletionTimestamp != nil || claimed[node.Labels[activities.NodeClaimLabel]] {
			continue
		}
		err := c.dynamic.Resource(corev1.SchemeGroupVersion.WithResource("nodes")).Delete(ctx, node.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("deleting Node %s of deleted NodePool %s: %w", node.Name, name, err)
		}
		c.logger.Info("Deleting Node of a deleted NodePool", zap.String("nodePool", name), zap.String("node", node.Name))
	}
	if len(claims) > 0 || len(nodes) > 0 {
		return terminationRecheck, nil
	}
	finalizers := slices.DeleteFunc(slices.Clone(u.GetFinalizers()), func(f string) bool { return f == NodePoolFinalizer })
	if err := c.patchFinalizers(ctx, u, finalizers); err != nil {
		return 0, err
	}
	c.logger.Info("Deleted NodePool's nodes are gone; removed its finalizer", zap.String("nodePool", name))
	return 0, nil
}

// patchFinalizers sets u's finalizers with a merge patch carrying its
// resourceVersion, so a list changed meanwhile is not overwritten.
func (c *nodePoolController) patchFinalizers(ctx context.Context, u *unstructured.Unstructured, finalizers []string) error {
	if finalizers == nil {
		finalizers = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": finalizers, "resourceVersion": u.GetResourceVersion(),
	}})
	if err != nil {
		return err
	}
	_, err = c.client.Patch(ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("setting the finalizers of NodePool %s: %w", u.GetName(), err)
	}
	return nil
}
