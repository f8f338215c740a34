package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/millwright/millwright/activities"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// The priority classes Kubernetes reserves for pods a node or cluster cannot
// run without; they are drained last.
const (
	systemClusterCritical = "system-cluster-critical"
	systemNodeCritical    = "system-node-critical"
)

// stuckTerminatingAfter is how long past its deletion deadline a terminating
// pod may stay before it stops blocking a drain: its kubelet is gone (the
// instance is shutting down) and nothing will ever finish deleting it.
const stuckTerminatingAfter = time.Minute

// podsOnNode lists the pods bound to node from the API server, a consistent
// read: a drain must not miss a pod bound a moment ago. spec.nodeName is a
// field selector the API server's watch cache indexes, so this reads one
// node's pods, not the cluster's.
func (a *Activities) podsOnNode(ctx context.Context, node string) ([]corev1.Pod, error) {
	return a.listPodsOnNode(ctx, node, "")
}

// recentPodsOnNode is podsOnNode served from the API server's watch cache
// as it stands (resourceVersion "0"), without waiting for it to catch up
// with etcd: for a count that later pod events correct. At 5,000 pods the
// consistent read of every newly initialized node waited on a watch cache
// busy with the burst's writes and timed out by the hundred ("the server
// was unable to return a response in the time allotted"), each retried a
// minute later.
func (a *Activities) recentPodsOnNode(ctx context.Context, node string) ([]corev1.Pod, error) {
	return a.listPodsOnNode(ctx, node, "0")
}

func (a *Activities) listPodsOnNode(ctx context.Context, node, resourceVersion string) ([]corev1.Pod, error) {
	list, err := a.clientset.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("spec.nodeName", node).String(),
		ResourceVersion: resourceVersion,
	})
	if err != nil {
		return nil, fmt.Errorf("list pods on node %s: %w", node, err)
	}
	return list.Items, nil
}

func podKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// isMirrorPod: a static pod's API mirror. Deleting it does nothing (the
// kubelet owns it from a manifest file), so drains skip it.
func isMirrorPod(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}

// isTerminal: the pod's containers are done and will not restart.
func isTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func isDaemonSetPod(pod *corev1.Pod) bool {
	owner := metav1.GetControllerOf(pod)
	return owner != nil && owner.Kind == "DaemonSet"
}

func isCritical(pod *corev1.Pod) bool {
	return pod.Spec.PriorityClassName == systemClusterCritical || pod.Spec.PriorityClassName == systemNodeCritical
}

// doNotDisrupt names the annotation protecting pod from a voluntary
// disruption at now (millwright.dev/ or karpenter.sh/do-not-disrupt, "true"
// or a duration since the pod started), or "" when none does.
func doNotDisrupt(pod *corev1.Pod, now time.Time) string {
	start := pod.CreationTimestamp.Time
	if pod.Status.StartTime != nil {
		start = pod.Status.StartTime.Time
	}
	key, _, _ := apisv1.DoNotDisrupt(pod.Annotations, start, now)
	return key
}

// disruptedTaint is what Drain puts on the node.
var disruptedTaint = corev1.Taint{Key: activities.DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule}

var candidateTaint = corev1.Taint{Key: activities.CandidateTaintKey, Effect: corev1.TaintEffectPreferNoSchedule}

// toleratesDisruption: a pod that tolerates the disrupted taint would be
// scheduled right back onto the draining node (DaemonSets with a blanket
// toleration do this), so evicting it cannot make progress; it ends with the
// node.
func toleratesDisruption(pod *corev1.Pod) bool {
	return corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, &disruptedTaint, false)
}

// isStuckTerminating: deleted, and its deletion deadline passed long ago.
func isStuckTerminating(pod *corev1.Pod, now time.Time) bool {
	return pod.DeletionTimestamp != nil && now.Sub(pod.DeletionTimestamp.Time) > stuckTerminatingAfter
}

// countWorkloadPods counts the pods that make a node non-empty: not from a
// DaemonSet, not mirror pods (node infrastructure either way) and not
// terminal.
func countWorkloadPods(pods []corev1.Pod) int {
	count := 0
	for i := range pods {
		pod := &pods[i]
		if isDaemonSetPod(pod) || isMirrorPod(pod) || isTerminal(pod) {
			continue
		}
		count++
	}
	return count
}

// podGracePeriod is the pod's own termination grace period (the API server
// defaults it to 30s, so nil only appears in hand-built objects).
func podGracePeriod(pod *corev1.Pod) time.Duration {
	if pod.Spec.TerminationGracePeriodSeconds == nil {
		return corev1.DefaultTerminationGracePeriodSeconds * time.Second
	}
	return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
}
