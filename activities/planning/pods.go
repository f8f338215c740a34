package planning

import (
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

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

// IsProvisionable reports whether a pod is one Millwright provisions for:
// the scheduler found no node for it (PodScheduled=False, reason
// Unschedulable), it is not bound, not owned by a DaemonSet (those follow
// nodes, they do not cause them), not a mirror pod and not terminating. The
// worker's pod watcher uses the same rule to decide what to signal.
func IsProvisionable(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || isTerminal(pod) || isDaemonSetPod(pod) || isMirrorPod(pod) {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// isReschedulable reports a pod on a disrupted node that must find room
// elsewhere: one that will be evicted (not a DaemonSet or mirror pod) and is
// not already leaving.
func isReschedulable(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && !isTerminal(pod) && !isDaemonSetPod(pod) && !isMirrorPod(pod)
}

// chooseBatch picks the pods this pass plans: the requested provisionable
// pods (every provisionable pod for a resync) and the pods of disrupted
// nodes, minus those owned: by an in-flight node, or by the Node they are
// nominated to (see useNodes).
func (w *world) chooseBatch(req activities.PlanRequest, pods []*corev1.Pod, byKey map[string]*corev1.Pod,
	bound map[string][]*corev1.Pod, disrupted map[string]bool, owned map[string]bool) {
	chosen := map[string]*corev1.Pod{}
	if req.AllPending {
		for _, pod := range pods {
			if IsProvisionable(pod) {
				chosen[podKey(pod)] = pod
			}
		}
	}
	for _, key := range req.PodKeys {
		if pod, ok := byKey[key]; ok && IsProvisionable(pod) {
			chosen[key] = pod
		}
	}
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
