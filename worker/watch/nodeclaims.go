package watch

import (
	"context"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/kube"
	"github.com/millwright/millwright/workflows"
)

// WorkflowDescriber is the slice of client.Client that tells whether a node
// workflow runs and in which phase.
type WorkflowDescriber interface {
	DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
}

// NodeClaimWatcher makes `kubectl delete nodeclaim` do what `kubectl delete
// node` does: a NodeClaim being deleted (held by its finalizer) sends its
// node workflow the same NodeDeleted signal, and the workflow drains and
// terminates the node, then lets the NodeClaim go. A NodeClaim removed
// outright while its node lives (its finalizer stripped by hand) is written
// back: it mirrors the workflow, which stays the source of truth.
type NodeClaimWatcher struct {
	signaler  Signaler
	describer WorkflowDescriber
	dynamic   dynamic.Interface
	cluster   string
	logger    *zap.Logger
	claims    cache.SharedIndexInformer
	queue     workqueue.TypedRateLimitingInterface[nodeClaimEvent]
}

type nodeClaimEvent struct {
	name string
	// gone holds the final state of a NodeClaim removed from the API.
	gone *unstructured.Unstructured
}

// NewNodeClaimWatcher registers its handlers on the factory's NodeClaim
// informer.
func NewNodeClaimWatcher(factory dynamicinformer.DynamicSharedInformerFactory, client dynamic.Interface, signaler Signaler,
	describer WorkflowDescriber, cluster string, logger *zap.Logger) (*NodeClaimWatcher, error) {
	w := &NodeClaimWatcher{
		signaler: signaler, describer: describer, dynamic: client, cluster: cluster, logger: logger,
		claims: factory.ForResource(kube.NodeClaimResource).Informer(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[nodeClaimEvent](),
			workqueue.TypedRateLimitingQueueConfig[nodeClaimEvent]{Name: "nodeclaims"}),
	}
	_, err := w.claims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.onClaim,
		UpdateFunc: func(_, obj any) { w.onClaim(obj) },
		DeleteFunc: w.onRemoved,
	})
	if err != nil {
		return nil, fmt.Errorf("nodeclaim watcher: %w", err)
	}
	return w, nil
}

func (w *NodeClaimWatcher) onClaim(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if ok && u.GetDeletionTimestamp() != nil {
		w.queue.Add(nodeClaimEvent{name: u.GetName()})
	}
}

func (w *NodeClaimWatcher) onRemoved(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		w.queue.Add(nodeClaimEvent{name: u.GetName(), gone: u})
	}
}

// Run handles deleted NodeClaims until ctx ends.
func (w *NodeClaimWatcher) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	for {
		event, shutdown := w.queue.Get()
		if shutdown {
			return
		}
		if err := w.handle(ctx, event); err != nil {
			w.logger.Warn("handling a NodeClaim deletion failed; will retry", zap.String("nodeClaim", event.name), zap.Error(err))
			w.queue.AddRateLimited(event)
		} else {
			w.queue.Forget(event)
		}
		w.queue.Done(event)
	}
}

func (w *NodeClaimWatcher) handle(ctx context.Context, event nodeClaimEvent) error {
	if event.gone != nil {
		return w.restoreIfLive(ctx, event.gone)
	}
	obj, exists, err := w.claims.GetIndexer().GetByKey(event.name)
	if err != nil || !exists {
		return err
	}
	u := obj.(*unstructured.Unstructured)
	deleted := u.GetDeletionTimestamp()
	if deleted == nil {
		return nil
	}
	w.logger.Info("NodeClaim deleted; asking its workflow to drain and terminate", zap.String("nodeClaim", event.name))
	return signalNode(ctx, w.signaler, w.cluster, event.name, workflows.SignalNodeDeleted,
		workflows.NodeDeleted{DeletionTimestamp: deleted.UTC()})
}

// restoreIfLive writes a removed NodeClaim back when its node workflow
// runs and the node is not leaving.
func (w *NodeClaimWatcher) restoreIfLive(ctx context.Context, gone *unstructured.Unstructured) error {
	described, err := w.describer.DescribeWorkflowExecution(ctx, workflows.NodeWorkflowID(w.cluster, gone.GetName()), "")
	if err != nil {
		return nil // no such workflow (or not this cluster's): nothing mirrors it
	}
	info := described.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil
	}
	phase := keyword(info.GetSearchAttributes().GetIndexedFields()[workflows.PhaseAttribute.GetName()])
	if phase == "" || activities.NodePhaseLeaving(phase) {
		return nil
	}
	w.logger.Info("NodeClaim removed while its node lives; writing it back", zap.String("nodeClaim", gone.GetName()), zap.String("phase", phase))
	return kube.RestoreNodeClaim(ctx, w.dynamic, gone)
}

// keyword decodes a Keyword search attribute; "" when absent.
func keyword(payload *commonpb.Payload) string {
	var value string
	if payload == nil || converter.GetDefaultDataConverter().FromPayload(payload, &value) != nil {
		return ""
	}
	return value
}
