package status

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/cloud"
	"github.com/millwright/millwright/activities/kube"
	"github.com/millwright/millwright/activities/planning"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/disruption"
)

// nodeCountDelay gathers the Node events of a pool into one status write:
// the pool's node count and resources are read this long after the first
// event. Written at once, each Node of a scaling pool was a status write per
// worker (407 for 225 Nodes deleted in 150 s, each fanned out to every
// NodePool watcher); the counts are for people and metrics, not for
// decisions (limits are checked against the live Nodes).
const nodeCountDelay = 5 * time.Second

// DefaultResolveInterval is how often an EC2NodeClass is resolved again
// when its spec does not change: subnets, security groups and AMIs change
// in EC2 without Kubernetes seeing it (Karpenter re-resolves as often).
const DefaultResolveInterval = 5 * time.Minute

// resolveTimeout bounds one class's EC2 calls, so a hung endpoint does not
// hold the queue.
const resolveTimeout = time.Minute

// nodePoolIndex indexes Nodes by the NodePool they belong to.
const nodePoolIndex = "status.millwright.dev/nodepool"

// NodeClassResolver resolves an EC2NodeClass's selector terms; the EC2
// provider's *cloud.NodeClassResolver is the one (the resolver launches
// use, so status shows what a launch would get).
type NodeClassResolver interface {
	Resolve(ctx context.Context, nc *apisv1.EC2NodeClass) (*cloud.ResolvedNodeClass, error)
}

// InstanceProfileCollector deletes the managed instance profiles of
// deleted EC2NodeClasses (*cloud.InstanceProfileManager).
type InstanceProfileCollector interface {
	GarbageCollect(ctx context.Context, exists cloud.ClassExists) (deleted, waiting []string, err error)
}

// Options configure the status controllers.
type Options struct {
	// Informers and DynamicInformers are the worker's shared factories:
	// New registers its Node, NodePool and EC2NodeClass informers (and a
	// Node index) on them, so it must be called before they start.
	Informers        informers.SharedInformerFactory
	DynamicInformers dynamicinformer.DynamicSharedInformerFactory
	// Dynamic writes the status subresources.
	Dynamic dynamic.Interface
	// Resolver resolves EC2NodeClasses.
	Resolver NodeClassResolver
	// NodeClaims: the API serves millwright.dev/v1 nodeclaims; a deleted
	// NodePool's NodeClaims are deleted (else only its Nodes are).
	NodeClaims bool
	// InstanceProfiles, when set, removes the managed instance profiles of
	// deleted classes (the EC2 provider's InstanceProfiles).
	InstanceProfiles InstanceProfileCollector
	// ResolveInterval defaults to DefaultResolveInterval.
	ResolveInterval time.Duration
	// Clock stamps condition transitions and drives the queues' delays.
	Clock  clock.WithTicker
	Logger *zap.Logger
}

// Controllers keep NodePool and EC2NodeClass statuses up to date.
type Controllers struct {
	pools   *reconcileLoop
	classes *reconcileLoop
}

// New registers the controllers' informers and event handlers.
func New(opts Options) (*Controllers, error) {
	switch {
	case opts.Informers == nil || opts.DynamicInformers == nil:
		return nil, errors.New("status controllers: informer factories are required")
	case opts.Dynamic == nil:
		return nil, errors.New("status controllers: a dynamic client is required")
	case opts.Resolver == nil:
		return nil, errors.New("status controllers: an EC2NodeClass resolver is required")
	}
	if opts.ResolveInterval <= 0 {
		opts.ResolveInterval = DefaultResolveInterval
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	nodes := opts.Informers.Core().V1().Nodes().Informer()
	pools := opts.DynamicInformers.ForResource(planning.NodePoolResource).Informer()
	classes := opts.DynamicInformers.ForResource(planning.EC2NodeClassResource).Informer()
	if err := nodes.AddIndexers(cache.Indexers{nodePoolIndex: nodePoolOfNode}); err != nil {
		return nil, fmt.Errorf("status controllers: indexing Nodes by NodePool: %w", err)
	}
	var claims cache.SharedIndexInformer
	if opts.NodeClaims {
		claims = opts.DynamicInformers.ForResource(kube.NodeClaimResource).Informer()
		if err := claims.AddIndexers(cache.Indexers{nodeClaimPoolIndex: nodePoolOfClaim}); err != nil {
			return nil, fmt.Errorf("status controllers: indexing NodeClaims by NodePool: %w", err)
		}
	}

	poolController := &nodePoolController{
		nodes: nodes, pools: pools, classes: classes, claims: claims, dynamic: opts.Dynamic,
		client: opts.Dynamic.Resource(planning.NodePoolResource), clock: opts.Clock, logger: opts.Logger.Named("nodepool-status"),
	}
	classController := &nodeClassController{
		classes: classes, resolver: opts.Resolver, profiles: opts.InstanceProfiles, interval: opts.ResolveInterval,
		client: opts.Dynamic.Resource(planning.EC2NodeClassResource), clock: opts.Clock, logger: opts.Logger.Named("ec2nodeclass-status"),
	}
	c := &Controllers{
		pools:   newReconcileLoop("nodepool-status", poolController.reconcile, opts.Clock, poolController.logger),
		classes: newReconcileLoop("ec2nodeclass-status", classController.reconcile, opts.Clock, classController.logger),
	}
	if err := c.watch(nodes, pools, classes); err != nil {
		return nil, fmt.Errorf("status controllers: %w", err)
	}
	if claims == nil {
		return c, nil
	}
	// A deleted pool is looked at again as its NodeClaims go.
	if _, err := claims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if pools, _ := nodePoolOfClaim(obj); len(pools) == 1 {
				c.pools.queue.Add(pools[0])
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("status controllers: %w", err)
	}
	return c, nil
}

// watch maps informer events to the names to reconcile.
func (c *Controllers) watch(nodes, pools, classes cache.SharedIndexInformer) error {
	// A pool is reconciled when it changes (its spec, or its status written
	// by someone else), when a Node joins or leaves it or changes capacity,
	// and when its EC2NodeClass changes.
	enqueuePool := func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			c.pools.queue.Add(u.GetName())
		}
	}
	if _, err := pools.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueuePool,
		UpdateFunc: func(_, obj any) { enqueuePool(obj) },
	}); err != nil {
		return err
	}
	enqueueNodePool := func(obj any) {
		if node, ok := asNode(obj); ok && node.Labels[apisv1.LabelNodePool] != "" {
			c.pools.queue.AddAfter(node.Labels[apisv1.LabelNodePool], nodeCountDelay)
		}
	}
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueNodePool,
		DeleteFunc: enqueueNodePool,
		UpdateFunc: func(old, obj any) {
			// Nodes update often (conditions, heartbeats); only a change of
			// pool or capacity changes a pool's status.
			before, ok1 := asNode(old)
			after, ok2 := asNode(obj)
			if ok1 && ok2 && before.Labels[apisv1.LabelNodePool] == after.Labels[apisv1.LabelNodePool] &&
				equalResources(before.Status.Capacity, after.Status.Capacity) {
				return
			}
			enqueueNodePool(old)
			enqueueNodePool(obj)
		},
	}); err != nil {
		return err
	}
	poolsOfClass := func(obj any) {
		className := objectName(obj)
		for _, item := range pools.GetStore().List() {
			u, ok := item.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			if ref, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "nodeClassRef", "name"); ref == className {
				c.pools.queue.Add(u.GetName())
			}
		}
	}
	// A class is resolved when it appears and when its spec changes (its
	// generation); status-only updates, including this package's own, do
	// not resolve it again. The periodic re-resolution is the reconcile's.
	enqueueClass := func(obj any) { c.classes.queue.Add(objectName(obj)) }
	_, err := classes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			enqueueClass(obj)
			poolsOfClass(obj)
		},
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*unstructured.Unstructured)
			n, ok2 := obj.(*unstructured.Unstructured)
			if !ok1 || !ok2 || o.GetGeneration() != n.GetGeneration() {
				enqueueClass(obj)
			}
			poolsOfClass(obj)
		},
		DeleteFunc: func(obj any) {
			// A deleted class's instance profile is collected.
			enqueueClass(obj)
			poolsOfClass(obj)
		},
	})
	return err
}

// Run reconciles until ctx ends.
func (c *Controllers) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, loop := range []*reconcileLoop{c.pools, c.classes} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop.run(ctx)
		}()
	}
	wg.Wait()
}

// reconcileLoop is one controller's queue: one reconcile at a time per
// name, failures retried with the queue's rate limit, and a reconcile may
// ask to be run again after a delay.
type reconcileLoop struct {
	queue     workqueue.TypedRateLimitingInterface[string]
	reconcile func(ctx context.Context, name string) (requeueAfter time.Duration, err error)
	logger    *zap.Logger
}

func newReconcileLoop(name string, reconcile func(context.Context, string) (time.Duration, error), clk clock.WithTicker, logger *zap.Logger) *reconcileLoop {
	return &reconcileLoop{
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name, Clock: clk}),
		reconcile: reconcile,
		logger:    logger,
	}
}

func (l *reconcileLoop) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		l.queue.ShutDown()
	}()
	for {
		name, shutdown := l.queue.Get()
		if shutdown {
			return
		}
		requeueAfter, err := l.reconcile(ctx, name)
		switch {
		case err != nil:
			// A conflict means another writer (a second worker) got there
			// first: expected, and the next reconcile reads its write.
			if apierrors.IsConflict(err) {
				l.logger.Debug("status write conflicted; will retry", zap.String("name", name), zap.Error(err))
			} else if ctx.Err() == nil {
				l.logger.Warn("updating status failed; will retry", zap.String("name", name), zap.Error(err))
			}
			l.queue.AddRateLimited(name)
		default:
			l.queue.Forget(name)
			if requeueAfter > 0 {
				l.queue.AddAfter(name, requeueAfter)
			}
		}
		l.queue.Done(name)
	}
}

type nodePoolController struct {
	nodes, pools, classes, claims cache.SharedIndexInformer
	client                        dynamic.ResourceInterface
	// dynamic deletes a deleted pool's NodeClaims and Nodes.
	dynamic dynamic.Interface
	clock   clock.PassiveClock
	logger  *zap.Logger
}

func (c *nodePoolController) reconcile(ctx context.Context, name string) (time.Duration, error) {
	obj, exists, err := c.pools.GetIndexer().GetByKey(name)
	if err != nil || !exists {
		return 0, err
	}
	u := obj.(*unstructured.Unstructured)
	if u.GetDeletionTimestamp() != nil {
		return c.terminate(ctx, u)
	}
	if err := c.ensureFinalizer(ctx, u); err != nil {
		return 0, err
	}
	var pool apisv1.NodePool
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pool); err != nil {
		// The CRD's schema makes this all but impossible; without the
		// decoded conditions a status would lose its transition times.
		c.logger.Error("NodePool cannot be decoded; its status is not updated", zap.String("name", name), zap.Error(err))
		return 0, nil
	}
	pool.SetDefaults()
	validationErr := pool.Validate()
	nodes, err := c.nodesOf(name)
	if err != nil {
		return 0, err
	}
	class, err := c.nodeClass(pool.NodeClassName())
	if err != nil {
		return 0, err
	}
	status := NodePoolStatus(&pool, validationErr, nodes, class, c.clock.Now())
	object, err := nodePoolStatusObject(status)
	if err != nil {
		return 0, err
	}
	wrote, err := writeStatus(ctx, c.client, u, object)
	if wrote {
		logWrite(c.logger, "NodePool", name, pool.Status.Conditions, status.Conditions, zap.Int64("nodes", status.Nodes))
	}
	if err != nil {
		return 0, err
	}
	_, err = writeAnnotations(ctx, c.client, u, disruption.HashAnnotations(&pool, nil))
	return 0, err
}

func (c *nodePoolController) nodesOf(pool string) ([]*corev1.Node, error) {
	items, err := c.nodes.GetIndexer().ByIndex(nodePoolIndex, pool)
	if err != nil {
		return nil, err
	}
	nodes := make([]*corev1.Node, 0, len(items))
	for _, item := range items {
		if node, ok := item.(*corev1.Node); ok {
			nodes = append(nodes, node)
		}
	}
	return nodes, nil
}

// nodeClass is the EC2NodeClass called name from the cache, nil when it
// does not exist.
func (c *nodePoolController) nodeClass(name string) (*apisv1.EC2NodeClass, error) {
	if name == "" {
		return nil, nil
	}
	obj, exists, err := c.classes.GetIndexer().GetByKey(name)
	if err != nil || !exists {
		return nil, err
	}
	u := obj.(*unstructured.Unstructured)
	var class apisv1.EC2NodeClass
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &class); err != nil {
		// Reported on the class itself; here it only is not ready.
		return &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Generation: u.GetGeneration()}}, nil
	}
	return &class, nil
}

type nodeClassController struct {
	classes  cache.SharedIndexInformer
	resolver NodeClassResolver
	profiles InstanceProfileCollector
	interval time.Duration
	client   dynamic.ResourceInterface
	clock    clock.PassiveClock
	logger   *zap.Logger
}

func (c *nodeClassController) reconcile(ctx context.Context, name string) (time.Duration, error) {
	obj, exists, err := c.classes.GetIndexer().GetByKey(name)
	if err != nil {
		return 0, err
	}
	if !exists {
		return c.collectInstanceProfiles(ctx, name)
	}
	u := obj.(*unstructured.Unstructured)
	var class apisv1.EC2NodeClass
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &class); err != nil {
		c.logger.Error("EC2NodeClass cannot be decoded; its status is not updated", zap.String("name", name), zap.Error(err))
		return c.interval, nil
	}
	class.SetDefaults()
	var resolution Resolution
	if resolution.Invalid = class.Validate(); resolution.Invalid == nil {
		resolveCtx, cancel := context.WithTimeout(ctx, resolveTimeout)
		resolved, err := c.resolver.Resolve(resolveCtx, &class)
		cancel()
		switch {
		case err == nil:
			resolution.Resolved = resolved
		case activities.IsInvalidNodeClass(err):
			resolution.Unresolved = err
		default:
			// EC2 unreachable or throttling: what the class resolves to is
			// not known, so the last status stands and the queue retries.
			return 0, fmt.Errorf("resolving EC2NodeClass %q: %w", name, err)
		}
	}
	status := NodeClassStatus(&class, resolution, c.clock.Now())
	object, err := toObject(status)
	if err != nil {
		return 0, err
	}
	wrote, err := writeStatus(ctx, c.client, u, object)
	if wrote {
		logWrite(c.logger, "EC2NodeClass", name, class.Status.Conditions, status.Conditions,
			zap.Int("subnets", len(status.Subnets)), zap.Int("securityGroups", len(status.SecurityGroups)), zap.Int("amis", len(status.AMIs)))
	}
	if err != nil {
		return 0, err
	}
	if _, err := writeAnnotations(ctx, c.client, u, disruption.HashAnnotations(nil, &class)); err != nil {
		return 0, err
	}
	return c.interval, nil
}

// collectInstanceProfiles removes the managed instance profiles of deleted
// classes once their instances are gone; while the deleted class's
// instances remain it looks again after the resolve interval.
func (c *nodeClassController) collectInstanceProfiles(ctx context.Context, deletedClass string) (time.Duration, error) {
	if c.profiles == nil {
		return 0, nil
	}
	exists := func(_ context.Context, name string) (bool, error) {
		_, ok, err := c.classes.GetIndexer().GetByKey(name)
		return ok, err
	}
	deleted, waiting, err := c.profiles.GarbageCollect(ctx, exists)
	for _, name := range deleted {
		c.logger.Info("Deleted the instance profile of a deleted EC2NodeClass", zap.String("instanceProfile", name))
	}
	if err != nil {
		return 0, fmt.Errorf("collecting instance profiles: %w", err)
	}
	for _, class := range waiting {
		if class == deletedClass {
			return c.interval, nil
		}
	}
	return 0, nil
}

// logWrite logs a status write: at Info when Ready changed (someone may be
// waiting for it), at Debug otherwise.
func logWrite(logger *zap.Logger, kind, name string, before, after []metav1.Condition, fields ...zap.Field) {
	was := meta.FindStatusCondition(before, apisv1.ConditionTypeReady)
	ready := meta.FindStatusCondition(after, apisv1.ConditionTypeReady)
	fields = append(fields, zap.String("name", name))
	if ready != nil {
		fields = append(fields, zap.String("ready", string(ready.Status)), zap.String("reason", ready.Reason), zap.String("message", ready.Message))
	}
	if was == nil || ready == nil || was.Status != ready.Status || was.Reason != ready.Reason {
		logger.Info(kind+" status updated", fields...)
		return
	}
	logger.Debug(kind+" status updated", fields...)
}
