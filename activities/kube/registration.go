package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"

	"github.com/millwright/millwright/activities"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/scheduling"
)

// Keys this package writes on Nodes besides the contract's.
const (
	// NodePoolLabel names the NodePool a Node belongs to.
	NodePoolLabel = apisv1.LabelNodePool
	// RegisteredAnnotation records when RegisterNode adopted the Node. Its
	// presence makes a re-run leave taints alone: startup taints that other
	// systems removed since must not come back.
	RegisteredAnnotation = "millwright.dev/registered"
)

// InvalidRequestErrorType is the Temporal application error type of a
// request that can never succeed (a required field empty). Not retryable.
const InvalidRequestErrorType = "InvalidRequest"

func invalidRequest(activityName, field, problem string) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("%s: %s: %s", activityName, field, problem), InvalidRequestErrorType, nil)
}

// IsInvalidRequest reports whether err is an InvalidRequest error.
func IsInvalidRequest(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == InvalidRequestErrorType
}

// WaitForRegistration waits, heartbeating, until a Node with req.ProviderID
// exists, and returns its name. Past req.Deadline (zero: no deadline; the
// activity's own timeouts bound it) it returns a RegistrationTimeout error,
// after one authoritative read from the API server so a lagging cache never
// gets a registered instance terminated.
func (a *Activities) WaitForRegistration(ctx context.Context, req activities.WaitForRegistrationRequest) (activities.WaitForRegistrationResponse, error) {
	if req.ProviderID == "" {
		return activities.WaitForRegistrationResponse{}, invalidRequest(activities.WaitForRegistrationActivity, "providerID", "empty")
	}
	nodes, err := a.nodeCache(ctx)
	if err != nil {
		return activities.WaitForRegistrationResponse{}, err
	}
	// Registered before the first look, so a Node arriving between the
	// look and the wait still wakes it.
	arrived, stopWaiting := a.registrations.wait(req.ProviderID)
	defer stopWaiting()
	started := a.clock.Now()
	var name string
	err = a.pollUntilWoken(ctx, arrived, func(ctx context.Context) (bool, error) {
		found, err := nodes.ByIndex(providerIDIndex, req.ProviderID)
		if err != nil {
			return false, fmt.Errorf("node cache lookup of providerID %s: %w", req.ProviderID, err)
		}
		if node := preferLive(found); node != nil {
			name = node.Name
			return true, nil
		}
		heartbeat(ctx, "waiting for Node with providerID "+req.ProviderID)
		if !passed(req.Deadline, a.clock.Now()) {
			return false, nil
		}
		node, err := a.nodeByProviderID(ctx, req.ProviderID)
		if err != nil {
			return false, err
		}
		if node == nil {
			return false, activities.NewRegistrationTimeoutError(req.InstanceID, req.ProviderID, a.clock.Since(started).Round(time.Second))
		}
		name = node.Name
		return true, nil
	})
	if err != nil {
		return activities.WaitForRegistrationResponse{}, err
	}
	a.logger.Info("Node registered", zap.String("node", name), zap.String("providerID", req.ProviderID),
		zap.String("nodeClaim", req.NodeClaimName))
	return activities.WaitForRegistrationResponse{NodeName: name}, nil
}

// preferLive picks the Node among candidates that is not being deleted, or
// any; providerIDs are unique in practice, but a Node being deleted may
// overlap briefly with its replacement.
func preferLive(candidates []any) *corev1.Node {
	var fallback *corev1.Node
	for _, obj := range candidates {
		node, ok := obj.(*corev1.Node)
		if !ok {
			continue
		}
		if node.DeletionTimestamp == nil {
			return node
		}
		fallback = node
	}
	return fallback
}

// nodeByProviderID lists Nodes from the API server (in pages) and returns the
// one with providerID, or nil. It is the authoritative, expensive lookup:
// used where a stale cache would do harm.
func (a *Activities) nodeByProviderID(ctx context.Context, providerID string) (*corev1.Node, error) {
	var found []any
	listPager := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return a.clientset.CoreV1().Nodes().List(ctx, opts)
	})
	err := listPager.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		if node, ok := obj.(*corev1.Node); ok && node.Spec.ProviderID == providerID {
			found = append(found, node)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list Nodes to find providerID %s: %w", providerID, err)
	}
	return preferLive(found), nil
}

// RegisterNode adopts the Node: the termination finalizer, the pool's and
// node claim's labels, req.Labels and req.Annotations, and removes the
// unregistered taint. req.Taints and req.StartupTaints are added (when
// missing by key and effect) only the first time, which RegisteredAnnotation
// records; a re-run after other systems removed a startup taint leaves it
// removed. Every write is a patch guarded by the Node's resourceVersion. A
// Node deleted before it could be adopted is a NodeGone error (not
// retryable: a kubelet does not register its Node again).
func (a *Activities) RegisterNode(ctx context.Context, req activities.RegisterNodeRequest) (activities.RegisterNodeResponse, error) {
	switch {
	case req.NodeName == "":
		return activities.RegisterNodeResponse{}, invalidRequest(activities.RegisterNodeActivity, "nodeName", "empty")
	case req.NodePool == "":
		return activities.RegisterNodeResponse{}, invalidRequest(activities.RegisterNodeActivity, "nodePool", "empty")
	case req.NodeClaimName == "":
		return activities.RegisterNodeResponse{}, invalidRequest(activities.RegisterNodeActivity, "nodeClaimName", "empty")
	}
	if len(req.NominatePods) > 0 {
		if err := a.nominateBeforeAdoption(ctx, req); err != nil {
			if apierrors.IsNotFound(err) {
				return activities.RegisterNodeResponse{}, activities.NewNodeGoneError(req.NodeName, err)
			}
			return activities.RegisterNodeResponse{}, fmt.Errorf("register node %s: %w", req.NodeName, err)
		}
	}
	registeredAt := a.clock.Now().UTC().Format(time.RFC3339)
	node, changed, err := a.updateNode(ctx, req.NodeName, func(node *corev1.Node) {
		if !slices.Contains(node.Finalizers, activities.TerminationFinalizer) {
			node.Finalizers = append(node.Finalizers, activities.TerminationFinalizer)
		}
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		maps.Copy(node.Labels, req.Labels)
		node.Labels[NodePoolLabel] = req.NodePool
		// Under Karpenter's key too (karpenter.sh/nodepool): a Custom AMI's
		// userData does not put it on the Node as Millwright's does.
		for _, alias := range scheduling.LabelAliases(scheduling.CanonicalLabelKey(NodePoolLabel)) {
			node.Labels[alias] = req.NodePool
		}
		node.Labels[activities.NodeClaimLabel] = req.NodeClaimName
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		maps.Copy(node.Annotations, req.Annotations)
		if _, registered := node.Annotations[RegisteredAnnotation]; !registered {
			node.Spec.Taints = addMissingTaints(node.Spec.Taints, req.Taints...)
			node.Spec.Taints = addMissingTaints(node.Spec.Taints, req.StartupTaints...)
			node.Annotations[RegisteredAnnotation] = registeredAt
		}
		node.Spec.Taints = removeTaintKey(node.Spec.Taints, activities.UnregisteredTaintKey)
	})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return activities.RegisterNodeResponse{}, activities.NewNodeGoneError(req.NodeName, err)
		}
		return activities.RegisterNodeResponse{}, fmt.Errorf("register node %s: %w", req.NodeName, err)
	}
	if changed {
		a.logger.Info("Registered node", zap.String("node", node.Name), zap.String("nodePool", req.NodePool),
			zap.String("nodeClaim", req.NodeClaimName), zap.String("taints", taintList(node.Spec.Taints)))
	}
	return activities.RegisterNodeResponse{}, nil
}

// nominateBeforeAdoption nominates req.NominatePods to the Node while it
// still carries the unregistered taint, so the scheduler knows where they go
// before it can place any pod there. Only the first registration does: a
// retry after adoption would nominate pods the scheduler has since placed
// elsewhere or given up on.
func (a *Activities) nominateBeforeAdoption(ctx context.Context, req activities.RegisterNodeRequest) error {
	node, err := a.clientset.CoreV1().Nodes().Get(ctx, req.NodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if _, registered := node.Annotations[RegisteredAnnotation]; registered {
		return nil
	}
	if n := a.nominatePods(ctx, req.NodeName, req.NominatePods); n > 0 {
		a.logger.Info("Nominated pods to their node", zap.String("node", req.NodeName), zap.Int("pods", n),
			zap.Int("planned", len(req.NominatePods)))
	}
	return nil
}

func taintList(taints []corev1.Taint) string {
	names := make([]string, 0, len(taints))
	for _, taint := range taints {
		names = append(names, taint.ToString())
	}
	return strings.Join(names, ",")
}
