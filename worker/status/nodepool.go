package status

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// ResourceNodes is the "nodes" entry of a NodePool's status.resources: the
// pool's node count, as Karpenter reports it (and as spec.limits.nodes
// bounds it).
const ResourceNodes corev1.ResourceName = "nodes"

// nodeClassRefField is where a NodePool names its EC2NodeClass, for
// messages.
const nodeClassRefField = "spec.template.spec.nodeClassRef.name"

// NodePoolStatus computes a NodePool's status from the Nodes labelled with
// it and the EC2NodeClass it references (nil when that does not exist).
// validationErr is what pool.Validate returned (after SetDefaults). The
// pool's current conditions are the starting point, so an unchanged
// condition keeps its lastTransitionTime.
func NodePoolStatus(pool *apisv1.NodePool, validationErr error, nodes []*corev1.Node, class *apisv1.EC2NodeClass, now time.Time) apisv1.NodePoolStatus {
	out := apisv1.NodePoolStatus{
		Nodes:      int64(len(nodes)),
		Resources:  nodeCapacity(nodes),
		Conditions: append([]metav1.Condition(nil), pool.Status.Conditions...),
	}
	conditions := conditionSetter{conditions: &out.Conditions, generation: pool.Generation, now: now}
	if validationErr != nil {
		conditions.set(apisv1.ConditionTypeValidationSucceeded, metav1.ConditionFalse, ReasonValidationFailed, validationMessage(validationErr))
	} else {
		conditions.setTrue(apisv1.ConditionTypeValidationSucceeded)
	}
	status, reason, message := nodeClassReadiness(pool.NodeClassName(), class)
	if status == metav1.ConditionTrue {
		conditions.setTrue(apisv1.ConditionTypeNodeClassReady)
	} else {
		conditions.set(apisv1.ConditionTypeNodeClassReady, status, reason, message)
	}
	conditions.setReady(apisv1.ConditionTypeValidationSucceeded, apisv1.ConditionTypeNodeClassReady)
	return out
}

// nodeCapacity sums the Nodes' capacity, resource by resource, and adds
// the node count.
func nodeCapacity(nodes []*corev1.Node) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for _, node := range nodes {
		for name, quantity := range node.Status.Capacity {
			total := sum[name]
			total.Add(quantity)
			sum[name] = total
		}
	}
	sum[ResourceNodes] = *resource.NewQuantity(int64(len(nodes)), resource.DecimalSI)
	return sum
}

// nodeClassReadiness is the NodeClassReady condition of a pool that
// references the class called name (class nil: it does not exist).
func nodeClassReadiness(name string, class *apisv1.EC2NodeClass) (metav1.ConditionStatus, string, string) {
	switch {
	case name == "":
		// Validation reports the missing reference itself; say it here too,
		// so this condition is not left True.
		return metav1.ConditionFalse, ReasonNodeClassNotFound, nodeClassRefField + " names no EC2NodeClass"
	case class == nil:
		return metav1.ConditionFalse, ReasonNodeClassNotFound,
			fmt.Sprintf("EC2NodeClass %q (%s) does not exist", name, nodeClassRefField)
	case class.DeletionTimestamp != nil:
		return metav1.ConditionFalse, ReasonNodeClassTerminating, fmt.Sprintf("EC2NodeClass %q is being deleted", name)
	}
	ready := meta.FindStatusCondition(class.Status.Conditions, apisv1.ConditionTypeReady)
	switch {
	case ready == nil || ready.ObservedGeneration != class.Generation:
		// Not resolved yet, or not since its spec last changed.
		return metav1.ConditionUnknown, ReasonAwaitingReconciliation,
			fmt.Sprintf("EC2NodeClass %q has not been resolved since its last change", name)
	case ready.Status == metav1.ConditionTrue:
		return metav1.ConditionTrue, apisv1.ConditionTypeNodeClassReady, ""
	case ready.Status == metav1.ConditionFalse:
		return metav1.ConditionFalse, ReasonNodeClassNotReady,
			fmt.Sprintf("EC2NodeClass %q is not ready (%s): %s", name, ready.Reason, ready.Message)
	default:
		return metav1.ConditionUnknown, ReasonNodeClassNotReady,
			fmt.Sprintf("EC2NodeClass %q readiness is unknown (%s): %s", name, ready.Reason, ready.Message)
	}
}
