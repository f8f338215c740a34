package watch

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/workflows"
)

// NodeWatcher tells a node's workflow that its Node was deleted (`kubectl
// delete node`): the termination finalizer holds the Node while the workflow
// drains it and terminates the instance.
type NodeWatcher struct {
	signaler Signaler
	cluster  string
	logger   *zap.Logger
	nodes    cache.SharedIndexInformer
	deleted  workqueue.TypedRateLimitingInterface[string]
	// Disruption, when set, is poked when a Node is added: it is capacity
	// other nodes' pods may move to.
	Disruption *Trigger
}

// NewNodeWatcher registers its handler on the factory's node informer.
func NewNodeWatcher(factory informers.SharedInformerFactory, signaler Signaler, cluster string, logger *zap.Logger) (*NodeWatcher, error) {
	w := &NodeWatcher{
		signaler: signaler,
		cluster:  cluster,
		logger:   logger,
		nodes:    factory.Core().V1().Nodes().Informer(),
		deleted: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "deleted-nodes"}),
	}
	_, err := w.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			w.onNode(obj)
			w.Disruption.Poke("node added")
		},
		UpdateFunc: func(_, obj any) { w.onNode(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("node watcher: %w", err)
	}
	return w, nil
}

func (w *NodeWatcher) onNode(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok || node.DeletionTimestamp == nil || node.Labels[activities.NodeClaimLabel] == "" {
		return
	}
	w.deleted.Add(node.Name)
}

// Run signals deleted nodes until ctx ends.
func (w *NodeWatcher) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		w.deleted.ShutDown()
	}()
	for {
		name, shutdown := w.deleted.Get()
		if shutdown {
			return
		}
		if err := w.signalDeleted(ctx, name); err != nil {
			w.logger.Warn("signalling a node deletion failed; will retry", zap.String("node", name), zap.Error(err))
			w.deleted.AddRateLimited(name)
		} else {
			w.deleted.Forget(name)
		}
		w.deleted.Done(name)
	}
}

func (w *NodeWatcher) signalDeleted(ctx context.Context, name string) error {
	obj, exists, err := w.nodes.GetIndexer().GetByKey(name)
	if err != nil || !exists {
		return err
	}
	node := obj.(*corev1.Node)
	if node.DeletionTimestamp == nil {
		return nil
	}
	w.logger.Info("Node deleted; asking its workflow to drain and terminate", zap.String("node", name))
	return signalNode(ctx, w.signaler, w.cluster, node.Labels[activities.NodeClaimLabel], workflows.SignalNodeDeleted,
		workflows.NodeDeleted{DeletionTimestamp: node.DeletionTimestamp.UTC()})
}
