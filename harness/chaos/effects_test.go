package chaos

import (
	"fmt"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/activities"
	kubeactivities "github.com/millwright/millwright/activities/kube"
)

// node builds a Node for the effect table; options change it.
func node(options ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1.ec2.internal", Annotations: map[string]string{}}}
	for _, o := range options {
		o(n)
	}
	return n
}

func adopted(n *corev1.Node) { n.Finalizers = append(n.Finalizers, activities.TerminationFinalizer) }
func ready(n *corev1.Node) {
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue})
}
func reserved(n *corev1.Node) {
	n.Annotations[kubeactivities.ReservedForDisruptionAnnotation] = "2026-12-02T00:00:00Z"
}
func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }

func TestNodeEffectsSeeEachActivitysChange(t *testing.T) {
	tests := []struct {
		activity      string
		before, after *corev1.Node
		want          bool
	}{
		{activities.WaitForRegistrationActivity, nil, node(), true},
		{activities.WaitForRegistrationActivity, node(), node(ready), false},
		{activities.RegisterNodeActivity, node(), node(adopted), true},
		{activities.RegisterNodeActivity, node(adopted), node(adopted, ready), false},
		{activities.WaitForInitializationActivity, node(adopted), node(adopted, ready), true},
		{activities.WaitForInitializationActivity, node(ready), node(ready, adopted), false},
		{activities.AllowDisruptionActivity, node(adopted, ready), node(adopted, ready, reserved), true},
		{activities.AllowDisruptionActivity, node(reserved), node(reserved, cordoned), false},
		{activities.DrainActivity, node(adopted, reserved), node(adopted, reserved, cordoned), true},
		{activities.DrainActivity, node(cordoned), node(cordoned, adopted), false},
		{activities.DeleteNodeActivity, node(adopted, cordoned), nil, true},
		// A Node without the finalizer deleted: not DeleteNode's doing.
		{activities.DeleteNodeActivity, node(), nil, false},
	}
	for _, tc := range tests {
		if got := nodeEffects[tc.activity](tc.before, tc.after); got != tc.want {
			t.Errorf("%s effect(%v → %v) = %v, want %v", tc.activity, describe(tc.before), describe(tc.after), got, tc.want)
		}
	}
}

func describe(n *corev1.Node) string {
	if n == nil {
		return "no Node"
	}
	return fmt.Sprintf("finalizers %v, ready %v, annotations %v, unschedulable %v", n.Finalizers, nodeReady(n), n.Annotations, n.Spec.Unschedulable)
}

func TestServerCausesAreNoCodeFailure(t *testing.T) {
	tests := []struct {
		cause enumspb.WorkflowTaskFailedCause
		want  bool
	}{
		{enumspb.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR, true},
		{enumspb.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE, true},
		{enumspb.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND, false},
		{enumspb.WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND, false},
		{enumspb.WORKFLOW_TASK_FAILED_CAUSE_BAD_SCHEDULE_ACTIVITY_ATTRIBUTES, true},
	}
	for _, tc := range tests {
		if got := isCodeFailure(tc.cause); got != tc.want {
			t.Errorf("isCodeFailure(%s) = %v, want %v", tc.cause, got, tc.want)
		}
	}
}
