package disruption_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/disruption"
)

// With Options.SkipSettlingDestinations, a node still within its pool's
// consolidateAfter since its last pod event takes no pods consolidation
// moves (Karpenter v1.14, kubernetes-sigs/karpenter#3006); pending pods,
// pods of nodes already leaving, and drift and repair may still use it.
func TestConsolidationKeepsMovedPodsOffSettlingNodes(t *testing.T) {
	const source = "consolidation_test.go: Consolidation / "
	settling := lastPodEvent(now.Add(-10 * time.Second))
	// dest has room for src's pod; its pod event 10 s ago keeps it from
	// being a candidate and, within a 1m consolidateAfter, from taking
	// moved pods. src is as cheap as a node comes: it can only be deleted.
	dest := func(opts ...nodeOpt) disruption.Node {
		return node("dest", "default", "c.small", append([]nodeOpt{running(pods(2, "d", "500m", "1Gi")...)}, opts...)...)
	}
	src := func(opts ...podOpt) disruption.Node {
		return node("src", "default", "c.small", running(pod("s", "500m", "1Gi", opts...)))
	}
	oneMinute := pool("default", consolidateAfter("1m"))
	viaPacker := throughPacker
	skipping := func(in disruption.Input) disruption.Input {
		in.Options.SkipSettlingDestinations = true
		return in
	}
	// dest (settling) and other (held by do-not-disrupt) have room for
	// the pending pod; it goes to dest, the least allocated, so src's pod
	// fits other. Barred from dest too, the pending pod would take other's
	// room and src would stay.
	pendingBeside := func(srcOpts ...podOpt) disruption.Input {
		in := input(pools(oneMinute),
			node("dest", "default", "c.medium", running(pod("d", "1", "1Gi")), settling),
			node("other", "default", "c.small", running(pod("o", "500m", "1Gi")), annotated(apisv1.AnnotationDoNotDisrupt, "true")),
			node("src", "default", "c.small", running(pod("s", "1", "1Gi", srcOpts...))))
		in.PendingPods = []*corev1.Pod{pod("pending", "1500m", "1Gi")}
		return in
	}
	runCases(t, []computeCase{
		{
			name:     "a destination within its consolidateAfter takes no moved pods",
			source:   source + "should not consolidate pods onto a destination node that is under its consolidateAfter window",
			in:       skipping(input(pools(oneMinute), dest(settling), src())),
			verdicts: map[string]string{"src": "", "dest": "consolidateAfter 1m0s has not passed"},
		},
		{
			name:   "the same through the packer",
			source: "Millwright: the rule in simulations with topology",
			in:     skipping(input(pools(oneMinute), dest(settling), src(viaPacker))),
		},
		{
			name:   "once its consolidateAfter passed, it takes them",
			source: source + "should not consolidate pods onto a destination node that is under its consolidateAfter window (after the window)",
			in:     skipping(input(pools(oneMinute), dest(lastPodEvent(now.Add(-2*time.Minute))), src())),
			want:   []string{"Underutilized/delete [src]"},
		},
		{
			name:   "a destination whose pool never consolidates takes them",
			source: source + "should consolidate pods onto a destination node with consolidateAfter set to Never",
			in: skipping(input(pools(oneMinute, pool("keep", consolidateAfter("Never"))),
				node("dest", "keep", "c.small", running(pods(2, "d", "500m", "1Gi")...), settling), src())),
			want: []string{"Underutilized/delete [src]"},
		},
		{
			name:   "consolidateAfter 0s leaves no window",
			source: "pkg/utils/disruption IsUnderConsolidateAfter: a zero consolidateAfter is never under it",
			in:     skipping(input(pools(pool("default", consolidateAfter("0s"))), dest(lastPodEvent(now), annotated(apisv1.AnnotationDoNotDisrupt, "true")), src())),
			want:   []string{"Underutilized/delete [src]"},
		},
		{
			name:   "a replacement is launched whatever the destinations' windows",
			source: source + "should replace a node with a cheaper one even when consolidateAfter has not expired",
			in: skipping(input(pools(oneMinute), dest(settling),
				node("src", "default", "c.large", running(pod("s", "500m", "1Gi"))))),
			want: []string{"Underutilized/replace [src] → [c.small/on-demand]"},
		},
		{
			name:   "pending pods still go onto a settling node",
			source: "scheduler.go: pending pods are exempt from the consolidateAfter destination check",
			in:     skipping(pendingBeside()),
			want:   []string{"Underutilized/delete [src]"},
		},
		{
			name:   "pending pods still go onto a settling node, through the packer",
			source: "scheduler.go: pending pods are exempt from the consolidateAfter destination check",
			in:     skipping(pendingBeside(viaPacker)),
			want:   []string{"Underutilized/delete [src]"},
		},
		{
			name:   "drift moves pods onto a settling node",
			source: "drift.go: drift simulates without the consolidateAfter destination check",
			in: skipping(input(pools(oneMinute), dest(settling),
				node("src", "default", "c.small", running(pod("s", "500m", "1Gi")), stamped("old", "")))),
			want: []string{"Drifted/delete [src]"},
		},
	})
	// Off (the default), the settling destination takes the pod.
	runCases(t, []computeCase{{
		name:   "by default a settling destination takes moved pods",
		source: "Millwright: Options.SkipSettlingDestinations is off by default",
		in:     input(pools(oneMinute), dest(settling), src()),
		want:   []string{"Underutilized/delete [src]"},
	}})
}
