package kube

import (
	"context"
	"fmt"
	"slices"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/activities"
)

// DeleteNode deletes the Node (by req.NodeName, or by req.ProviderID when the
// name is unknown) and removes the termination finalizer, so the Node
// object is gone when it returns. A Node that is already gone is success
// (Deleted false). When both name and providerID are given and the Node of
// that name has another providerID, the name was reused by a new instance
// and that Node is left alone.
//
// Order: the finalizer goes first, then the Node is deleted, both guarded
// by the Node's UID so neither can hit a new Node that took the name. The
// Node then vanishes at once: watchers never see it terminating behind the
// finalizer, so the node watchers of every worker do not take Millwright's
// own deletion for a `kubectl delete node` and signal the workflow that is
// deleting it (two signals and a workflow task per node in a scale-down).
// Retried after either step, each step is a no-op: the finalizer patch
// writes only when the finalizer is still there, and a Node already gone is
// success. A Node someone else deletes between the steps is gone either way.
// A Node already terminating (`kubectl delete node`, or a retry of the
// earlier order) goes when its finalizer does.
func (a *Activities) DeleteNode(ctx context.Context, req activities.DeleteNodeRequest) (activities.DeleteNodeResponse, error) {
	if req.NodeName == "" && req.ProviderID == "" {
		return activities.DeleteNodeResponse{}, invalidRequest(activities.DeleteNodeActivity, "nodeName/providerID", "both empty")
	}
	node, err := a.findNode(ctx, req)
	if err != nil {
		return activities.DeleteNodeResponse{}, err
	}
	if node == nil {
		a.logger.Info("Node already deleted", zap.String("node", req.NodeName), zap.String("providerID", req.ProviderID))
		return activities.DeleteNodeResponse{Deleted: false}, nil
	}
	logger := a.logger.With(zap.String("node", node.Name), zap.String("providerID", node.Spec.ProviderID))

	_, _, err = a.updateReadNode(ctx, node.Name, node, true, func(current *corev1.Node) {
		if current.UID != node.UID {
			return // a new Node took the name meanwhile
		}
		current.Finalizers = slices.DeleteFunc(current.Finalizers, func(f string) bool {
			return f == activities.TerminationFinalizer
		})
	})
	switch {
	case apierrors.IsNotFound(err):
		if node.DeletionTimestamp == nil {
			logger.Info("Node already deleted")
			return activities.DeleteNodeResponse{Deleted: false}, nil
		}
	case err != nil:
		return activities.DeleteNodeResponse{}, fmt.Errorf("remove finalizer %s from node %s: %w", activities.TerminationFinalizer, node.Name, err)
	}
	if node.DeletionTimestamp == nil {
		err := a.clientset.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &node.UID},
		})
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Gone, or replaced by a new Node of the same name (UID
			// precondition failed): not ours to delete.
			logger.Info("Node already deleted")
			return activities.DeleteNodeResponse{Deleted: false}, nil
		case err != nil:
			return activities.DeleteNodeResponse{}, fmt.Errorf("delete node %s: %w", node.Name, err)
		}
	}
	logger.Info("Deleted node")
	return activities.DeleteNodeResponse{Deleted: true}, nil
}

// findNode returns the Node req names, read from the API server (a stale
// cache here would leave a Node behind whose instance is gone), or nil.
func (a *Activities) findNode(ctx context.Context, req activities.DeleteNodeRequest) (*corev1.Node, error) {
	if req.NodeName == "" {
		return a.nodeByProviderID(ctx, req.ProviderID)
	}
	node, err := a.clientset.CoreV1().Nodes().Get(ctx, req.NodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		node = nil
	case err != nil:
		return nil, fmt.Errorf("get node %s: %w", req.NodeName, err)
	case req.ProviderID != "" && node.Spec.ProviderID != "" && node.Spec.ProviderID != req.ProviderID:
		node = nil // the name now belongs to another instance
	}
	if node == nil && req.ProviderID != "" {
		// The instance's Node may have registered under another name.
		return a.nodeByProviderID(ctx, req.ProviderID)
	}
	return node, nil
}
