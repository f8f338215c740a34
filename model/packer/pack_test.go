package packer_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// plan is a readable view of a result for assertions.
type plan struct {
	r      packer.Result
	nodeOf map[string]*packer.NodePlan
	on     map[string]string // pod -> existing node
	reason map[string]string
}

func view(r packer.Result) plan {
	v := plan{r: r, nodeOf: map[string]*packer.NodePlan{}, on: map[string]string{}, reason: map[string]string{}}
	for i := range r.NewNodes {
		for _, p := range r.NewNodes[i].Pods {
			v.nodeOf[p.Name] = &r.NewNodes[i]
		}
	}
	for _, pl := range r.Placements {
		v.on[pl.Pod.Name] = pl.Node
	}
	for _, u := range r.Unschedulable {
		v.reason[u.Pod.Name] = u.Reason
	}
	return v
}

func TestPack(t *testing.T) {
	cat := smallCatalog()
	gpuTaint := withTaint("nvidia.com/gpu", "true")
	ds := func(cpu string, opts ...podOption) *corev1.Pod { return pod("ds", cpu, "100Mi", opts...) }
	tests := []packCase{
		{
			name: "cheapest type that fits, spot",
			in:   packer.Input{NodePools: []packer.NodePool{nodePool("default", cat)}, Pods: pods(3, "web", "500m", "1Gi")},
			check: func(t *testing.T, v plan) {
				if len(v.r.NewNodes) != 1 || v.r.NewNodes[0].InstanceType != "a.small" || v.r.NewNodes[0].CapacityType != "spot" {
					t.Fatalf("want one a.small spot node, got %+v", summary(v.r))
				}
				if got := v.r.NewNodes[0].Options; len(got) == 0 || got[0].InstanceType != "a.small" || got[0].Price != 0.03 {
					t.Errorf("options must start with the chosen launch: %+v", got)
				}
			},
		},
		{
			name: "amd64 nodeSelector",
			in:   packer.Input{NodePools: []packer.NodePool{nodePool("default", cat)}, Pods: pods(3, "web", "500m", "1Gi", withNodeSelector("kubernetes.io/arch", "amd64"))},
			check: func(t *testing.T, v plan) {
				if n := v.nodeOf["web-0"]; n == nil || n.InstanceType != "m.small" {
					t.Fatalf("want m.small, got %+v", summary(v.r))
				}
			},
		},
		{
			name: "arm64 via node affinity with ORed terms",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", cat)}, Pods: []*corev1.Pod{pod("p", "1", "1Gi", withNodeAffinity(
				[]corev1.NodeSelectorRequirement{{Key: "kubernetes.io/arch", Operator: "In", Values: []string{"s390x"}}},
				[]corev1.NodeSelectorRequirement{{Key: "kubernetes.io/arch", Operator: "In", Values: []string{"arm64"}}, {Key: scheduling.LabelZone, Operator: "In", Values: []string{"zone-c"}}},
			))}},
			check: func(t *testing.T, v plan) {
				if n := v.nodeOf["p"]; n == nil || n.InstanceType != "a.small" || n.Zone != "zone-c" {
					t.Fatalf("want a.small in zone-c, got %+v", summary(v.r))
				}
			},
		},
		{
			name: "GPU pods get GPU nodes, one GPU each",
			in:   packer.Input{NodePools: []packer.NodePool{nodePool("default", cat)}, Pods: pods(2, "train", "1", "4Gi", withRequest("nvidia.com/gpu", "1"))},
			check: func(t *testing.T, v plan) {
				a, b := v.nodeOf["train-0"], v.nodeOf["train-1"]
				if a == nil || b == nil || a == b || a.InstanceType != "g.large" || b.InstanceType != "g.large" {
					t.Fatalf("want two g.large nodes, got %+v", summary(v.r))
				}
			},
		},
		{
			name: "more GPUs than any type has",
			in:   packer.Input{NodePools: []packer.NodePool{nodePool("default", cat)}, Pods: []*corev1.Pod{pod("big", "1", "1Gi", withRequest("nvidia.com/gpu", "2"))}},
			check: func(t *testing.T, v plan) {
				if r := v.reason["big"]; !strings.Contains(r, "no instance type has enough allocatable: nvidia.com/gpu") {
					t.Fatalf("reason = %q", r)
				}
			},
		},
		{
			name: "impossible nodeSelector names the selector",
			in:   packer.Input{NodePools: []packer.NodePool{nodePool("default", cat)}, Pods: []*corev1.Pod{pod("z", "1", "1Gi", withNodeSelector("kubernetes.io/arch", "s390x"))}},
			check: func(t *testing.T, v plan) {
				if r := v.reason["z"]; r != "no instance type satisfies: nodeSelector kubernetes.io/arch=s390x" {
					t.Fatalf("reason = %q", r)
				}
			},
		},
		{
			name: "tainted pool without toleration",
			in:   packer.Input{NodePools: []packer.NodePool{nodePool("gpu", cat, gpuTaint)}, Pods: []*corev1.Pod{pod("p", "1", "1Gi")}},
			check: func(t *testing.T, v plan) {
				if r := v.reason["p"]; r != "no nodepool's taints are tolerated: nvidia.com/gpu=true:NoSchedule (nodepool gpu)" {
					t.Fatalf("reason = %q", r)
				}
			},
		},
		{
			name: "tainted pool with toleration, untainted pool for the rest",
			in: packer.Input{
				NodePools: []packer.NodePool{
					nodePool("gpu", cat, gpuTaint, withWeight(50), withPoolRequirement("karpenter.k8s.aws/instance-family", "In", "g")),
					nodePool("general", cat, withPoolRequirement("karpenter.k8s.aws/instance-family", "NotIn", "g")),
				},
				Pods: []*corev1.Pod{pod("gpu", "1", "1Gi", withToleration("nvidia.com/gpu"), withRequest("nvidia.com/gpu", "1")), pod("plain", "1", "1Gi")},
			},
			check: func(t *testing.T, v plan) {
				if n := v.nodeOf["gpu"]; n == nil || n.NodePool != "gpu" || len(n.Taints) != 1 {
					t.Errorf("gpu pod: %+v", summary(v.r))
				}
				if n := v.nodeOf["plain"]; n == nil || n.NodePool != "general" {
					t.Errorf("plain pod: %+v", summary(v.r))
				}
			},
		},
		{
			name: "zone selector",
			in:   packer.Input{NodePools: []packer.NodePool{nodePool("default", cat)}, Pods: pods(2, "p", "1", "1Gi", withNodeSelector("topology.kubernetes.io/zone", "zone-b"))},
			check: func(t *testing.T, v plan) {
				if n := v.nodeOf["p-0"]; n == nil || n.Zone != "zone-b" || n.Labels[scheduling.LabelZone] != "zone-b" {
					t.Fatalf("want zone-b, got %+v", summary(v.r))
				}
			},
		},
		{
			name: "cpu limit exhausted",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", cat, withLimit("cpu", "4"))},
				Pods: pods(6, "p", "900m", "1Gi", withNodeSelector("kubernetes.io/arch", "arm64"))},
			check: func(t *testing.T, v plan) {
				if len(v.r.NewNodes) != 2 || len(v.r.Unschedulable) != 2 {
					t.Fatalf("want 2 nodes and 2 unschedulable, got %+v", summary(v.r))
				}
				if r := v.r.Unschedulable[0].Reason; r != "nodepool limits exceeded: cpu" {
					t.Fatalf("reason = %q", r)
				}
			},
		},
		{
			name: "nodes limit",
			in:   packer.Input{NodePools: []packer.NodePool{nodePool("default", cat, withLimit("nodes", "1"))}, Pods: pods(3, "p", "1500m", "1Gi")},
			check: func(t *testing.T, v plan) {
				if len(v.r.NewNodes) != 1 {
					t.Fatalf("want 1 node, got %+v", summary(v.r))
				}
				if len(v.r.Unschedulable) > 0 && !strings.Contains(v.r.Unschedulable[0].Reason, "nodepool limits exceeded: nodes") {
					t.Fatalf("reason = %q", v.r.Unschedulable[0].Reason)
				}
			},
		},
		{
			name: "existing and in-flight nodes absorb pods first",
			in: packer.Input{
				NodePools: []packer.NodePool{nodePool("default", cat)},
				Nodes: []packer.Node{
					{Name: "old", Labels: map[string]string{"kubernetes.io/arch": "amd64", scheduling.LabelZone: "zone-a"}, Available: resources("cpu", "1", "memory", "2Gi", "pods", "5")},
					{Name: "launching", InFlight: true, Labels: map[string]string{"kubernetes.io/arch": "arm64", scheduling.LabelZone: "zone-b"}, Available: resources("cpu", "2", "memory", "4Gi", "pods", "5")},
				},
				Pods: pods(5, "p", "500m", "1Gi"),
			},
			check: func(t *testing.T, v plan) {
				if len(v.r.NewNodes) != 0 || len(v.r.Placements) != 5 {
					t.Fatalf("want 5 placements and no new node, got %+v placements %d", summary(v.r), len(v.r.Placements))
				}
				if v.on["p-0"] != "old" || v.on["p-1"] != "old" || v.on["p-2"] != "launching" {
					t.Errorf("placements: %v", v.on)
				}
			},
		},
		{
			name: "higher weight pool first, even if dearer",
			in: packer.Input{NodePools: []packer.NodePool{
				nodePool("cheap", cat),
				nodePool("preferred", cat, withWeight(10), withPoolRequirement("kubernetes.io/arch", "In", "amd64")),
			}, Pods: pods(4, "p", "500m", "1Gi")},
			check: func(t *testing.T, v plan) {
				for _, n := range v.r.NewNodes {
					if n.NodePool != "preferred" {
						t.Fatalf("want every node from preferred, got %+v", summary(v.r))
					}
				}
			},
		},
		{
			name: "lower weight pool when the higher is at its limit",
			in: packer.Input{NodePools: []packer.NodePool{
				nodePool("cheap", cat),
				nodePool("preferred", cat, withWeight(10), withLimit("nodes", "1"), withPoolRequirement("kubernetes.io/arch", "In", "amd64"), withPoolRequirement("node.kubernetes.io/instance-type", "In", "m.small")),
			}, Pods: pods(6, "p", "900m", "1Gi")},
			check: func(t *testing.T, v plan) {
				pools := map[string]int{}
				for _, n := range v.r.NewNodes {
					pools[n.NodePool]++
				}
				if pools["preferred"] != 1 || pools["cheap"] == 0 || len(v.r.Unschedulable) != 0 {
					t.Fatalf("want 1 preferred node and the rest from cheap, got %+v", summary(v.r))
				}
			},
		},
		{
			name: "zone spread within maxSkew",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", cat)},
				Pods: pods(9, "s", "250m", "256Mi", withLabel("app", "s"), withSpread(scheduling.LabelZone, 1, corev1.DoNotSchedule, map[string]string{"app": "s"}))},
			check: func(t *testing.T, v plan) {
				perZone := map[string]int{}
				for _, n := range v.r.NewNodes {
					perZone[n.Zone] += len(n.Pods)
				}
				if perZone["zone-a"] != 3 || perZone["zone-b"] != 3 || perZone["zone-c"] != 3 {
					t.Fatalf("want 3 pods per zone, got %v", perZone)
				}
			},
		},
		{
			name: "hostname anti-affinity: one pod per node",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", cat)},
				Pods: join(pods(4, "a", "250m", "1Gi", withLabel("app", "a"), withAntiAffinity(scheduling.LabelHostname, map[string]string{"app": "a"})), pods(4, "filler", "250m", "256Mi"))},
			check: func(t *testing.T, v plan) {
				seen := map[*packer.NodePlan]bool{}
				for i := 0; i < 4; i++ {
					n := v.nodeOf["a-"+string(rune('0'+i))]
					if n == nil || seen[n] {
						t.Fatalf("anti-affine pods share a node: %+v", summary(v.r))
					}
					seen[n] = true
				}
				if len(v.r.NewNodes) != 4 {
					t.Errorf("fillers should share the forced nodes: %+v", summary(v.r))
				}
			},
		},
		{
			name: "zone anti-affinity: a fourth pod has no zone left",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", cat)},
				Pods: pods(4, "z", "250m", "1Gi", withLabel("app", "z"), withAntiAffinity(scheduling.LabelZone, map[string]string{"app": "z"}))},
			check: func(t *testing.T, v plan) {
				if len(v.r.NewNodes) != 3 || len(v.r.Unschedulable) != 1 {
					t.Fatalf("want 3 nodes and 1 unschedulable, got %+v", summary(v.r))
				}
				if r := v.r.Unschedulable[0].Reason; !strings.HasPrefix(r, "cannot satisfy pod anti-affinity (topology.kubernetes.io/zone") {
					t.Fatalf("reason = %q", r)
				}
			},
		},
		{
			name: "zone affinity keeps a self-affine group in one zone",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", cat)},
				Pods: pods(12, "g", "1500m", "2Gi", withLabel("grp", "1"), withAffinity(scheduling.LabelZone, map[string]string{"grp": "1"}))},
			check: func(t *testing.T, v plan) {
				zonesUsed := map[string]bool{}
				for _, n := range v.r.NewNodes {
					zonesUsed[n.Zone] = true
				}
				if len(zonesUsed) != 1 || len(v.r.Unschedulable) != 0 {
					t.Fatalf("want one zone, got %+v", summary(v.r))
				}
			},
		},
		{
			name: "hostname spread maxSkew 2",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", cat)},
				Pods: pods(6, "h", "100m", "128Mi", withLabel("app", "h"), withSpread(scheduling.LabelHostname, 2, corev1.DoNotSchedule, map[string]string{"app": "h"}))},
			check: func(t *testing.T, v plan) {
				for _, n := range v.r.NewNodes {
					if len(n.Pods) > 2 {
						t.Fatalf("node %s has %d pods, maxSkew 2", n.Name, len(n.Pods))
					}
				}
			},
		},
		{
			name: "unavailable offerings are not used",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", []*catalog.InstanceType{
				instanceType("cheap", "amd64", []catalog.Offering{{Zone: "zone-a", CapacityType: "spot", Price: 0.01, Available: false}, offer("zone-b", "on-demand", 0.05)}, "cpu", "2", "memory", "4Gi", "pods", "10"),
				instanceType("dear", "amd64", everywhere(0.03, 0.06), "cpu", "2", "memory", "4Gi", "pods", "10"),
			})}, Pods: []*corev1.Pod{pod("p", "1", "1Gi"), pod("d", "1", "1Gi", withNodeSelector(scheduling.LabelZone, "zone-d"))}},
			check: func(t *testing.T, v plan) {
				if n := v.nodeOf["p"]; n == nil || n.InstanceType != "dear" || n.CapacityType != "spot" {
					t.Errorf("want dear spot, got %+v", summary(v.r))
				}
				if r := v.reason["d"]; r != "no instance type satisfies: nodeSelector topology.kubernetes.io/zone=zone-d" {
					t.Errorf("reason = %q", r)
				}
			},
		},
		{
			name: "zone whose offerings are all unavailable",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", []*catalog.InstanceType{
				instanceType("t", "amd64", []catalog.Offering{{Zone: "zone-a", CapacityType: "spot", Price: 0.01, Available: false}, offer("zone-b", "spot", 0.02)}, "cpu", "2", "memory", "4Gi", "pods", "10"),
			})}, Pods: []*corev1.Pod{pod("p", "1", "1Gi", withNodeSelector(scheduling.LabelZone, "zone-a"))}},
			check: func(t *testing.T, v plan) {
				if r := v.reason["p"]; !strings.HasPrefix(r, "no available offering: nodeSelector topology.kubernetes.io/zone=zone-a") {
					t.Errorf("reason = %q", r)
				}
			},
		},
		{
			name: "spot dearer than on-demand is dropped",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", []*catalog.InstanceType{
				instanceType("t", "amd64", []catalog.Offering{offer("zone-a", "spot", 0.07), offer("zone-a", "on-demand", 0.05)}, "cpu", "2", "memory", "4Gi", "pods", "10"),
			})}, Pods: []*corev1.Pod{pod("p", "1", "1Gi")}},
			check: func(t *testing.T, v plan) {
				if n := v.nodeOf["p"]; n == nil || n.CapacityType != "on-demand" || n.Price != 0.05 {
					t.Fatalf("want on-demand at 0.05, got %+v", summary(v.r))
				}
			},
		},
		{
			name: "on-demand only pool, and a pod that asks for on-demand by Karpenter's key",
			in: packer.Input{NodePools: []packer.NodePool{
				nodePool("od", cat, withCapacityTypes("on-demand"), withPoolRequirement("kubernetes.io/arch", "In", "arm64")),
				nodePool("any", cat, withPoolRequirement("kubernetes.io/arch", "In", "amd64")),
			}, Pods: []*corev1.Pod{pod("a", "1", "1Gi", withNodeSelector("kubernetes.io/arch", "arm64")), pod("b", "1", "1Gi", withNodeSelector("karpenter.sh/capacity-type", "on-demand"), withNodeSelector("kubernetes.io/arch", "amd64"))}},
			check: func(t *testing.T, v plan) {
				if n := v.nodeOf["a"]; n == nil || n.CapacityType != "on-demand" || n.NodePool != "od" {
					t.Errorf("a: %+v", summary(v.r))
				}
				if n := v.nodeOf["b"]; n == nil || n.CapacityType != "on-demand" || n.Labels["karpenter.sh/capacity-type"] != "on-demand" {
					t.Errorf("b: %+v", summary(v.r))
				}
			},
		},
		{
			name: "DaemonSet overhead leaves room for one pod per small node",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", cat, withPoolRequirement("node.kubernetes.io/instance-type", "In", "m.small"))},
				DaemonSetPods: []*corev1.Pod{ds("1")}, Pods: pods(2, "p", "1", "1Gi")},
			check: func(t *testing.T, v plan) {
				if len(v.r.NewNodes) != 2 || len(v.r.NewNodes[0].DaemonSetPods) != 1 {
					t.Fatalf("want 2 nodes each with the DaemonSet, got %+v", summary(v.r))
				}
			},
		},
		{
			name: "DaemonSet for arm64 only does not weigh on amd64 nodes",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", cat, withPoolRequirement("karpenter.k8s.aws/instance-family", "In", "m", "a"))},
				DaemonSetPods: []*corev1.Pod{ds("1500m", withNodeSelector("kubernetes.io/arch", "arm64"))},
				Pods:          pods(2, "p", "900m", "1Gi", withNodeSelector("kubernetes.io/arch", "amd64"))},
			check: func(t *testing.T, v plan) {
				if len(v.r.NewNodes) != 1 || len(v.r.NewNodes[0].DaemonSetPods) != 0 || v.r.NewNodes[0].InstanceType != "m.small" {
					t.Fatalf("want one m.small without DaemonSets, got %+v", summary(v.r))
				}
			},
		},
		{
			name: "init container larger than the containers",
			in:   packer.Input{NodePools: []packer.NodePool{nodePool("default", cat)}, Pods: []*corev1.Pod{pod("p", "500m", "1Gi", withInitContainer("3", "1Gi"))}},
			check: func(t *testing.T, v plan) {
				if n := v.nodeOf["p"]; n == nil || n.InstanceType != "m.large" {
					t.Fatalf("want m.large (3 cpu init), got %+v", summary(v.r))
				}
			},
		},
		{
			name: "custom label left open by the pool is pinned by the pod",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("teams", cat, withPoolRequirement("team", "In", "a", "b"))},
				Pods: []*corev1.Pod{pod("b", "1", "1Gi", withNodeSelector("team", "b")), pod("a", "1", "1Gi", withNodeSelector("team", "a"))}},
			check: func(t *testing.T, v plan) {
				if n := v.nodeOf["b"]; n == nil || n.Labels["team"] != "b" {
					t.Errorf("b: %+v", summary(v.r))
				}
				if n := v.nodeOf["a"]; n == nil || n.Labels["team"] != "a" {
					t.Errorf("a: %+v", summary(v.r))
				}
			},
		},
		{
			name: "existing pod's anti-affinity keeps newcomers off its node",
			in: packer.Input{
				NodePools: []packer.NodePool{nodePool("default", cat)},
				Nodes: []packer.Node{{Name: "old", Labels: map[string]string{"kubernetes.io/arch": "amd64", scheduling.LabelZone: "zone-a"},
					Available: resources("cpu", "4", "memory", "8Gi", "pods", "10"),
					Pods:      []*corev1.Pod{pod("loner", "100m", "100Mi", withAntiAffinity(scheduling.LabelHostname, map[string]string{"app": "web"}))}}},
				Pods: []*corev1.Pod{pod("web", "500m", "1Gi", withLabel("app", "web")), pod("other", "500m", "1Gi")},
			},
			check: func(t *testing.T, v plan) {
				if v.on["web"] == "old" || v.nodeOf["web"] == nil {
					t.Errorf("web must not join the loner: %+v %v", summary(v.r), v.on)
				}
				if v.on["other"] != "old" {
					t.Errorf("other should use the existing node: %v", v.on)
				}
			},
		},
	}
	runPackCases(t, tests)
}

func TestInvalidInput(t *testing.T) {
	_, err := packer.Pack(packer.Input{NodePools: []packer.NodePool{nodePool("bad", smallCatalog(), withPoolRequirement("kubernetes.io/arch", "Inn", "amd64"))}})
	if !packer.IsInvalidInput(err) || !strings.Contains(err.Error(), `nodePools[0] (bad): requirements[0]: requirement "kubernetes.io/arch": operator "Inn"`) {
		t.Fatalf("error = %v", err)
	}
}

type nodeSummary struct {
	Pool, Type, Zone, CT string
	Price                float64
	Pods                 []string
}

func summary(r packer.Result) []nodeSummary {
	var out []nodeSummary
	for _, n := range r.NewNodes {
		s := nodeSummary{n.NodePool, n.InstanceType, n.Zone, n.CapacityType, n.Price, nil}
		for _, p := range n.Pods {
			s.Pods = append(s.Pods, p.Name)
		}
		out = append(out, s)
	}
	for _, u := range r.Unschedulable {
		out = append(out, nodeSummary{Pool: "UNSCHEDULABLE", Pods: []string{u.Pod.Name + ": " + u.Reason}})
	}
	return out
}

var _ = metav1.ObjectMeta{}
