package stacktest

import (
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/workflows"
)

// pod builds a pod in phase with the Ready condition ready (none when
// ready is nil), terminating or not.
func pod(phase corev1.PodPhase, ready *corev1.ConditionStatus, terminating bool) *corev1.Pod {
	p := &corev1.Pod{Status: corev1.PodStatus{Phase: phase}}
	if ready != nil {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: *ready}}
	}
	if terminating {
		p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	}
	return p
}

func TestPodAvailable(t *testing.T) {
	isTrue, isFalse := corev1.ConditionTrue, corev1.ConditionFalse
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{name: "running and ready", pod: pod(corev1.PodRunning, &isTrue, false), want: true},
		{name: "running, not ready", pod: pod(corev1.PodRunning, &isFalse, false)},
		{name: "running, no Ready condition yet", pod: pod(corev1.PodRunning, nil, false)},
		{name: "pending", pod: pod(corev1.PodPending, &isTrue, false)},
		{name: "ready but terminating", pod: pod(corev1.PodRunning, &isTrue, true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodAvailable(tt.pod); got != tt.want {
				t.Errorf("PodAvailable = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNodeWorkflowOfReadsSearchAttributes(t *testing.T) {
	keyword := func(value any) *commonpb.Payload {
		payload, err := converter.GetDefaultDataConverter().ToPayload(value)
		if err != nil {
			t.Fatal(err)
		}
		return payload
	}
	info := &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: "wf", RunId: "run"},
		Status:    enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
			workflows.NodePoolAttribute.GetName(): keyword("pool-a"),
			workflows.PhaseAttribute.GetName():    keyword("Ready"),
			// A keyword list is shown raw rather than dropped.
			workflows.ZoneAttribute.GetName(): keyword([]string{"us-east-1a"}),
		}},
	}
	got := NodeWorkflowOf(info)
	if got.ID != "wf" || got.RunID != "run" || got.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING ||
		got.NodePool != "pool-a" || got.Phase != "Ready" || got.NodeName != "" || got.Zone == "" {
		t.Errorf("NodeWorkflowOf = %+v", got)
	}
}
