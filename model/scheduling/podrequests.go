package scheduling

import (
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// EffectiveRequests returns what a pod occupies on a node, as kube-scheduler
// computes it (k8s.io/component-helpers/resource.PodRequests): the larger of
// the sum of the containers (plus restartable "sidecar" init containers) and
// the largest init container (plus the sidecars started before it), plus
// spec.overhead; pod-level resources win when set. One "pods" slot is added.
func EffectiveRequests(pod *corev1.Pod) (Resources, error) {
	r, err := ResourcesFromList(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	if err != nil {
		return Resources{}, err
	}
	r[IndexPods] = 1
	return r, nil
}
