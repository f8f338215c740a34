package scale

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/millwright/millwright/local/stack/stacktest"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// The benchmark's pool and namespace.
const (
	poolName  = "scale"
	namespace = "scale"
)

// deployment is one deployment of a scenario.
type deployment struct {
	name     string
	replicas int
	cpu      string
	memory   string
	// oneNodeEach gives the pods a required hostname anti-affinity.
	oneNodeEach bool
}

// scenario is a workload created at once.
type scenario struct {
	name        string
	deployments []deployment
}

func (s scenario) pods() int {
	n := 0
	for _, d := range s.deployments {
		n += d.replicas
	}
	return n
}

// mixed is ten deployments of replicas pods each, 250m–4 CPU and
// 256Mi–8Gi.
func mixed(name string, replicas int) scenario {
	sizes := []struct{ cpu, memory string }{
		{"250m", "256Mi"}, {"500m", "512Mi"}, {"500m", "2Gi"}, {"1", "1Gi"}, {"1", "4Gi"},
		{"1500m", "2Gi"}, {"2", "2Gi"}, {"2", "8Gi"}, {"3", "6Gi"}, {"4", "8Gi"},
	}
	s := scenario{name: name}
	for i, size := range sizes {
		s.deployments = append(s.deployments, deployment{name: fmt.Sprintf("mixed-%d", i), replicas: replicas, cpu: size.cpu, memory: size.memory})
	}
	return s
}

// scenarios are the benchmark's, by name; ci is the smallest, the one
// `make test` runs for correctness.
var scenarios = map[string]scenario{
	// Karpenter's performance suite, "basic".
	"basic": {name: "basic", deployments: []deployment{
		{name: "small", replicas: 500, cpu: "900m", memory: "3100Mi"},
		{name: "large", replicas: 500, cpu: "3500m", memory: "28Gi"},
	}},
	"mixed":         mixed("mixed", 100),
	"anti-affinity": {name: "anti-affinity", deployments: []deployment{{name: "spread", replicas: 100, cpu: "500m", memory: "512Mi", oneNodeEach: true}}},
	"5000":          mixed("5000", 500),
	"ci":            {name: "ci", deployments: []deployment{{name: "spread", replicas: 12, cpu: "500m", memory: "512Mi", oneNodeEach: true}}},
}

// allScenarios is `make scale`'s order.
var allScenarios = []string{"basic", "mixed", "anti-affinity", "5000"}

// nodePool is the benchmark's NodePool: general-purpose, compute and memory
// families, spot or on-demand, empty nodes removed after 30 s under the
// default 10% budget.
func nodePool() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "millwright.dev/v1",
		"kind":       "NodePool",
		"metadata":   map[string]any{"name": poolName},
		"spec": map[string]any{
			"template": map[string]any{
				"spec": map[string]any{
					"nodeClassRef": map[string]any{"group": "millwright.dev", "kind": "EC2NodeClass", "name": "default"},
					"requirements": []any{
						map[string]any{"key": apisv1.LabelInstanceCategory, "operator": "In", "values": []any{"c", "m", "r"}},
						map[string]any{"key": corev1.LabelArchStable, "operator": "In", "values": []any{"amd64"}},
						map[string]any{"key": apisv1.LabelCapacityType, "operator": "In", "values": []any{"spot", "on-demand"}},
					},
				},
			},
			"disruption": map[string]any{"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"},
			"limits":     map[string]any{"cpu": "100000"},
		},
	}}
}

// object is the Deployment of d on the pool.
func (d deployment) object() *appsv1.Deployment {
	spec := stacktest.PausePodSpec(d.cpu)
	spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse(d.memory)
	spec.NodeSelector = map[string]string{apisv1.LabelNodePool: poolName}
	if d.oneNodeEach {
		spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": d.name}},
				TopologyKey:   corev1.LabelHostname,
			}},
		}}
	}
	return stacktest.Deployment(namespace, d.name, int32(d.replicas), spec)
}
