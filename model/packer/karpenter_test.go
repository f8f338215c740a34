package packer_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// packCase is one planning behaviour (for Karpenter's, ported from its
// tests, the test is named in the case's comment), checked on the packer's
// plan after Verify accepted it.
type packCase struct {
	name  string
	in    packer.Input
	check func(t *testing.T, v plan)
}

func runPackCases(t *testing.T, cases []packCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := packer.Pack(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if err := packer.Verify(tc.in, r); err != nil {
				t.Fatalf("plan fails verification: %v\nplan: %+v", err, summary(r))
			}
			tc.check(t, view(r))
		})
	}
}

// withTypeLabels returns a copy of it with more labels.
func withTypeLabels(it *catalog.InstanceType, kv ...string) *catalog.InstanceType {
	c := *it
	c.Labels = map[string]string{}
	for k, v := range it.Labels {
		c.Labels[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Labels[kv[i]] = kv[i+1]
	}
	return &c
}

// wantType fails unless pod is on a new node of instance type want.
func wantType(t *testing.T, v plan, pod, want string) {
	t.Helper()
	if n := v.nodeOf[pod]; n == nil || n.InstanceType != want {
		t.Fatalf("%s: want a new %s node, got %+v", pod, want, summary(v.r))
	}
}

// wantUnschedulable fails unless pod is unschedulable with a reason containing want.
func wantUnschedulable(t *testing.T, v plan, pod, want string) {
	t.Helper()
	if r, ok := v.reason[pod]; !ok || !strings.Contains(r, want) {
		t.Fatalf("%s: want unschedulable (%q), got reason %q, plan %+v", pod, want, r, summary(v.r))
	}
}

// Instance-type labels: Karpenter's AWS label set, and a requirement on a
// label a type lacks.
func TestKarpenterInstanceTypeLabels(t *testing.T) {
	plain := instanceType("c.large", "amd64", everywhere(0.02, 0.05), "cpu", "2", "memory", "4Gi", "pods", "10")
	nvme := withTypeLabels(instanceType("d.large", "amd64", everywhere(0.05, 0.12), "cpu", "2", "memory", "8Gi", "pods", "10"),
		scheduling.LabelInstanceLocalNVME, "474", scheduling.LabelInstanceCPUManufacturer, "intel")
	amd := withTypeLabels(instanceType("a.large", "amd64", everywhere(0.03, 0.07), "cpu", "2", "memory", "4Gi", "pods", "10"),
		scheduling.LabelInstanceCPUManufacturer, "amd")
	types := []*catalog.InstanceType{plain, nvme, amd}
	runPackCases(t, []packCase{
		{
			// karpenter-provider-aws docs "instance store" example; Karpenter's
			// suite_test "should not schedule if requirement on undefined label".
			name: "nodepool requirement on instance-local-nvme skips types without instance store",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", types,
				withPoolRequirement("karpenter.k8s.aws/instance-local-nvme", corev1.NodeSelectorOpGt, "300"))},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi")}},
			check: func(t *testing.T, v plan) { wantType(t, v, "p", "d.large") },
		},
		{
			// suite_test "Well Known Labels": a pod's nodeSelector on a Karpenter AWS label.
			name: "pod nodeSelector on instance-cpu-manufacturer",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", types)},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi", withNodeSelector("karpenter.k8s.aws/instance-cpu-manufacturer", "amd"))}},
			check: func(t *testing.T, v plan) { wantType(t, v, "p", "a.large") },
		},
		{
			// suite_test "should schedule pods that have node selectors with DoesNotExist operator".
			name: "DoesNotExist on a type label picks a type without it",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", []*catalog.InstanceType{nvme, amd},
				withPoolRequirement(scheduling.LabelInstanceLocalNVME, corev1.NodeSelectorOpDoesNotExist))},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi")}},
			check: func(t *testing.T, v plan) { wantType(t, v, "p", "a.large") },
		},
		{
			// suite_test "should not schedule pods that have node selectors with undefined key".
			name: "requirement on a type label no type carries matches no type",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", []*catalog.InstanceType{plain},
				withPoolRequirement(scheduling.LabelInstanceLocalNVME, corev1.NodeSelectorOpExists))},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi")}},
			check: func(t *testing.T, v plan) { wantUnschedulable(t, v, "p", "") },
		},
		{
			// suite_test "should not schedule pods that have node selectors with restricted domains".
			name: "pod nodeSelector on a restricted-domain key nothing sets",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", types)},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi", withNodeSelector("kubernetes.io/team", "a"))}},
			check: func(t *testing.T, v plan) { wantUnschedulable(t, v, "p", "nodeSelector kubernetes.io/team=a") },
		},
		{
			// suite_test "should schedule pods that have node selectors with NotIn operator and undefined key".
			name: "NotIn on an undefined key schedules",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", types)},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi", withNodeAffinity([]corev1.NodeSelectorRequirement{{Key: "example.com/undefined", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"x"}}}))}},
			check: func(t *testing.T, v plan) { wantType(t, v, "p", "c.large") },
		},
		{
			// suite_test "should not schedule pods that have node selectors with Exists operator and undefined key".
			name: "Exists on an undefined key does not schedule",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", types)},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi", withNodeAffinity([]corev1.NodeSelectorRequirement{{Key: "example.com/undefined", Operator: corev1.NodeSelectorOpExists}}))}},
			check: func(t *testing.T, v plan) { wantUnschedulable(t, v, "p", "example.com/undefined") },
		},
		{
			// suite_test "should schedule pods that with DoesNotExists operator and undefined key".
			name: "DoesNotExist on an undefined key schedules",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", types)},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi", withNodeAffinity([]corev1.NodeSelectorRequirement{{Key: "example.com/undefined", Operator: corev1.NodeSelectorOpDoesNotExist}}))}},
			check: func(t *testing.T, v plan) { wantType(t, v, "p", "c.large") },
		},
		{
			// suite_test "should schedule pods that have matching requirements" on a NodePool custom label:
			// the pool's single-valued custom requirement becomes the node's label.
			name: "a NodePool's custom requirement labels its nodes for pods selecting it",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", types, withPoolRequirement("example.com/team", corev1.NodeSelectorOpIn, "a"))},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi", withNodeSelector("example.com/team", "a"))}},
			check: func(t *testing.T, v plan) {
				if n := v.nodeOf["p"]; n == nil || n.Labels["example.com/team"] != "a" {
					t.Fatalf("want a node labelled team=a: %+v", summary(v.r))
				}
			},
		},
	})
}

// zonesOf lists the zones of the pods' nodes, in pod order.
func zonesOf(v plan, names ...string) []string {
	var out []string
	for _, n := range names {
		if node := v.nodeOf[n]; node != nil {
			out = append(out, node.Zone)
		} else {
			out = append(out, "-")
		}
	}
	return out
}

func distinctNodes(v plan, names ...string) int {
	seen := map[*packer.NodePlan]bool{}
	for _, n := range names {
		if node := v.nodeOf[n]; node != nil {
			seen[node] = true
		}
	}
	return len(seen)
}

func names(ps []*corev1.Pod) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// Preferences are requirements until they cannot be met, then relaxed one
// at a time (preferences.go).
func TestKarpenterPreferences(t *testing.T) {
	cat := smallCatalog()
	def := nodePool("default", cat)
	oneNode := nodePool("default", cat, withLimit("nodes", "1"))
	app := map[string]string{"app": "web"}
	threeAnti := pods(3, "anti", "100m", "100Mi", withLabel("app", "web"), withPreferredAntiAffinity(10, scheduling.LabelHostname, app))
	threeSpread := pods(3, "spread", "100m", "100Mi", withLabel("app", "web"), withSpread(scheduling.LabelHostname, 1, corev1.ScheduleAnyway, app))
	runPackCases(t, []packCase{
		{
			// suite_test "Preferential Fallback": "should schedule compatible preferences and requirements with Operator=In".
			name: "satisfiable preferred zone is chosen over the cheapest",
			in: packer.Input{NodePools: []packer.NodePool{def},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi", withPreferredNodeAffinity(1, inZones("zone-c")))}},
			check: func(t *testing.T, v plan) {
				if z := zonesOf(v, "p"); z[0] != "zone-c" {
					t.Fatalf("zone %v, want zone-c: %+v", z, summary(v.r))
				}
			},
		},
		{
			// suite_test "should schedule even if preference requirements are conflicting".
			name: "unsatisfiable preference is relaxed",
			in: packer.Input{NodePools: []packer.NodePool{def},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi", withPreferredNodeAffinity(1, inZones("zone-x")))}},
			check: func(t *testing.T, v plan) { wantType(t, v, "p", "a.small") },
		},
		{
			// suite_test "should relax to use lighter weights".
			name: "heaviest preferred node term first, then the lighter one",
			in: packer.Input{NodePools: []packer.NodePool{def},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi", withPreferredNodeAffinity(50, inZones("zone-b")), withPreferredNodeAffinity(100, inZones("zone-x")))}},
			check: func(t *testing.T, v plan) {
				if z := zonesOf(v, "p"); z[0] != "zone-b" {
					t.Fatalf("zone %v, want zone-b", z)
				}
			},
		},
		{
			// suite_test "should schedule even if preference is conflicting with requirement".
			name: "preference conflicting with a requirement yields to it",
			in: packer.Input{NodePools: []packer.NodePool{def},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi", withNodeAffinity([]corev1.NodeSelectorRequirement{inZones("zone-a")}), withPreferredNodeAffinity(1, inZones("zone-b")))}},
			check: func(t *testing.T, v plan) {
				if z := zonesOf(v, "p"); z[0] != "zone-a" {
					t.Fatalf("zone %v, want zone-a", z)
				}
			},
		},
		{
			// topology_test "should respect pod affinity (hostname)", with the term preferred.
			name: "preferred pod affinity puts the pod beside its target",
			in: packer.Input{NodePools: []packer.NodePool{def}, Pods: []*corev1.Pod{
				pod("db", "1", "1Gi", withLabel("app", "db"), withNodeSelector(scheduling.LabelZone, "zone-b")),
				pod("web", "500m", "1Gi", withPreferredAffinity(10, scheduling.LabelZone, map[string]string{"app": "db"})),
			}},
			check: func(t *testing.T, v plan) {
				if z := zonesOf(v, "db", "web"); z[0] != z[1] {
					t.Fatalf("web in %s, db in %s", z[1], z[0])
				}
			},
		},
		{
			// topology_test "should allow violation of preferred pod affinity".
			name: "preferred pod affinity to no pod is relaxed",
			in: packer.Input{NodePools: []packer.NodePool{def},
				Pods: []*corev1.Pod{pod("web", "500m", "1Gi", withPreferredAffinity(10, scheduling.LabelHostname, map[string]string{"app": "none"}))}},
			check: func(t *testing.T, v plan) { wantType(t, v, "web", "a.small") },
		},
		{
			// topology_test "should separate nodes using simple pod anti-affinity on hostname", preferred.
			name: "preferred anti-affinity on hostname gives each pod its node",
			in:   packer.Input{NodePools: []packer.NodePool{def}, Pods: threeAnti},
			check: func(t *testing.T, v plan) {
				if n := distinctNodes(v, names(threeAnti)...); n != 3 {
					t.Fatalf("%d nodes, want 3: %+v", n, summary(v.r))
				}
			},
		},
		{
			// topology_test "should allow violation of preferred pod anti-affinity".
			name: "preferred anti-affinity yields when one node is all the pool may launch",
			in:   packer.Input{NodePools: []packer.NodePool{oneNode}, Pods: threeAnti},
			check: func(t *testing.T, v plan) {
				if n := distinctNodes(v, names(threeAnti)...); n != 1 || len(v.r.Unschedulable) != 0 {
					t.Fatalf("want all on one node: %+v", summary(v.r))
				}
			},
		},
		{
			// topology_test "should violate preferred pod anti-affinity on zone (inverse w/existing nodes)":
			// an existing pod's preferred anti-affinity does not keep others away.
			name: "existing pod's preferred anti-affinity binds only itself",
			in: packer.Input{NodePools: []packer.NodePool{def},
				Nodes: []packer.Node{{Name: "old", Labels: map[string]string{"kubernetes.io/arch": "amd64", scheduling.LabelZone: "zone-a"},
					Available: resources("cpu", "4", "memory", "8Gi", "pods", "10"),
					Pods:      []*corev1.Pod{pod("loner", "100m", "100Mi", withPreferredAntiAffinity(10, scheduling.LabelZone, app))}}},
				Pods: []*corev1.Pod{pod("web", "500m", "1Gi", withLabel("app", "web"))}},
			check: func(t *testing.T, v plan) {
				if v.on["web"] != "old" {
					t.Fatalf("web should use the existing node: %v %+v", v.on, summary(v.r))
				}
			},
		},
		{
			// topology_test "should spread pods ... (hostname)" with whenUnsatisfiable ScheduleAnyway:
			// the three pods that could each have their own node.
			name: "ScheduleAnyway hostname spread is honoured when it can be",
			in:   packer.Input{NodePools: []packer.NodePool{def}, Pods: threeSpread},
			check: func(t *testing.T, v plan) {
				if n := distinctNodes(v, names(threeSpread)...); n != 3 {
					t.Fatalf("%d nodes, want 3: %+v", n, summary(v.r))
				}
			},
		},
		{
			// topology_test "should violate max-skew when unsat = schedule anyway".
			name: "ScheduleAnyway spread is relaxed when it cannot be met",
			in:   packer.Input{NodePools: []packer.NodePool{oneNode}, Pods: threeSpread},
			check: func(t *testing.T, v plan) {
				if n := distinctNodes(v, names(threeSpread)...); n != 1 || len(v.r.Unschedulable) != 0 {
					t.Fatalf("want all on one node: %+v", summary(v.r))
				}
			},
		},
		{
			// preferences.go toleratePreferNoScheduleTaints: a PreferNoSchedule taint the pod
			// does not tolerate is avoided while an untainted pool fits.
			name: "PreferNoSchedule pool is avoided when another pool fits",
			in: packer.Input{NodePools: []packer.NodePool{
				nodePool("cheap-tainted", []*catalog.InstanceType{cat[2]}, withTaintEffect("spare", corev1.TaintEffectPreferNoSchedule)),
				nodePool("plain", []*catalog.InstanceType{cat[0]}),
			}, Pods: []*corev1.Pod{pod("p", "1", "1Gi")}},
			check: func(t *testing.T, v plan) {
				if n := v.nodeOf["p"]; n == nil || n.NodePool != "plain" {
					t.Fatalf("want the plain pool: %+v", summary(v.r))
				}
			},
		},
		{
			name: "PreferNoSchedule pool is used when it is the only one",
			in: packer.Input{NodePools: []packer.NodePool{
				nodePool("cheap-tainted", []*catalog.InstanceType{cat[2]}, withTaintEffect("spare", corev1.TaintEffectPreferNoSchedule)),
			}, Pods: []*corev1.Pod{pod("p", "1", "1Gi")}},
			check: func(t *testing.T, v plan) { wantType(t, v, "p", "a.small") },
		},
		{
			name: "a pod tolerating PreferNoSchedule takes the cheaper tainted pool",
			in: packer.Input{NodePools: []packer.NodePool{
				nodePool("cheap-tainted", []*catalog.InstanceType{cat[2]}, withTaintEffect("spare", corev1.TaintEffectPreferNoSchedule)),
				nodePool("plain", []*catalog.InstanceType{cat[0]}),
			}, Pods: []*corev1.Pod{pod("p", "1", "1Gi", withToleration("spare"))}},
			check: func(t *testing.T, v plan) { wantType(t, v, "p", "a.small") },
		},
	})
}

// Spread domains, namespace selectors and host ports.
func TestKarpenterTopology(t *testing.T) {
	cat := smallCatalog()
	def := nodePool("default", cat)
	app := map[string]string{"app": "web"}
	zoneAB := withNodeAffinity([]corev1.NodeSelectorRequirement{inZones("zone-a", "zone-b")})
	spread := withSpread(scheduling.LabelZone, 1, corev1.DoNotSchedule, app)
	four := func(opts ...podOption) []*corev1.Pod {
		return pods(4, "web", "100m", "100Mi", append([]podOption{withLabel("app", "web")}, opts...)...)
	}
	// zone-c only through a pool whose taint the pods do not tolerate.
	abPool := nodePool("ab", cat, withPoolRequirement(scheduling.LabelZone, corev1.NodeSelectorOpIn, "zone-a", "zone-b"))
	cPool := nodePool("c", cat, withPoolRequirement(scheduling.LabelZone, corev1.NodeSelectorOpIn, "zone-c"), withTaint("dedicated", "c"))
	balanced := func(want map[string]int) func(t *testing.T, v plan) {
		return func(t *testing.T, v plan) {
			got := map[string]int{}
			for _, z := range zonesOf(v, "web-0", "web-1", "web-2", "web-3") {
				got[z]++
			}
			for z, n := range want {
				if got[z] != n {
					t.Fatalf("zones %v, want %v: %+v", got, want, summary(v.r))
				}
			}
		}
	}
	runPackCases(t, []packCase{
		{
			// topology_test "should limit spread options by required node affinity".
			name:  "the pod's own zone affinity narrows its spread domains",
			in:    packer.Input{NodePools: []packer.NodePool{def}, Pods: four(spread, zoneAB)},
			check: balanced(map[string]int{"zone-a": 2, "zone-b": 2}),
		},
		{
			// topology_test "should not limit spread options by preferred node affinity".
			name: "a preferred zone does not narrow spread domains",
			in: packer.Input{NodePools: []packer.NodePool{def},
				Pods: pods(3, "web", "100m", "100Mi", withLabel("app", "web"), spread, withPreferredNodeAffinity(1, inZones("zone-a")))},
			check: func(t *testing.T, v plan) {
				z := zonesOf(v, "web-0", "web-1", "web-2")
				if z[0] == z[1] || z[1] == z[2] || z[0] == z[2] {
					t.Fatalf("zones %v, want one per zone", z)
				}
			},
		},
		{
			// topology_test "should balance pods across a label (NodeAffinityPolicy=ignore)":
			// zone-c counts though the pods cannot go there, so only one pod per allowed zone fits.
			name: "nodeAffinityPolicy Ignore counts domains the pod cannot reach",
			in:   packer.Input{NodePools: []packer.NodePool{def}, Pods: four(spread, withSpreadPolicies(corev1.NodeInclusionPolicyIgnore, ""), zoneAB)},
			check: func(t *testing.T, v plan) {
				if len(v.r.Unschedulable) != 2 {
					t.Fatalf("want 2 unschedulable: %+v", summary(v.r))
				}
				wantUnschedulable(t, v, "web-3", "topology spread")
			},
		},
		{
			// topology_test "should balance pods across a label (NodeTaintsPolicy=honor)".
			name:  "nodeTaintsPolicy Honor leaves out domains of untolerated taints",
			in:    packer.Input{NodePools: []packer.NodePool{abPool, cPool}, Pods: four(spread, withSpreadPolicies("", corev1.NodeInclusionPolicyHonor))},
			check: balanced(map[string]int{"zone-a": 2, "zone-b": 2}),
		},
		{
			// topology_test "should balance pods across a label (NodeTaintsPolicy=ignore)" (the default).
			name: "nodeTaintsPolicy Ignore counts domains of untolerated taints",
			in:   packer.Input{NodePools: []packer.NodePool{abPool, cPool}, Pods: four(spread)},
			check: func(t *testing.T, v plan) {
				if len(v.r.Unschedulable) != 2 {
					t.Fatalf("want 2 unschedulable: %+v", summary(v.r))
				}
			},
		},
		{
			// topology_test "should filter pod affinity topologies by namespace, matching pods namespace selector".
			name: "namespaceSelector selects namespaces by their labels",
			in: packer.Input{NodePools: []packer.NodePool{def},
				Namespaces: map[string]map[string]string{"payments": {"team": "a"}, "default": {}},
				Nodes: []packer.Node{{Name: "old", Labels: map[string]string{"kubernetes.io/arch": "amd64", scheduling.LabelZone: "zone-a"},
					Available: resources("cpu", "4", "memory", "8Gi", "pods", "10"),
					Pods:      []*corev1.Pod{pod("db", "100m", "100Mi", withNamespace("payments"), withLabel("app", "db"))}}},
				Pods: []*corev1.Pod{
					pod("near", "500m", "1Gi", withAffinityNamespaceSelector(false, scheduling.LabelHostname, map[string]string{"app": "db"}, map[string]string{"team": "a"})),
					pod("nowhere", "500m", "1Gi", withAffinityNamespaceSelector(false, scheduling.LabelHostname, map[string]string{"app": "db"}, map[string]string{"team": "b"})),
					pod("away", "500m", "1Gi", withAffinityNamespaceSelector(true, scheduling.LabelHostname, map[string]string{"app": "db"}, map[string]string{"team": "a"})),
					pod("unaffected", "500m", "1Gi", withAffinityNamespaceSelector(true, scheduling.LabelHostname, map[string]string{"app": "db"}, map[string]string{"team": "b"})),
				}},
			check: func(t *testing.T, v plan) {
				if v.on["near"] != "old" || v.on["unaffected"] != "old" {
					t.Errorf("near and unaffected belong on old: %v %+v", v.on, summary(v.r))
				}
				if v.on["away"] == "old" {
					t.Errorf("away must avoid old")
				}
				wantUnschedulable(t, v, "nowhere", "pod affinity")
			},
		},
		{
			// suite_test "should schedule pods with the same host port to different nodes".
			name: "pods binding the same host port get different nodes",
			in:   packer.Input{NodePools: []packer.NodePool{def}, Pods: pods(2, "hp", "100m", "100Mi", withHostPort(8080))},
			check: func(t *testing.T, v plan) {
				if n := distinctNodes(v, "hp-0", "hp-1"); n != 2 {
					t.Fatalf("%d nodes, want 2", n)
				}
			},
		},
		{
			// suite_test "Existing Nodes": a bound pod's host port keeps a newcomer binding it away.
			name: "an existing pod's host port keeps the newcomer off its node",
			in: packer.Input{NodePools: []packer.NodePool{def},
				Nodes: []packer.Node{{Name: "old", Labels: map[string]string{"kubernetes.io/arch": "amd64", scheduling.LabelZone: "zone-a"},
					Available: resources("cpu", "4", "memory", "8Gi", "pods", "10"),
					Pods:      []*corev1.Pod{pod("exporter", "100m", "100Mi", withHostPort(9100))}}},
				Pods: []*corev1.Pod{pod("hp", "100m", "100Mi", withHostPort(9100)), pod("free", "100m", "100Mi")}},
			check: func(t *testing.T, v plan) {
				if v.on["hp"] == "old" || v.on["free"] != "old" {
					t.Fatalf("hp must avoid old, free use it: %v %+v", v.on, summary(v.r))
				}
			},
		},
		{
			// A DaemonSet binding the port runs on every node: the pod fits nowhere.
			name: "a DaemonSet's host port keeps the pod off every node",
			in: packer.Input{NodePools: []packer.NodePool{def}, DaemonSetPods: []*corev1.Pod{pod("node-exporter", "10m", "10Mi", withHostPort(9100))},
				Pods: []*corev1.Pod{pod("hp", "100m", "100Mi", withHostPort(9100))}},
			check: func(t *testing.T, v plan) { wantUnschedulable(t, v, "hp", "host port") },
		},
	})
}

// hostTerm is a volume node affinity term on a hostname (and a zone, when
// given); zoneTerm one on a zone only.
func hostTerm(host, zone string) corev1.NodeSelectorTerm {
	term := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{host}}}}
	if zone != "" {
		term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{Key: scheduling.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}})
	}
	return term
}

func zoneTerm(zone string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: scheduling.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}
}

func withLocal(pv *corev1.PersistentVolume) {
	pv.Spec.Local = &corev1.LocalVolumeSource{Path: "/mnt/disks/ssd1"}
}

func withHostPath(pv *corev1.PersistentVolume) {
	pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/data"}
}

// hostVolume is a volume name, bound to claim name-claim, whose node
// affinity is terms (ORed); source, when not nil, sets its kind.
func hostVolume(name string, source func(*corev1.PersistentVolume), terms ...corev1.NodeSelectorTerm) packer.Storage {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: terms}}}}
	if source != nil {
		source(pv)
	}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name + "-claim", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: name}}
	return packer.Storage{PersistentVolumes: []*corev1.PersistentVolume{pv}, PersistentVolumeClaims: []*corev1.PersistentVolumeClaim{claim}}
}

// Volume topology (Karpenter's volumetopology.go; suite_test "Volume Topology Requirements").
func TestKarpenterVolumeTopology(t *testing.T) {
	cat := smallCatalog()
	def := nodePool("default", cat)
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	immediate := storagev1.VolumeBindingImmediate
	zonal := func(name, key, zone string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}}}}}
	}
	claim := func(name, volume string, class *string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume, StorageClassName: class}}
	}
	class := func(name string, mode storagev1.VolumeBindingMode, zones ...string) *storagev1.StorageClass {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, VolumeBindingMode: &mode}
		if len(zones) > 0 {
			sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: scheduling.LabelZone, Values: zones}}}}
		}
		return sc
	}
	withClaim := func(name string) podOption {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
		}
	}
	gp3 := "gp3"
	fast := "fast"
	storage := packer.Storage{
		PersistentVolumes: []*corev1.PersistentVolume{zonal("pv-b", scheduling.LabelZone, "zone-b"), zonal("pv-c", "topology.ebs.csi.aws.com/zone", "zone-c")},
		PersistentVolumeClaims: []*corev1.PersistentVolumeClaim{
			claim("bound-b", "pv-b", nil), claim("bound-c", "pv-c", nil), claim("unbound", "", &gp3), claim("immediate", "", &fast),
		},
		StorageClasses: []*storagev1.StorageClass{class("gp3", wffc, "zone-c"), class("fast", immediate, "zone-a")},
	}
	cases := []packCase{
		{
			// suite_test "should launch nodes for pods with bound persistent volumes in the volume's zone"
			// (aws/karpenter-provider-aws#1011).
			name: "a claim bound to a zonal volume pins the pod to its zone",
			in:   packer.Input{NodePools: []packer.NodePool{def}, Storage: storage, Pods: []*corev1.Pod{pod("p", "1", "1Gi", withClaim("bound-b"))}},
			check: func(t *testing.T, v plan) {
				if z := zonesOf(v, "p"); z[0] != "zone-b" {
					t.Fatalf("zone %v, want zone-b", z)
				}
			},
		},
		{
			name: "the EBS CSI zone key is the zone",
			in:   packer.Input{NodePools: []packer.NodePool{def}, Storage: storage, Pods: []*corev1.Pod{pod("p", "1", "1Gi", withClaim("bound-c"))}},
			check: func(t *testing.T, v plan) {
				if z := zonesOf(v, "p"); z[0] != "zone-c" {
					t.Fatalf("zone %v, want zone-c: %+v", z, summary(v.r))
				}
			},
		},
		{
			// suite_test "should launch nodes for pods with unbound volumes in the storage class's allowed topologies".
			name: "an unbound claim of a WaitForFirstConsumer class follows allowedTopologies",
			in:   packer.Input{NodePools: []packer.NodePool{def}, Storage: storage, Pods: []*corev1.Pod{pod("p", "1", "1Gi", withClaim("unbound"))}},
			check: func(t *testing.T, v plan) {
				if z := zonesOf(v, "p"); z[0] != "zone-c" {
					t.Fatalf("zone %v, want zone-c: %+v", z, summary(v.r))
				}
			},
		},
		{
			// An Immediate class binds before scheduling: its topologies do not steer the pod.
			name: "an Immediate class's allowedTopologies do not apply",
			in:   packer.Input{NodePools: []packer.NodePool{def}, Storage: storage, Pods: []*corev1.Pod{pod("p", "1", "1Gi", withClaim("immediate"))}},
			check: func(t *testing.T, v plan) {
				if z := zonesOf(v, "p"); z[0] != "zone-a" {
					t.Fatalf("zone %v, want the cheapest (zone-a)", z)
				}
			},
		},
		{
			// suite_test "should not launch nodes for pods with conflicting volume and node requirements".
			name: "volume zone conflicting with the pod's zone selector",
			in: packer.Input{NodePools: []packer.NodePool{def}, Storage: storage,
				Pods: []*corev1.Pod{pod("p", "1", "1Gi", withClaim("bound-b"), withNodeSelector(scheduling.LabelZone, "zone-a"))}},
			check: func(t *testing.T, v plan) { wantUnschedulable(t, v, "p", "volume topology") },
		},
		{
			// provisioning suite_test "should not schedule if invalid pvc".
			name: "a claim that does not exist keeps the pod pending",
			in:   packer.Input{NodePools: []packer.NodePool{def}, Storage: storage, Pods: []*corev1.Pod{pod("p", "1", "1Gi", withClaim("missing")), pod("ok", "1", "1Gi")}},
			check: func(t *testing.T, v plan) {
				wantUnschedulable(t, v, "p", "persistentvolumeclaim default/missing does not exist")
				wantType(t, v, "ok", "a.small") // "should schedule valid pods when a pod with an invalid pvc is encountered"
			},
		},
		{
			// provisioning suite_test "should not schedule with a missing storage class if the pvc is not bound".
			name: "an unbound claim whose storage class is missing keeps the pod pending",
			in: packer.Input{NodePools: []packer.NodePool{def}, Storage: packer.Storage{PersistentVolumeClaims: []*corev1.PersistentVolumeClaim{claim("orphan", "", &fast)}},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi", withClaim("orphan"))}},
			check: func(t *testing.T, v plan) {
				wantUnschedulable(t, v, "p", "storageclass fast of the unbound claim does not exist")
			},
		},
		{
			// provisioning suite_test "should schedule with a missing storage class if the pvc is bound".
			name: "a bound claim needs no storage class",
			in: packer.Input{NodePools: []packer.NodePool{def}, Storage: packer.Storage{
				PersistentVolumeClaims: []*corev1.PersistentVolumeClaim{claim("bound-b", "pv-b", &fast)}, PersistentVolumes: storage.PersistentVolumes},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi", withClaim("bound-b"))}},
			check: func(t *testing.T, v plan) {
				if z := zonesOf(v, "p"); z[0] != "zone-b" {
					t.Fatalf("zone %v, want zone-b", z)
				}
			},
		},
		{
			// provisioning suite_test "should ignore hostname affinity scheduling when using local path volumes":
			// the pod is placed anew, and no new node carries the old node's name.
			name: "a local volume's hostname is ignored, its zone is not",
			in: packer.Input{NodePools: []packer.NodePool{def}, Storage: hostVolume("local", withLocal, hostTerm("gone", "zone-b")),
				Pods: []*corev1.Pod{pod("p", "1", "1Gi", withClaim("local-claim"))}},
			check: func(t *testing.T, v plan) {
				if z := zonesOf(v, "p"); z[0] != "zone-b" {
					t.Fatalf("zone %v, want zone-b: %+v", z, summary(v.r))
				}
			},
		},
		{
			name: "a hostPath volume's hostname is ignored",
			in: packer.Input{NodePools: []packer.NodePool{def}, Storage: hostVolume("hostpath", withHostPath, hostTerm("gone", "")),
				Pods: []*corev1.Pod{pod("p", "1", "1Gi", withClaim("hostpath-claim"))}},
			check: func(t *testing.T, v plan) { wantType(t, v, "p", "a.small") },
		},
		{
			// scheduling suite_test "should preserve unconstrained PV alternatives after ignoring hostname affinity".
			name: "a hostname-only term of a local volume leaves the pod unconstrained",
			in: packer.Input{NodePools: []packer.NodePool{def}, Storage: hostVolume("either", withLocal, hostTerm("gone", ""), zoneTerm("invalid-zone")),
				Pods: []*corev1.Pod{pod("p", "1", "1Gi", withClaim("either-claim"))}},
			check: func(t *testing.T, v plan) { wantType(t, v, "p", "a.small") },
		},
		{
			// provisioning suite_test "should not ignore hostname affinity when using non-local path volumes".
			name: "another volume's hostname still pins the pod",
			in: packer.Input{NodePools: []packer.NodePool{def}, Storage: hostVolume("ebs", nil, hostTerm("gone", "")),
				Pods: []*corev1.Pod{pod("p", "1", "1Gi", withClaim("ebs-claim"))}},
			check: func(t *testing.T, v plan) { wantUnschedulable(t, v, "p", "") },
		},
		{
			name: "pods of one spec with different volumes are planned apart",
			in: packer.Input{NodePools: []packer.NodePool{def}, Storage: storage,
				Pods: []*corev1.Pod{pod("b", "100m", "100Mi", withClaim("bound-b")), pod("c", "100m", "100Mi", withClaim("bound-c"))}},
			check: func(t *testing.T, v plan) {
				if z := zonesOf(v, "b", "c"); z[0] != "zone-b" || z[1] != "zone-c" {
					t.Fatalf("zones %v, want [zone-b zone-c]", z)
				}
			},
		},
	}
	runPackCases(t, cases)
	// The same cases with the storage indexed once beforehand
	// (Input.Volumes), as a disruption pass packs: Storage is then unread.
	indexed := make([]packCase, 0, len(cases))
	for _, tc := range cases {
		tc.name = "indexed once: " + tc.name
		tc.in.Volumes = packer.NewVolumeConstraints(tc.in.Storage)
		tc.in.Storage = packer.Storage{}
		indexed = append(indexed, tc)
	}
	runPackCases(t, indexed)
}

func withMinValues(key string, n int) poolOption {
	return func(np *packer.NodePool) {
		if np.MinValues == nil {
			np.MinValues = map[string]int{}
		}
		np.MinValues[key] = n
	}
}

// optionTypes lists the distinct instance types of a node's options.
func optionTypes(n *packer.NodePlan) map[string]bool {
	out := map[string]bool{}
	for _, o := range n.Options {
		out[o.InstanceType] = true
	}
	return out
}

// minValues on NodePool requirements (instance_selection_test "minValues").
func TestKarpenterMinValues(t *testing.T) {
	sizes := []*catalog.InstanceType{
		withTypeLabels(instanceType("m.small", "amd64", everywhere(0.04, 0.10), "cpu", "2", "memory", "8Gi", "pods", "10"), scheduling.LabelInstanceFamily, "m"),
		withTypeLabels(instanceType("m.medium", "amd64", everywhere(0.08, 0.20), "cpu", "4", "memory", "16Gi", "pods", "20"), scheduling.LabelInstanceFamily, "m"),
		withTypeLabels(instanceType("c.large", "amd64", everywhere(0.15, 0.38), "cpu", "8", "memory", "16Gi", "pods", "40"), scheduling.LabelInstanceFamily, "c"),
		withTypeLabels(instanceType("m.large", "amd64", everywhere(0.16, 0.40), "cpu", "8", "memory", "32Gi", "pods", "40"), scheduling.LabelInstanceFamily, "m"),
	}
	types := withPoolRequirement(scheduling.LabelInstanceType, corev1.NodeSelectorOpIn, "m.small", "m.medium", "c.large", "m.large")
	runPackCases(t, []packCase{
		{
			// "should schedule respecting the minValues from instance-type requirements".
			name: "options span minValues instance types",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", sizes, types, withMinValues(scheduling.LabelInstanceType, 3))},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi")}},
			check: func(t *testing.T, v plan) {
				if n := v.nodeOf["p"]; n == nil || len(optionTypes(n)) < 3 || n.InstanceType != "m.small" {
					t.Fatalf("want m.small with >= 3 option types: %+v", v.r.NewNodes)
				}
			},
		},
		{
			// "should schedule and respect multiple requirement keys with minValues".
			name: "minValues on instance family",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", sizes, withMinValues("karpenter.k8s.aws/instance-family", 2))},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi")}},
			check: func(t *testing.T, v plan) {
				n := v.nodeOf["p"]
				families := map[string]bool{}
				for name := range optionTypes(n) {
					families[name[:1]] = true
				}
				if len(families) < 2 {
					t.Fatalf("option families %v, want 2", families)
				}
			},
		},
		{
			// "schedule should fail if minimum number of InstanceTypes is not met as per the minValues in the requirement".
			name: "a pod only one type can hold fails minValues 2",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", sizes, types, withMinValues(scheduling.LabelInstanceType, 2))},
				Pods: []*corev1.Pod{pod("big", "7", "20Gi")}},
			check: func(t *testing.T, v plan) { wantUnschedulable(t, v, "big", "minValues 2") },
		},
		{
			// Millwright differs: Karpenter's scheduler stops adding pods to a claim
			// before it drops below minValues; the packer packs, then sheds pods from
			// a node whose options fall short and plans them again.
			name: "a node too full for minValues is split",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", sizes, types, withMinValues(scheduling.LabelInstanceType, 2))},
				Pods: pods(3, "p", "2500m", "2Gi")},
			check: func(t *testing.T, v plan) {
				if len(v.r.Unschedulable) > 0 {
					t.Fatalf("all pods fit: %+v", summary(v.r))
				}
				for i := range v.r.NewNodes {
					if got := optionTypes(&v.r.NewNodes[i]); len(got) < 2 {
						t.Errorf("node %s options %v, want >= 2 types", v.r.NewNodes[i].Name, got)
					}
				}
			},
		},
	})
}
