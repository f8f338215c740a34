package planning

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/activities"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// A node that went NotReady a minute after it started is initialized when
// its workflow labelled it so; without the label, only its age says so.
func TestLooksInitialized(t *testing.T) {
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	w := &world{now: now, startingUpFor: 15 * time.Minute}
	node := func(age time.Duration, ready corev1.ConditionStatus, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels, CreationTimestamp: metav1.NewTime(now.Add(-age))},
			Spec:       corev1.NodeSpec{Taints: taints},
			Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}},
		}
	}
	labelled := map[string]string{apisv1.LabelNodeInitialized: "true"}
	unregistered := corev1.Taint{Key: activities.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}
	tests := []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"Ready and registered", node(time.Minute, corev1.ConditionTrue, nil), true},
		{"NotReady soon after start, unlabelled", node(2*time.Minute, corev1.ConditionFalse, nil), false},
		{"NotReady soon after start, labelled initialized", node(2*time.Minute, corev1.ConditionFalse, labelled), true},
		{"NotReady past the registration window", node(20*time.Minute, corev1.ConditionUnknown, nil), true},
		{"still unregistered", node(time.Minute, corev1.ConditionTrue, nil, unregistered), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := w.looksInitialized(tt.node, nil); got != tt.want {
				t.Errorf("looksInitialized = %v, want %v", got, tt.want)
			}
		})
	}
}
