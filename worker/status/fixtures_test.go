package status

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/millwright/millwright/deploy/examples"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// now is when the tests' statuses are computed; earlier is when their
// existing conditions last changed.
var (
	now     = time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	earlier = now.Add(-time.Hour)
)

// poolBuilder builds NodePools: aPool() is the example NodePool "default"
// (valid, referencing EC2NodeClass "default", generation 1); each with…
// changes one thing.
type poolBuilder struct{ pool apisv1.NodePool }

func aPool(t *testing.T) *poolBuilder {
	t.Helper()
	b := &poolBuilder{}
	if err := yaml.Unmarshal(examples.NodePool, &b.pool); err != nil {
		t.Fatal(err)
	}
	b.pool.Generation = 1
	return b
}

func (b *poolBuilder) withNodeClass(name string) *poolBuilder {
	b.pool.Spec.Template.Spec.NodeClassRef.Name = name
	return b
}

func (b *poolBuilder) withBudgetSchedule(schedule string) *poolBuilder {
	duration := apisv1.Duration("1h")
	b.pool.Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: "1", Schedule: &schedule, Duration: &duration}}
	return b
}

func (b *poolBuilder) withCondition(conditionType string, status metav1.ConditionStatus, reason string, since time.Time) *poolBuilder {
	b.pool.Status.Conditions = append(b.pool.Status.Conditions, metav1.Condition{
		Type: conditionType, Status: status, Reason: reason, ObservedGeneration: b.pool.Generation, LastTransitionTime: metav1.NewTime(since),
	})
	return b
}

// build returns the pool, defaulted, and what Validate says of it.
func (b *poolBuilder) build() (*apisv1.NodePool, error) {
	pool := b.pool.DeepCopy()
	pool.SetDefaults()
	return pool, pool.Validate()
}

// classBuilder builds EC2NodeClasses: aClass() is the example class
// "default" at generation 1 with no status; each with… changes one thing.
type classBuilder struct{ class apisv1.EC2NodeClass }

func aClass(t *testing.T) *classBuilder {
	t.Helper()
	b := &classBuilder{}
	if err := yaml.Unmarshal(examples.NodeClass, &b.class); err != nil {
		t.Fatal(err)
	}
	b.class.Generation = 1
	return b
}

func (b *classBuilder) withGeneration(generation int64) *classBuilder {
	b.class.Generation = generation
	return b
}

// withReady sets the class's Ready condition as observed at generation 1.
func (b *classBuilder) withReady(status metav1.ConditionStatus, reason, message string) *classBuilder {
	b.class.Status.Conditions = append(b.class.Status.Conditions, metav1.Condition{
		Type: apisv1.ConditionTypeReady, Status: status, Reason: reason, Message: message,
		ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(earlier),
	})
	return b
}

func (b *classBuilder) withoutSubnetTerms() *classBuilder {
	b.class.Spec.SubnetSelectorTerms = nil
	return b
}

func (b *classBuilder) build() *apisv1.EC2NodeClass {
	class := b.class.DeepCopy()
	class.SetDefaults()
	return class
}

// aNode is a Node of pool with the given capacity ("cpu=4", ...).
func aNode(name, pool string, capacity map[corev1.ResourceName]string) *corev1.Node {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{apisv1.LabelNodePool: pool}}}
	node.Status.Capacity = corev1.ResourceList{}
	for resourceName, quantity := range capacity {
		node.Status.Capacity[resourceName] = resource.MustParse(quantity)
	}
	return node
}

// m5Large is an m5.large's capacity as the emulator's kubelets report it.
var m5Large = map[corev1.ResourceName]string{"cpu": "2", "memory": "8Gi", "pods": "29", "ephemeral-storage": "20Gi"}
