package disruption_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/disruption"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// throughPacker gives a pod a required anti-affinity that selects nothing:
// any such term sends a simulation through the packer instead of the quick
// fit.
func throughPacker(p *corev1.Pod) {
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: scheduling.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "none"}}}}}}
}

// A node not initialized yet (registered but not Ready with its startup
// taints gone, or still in flight) takes none of the pods consolidation or
// drift moves: Karpenter's SimulateScheduling refuses a decision whose
// pods would land on one ("would schedule against uninitialized
// nodeclaim"), as it may never become Ready and kube-scheduler places
// nothing on it until it is. Pending pods and the pods of nodes already
// leaving may use its room, and so may repair, which must take a broken
// node whatever becomes of its pods.
func TestMovedPodsStayOffUninitializedNodes(t *testing.T) {
	const source = "consolidation_test.go: Delete / "
	// fresh has room for src's pod; it is not initialized yet.
	fresh := func(opts ...nodeOpt) disruption.Node {
		return node("fresh", "default", "c.small", append([]nodeOpt{running(pods(2, "f", "500m", "1Gi")...), uninitialized}, opts...)...)
	}
	// src is as cheap as a node comes: it can only be deleted.
	src := func(opts ...podOpt) disruption.Node {
		return node("src", "default", "c.small", running(pod("s", "500m", "1Gi", opts...)))
	}
	// full is an initialized node without room for anything.
	full := func(name string) disruption.Node {
		return node(name, "default", "c.small", running(pods(2, name, "1", "1Gi")...), consolidationOff)
	}
	// roomy is an initialized node with one CPU free; empty is a node not
	// initialized yet with all of its four, so kube-scheduler's
	// LeastAllocated would rather have it.
	roomy := node("roomy", "default", "c.small", running(pod("r", "1", "1Gi")), consolidationOff)
	empty := node("empty", "default", "c.medium", uninitialized)
	// leavingBeside: empty and roomy have room for one 1-CPU pod each
	// besides, which the pod that comes first takes on empty (the least
	// allocated); src's pod then fits roomy. Barred from empty too, the
	// pod that comes first would take roomy's room and src would stay.
	leavingBeside := func(first func(*disruption.Input)) disruption.Input {
		in := input(pools(pool("default")), node("empty", "default", "c.small", uninitialized), roomy,
			node("src", "default", "c.small", running(pod("s", "1", "1Gi"))))
		first(&in)
		return in
	}
	inFlight := func(in disruption.Input, n packer.Node) disruption.Input {
		in.InFlight = append(in.InFlight, n)
		return in
	}
	threeCPU, _ := scheduling.ParseResources("cpu", "3", "memory", "12Gi", "pods", "100")
	runCases(t, []computeCase{
		{
			name:     "no delete whose pods need a node not initialized",
			source:   source + "won't delete node if it would require pods to schedule on an uninitialized node",
			in:       input(pools(pool("default")), fresh(), src()),
			verdicts: map[string]string{"src": "Not all pods would schedule, pod default/s would schedule against uninitialized node/fresh"},
		},
		{
			name:     "the same through the packer",
			source:   "Millwright: the rule in simulations with topology",
			in:       input(pools(pool("default")), fresh(), src(throughPacker)),
			verdicts: map[string]string{"src": "would schedule against uninitialized node/fresh"},
		},
		{
			name:   "nor one whose pods need an in-flight node",
			source: source + "won't delete node if it would require pods to schedule on an uninitialized node (the NodeClaim not registered yet)",
			in: inFlight(input(pools(pool("default")), node("n1", "default", "c.medium", running(pod("a", "1", "1Gi")))),
				packer.Node{Name: "claim-1", NodePool: "default", Labels: map[string]string{apisv1.LabelNodePool: "default"}, Available: threeCPU}),
			verdicts: map[string]string{"n1": "would schedule against uninitialized nodeclaim/claim-1"},
		},
		{
			name:   "nor a replacement Karpenter's scheduler would not need",
			source: "helpers.go SimulateScheduling: existing nodes, initialized or not, come before new NodeClaims",
			in: input(pools(pool("default")), fresh(),
				node("src", "default", "c.large", running(pod("s", "500m", "1Gi")))),
			verdicts: map[string]string{"src": "would schedule against uninitialized node/fresh"},
		},
		{
			name:   "an initialized node with room takes the pods first",
			source: "consolidation_test.go: Consolidation / should consider initialized nodes before uninitialized nodes",
			in:     input(pools(pool("default")), empty, roomy, src()),
			want:   []string{"Underutilized/delete [src]"},
		},
		{
			name:   "once initialized, it takes them",
			source: source + "won't delete node if it would require pods to schedule on an uninitialized node (once it is initialized)",
			in: input(pools(pool("default")),
				node("fresh", "default", "c.small", running(pods(2, "f", "500m", "1Gi")...), consolidationOff), src()),
			want: []string{"Underutilized/delete [src]"},
		},
		{
			name:   "the pods of a deleting node may go onto it",
			source: "suite_test.go: should allow pods on deleting nodes to reschedule to uninitialized nodes",
			in: leavingBeside(func(in *disruption.Input) {
				in.Nodes = append(in.Nodes, node("gone", "default", "c.small", running(pod("g", "1", "1Gi")), deleting))
			}),
			want: []string{"Underutilized/delete [src]"},
		},
		{
			name:   "pending pods may go onto it",
			source: "helpers.go SimulateScheduling: pending pods' errors do not count (AllNonPendingPodsScheduled)",
			in: leavingBeside(func(in *disruption.Input) {
				in.PendingPods = []*corev1.Pod{pod("pending", "1", "1Gi")}
			}),
			want: []string{"Underutilized/delete [src]"},
		},
		{
			name:     "drift waits rather than move pods onto it",
			source:   "drift.go: drift simulates with SimulateScheduling, which refuses uninitialized destinations",
			in:       input(pools(pool("default")), fresh(), node("src", "default", "c.small", running(pod("s", "500m", "1Gi")), stamped("old", ""))),
			verdicts: map[string]string{"src": "would schedule against uninitialized node/fresh"},
		},
		{
			name:   "drift launches when no node not initialized holds the pods",
			source: "drift_test.go: should replace drifted nodes",
			in: input(pools(pool("default")), fresh(func(n *disruption.Node) { n.Pods = nil }, running(pods(2, "f", "1", "1Gi")...)),
				node("src", "default", "c.small", running(pod("s", "500m", "1Gi")), stamped("old", ""))),
			want: []string{"Drifted/replace [src] → [c.small/on-demand]"},
		},
		{
			name:   "repair moves a broken node's pods onto it and launches for the rest",
			source: "node/health: a broken node goes whatever becomes of its pods",
			in: input(pools(pool("default")), full("h1"), full("h2"), full("h3"), full("h4"), empty,
				node("sick", "default", "c.large", running(pods(5, "k", "1", "1Gi")...), notReady(corev1.ConditionUnknown, now.Add(-31*time.Minute)), consolidationOff)),
			// Four of its pods go onto empty; barred from it, none would
			// find a place and the node would go without a replacement.
			want: []string{"Unhealthy/replace [sick] → [c.small/on-demand]"},
		},
	})
}
