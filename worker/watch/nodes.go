package watch

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/workflows"
)

// NodeWatcher tells a node's workflow that its Node was deleted (`kubectl
// delete node`): the termination finalizer holds the Node while the workflow
// drains it and terminates the instance.
//
// Before it signals, it puts the disrupted taint on the Node itself, as
// Karpenter's termination controller taints a deleted node first: the
// workflow's Drain would, but only once a worker runs it, and while workers
// restart (a workflow task waits out its timeout on a dead one) the
// scheduler kept binding pods to a Node already going away — a pod that
// must not be evicted (a maxUnavailable-0 budget, do-not-disrupt) then
// holds the drain forever.
type NodeWatcher struct {
	signaler Signaler
	kube     kubernetes.Interface
	cluster  string
	logger   *zap.Logger
	nodes    cache.SharedIndexInformer
	deleted  workqueue.TypedRateLimitingInterface[string]
	// signalled are the deleted Nodes (by UID) this process has told
	// their workflow about: a deleted Node keeps changing (its status, its
	// taints) and each change would otherwise be another signal in the
	// workflow's history. After a restart each is told once more; a Node
	// gone from the API is forgotten.
	mu        sync.Mutex
	signalled map[types.UID]bool
	// Disruption, when set, is poked when a Node is added: it is capacity
	// other nodes' pods may move to.
	Disruption *Trigger
}

// NewNodeWatcher registers its handler on the factory's node informer.
func NewNodeWatcher(factory informers.SharedInformerFactory, kube kubernetes.Interface, signaler Signaler, cluster string, logger *zap.Logger) (*NodeWatcher, error) {
	w := &NodeWatcher{
		signaler:  signaler,
		kube:      kube,
		signalled: map[types.UID]bool{},
		cluster:   cluster,
		logger:    logger,
		nodes:     factory.Core().V1().Nodes().Informer(),
		deleted: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "deleted-nodes"}),
	}
	_, err := w.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			w.onNode(obj)
			w.Disruption.Poke("node added")
		},
		UpdateFunc: func(_, obj any) { w.onNode(obj) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if node, ok := obj.(*corev1.Node); ok {
				w.mu.Lock()
				delete(w.signalled, node.UID)
				w.mu.Unlock()
			}
		},
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
	if err := w.taintDeleted(ctx, node); err != nil {
		return err
	}
	w.mu.Lock()
	told := w.signalled[node.UID]
	w.mu.Unlock()
	if told {
		return nil
	}
	w.logger.Info("Node deleted; asking its workflow to drain and terminate", zap.String("node", name))
	if err := signalNode(ctx, w.signaler, w.cluster, node.Labels[activities.NodeClaimLabel], workflows.SignalNodeDeleted,
		workflows.NodeDeleted{DeletionTimestamp: node.DeletionTimestamp.UTC()}); err != nil {
		return err
	}
	w.mu.Lock()
	w.signalled[node.UID] = true
	w.mu.Unlock()
	return nil
}

// taintDeleted adds the disrupted NoSchedule taint to a deleted Node that
// lacks it. It writes the informer's copy: a Conflict means the Node changed
// since, and the change brings it back through the queue.
func (w *NodeWatcher) taintDeleted(ctx context.Context, node *corev1.Node) error {
	for _, taint := range node.Spec.Taints {
		if taint.Key == activities.DisruptedTaintKey && taint.Effect == corev1.TaintEffectNoSchedule {
			return nil
		}
	}
	tainted := node.DeepCopy()
	tainted.Spec.Taints = append(tainted.Spec.Taints, corev1.Taint{Key: activities.DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule})
	_, err := w.kube.CoreV1().Nodes().Update(ctx, tainted, metav1.UpdateOptions{})
	switch {
	case err == nil:
		w.logger.Info("Tainted deleted node", zap.String("node", node.Name), zap.String("taint", activities.DisruptedTaintKey+":NoSchedule"))
		return nil
	case apierrors.IsNotFound(err):
		return nil
	default:
		return fmt.Errorf("taint deleted node %s: %w", node.Name, err)
	}
}
