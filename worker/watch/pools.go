package watch

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/millwright/millwright/activities/events"
	"github.com/millwright/millwright/activities/planning"
	v1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/workflows"
)

// Event reasons the pool watcher records.
const (
	ReasonInvalidNodePool     = "InvalidNodePool"
	ReasonInvalidEC2NodeClass = "InvalidEC2NodeClass"
	// ReasonUnsupportedSetting: a valid setting Millwright does not act on
	// yet; the pool is used, the setting ignored.
	ReasonUnsupportedSetting = events.UnsupportedSetting
)

// poolWarning is a Warning about a NodePool or EC2NodeClass, repeated at
// most every DefaultDedupeTimeout for the same object and message (the
// informer's resync hands every object back periodically).
func poolWarning(u *unstructured.Unstructured, reason, message string) events.Event {
	return events.Event{
		InvolvedObject: u, Type: corev1.EventTypeWarning, Reason: reason, Message: message,
		DedupeValues: []string{string(u.GetUID()), message},
	}
}

// PoolWatcher validates NodePools and EC2NodeClasses as they change: an
// invalid one gets a Warning event and a log line naming the field (the
// planner skips it; the rest keep working), and any change asks the
// provisioner for a planning pass (a new pool may fit pending pods; minNodes
// may have grown).
type PoolWatcher struct {
	provisioner Provisioner
	recorder    events.Recorder
	logger      *zap.Logger
	informers   map[schema.GroupVersionResource]cache.SharedIndexInformer
	queue       workqueue.TypedRateLimitingInterface[poolKey]
	// Disruption, when set, is poked when a pool or class changes: its
	// nodes may have drifted.
	Disruption *Trigger
}

type poolKey struct {
	resource schema.GroupVersionResource
	name     string
}

// NewPoolWatcher registers informers for both CRDs on the factory.
func NewPoolWatcher(factory dynamicinformer.DynamicSharedInformerFactory, provisioner Provisioner, recorder events.Recorder, logger *zap.Logger) (*PoolWatcher, error) {
	w := &PoolWatcher{
		provisioner: provisioner,
		recorder:    recorder,
		logger:      logger,
		informers:   map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[poolKey](),
			workqueue.TypedRateLimitingQueueConfig[poolKey]{Name: "node-pools"}),
	}
	for _, resource := range []schema.GroupVersionResource{planning.NodePoolResource, planning.EC2NodeClassResource} {
		informer := factory.ForResource(resource).Informer()
		enqueue := func(obj any) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				w.queue.Add(poolKey{resource: resource, name: u.GetName()})
			}
		}
		_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: enqueue,
			UpdateFunc: func(old, obj any) {
				// Status-only updates do not change what the planner sees.
				if o, ok := old.(*unstructured.Unstructured); ok {
					if n, ok := obj.(*unstructured.Unstructured); ok && o.GetGeneration() == n.GetGeneration() {
						return
					}
				}
				enqueue(obj)
			},
		})
		if err != nil {
			return nil, fmt.Errorf("pool watcher: %w", err)
		}
		w.informers[resource] = informer
	}
	return w, nil
}

// Run processes changes until ctx ends.
func (w *PoolWatcher) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	for {
		key, shutdown := w.queue.Get()
		if shutdown {
			return
		}
		if err := w.handle(ctx, key); err != nil {
			w.logger.Warn("handling a NodePool change failed; will retry", zap.String("name", key.name), zap.Error(err))
			w.queue.AddRateLimited(key)
		} else {
			w.queue.Forget(key)
		}
		w.queue.Done(key)
	}
}

func (w *PoolWatcher) handle(ctx context.Context, key poolKey) error {
	obj, exists, err := w.informers[key.resource].GetIndexer().GetByKey(key.name)
	if err != nil || !exists {
		return err
	}
	u := obj.(*unstructured.Unstructured)
	kind := "NodePool"
	reason := ReasonInvalidNodePool
	if validationErr := ValidateObject(u, key.resource); validationErr != nil {
		if key.resource == planning.EC2NodeClassResource {
			kind, reason = "EC2NodeClass", ReasonInvalidEC2NodeClass
		}
		w.logger.Error("invalid "+kind+"; it will not be used until fixed", zap.String("name", key.name), zap.Error(validationErr))
		w.recorder.Publish(poolWarning(u, reason, validationErr.Error()))
		return nil
	}
	if key.resource == planning.NodePoolResource {
		var pool v1.NodePool
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pool); err == nil {
			for _, message := range UnsupportedSettings(&pool) {
				w.logger.Warn("NodePool setting not acted on", zap.String("name", key.name), zap.String("setting", message))
				w.recorder.Publish(poolWarning(u, ReasonUnsupportedSetting, message))
			}
		}
	}
	w.Disruption.Poke(fmt.Sprintf("%s %s changed", key.resource.Resource, key.name))
	return w.provisioner.Signal(ctx, workflows.SignalReconcile, workflows.ReconcileRequest{
		Reason: fmt.Sprintf("%s %s changed", key.resource.Resource, key.name)})
}

// UnsupportedSettings names the valid settings of pool that Millwright does
// not act on yet, so that users are told instead of silently getting less
// than they asked for.
// (consolidationPolicy WhenEmptyOrUnderutilized is acted on now: the
// disruption workflow's Underutilized commands.) None today.
func UnsupportedSettings(*v1.NodePool) []string {
	return nil
}

// ValidateObject decodes a NodePool or EC2NodeClass, applies the API's
// defaults and validates it; the error names every broken field.
func ValidateObject(u *unstructured.Unstructured, resource schema.GroupVersionResource) error {
	switch resource {
	case planning.NodePoolResource:
		var pool v1.NodePool
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pool); err != nil {
			return fmt.Errorf("NodePool %s: %w", u.GetName(), err)
		}
		pool.SetDefaults()
		return pool.Validate()
	case planning.EC2NodeClassResource:
		var class v1.EC2NodeClass
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &class); err != nil {
			return fmt.Errorf("EC2NodeClass %s: %w", u.GetName(), err)
		}
		class.SetDefaults()
		return class.Validate()
	}
	return fmt.Errorf("unknown resource %s", resource)
}
