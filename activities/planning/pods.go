package planning

import (
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/millwright/millwright/activities"
)

// podKey is namespace/name, as signals and launch specs name pods.
func podKey(pod *corev1.Pod) string {
	ns := pod.Namespace
	if ns == "" {
		ns = "default"
	}
	return ns + "/" + pod.Name
}

// isTerminal reports a pod that no longer occupies its node.
func isTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func isDaemonSetPod(pod *corev1.Pod) bool {
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "DaemonSet" && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}

func isMirrorPod(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}

// SchedulerGrace is how long a pod may wait for kube-scheduler's first look
// before Millwright plans for it anyway. Karpenter provisions only for pods
// the scheduler marked Unschedulable, and so did Millwright; but a scheduler
// handed a burst looks at each pod in turn, each failure a synchronous
// status write (about 30 a second on a loaded 2-core control plane), so the
// pods of a 1,000-pod burst were marked up to 34 s after their creation, the
// 5,000th of a larger one after minutes, and each batch planned only what
// had been marked by then: pod → CreateFleet p99 38–52 s and 58–85 nodes for
// Karpenter's "basic" scenario, where 16 do. A healthy scheduler looks at a
// new pod within milliseconds, so a pod it has not looked at for two seconds
// (creation times are whole seconds: one to two seconds in fact) is in its
// backlog; planned then, a burst reaches the planner within seconds (basic:
// 16–48 nodes and pod → CreateFleet p99 7.9–15.2 s over five runs, against
// 58 nodes and 37.9 s the same day with a minute). The planner places such
// pods on existing and in-flight room first, as for any pod, so a pod the
// scheduler would bind there gets no node. The grace was a minute before 5
// December 2026 because 5 s, 15 s and 30 s had given 47 to 110 nodes in
// basic runs (likely because the pods the scheduler marked before the grace
// and those planned at its end reached the planner in different batches);
// two seconds is shorter than the scheduler's first marks in a burst.
const SchedulerGrace = 2 * time.Second

// IsProvisionable reports whether a pod is one Millwright provisions for at
// now: an unbound pod (see isUnbound) that the scheduler found no node for
// (PodScheduled=False, reason Unschedulable) or that kube-scheduler has not
// looked at for SchedulerGrace (see OverlookedAt). The worker's pod watcher
// uses the same rule to decide what to signal.
func IsProvisionable(pod *corev1.Pod, now time.Time) bool {
	if failedToSchedule(pod) {
		return isUnbound(pod)
	}
	at, ok := OverlookedAt(pod)
	return ok && !now.Before(at)
}

// isUnbound reports a pod waiting for a node: not bound, not owned by a
// DaemonSet (those follow nodes, they do not cause them), not a mirror pod,
// not terminating and not finished.
func isUnbound(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && !isTerminal(pod) && !isDaemonSetPod(pod) && !isMirrorPod(pod)
}

// failedToSchedule reports the scheduler's verdict that no node fits.
func failedToSchedule(pod *corev1.Pod) bool {
	condition, ok := podScheduled(pod)
	return ok && condition.Status == corev1.ConditionFalse && condition.Reason == corev1.PodReasonUnschedulable
}

// OverlookedAt is when an unbound pod of the default scheduler that has no
// PodScheduled condition becomes provisionable (SchedulerGrace after its
// creation), and false for any other pod; the pod watcher looks at the pod
// again then. Gated pods (the API server marks them SchedulingGated at
// creation) and pods nominated to a node are not overlooked; pods of other
// schedulers wait for their scheduler's verdict, since Millwright cannot
// know how far behind it is.
func OverlookedAt(pod *corev1.Pod) (time.Time, bool) {
	if !awaitsFirstLook(pod) || pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != corev1.DefaultSchedulerName {
		return time.Time{}, false
	}
	return pod.CreationTimestamp.Add(SchedulerGrace), true
}

// awaitsNode reports an unbound pod that a node may be on its way for: not
// gated, and either not looked at yet or found no node. A pod nominated to a
// Node, or planned for an in-flight one, holds its room there while it
// awaits it, whether or not the scheduler has looked at it yet.
func awaitsNode(pod *corev1.Pod) bool {
	if !isUnbound(pod) || len(pod.Spec.SchedulingGates) > 0 {
		return false
	}
	_, looked := podScheduled(pod)
	return !looked || failedToSchedule(pod)
}

func podScheduled(pod *corev1.Pod) (corev1.PodCondition, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c, true
		}
	}
	return corev1.PodCondition{}, false
}

// isReschedulable reports a pod on a disrupted node that must find room
// elsewhere: one that will be evicted (not a DaemonSet or mirror pod) and is
// not already leaving.
func isReschedulable(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && !isTerminal(pod) && !isDaemonSetPod(pod) && !isMirrorPod(pod)
}

// addWaitingSiblings adds to chosen the siblings of its pods (the same
// controller, such as a ReplicaSet) that are provisionable too, or that
// kube-scheduler has not looked at yet (see awaitsFirstLook). A controller
// creates its pods in quick waves and the scheduler marks them one by one,
// so a scaled Deployment's pods could reach the provisioner over more
// than its 1 s idle window and be planned in two batches, on more and
// smaller nodes than one plan of them all (the e2e walkthrough's ten pods
// on a loaded machine: m5.2xlarge and three m5.large, where two m5.2xlarge
// do). A sibling has its pod's spec, so the scheduler's verdict on the one
// is its verdict on the other; the planner still places each on existing
// and in-flight room first.
func addWaitingSiblings(chosen map[string]*corev1.Pod, pods []*corev1.Pod, now time.Time) {
	owners := map[types.UID]bool{}
	for _, pod := range chosen {
		if owner := metav1.GetControllerOf(pod); owner != nil {
			owners[owner.UID] = true
		}
	}
	if len(owners) == 0 {
		return
	}
	for _, pod := range pods {
		owner := metav1.GetControllerOf(pod)
		if owner == nil || !owners[owner.UID] {
			continue
		}
		if IsProvisionable(pod, now) || awaitsFirstLook(pod) {
			chosen[podKey(pod)] = pod
		}
	}
}

// awaitsFirstLook reports an unbound pod its scheduler has not looked at
// yet: no PodScheduled condition, not gated and not nominated to a node.
// OverlookedAt adds the default scheduler; a sibling of a pod its scheduler
// already found no node for (see addWaitingSiblings) may have any.
func awaitsFirstLook(pod *corev1.Pod) bool {
	_, looked := podScheduled(pod)
	return !looked && isUnbound(pod) && len(pod.Spec.SchedulingGates) == 0 && pod.Status.NominatedNodeName == ""
}

// chooseBatch picks the pods this pass plans: the requested provisionable
// pods (every provisionable pod for a resync) with their waiting siblings
// (see addWaitingSiblings) and the pods of disrupted nodes, minus those
// owned: by an in-flight node, or by the Node they are nominated to (see
// useNodes).
func (w *world) chooseBatch(req activities.PlanRequest, pods []*corev1.Pod, byKey map[string]*corev1.Pod,
	bound map[string][]*corev1.Pod, disrupted map[string]bool, owned map[string]bool) {
	chosen := map[string]*corev1.Pod{}
	if req.AllPending {
		for _, pod := range pods {
			if IsProvisionable(pod, w.now) {
				chosen[podKey(pod)] = pod
			}
		}
	}
	for _, key := range req.PodKeys {
		if pod, ok := byKey[key]; ok && IsProvisionable(pod, w.now) {
			chosen[key] = pod
		}
	}
	addWaitingSiblings(chosen, pods, w.now)
	for node := range disrupted {
		for _, pod := range bound[node] {
			if isReschedulable(pod) {
				chosen[podKey(pod)] = pod
			}
		}
	}
	keys := make([]string, 0, len(chosen))
	for key := range chosen {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if owned[key] {
			w.batchInFlight = append(w.batchInFlight, key)
			continue
		}
		w.batch = append(w.batch, chosen[key])
	}
	slices.Sort(w.batchInFlight)
}
