package packer_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// wantZones fails unless the new node of pod may launch in exactly want
// (the plan's zone first), with every option in one of them.
func wantZones(t *testing.T, v plan, pod string, want ...string) {
	t.Helper()
	n := v.nodeOf[pod]
	if n == nil {
		t.Fatalf("%s: not on a new node: %+v", pod, summary(v.r))
	}
	got := slices.Clone(n.Zones)
	slices.Sort(got[1:])
	if !slices.Equal(got, want) {
		t.Fatalf("%s: node %s may launch in %v, want %v (options %+v)", pod, n.Name, n.Zones, want, n.Options)
	}
	for _, o := range n.Options {
		if !slices.Contains(want, n.ZoneOf(o)) {
			t.Fatalf("%s: option %+v outside %v", pod, o, want)
		}
	}
}

// zonePriced offers spot at the given price per zone (a, b, c) and
// on-demand at 1.00 everywhere.
func zonePriced(a, b, c float64) []catalog.Offering {
	var out []catalog.Offering
	for i, price := range []float64{a, b, c} {
		out = append(out, offer(zones[i], scheduling.CapacityTypeSpot, price), offer(zones[i], scheduling.CapacityTypeOnDemand, 1.00))
	}
	return out
}

// A node whose pods do not depend on its zone offers CreateFleet its
// options in every zone, as a Karpenter NodeClaim does, so that
// price-capacity-optimized chooses among every zone's pools: pinned to the
// cheapest zone, the issue-12 workload's fresh plan launched at $5.00/h
// instead of its $3.55/h (the emulator's deep pools), $3.76/h across zones.
func TestZoneFreeNodesLaunchInAnyZone(t *testing.T) {
	cat := smallCatalog()
	def := nodePool("default", cat)
	spread := pods(3, "spread", "100m", "100Mi", withLabel("app", "s"), withSpread(scheduling.LabelZone, 1, corev1.DoNotSchedule, map[string]string{"app": "s"}))
	soft := pod("soft", "100m", "100Mi", withLabel("app", "soft"), withSpread(scheduling.LabelZone, 1, corev1.ScheduleAnyway, map[string]string{"app": "soft"}))
	counted := pod("counted", "1500m", "1Gi", withLabel("app", "x"))
	counter := pod("counter", "100m", "100Mi", withAntiAffinity(scheduling.LabelZone, map[string]string{"app": "x"}))
	hostAnti := pods(2, "host", "100m", "100Mi", withLabel("app", "h"), withAntiAffinity(scheduling.LabelHostname, map[string]string{"app": "h"}))
	priced := []*catalog.InstanceType{
		instanceType("t.small", "amd64", zonePriced(0.04, 0.05, 0.30), "cpu", "2", "memory", "8Gi", "pods", "10"),
		instanceType("t.medium", "amd64", zonePriced(0.08, 0.09, 0.10), "cpu", "4", "memory", "16Gi", "pods", "20"),
	}
	runPackCases(t, []packCase{
		{"pods without zone constraints may launch in every zone", packer.Input{NodePools: []packer.NodePool{def}, Pods: pods(2, "free", "1", "1Gi")},
			func(t *testing.T, v plan) {
				n := v.nodeOf["free-0"]
				if n == nil || len(n.Zones) != 3 {
					t.Fatalf("want a node that may launch in 3 zones, got %+v", summary(v.r))
				}
				wantZones(t, v, "free-0", "zone-a", "zone-b", "zone-c")
				if n.Options[0].InstanceType != n.InstanceType || n.Options[0].Zone != n.Zone || packer.OptionTypes(n.Options) >= len(n.Options) {
					t.Fatalf("want the chosen launch first and several zones per type, got %+v", n.Options)
				}
			}},
		{"a zone spread pins its pods' node to the zone it was counted in", packer.Input{NodePools: []packer.NodePool{def}, Pods: spread},
			func(t *testing.T, v plan) {
				for _, p := range spread {
					wantZones(t, v, p.Name, v.nodeOf[p.Name].Zone)
				}
			}},
		{"a ScheduleAnyway zone spread pins too", packer.Input{NodePools: []packer.NodePool{def}, Pods: []*corev1.Pod{soft}},
			func(t *testing.T, v plan) { wantZones(t, v, "soft", v.nodeOf["soft"].Zone) }},
		{"a pod another pod's zone anti-affinity counts is pinned", packer.Input{NodePools: []packer.NodePool{def}, Pods: []*corev1.Pod{counted, counter}},
			func(t *testing.T, v plan) { wantZones(t, v, "counted", v.nodeOf["counted"].Zone) }},
		{"a zone node selector narrows the zones to its own", packer.Input{NodePools: []packer.NodePool{def}, Pods: []*corev1.Pod{pod("b-only", "1", "1Gi", withNodeSelector(scheduling.LabelZone, "zone-b"))}},
			func(t *testing.T, v plan) { wantZones(t, v, "b-only", "zone-b") }},
		{"a zone requirement of the pool narrows the zones", packer.Input{NodePools: []packer.NodePool{nodePool("ab", cat, withPoolRequirement(scheduling.LabelZone, corev1.NodeSelectorOpIn, "zone-a", "zone-b"))}, Pods: pods(1, "ab", "1", "1Gi")},
			func(t *testing.T, v plan) {
				wantZones(t, v, "ab-0", v.nodeOf["ab-0"].Zone, map[string]string{"zone-a": "zone-b", "zone-b": "zone-a"}[v.nodeOf["ab-0"].Zone])
			}},
		{"hostname anti-affinity leaves the zones open", packer.Input{NodePools: []packer.NodePool{def}, Pods: hostAnti},
			func(t *testing.T, v plan) {
				for _, p := range hostAnti {
					if n := v.nodeOf[p.Name]; n == nil || len(n.Zones) != 3 {
						t.Fatalf("%s: want a node that may launch in 3 zones, got %+v", p.Name, summary(v.r))
					}
				}
			}},
		{"other zones' offerings cost at most the dearest option of the node's zone", packer.Input{NodePools: []packer.NodePool{nodePool("priced", priced)}, Pods: pods(1, "p", "1", "1Gi")},
			func(t *testing.T, v plan) {
				n := v.nodeOf["p-0"]
				var got []string
				for _, o := range n.Options {
					got = append(got, o.InstanceType+"@"+n.ZoneOf(o))
				}
				// zone-a: t.small 0.04, t.medium 0.08; zone-b's t.small
				// (0.05) is within 0.08, its t.medium (0.09) and every
				// zone-c offering are not.
				if want := "t.small@zone-a t.small@zone-b t.medium@zone-a"; strings.Join(got, " ") != want {
					t.Fatalf("options %s, want %s", strings.Join(got, " "), want)
				}
				wantZones(t, v, "p-0", "zone-a", "zone-b")
			}},
	})
}

func TestVerifyChecksOptionsInOtherZones(t *testing.T) {
	cat := smallCatalog()
	small := cat[0]
	def := nodePool("default", cat)
	free := pod("free", "1", "1Gi")
	spread := pod("spread", "1", "1Gi", withLabel("app", "s"), withSpread(scheduling.LabelZone, 1, corev1.DoNotSchedule, map[string]string{"app": "s"}))
	counted := pod("counted", "1", "1Gi", withLabel("app", "x"))
	counter := pod("counter", "100m", "100Mi", withAntiAffinity(scheduling.LabelZone, map[string]string{"app": "x"}))
	aOnly := pod("a-only", "1", "1Gi", withNodeSelector(scheduling.LabelZone, "zone-a"))
	withB := func(n packer.NodePlan) packer.NodePlan {
		n.Options = []packer.InstanceTypeOption{{InstanceType: small.Name, CapacityType: "spot", Zone: "zone-a", Price: 0.04}, {InstanceType: small.Name, CapacityType: "spot", Zone: "zone-b", Price: 0.04}}
		n.Zones = []string{"zone-a", "zone-b"}
		return n
	}
	tests := []struct {
		name string
		pods []*corev1.Pod
		on   []*corev1.Pod
		want string
	}{
		{"zone-free pod", []*corev1.Pod{free}, []*corev1.Pod{free}, ""},
		{"pod with a zone spread", []*corev1.Pod{spread}, []*corev1.Pod{spread}, "has a topology term on topology.kubernetes.io/zone"},
		{"pod counted by a zone anti-affinity", []*corev1.Pod{counted, counter}, []*corev1.Pod{counted}, "a topology term on topology.kubernetes.io/zone counts it"},
		{"pod restricted to the plan's zone", []*corev1.Pod{aOnly}, []*corev1.Pod{aOnly}, "option in zone-b: its nodeSelector"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := packer.Input{NodePools: []packer.NodePool{def}, Pods: tc.pods}
			r := packer.Result{NewNodes: []packer.NodePlan{withB(planned("n1", def, small, "zone-a", "spot", 0.04, tc.on...))}}
			for _, p := range tc.pods {
				if !slices.Contains(tc.on, p) {
					r.NewNodes = append(r.NewNodes, planned("n2", def, small, "zone-c", "spot", 0.04, p))
				}
			}
			err := packer.Verify(in, r)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected violation: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("violation %q not caught", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("want %q, got %v", tc.want, err)
			}
		})
	}
}
