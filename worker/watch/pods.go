package watch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/planning"
	"github.com/millwright/millwright/workflows"
)

// podsByNodeIndex indexes pods by spec.nodeName, so a node's pod count is a
// lookup, not a scan.
const podsByNodeIndex = "millwright.dev/pods-by-node"

// maxPodKeysPerSignal bounds one podsPending signal's payload.
const maxPodKeysPerSignal = 1000

// pendingSignalInterval paces podsPending signals: a signal goes at once
// when none went for this long, else when the interval is up, with every
// key queued meanwhile. Unpaced, pods marked unschedulable one by one went
// as one signal each, about 50 a second per worker; after both workers
// restarted in the chaos suite, over 100 were buffered while the
// provisioner's task was lost with its worker, and the server failed that
// task (its buffered-events limit). The provisioner's idle window is a
// second, so a fifth of one delays no batch much.
const pendingSignalInterval = 200 * time.Millisecond

// nodeCountDelay gathers a node's pod events into one pods-changed signal:
// the count is read and sent this long after the first event, so the 50
// pods bound to a new node in a second are one signal (and one workflow
// task), not 50. Emptiness waits consolidateAfter; a second is nothing.
const nodeCountDelay = time.Second

// nodeCountRefresh is the least time between two pods-changed signals to a
// node whose count changes without reaching or leaving zero. Only the
// crossings decide anything (emptiness counts from the signal that emptied
// the node; the disruption workflow reads pods itself); other counts are
// for `starter describe`. Sent after every second of change, a 5,000-pod
// deletion became 13 signals per node, two thirds of the node workflows'
// tasks while the cluster scaled to zero.
const nodeCountRefresh = 30 * time.Second

// nodeCountWorkers send pods-changed signals to different nodes' workflows
// at once; one node's are never sent concurrently (the queue's guarantee).
const nodeCountWorkers = 4

// PodWatcher feeds the provisioner with provisionable pods and each node
// workflow with its node's pod count.
type PodWatcher struct {
	provisioner Provisioner
	signaler    Signaler
	cluster     string
	clock       clock.PassiveClock
	logger      *zap.Logger

	pods  cache.SharedIndexInformer
	nodes cache.SharedIndexInformer
	// pending holds pod keys to report to the provisioner; nodeCounts holds
	// node names whose pod count to report. Both deduplicate by key and
	// retry with rate-limited backoff.
	pending    workqueue.TypedRateLimitingInterface[string]
	nodeCounts workqueue.TypedRateLimitingInterface[string]
	// reported remembers the last count sent per node and when, so a pod's
	// status updates do not each become a signal.
	reportedMu sync.Mutex
	reported   map[string]reportedCount
	// Disruption, when set, is poked when a bound pod goes away: its node
	// may now be empty or underutilized.
	Disruption *Trigger
}

// NewPodWatcher registers its handlers on the factory's pod and node
// informers; start the factory, then Run.
func NewPodWatcher(factory informers.SharedInformerFactory, provisioner Provisioner, c clock.PassiveClock, logger *zap.Logger) (*PodWatcher, error) {
	// The queues' delays (a node's pod count, the end of a pod's
	// scheduler grace) run on c when c can tick (a fake clock in tests).
	queueClock, _ := c.(clock.WithTicker)
	w := &PodWatcher{
		provisioner: provisioner,
		signaler:    provisioner.Signaler,
		cluster:     provisioner.Cluster,
		clock:       c,
		logger:      logger,
		pods:        factory.Core().V1().Pods().Informer(),
		nodes:       factory.Core().V1().Nodes().Informer(),
		pending: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "provisionable-pods", Clock: queueClock}),
		nodeCounts: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "node-pod-counts", Clock: queueClock}),
		reported: map[string]reportedCount{},
	}
	if err := w.pods.AddIndexers(cache.Indexers{podsByNodeIndex: func(obj any) ([]string, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return nil, nil
		}
		return []string{pod.Spec.NodeName}, nil
	}}); err != nil {
		return nil, fmt.Errorf("pod watcher: %w", err)
	}
	_, err := w.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.onPod(nil, obj) },
		UpdateFunc: func(old, obj any) { w.onPod(old, obj) },
		DeleteFunc: func(obj any) {
			w.onPod(nil, obj)
			w.Disruption.Poke("pod deleted")
		},
	})
	if err != nil {
		return nil, fmt.Errorf("pod watcher: %w", err)
	}
	return w, nil
}

func (w *PodWatcher) onPod(old, obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := w.clock.Now()
	if planning.IsProvisionable(pod, now) {
		w.pending.Add(cache.MetaObjectToName(pod).String())
	} else if at, ok := planning.OverlookedAt(pod); ok {
		// No event marks the end of the scheduler's grace: look again then.
		w.pending.AddAfter(cache.MetaObjectToName(pod).String(), at.Sub(now))
	}
	if pod.Spec.NodeName != "" {
		w.nodeCounts.AddAfter(pod.Spec.NodeName, nodeCountDelay)
	}
	if oldPod, ok := old.(*corev1.Pod); ok && oldPod.Spec.NodeName != "" && oldPod.Spec.NodeName != pod.Spec.NodeName {
		w.nodeCounts.AddAfter(oldPod.Spec.NodeName, nodeCountDelay)
	}
}

// Run processes the queues until ctx ends.
func (w *PodWatcher) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		w.pending.ShutDown()
		w.nodeCounts.ShutDown()
	}()
	go w.runPending(ctx)
	var workers sync.WaitGroup
	for range nodeCountWorkers {
		workers.Go(func() { w.runNodeCounts(ctx) })
	}
	workers.Wait()
}

// runPending sends provisionable pods to the provisioner, many keys per
// signal: it takes one key (blocking), then whatever else is queued.
func (w *PodWatcher) runPending(ctx context.Context) {
	var last time.Time
	for {
		first, shutdown := w.pending.Get()
		if shutdown {
			return
		}
		if !last.IsZero() {
			w.sleep(ctx, pendingSignalInterval-w.clock.Since(last))
		}
		last = w.clock.Now()
		keys := []string{first}
		for w.pending.Len() > 0 && len(keys) < maxPodKeysPerSignal {
			key, shutdown := w.pending.Get()
			if shutdown {
				break
			}
			keys = append(keys, key)
		}
		keys = w.stillProvisionable(keys)
		if len(keys) == 0 {
			continue
		}
		slices.Sort(keys)
		err := w.provisioner.Signal(ctx, workflows.SignalPodsPending, workflows.PodsPending{PodKeys: keys})
		for _, key := range keys {
			if err != nil {
				w.pending.AddRateLimited(key)
			} else {
				w.pending.Forget(key)
			}
			w.pending.Done(key)
		}
		if err != nil {
			w.logger.Warn("signalling the provisioner failed; will retry", zap.Int("pods", len(keys)), zap.Error(err))
		} else {
			w.logger.Debug("signalled provisionable pods", zap.Int("pods", len(keys)))
		}
	}
}

// stillProvisionable drops, and marks done, the keys of pods that are no
// longer provisionable: gone, or bound since they were queued (a pod queued
// for the end of the scheduler's grace is often scheduled before it).
func (w *PodWatcher) stillProvisionable(keys []string) []string {
	now := w.clock.Now()
	kept := keys[:0]
	for _, key := range keys {
		obj, exists, err := w.pods.GetIndexer().GetByKey(key)
		if err == nil && (!exists || !planning.IsProvisionable(obj.(*corev1.Pod), now)) {
			w.pending.Forget(key)
			w.pending.Done(key)
			continue
		}
		kept = append(kept, key)
	}
	return kept
}

// sleep waits d (nothing when d ≤ 0) on the watcher's clock when it can
// tick (a fake clock in tests), or until ctx ends.
func (w *PodWatcher) sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	ticking, ok := w.clock.(clock.WithTicker)
	if !ok {
		ticking = clock.RealClock{}
	}
	select {
	case <-ctx.Done():
	case <-ticking.After(d):
	}
}

func (w *PodWatcher) runNodeCounts(ctx context.Context) {
	for {
		nodeName, shutdown := w.nodeCounts.Get()
		if shutdown {
			return
		}
		if err := w.reportNodeCount(ctx, nodeName); err != nil {
			w.logger.Warn("reporting a node's pod count failed; will retry", zap.String("node", nodeName), zap.Error(err))
			w.nodeCounts.AddRateLimited(nodeName)
		} else {
			w.nodeCounts.Forget(nodeName)
		}
		w.nodeCounts.Done(nodeName)
	}
}

func (w *PodWatcher) reportNodeCount(ctx context.Context, nodeName string) error {
	obj, exists, err := w.nodes.GetIndexer().GetByKey(nodeName)
	if err != nil || !exists {
		w.reportedMu.Lock()
		delete(w.reported, nodeName)
		w.reportedMu.Unlock()
		return err
	}
	node := obj.(*corev1.Node)
	nodeClaim := node.Labels[activities.NodeClaimLabel]
	if nodeClaim == "" {
		return nil // not a Millwright node
	}
	pods, err := w.pods.GetIndexer().ByIndex(podsByNodeIndex, nodeName)
	if err != nil {
		return err
	}
	count := 0
	for _, obj := range pods {
		if CountsTowardsEmptiness(obj.(*corev1.Pod)) {
			count++
		}
	}
	w.reportedMu.Lock()
	last, ok := w.reported[nodeName]
	w.reportedMu.Unlock()
	if ok && last.count == count {
		return nil
	}
	now := w.clock.Now()
	if ok && last.count > 0 && count > 0 {
		if wait := nodeCountRefresh - now.Sub(last.at); wait > 0 {
			// A crossing meanwhile comes sooner: the queue keeps the
			// earlier of two delays for a key.
			w.nodeCounts.AddAfter(nodeName, wait)
			return nil
		}
	}
	err = signalNode(ctx, w.signaler, w.cluster, nodeClaim, workflows.SignalPodsChanged,
		workflows.PodsChanged{NonDaemonSetPods: count, ObservedAt: now.UTC().Truncate(time.Millisecond)})
	if err != nil {
		return err
	}
	w.reportedMu.Lock()
	w.reported[nodeName] = reportedCount{count: count, at: now}
	w.reportedMu.Unlock()
	return nil
}

// reportedCount is the last pod count signalled for a node, and when.
type reportedCount struct {
	count int
	at    time.Time
}

// CountsTowardsEmptiness tells whether a pod keeps its node from being empty:
// a running or pending workload pod. DaemonSet pods run on every node and
// terminal or terminating pods are leaving.
func CountsTowardsEmptiness(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && !isTerminal(pod) && !IsDaemonSetPod(pod) && !isMirrorPod(pod)
}

// IsDaemonSetPod tells whether a DaemonSet controls the pod.
func IsDaemonSetPod(pod *corev1.Pod) bool {
	for _, owner := range pod.OwnerReferences {
		if owner.Controller != nil && *owner.Controller && owner.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

func isMirrorPod(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}

func isTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
