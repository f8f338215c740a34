package disruption_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/disruption"
	"github.com/millwright/millwright/model/scheduling"
)

// threeZoneTypes is the test catalog offered in zone-a, zone-b and zone-c.
func threeZoneTypes() []*catalog.InstanceType {
	var out []*catalog.InstanceType
	for _, it := range types() {
		var offerings catalog.Offerings
		for _, z := range []string{"zone-a", "zone-b", "zone-c"} {
			for _, o := range it.Offerings {
				o.Zone = z
				offerings = append(offerings, o)
			}
		}
		it.Offerings = offerings
		out = append(out, it)
	}
	return out
}

func inZone(z string) nodeOpt {
	return func(n *disruption.Node) { n.Zone, n.Labels[scheduling.LabelZone] = z, z }
}

func zoneSpread(p *corev1.Pod) {
	p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: scheduling.LabelZone,
		WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
}

func hostAntiAffinity(p *corev1.Pod) {
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: scheduling.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}
}

func nodeSelector(k, v string) podOpt {
	return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{k: v} }
}

func otherApp(p *corev1.Pod)  { p.Labels["app"] = "other" }
func otherApp2(p *corev1.Pod) { p.Labels["app"] = "batch" }

func withoutScore(in disruption.Input) disruption.Input {
	in.Options.ConsolidationThreshold = -1
	return in
}

func TestConsolidationConstraints(t *testing.T) {
	runCases(t, []computeCase{
		{
			name:   "zone spread: a pod does not move where it would break maxSkew, it is replaced in its zone",
			source: "consolidation_test.go: Topology Consideration / can replace node maintaining zonal topology spread",
			in: input(pools(pool("default", launchTypes(threeZoneTypes()), consolidateAfter("1m"))),
				node("a1", "default", "c.large", inZone("zone-a"), running(pod("w-a", "1", "1Gi", zoneSpread)), lastPodEvent(now)),
				node("b1", "default", "c.large", inZone("zone-b"), running(pod("w-b", "1", "1Gi", zoneSpread))),
				node("b2", "default", "c.small", inZone("zone-b"), running(pods(2, "full", "1", "1Gi", otherApp)...), lastPodEvent(now)),
				node("c1", "default", "c.large", inZone("zone-c"), running(pod("w-c", "1", "1Gi", zoneSpread)), lastPodEvent(now)),
				node("a2", "default", "c.xlarge", inZone("zone-a"), running(pod("o", "1", "1Gi", otherApp)), lastPodEvent(now))),
			want: []string{"Underutilized/replace [b1] → [c.small/on-demand]"},
		},
		{
			name:   "without the spread the same pod moves onto the free node",
			source: "consolidation_test.go: Delete / can delete nodes (control for the topology case)",
			in: input(pools(pool("default", launchTypes(threeZoneTypes()), consolidateAfter("1m"))),
				node("a1", "default", "c.large", inZone("zone-a"), running(pod("w-a", "1", "1Gi")), lastPodEvent(now)),
				node("b1", "default", "c.large", inZone("zone-b"), running(pod("w-b", "1", "1Gi"))),
				node("a2", "default", "c.xlarge", inZone("zone-a"), running(pod("o", "1", "1Gi", otherApp)), lastPodEvent(now))),
			want: []string{"Underutilized/delete [b1]"},
		},
		{
			name:   "hostname anti-affinity: a pod does not join another of its kind",
			source: "consolidation_test.go: Topology Consideration / won't delete node if it would violate pod anti-affinity",
			in: input(pools(pool("default", consolidateAfter("1m"))),
				node("n1", "default", "c.large", running(pod("w-1", "1", "1Gi", hostAntiAffinity)), lastPodEvent(now)),
				node("n2", "default", "c.large", running(pod("w-2", "1", "1Gi", hostAntiAffinity)))),
			want: []string{"Underutilized/replace [n2] → [c.small/on-demand]"},
		},
		{
			name:   "anti-affinity of a pod already on a node bars the pods it selects",
			source: "consolidation_test.go: Topology Consideration / won't delete node if it would violate pod anti-affinity (symmetric)",
			in: input(pools(pool("default", consolidateAfter("1m"))),
				node("n1", "default", "c.large", running(pod("guard", "1", "1Gi", otherApp, hostAntiAffinity)), lastPodEvent(now)),
				node("n2", "default", "c.large", running(pod("w", "1", "1Gi")))),
			want: []string{"Underutilized/replace [n2] → [c.small/on-demand]"},
		},
		{
			name:   "pods nothing selects move without topology checks beside pods that have some",
			source: "Millwright: only pods a term selects need the packer's topology",
			in: input(pools(pool("default", consolidateAfter("1m"))),
				node("n1", "default", "c.large", running(pod("guard", "1", "1Gi", otherApp, hostAntiAffinity)), lastPodEvent(now)),
				node("n2", "default", "c.large", running(pod("w", "1", "1Gi", otherApp2)))),
			want: []string{"Underutilized/delete [n2]"},
		},
		{
			name:   "a node selector only another pool satisfies: the replacement comes from it",
			source: "consolidation_test.go: Replace / can replace nodes with a node from another nodePool",
			in: input(pools(pool("a"), pool("b", func(np *disruption.NodePool) { np.Launch.Labels = map[string]string{"team": "b"} })),
				node("n1", "b", "c.xlarge", label("team", "b"), running(pod("p", "1", "1Gi", nodeSelector("team", "b"))))),
			want: []string{"Underutilized/replace [n1] → [c.small/on-demand]"},
		},
		{
			name:   "a pod no other node suits and no pool can launch for stays",
			source: "consolidation_test.go: Delete / won't delete node if it would require pods to schedule on an uninitialized node / with unsatisfiable selector",
			in: withoutScore(input(pools(pool("default")),
				node("n1", "default", "c.small", label("special", "yes"), running(pod("p", "1", "1Gi", nodeSelector("special", "yes")))),
				node("n2", "default", "c.xlarge", lastPodEvent(now.Add(1))))),
			verdicts: map[string]string{"n1": "Can't replace with a cheaper node"},
		},
		{
			name:   "DaemonSet overhead counts against a replacement",
			source: "consolidation_test.go: Replace / should consider daemonset overhead when replacing",
			in: func() disruption.Input {
				in := input(pools(pool("default")), node("n1", "default", "c.xlarge", running(pods(2, "a", "1", "1Gi")...)))
				ds := pod("ds", "1", "1Gi", daemonSetPod)
				in.DaemonSetPods = append(in.DaemonSetPods, ds)
				return in
			}(),
			want: []string{"Underutilized/replace [n1] → [c.medium/on-demand]"},
		},
		{
			name:   "a replacement stays within the pool's limits",
			source: "consolidation_test.go: Replace / won't replace node if the replacement would exceed the nodePool's limits",
			in: input(pools(pool("default", func(np *disruption.NodePool) {
				np.Launch.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("17")}
				np.Launch.Used = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16")}
			})), node("n1", "default", "c.xlarge", running(pods(2, "a", "1", "1Gi")...))),
			verdicts: map[string]string{"n1": "Can't replace with a cheaper node"},
		},
	})
	_ = apisv1.Group
}

// The pods of a command decided after the one being admitted stay put
// (Node.DecidedAfter): they do not compete for room, but they are still on
// their node, and kube-scheduler counts them for topology until they go. A
// pod barred from a zone by one of them does not move there.
func TestAdmissionCountsLaterCommandsPodsWhereTheyAre(t *testing.T) {
	zoneAntiAffinity := func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: scheduling.LabelZone, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}
	}
	decidedAfter := func(n *disruption.Node) { heldUncharged(n); n.DecidedAfter = true }
	for _, tc := range []struct {
		name, zone string
		want       []string
	}{
		{"a later command's pod in the only zone with room", "zone-a", nil},
		{"a later command's pod in another zone", "zone-c", []string{"Underutilized/delete [b]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := withoutScore(input(pools(pool("default", launchTypes(threeZoneTypes()), consolidateAfter("1m"), budgets(budget("100%")))),
				node("b", "default", "c.small", inZone("zone-b"), running(pod("w-b", "1", "1Gi", zoneAntiAffinity))),
				node("c", "default", "c.small", inZone(tc.zone), decidedAfter, running(pod("w-c", "1", "1Gi", zoneAntiAffinity))),
				node("x", "default", "c.small", inZone("zone-a"), running(pod("o", "1", "1Gi", otherApp)), lastPodEvent(now)),
			))
			in.Validation, in.Only = true, []string{"b"}
			if got := summaries(disruption.Compute(in)); !slices.Equal(got, tc.want) {
				t.Errorf("admission of b: %q, want %q", got, tc.want)
			}
		})
	}
}
