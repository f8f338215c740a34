package status

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// wantCondition is what a test expects of one condition; an empty
// messageHas means the message is not checked.
type wantCondition struct {
	status     metav1.ConditionStatus
	reason     string
	messageHas []string
	since      time.Time
}

func checkConditions(t *testing.T, got []metav1.Condition, want map[string]wantCondition) {
	t.Helper()
	for conditionType, w := range want {
		c := meta.FindStatusCondition(got, conditionType)
		if c == nil {
			t.Errorf("no %s condition in %+v", conditionType, got)
			continue
		}
		if c.Status != w.status || c.Reason != w.reason {
			t.Errorf("%s = %s (%s: %q), want %s (%s)", conditionType, c.Status, c.Reason, c.Message, w.status, w.reason)
		}
		for _, part := range w.messageHas {
			if !strings.Contains(c.Message, part) {
				t.Errorf("%s message %q does not name %q", conditionType, c.Message, part)
			}
		}
		if !w.since.IsZero() && !c.LastTransitionTime.Time.Equal(w.since) {
			t.Errorf("%s lastTransitionTime %s, want %s", conditionType, c.LastTransitionTime.Time, w.since)
		}
	}
}

func TestNodePoolStatus(t *testing.T) {
	readyClass := aClass(t).withReady(metav1.ConditionTrue, apisv1.ConditionTypeReady, "").build()
	tests := []struct {
		name          string
		pool          *poolBuilder
		nodes         []*corev1.Node
		class         *apisv1.EC2NodeClass
		wantNodes     int64
		wantResources map[corev1.ResourceName]string
		want          map[string]wantCondition
	}{{
		name:          "an empty pool with a ready class is ready and counts 0 nodes",
		pool:          aPool(t),
		class:         readyClass,
		wantResources: map[corev1.ResourceName]string{"nodes": "0"},
		want: map[string]wantCondition{
			apisv1.ConditionTypeValidationSucceeded: {status: metav1.ConditionTrue, reason: apisv1.ConditionTypeValidationSucceeded, since: now},
			apisv1.ConditionTypeNodeClassReady:      {status: metav1.ConditionTrue, reason: apisv1.ConditionTypeNodeClassReady, since: now},
			apisv1.ConditionTypeReady:               {status: metav1.ConditionTrue, reason: apisv1.ConditionTypeReady, since: now},
		},
	}, {
		name: "nodes are counted and their capacity summed, GPUs included",
		pool: aPool(t),
		nodes: []*corev1.Node{
			aNode("a", "default", m5Large),
			aNode("b", "default", map[corev1.ResourceName]string{"cpu": "4", "memory": "16Gi", "pods": "58", "nvidia.com/gpu": "1"}),
		},
		class:     readyClass,
		wantNodes: 2,
		wantResources: map[corev1.ResourceName]string{
			"cpu": "6", "memory": "24Gi", "pods": "87", "ephemeral-storage": "20Gi", "nvidia.com/gpu": "1", "nodes": "2",
		},
		want: map[string]wantCondition{apisv1.ConditionTypeReady: {status: metav1.ConditionTrue, reason: apisv1.ConditionTypeReady}},
	}, {
		name:          "a missing EC2NodeClass makes the pool not ready, naming it",
		pool:          aPool(t).withNodeClass("missing"),
		wantResources: map[corev1.ResourceName]string{"nodes": "0"},
		want: map[string]wantCondition{
			apisv1.ConditionTypeNodeClassReady: {status: metav1.ConditionFalse, reason: ReasonNodeClassNotFound,
				messageHas: []string{`EC2NodeClass "missing"`, "spec.template.spec.nodeClassRef.name"}},
			apisv1.ConditionTypeReady: {status: metav1.ConditionFalse, reason: ReasonNodeClassNotFound,
				messageHas: []string{`NodeClassReady=False`, `EC2NodeClass "missing"`}},
		},
	}, {
		name: "a class that does not resolve passes its reason on",
		pool: aPool(t),
		class: aClass(t).withReady(metav1.ConditionFalse, ReasonSubnetsNotResolved,
			`EC2NodeClass "default": spec.subnetSelectorTerms: matched no subnet`).build(),
		wantResources: map[corev1.ResourceName]string{"nodes": "0"},
		want: map[string]wantCondition{
			apisv1.ConditionTypeNodeClassReady: {status: metav1.ConditionFalse, reason: ReasonNodeClassNotReady,
				messageHas: []string{ReasonSubnetsNotResolved, "spec.subnetSelectorTerms: matched no subnet"}},
			apisv1.ConditionTypeReady: {status: metav1.ConditionFalse, reason: ReasonNodeClassNotReady},
		},
	}, {
		name:          "a class not resolved since its spec changed is unknown",
		pool:          aPool(t),
		class:         aClass(t).withReady(metav1.ConditionTrue, apisv1.ConditionTypeReady, "").withGeneration(2).build(),
		wantResources: map[corev1.ResourceName]string{"nodes": "0"},
		want: map[string]wantCondition{
			apisv1.ConditionTypeNodeClassReady: {status: metav1.ConditionUnknown, reason: ReasonAwaitingReconciliation},
			apisv1.ConditionTypeReady:          {status: metav1.ConditionUnknown, reason: ReasonAwaitingReconciliation},
		},
	}, {
		name:          "an invalid pool names the field",
		pool:          aPool(t).withBudgetSchedule("61 * * * *"),
		class:         readyClass,
		wantResources: map[corev1.ResourceName]string{"nodes": "0"},
		want: map[string]wantCondition{
			apisv1.ConditionTypeValidationSucceeded: {status: metav1.ConditionFalse, reason: ReasonValidationFailed,
				messageHas: []string{"spec.disruption.budgets[0].schedule"}},
			apisv1.ConditionTypeNodeClassReady: {status: metav1.ConditionTrue, reason: apisv1.ConditionTypeNodeClassReady},
			apisv1.ConditionTypeReady: {status: metav1.ConditionFalse, reason: ReasonValidationFailed,
				messageHas: []string{"ValidationSucceeded=False: spec.disruption.budgets[0].schedule"}},
		},
	}, {
		name: "an unchanged condition keeps its transition time, a changed one gets now",
		pool: aPool(t).
			withCondition(apisv1.ConditionTypeValidationSucceeded, metav1.ConditionTrue, apisv1.ConditionTypeValidationSucceeded, earlier).
			withCondition(apisv1.ConditionTypeNodeClassReady, metav1.ConditionTrue, apisv1.ConditionTypeNodeClassReady, earlier).
			withCondition(apisv1.ConditionTypeReady, metav1.ConditionTrue, apisv1.ConditionTypeReady, earlier).
			withNodeClass("gone"),
		wantResources: map[corev1.ResourceName]string{"nodes": "0"},
		want: map[string]wantCondition{
			apisv1.ConditionTypeValidationSucceeded: {status: metav1.ConditionTrue, reason: apisv1.ConditionTypeValidationSucceeded, since: earlier},
			apisv1.ConditionTypeNodeClassReady:      {status: metav1.ConditionFalse, reason: ReasonNodeClassNotFound, since: now},
			apisv1.ConditionTypeReady:               {status: metav1.ConditionFalse, reason: ReasonNodeClassNotFound, since: now},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, validationErr := tt.pool.build()
			got := NodePoolStatus(pool, validationErr, tt.nodes, tt.class, now)
			if got.Nodes != tt.wantNodes {
				t.Errorf("nodes = %d, want %d", got.Nodes, tt.wantNodes)
			}
			if len(got.Resources) != len(tt.wantResources) {
				t.Errorf("resources = %v, want %v", got.Resources, tt.wantResources)
			}
			for name, want := range tt.wantResources {
				if q, ok := got.Resources[name]; !ok || q.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("resources[%s] = %v, want %s", name, got.Resources[name], want)
				}
			}
			checkConditions(t, got.Conditions, tt.want)
			for _, c := range got.Conditions {
				if c.ObservedGeneration != pool.Generation {
					t.Errorf("%s observedGeneration %d, want %d", c.Type, c.ObservedGeneration, pool.Generation)
				}
			}
			if len(pool.Status.Conditions) > 0 && &pool.Status.Conditions[0] == &got.Conditions[0] {
				t.Error("the pool's own conditions were modified")
			}
		})
	}
}
