package planning

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// PodEventSource is a ClusterState that also knows when each Node last
// gained or lost a pod (Karpenter's lastPodEventTime), or else when it was
// initialized: consolidateAfter counts from it. A Node whose pods all left
// shows no pod to date the departure from, so without a source a node
// emptied a second ago would look empty since its creation. Nor is a Node's
// creation the start of a node that never had a pod: its instance creates
// the Node when it boots, and a node workflow that registers it late (its
// worker was killed) finds it Ready since then; in the chaos suite such a
// node was consolidated as empty 0.6 s after it was initialized, before
// kube-scheduler had looked again at the pods it had room for.
type PodEventSource interface {
	// LastPodEvent is the last time a pod was bound to, finished on or was
	// deleted from the Node named node, or when the source started watching
	// if it saw none (so after a restart a node waits consolidateAfter
	// again rather than too little).
	LastPodEvent(node string) time.Time
}

// podEvents records pod events per Node name from the pod informer's
// notifications. It lives in memory, as Karpenter's cluster state does: a
// restarted worker starts again from its own start time.
type podEvents struct {
	clock clock.PassiveClock
	since time.Time

	mu   sync.Mutex
	last map[string]time.Time
}

func newPodEvents(clk clock.PassiveClock) *podEvents {
	return &podEvents{clock: clk, since: clk.Now(), last: map[string]time.Time{}}
}

// LastPodEvent: see PodEventSource.
func (e *podEvents) LastPodEvent(node string) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	if t, ok := e.last[node]; ok {
		return t
	}
	return e.since
}

func (e *podEvents) record(node string) {
	if node == "" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.last[node] = e.clock.Now()
}

func (e *podEvents) forget(node string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.last, node)
}

// podHandler feeds e from the pod informer: a pod bound to a Node, finished
// there, or deleted from it is an event of that Node. The initial list is
// not: those pods arrived before the source started.
func (e *podEvents) podHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if pod, ok := obj.(*corev1.Pod); ok && !initial {
				e.record(pod.Spec.NodeName)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			before, ok1 := oldObj.(*corev1.Pod)
			after, ok2 := newObj.(*corev1.Pod)
			if !ok1 || !ok2 {
				return
			}
			switch {
			case before.Spec.NodeName != after.Spec.NodeName:
				e.record(after.Spec.NodeName)
			case !isTerminal(before) && isTerminal(after),
				before.DeletionTimestamp == nil && after.DeletionTimestamp != nil:
				e.record(after.Spec.NodeName)
			}
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				e.record(pod.Spec.NodeName)
			}
		},
	}
}

// nodeHandler dates a Node's initialization (Millwright's initialized
// label appearing) as an event, as Karpenter counts consolidateAfter from
// a NodeClaim's initialization before its first pod event, and forgets a
// deleted Node's events.
func (e *podEvents) nodeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			before, ok1 := oldObj.(*corev1.Node)
			after, ok2 := newObj.(*corev1.Node)
			if ok1 && ok2 && before.Labels[apisv1.LabelNodeInitialized] != "true" && after.Labels[apisv1.LabelNodeInitialized] == "true" {
				e.record(after.Name)
			}
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if node, ok := obj.(*corev1.Node); ok {
				e.forget(node.Name)
			}
		},
	}
}
