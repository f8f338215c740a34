package disruption_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/disruption"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// summary renders a command as "Reason/kind [candidates] → [type/capacity ...]".
func summary(cmd disruption.Command) string {
	var names, repl []string
	for _, c := range cmd.Candidates {
		names = append(names, c.NodeName)
	}
	for _, r := range cmd.Replacements {
		repl = append(repl, r.InstanceType+"/"+r.CapacityType)
	}
	s := fmt.Sprintf("%s/%s [%s]", cmd.Reason, cmd.Kind, strings.Join(names, " "))
	if len(repl) > 0 {
		s += " → [" + strings.Join(repl, " ") + "]"
	}
	return s
}

func summaries(r disruption.Result) []string {
	var out []string
	for _, c := range r.Commands {
		out = append(out, summary(c))
	}
	return out
}

func verdictOf(r disruption.Result, name string) (disruption.Verdict, bool) {
	for _, v := range r.Verdicts {
		if v.NodeName == name {
			return v, true
		}
	}
	return disruption.Verdict{}, false
}

type computeCase struct {
	name string
	// source names the Karpenter test the case follows.
	source string
	in     disruption.Input
	want   []string
	// verdicts: node name → substring of its verdict's message.
	verdicts map[string]string
}

func runCases(t *testing.T, cases []computeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := disruption.Compute(tc.in)
			if got := summaries(r); !slices.Equal(got, tc.want) {
				t.Errorf("commands:\n got %q\nwant %q", got, tc.want)
				for _, c := range r.Commands {
					t.Logf("  %s", c.Message)
				}
				for _, v := range r.Verdicts {
					t.Logf("  verdict %s: %s %s", v.NodeName, v.Event, v.Message)
				}
			}
			for name, want := range tc.verdicts {
				v, ok := verdictOf(r, name)
				if !ok {
					t.Errorf("no verdict for %s", name)
					continue
				}
				if !strings.Contains(v.Message, want) {
					t.Errorf("verdict of %s = %q (event %q), want it to contain %q", name, v.Message, v.Event, want)
				}
			}
			checkDisjoint(t, r)
		})
	}
}

// checkDisjoint: no node is in two commands.
func checkDisjoint(t *testing.T, r disruption.Result) {
	t.Helper()
	seen := map[string]bool{}
	for _, c := range r.Commands {
		for _, cand := range c.Candidates {
			if seen[cand.NodeName] {
				t.Errorf("node %s is in two commands", cand.NodeName)
			}
			seen[cand.NodeName] = true
		}
	}
}

func TestConsolidation(t *testing.T) {
	cheapLarge := instanceType("c.large-cheap", 8, 32, 0.38, 0.15)
	withThreshold := func(in disruption.Input, k int) disruption.Input { in.Options.ConsolidationThreshold = k; return in }
	withMinSavings := func(in disruption.Input, v float64) disruption.Input {
		in.Options.ConsolidationThreshold, in.Options.MinSavingsPerHour = -1, v
		return in
	}
	noSpotToSpot := func(in disruption.Input) disruption.Input { in.Options.DisableSpotToSpot = true; return in }
	spotPool := pool("default", launchTypes(manySpotTypes(20)), spotLaunches)
	pending := func(in disruption.Input, p ...*corev1.Pod) disruption.Input {
		in.PendingPods = append(in.PendingPods, p...)
		return in
	}
	validation := func(in disruption.Input) disruption.Input { in.Validation = true; return in }

	runCases(t, []computeCase{
		{
			name:   "a node whose pods fit on another node is deleted",
			source: "consolidation_test.go: Delete / can delete nodes",
			in: input(pools(pool("default")),
				node("n1", "default", "c.large", running(pod("a", "1", "1Gi"))),
				node("n2", "default", "c.large", running(pods(6, "b", "1", "1Gi")...))),
			want: []string{"Underutilized/delete [n1]"},
			// n2 takes n1's pod: no candidate for the rest of the pass.
			verdicts: map[string]string{"n2": "Receives the pods of a disruption decided in this pass"},
		},
		{
			name:   "a node is replaced by one cheaper node",
			source: "consolidation_test.go: Replace / can replace node",
			in: input(pools(pool("default")),
				node("n1", "default", "c.xlarge", running(pods(2, "a", "1", "1Gi")...))),
			want: []string{"Underutilized/replace [n1] → [c.small/on-demand]"},
		},
		{
			name:   "an on-demand node may be replaced by a spot node",
			source: "consolidation_test.go: Replace / can replace nodes if another nodePool returns no instance types (on-demand → spot)",
			in: input(pools(pool("default", spotLaunches)),
				node("n1", "default", "c.xlarge", running(pods(2, "a", "1", "1Gi")...))),
			want: []string{"Underutilized/replace [n1] → [c.small/spot]"},
		},
		{
			name:   "single-node consolidation simulates a bounded number of candidates per pass",
			source: "singlenodeconsolidation.go: abandons after its timeout (here a count, so Compute stays deterministic)",
			in: func() disruption.Input {
				// n3 (no candidate) takes n1's pods, so n2 stays a
				// candidate the bound leaves unsimulated.
				in := input(pools(pool("default")),
					node("n1", "default", "c.xlarge", running(pods(2, "a", "1", "1Gi")...)),
					node("n2", "default", "c.xlarge", running(pods(2, "b", "1", "1Gi")...)),
					node("n3", "default", "c.xlarge", annotated(apisv1.AnnotationDoNotDisrupt, "true")))
				in.Options.MultiNodeMaxCandidates, in.Options.SingleNodeMaxSimulations, in.Options.ConsolidationThreshold = 1, 1, -1
				return in
			}(),
			want:     []string{"Underutilized/delete [n1]"},
			verdicts: map[string]string{"n2": "Not evaluated in this pass"},
		},
		{
			name:   "no replacement when nothing cheaper fits",
			source: "consolidation_test.go: Replace / won't replace node if any spot replacement is more expensive",
			in: input(pools(pool("default")),
				node("n1", "default", "c.small", running(pods(2, "a", "1", "1Gi")...))),
			verdicts: map[string]string{"n1": "Can't replace with a cheaper node"},
		},
		{
			name:   "spot→spot needs 15 cheaper options",
			source: "consolidation_test.go: Replace / spot to spot consolidation: cannot replace spot with spot if less than minimum InstanceTypes flexibility",
			in: input(pools(spotPool),
				node("n1", "default", "s.10", running(pod("a", "1", "1Gi")))),
			verdicts: map[string]string{"n1": "requires 15 cheaper instance type options than the current candidate to consolidate, got 10"},
		},
		{
			name:   "spot→spot with 19 cheaper options replaces, launching among the 15 cheapest",
			source: "consolidation_test.go: Replace / spot to spot consolidation: can replace spot with spot, truncating options to 15",
			in: input(pools(spotPool),
				node("n1", "default", "s.19", running(pod("a", "1", "1Gi")))),
			want: []string{"Underutilized/replace [n1] → [s.00/spot]"},
		},
		{
			name:     "spot→spot off",
			source:   "consolidation_test.go: Replace / spot to spot consolidation: cannot replace spot with spot if the feature gate is off",
			in:       noSpotToSpot(input(pools(spotPool), node("n1", "default", "s.19", running(pod("a", "1", "1Gi"))))),
			verdicts: map[string]string{"n1": "SpotToSpotConsolidation is disabled"},
		},
		{
			name:   "multi-node: three nodes replaced by one",
			source: "consolidation_test.go: Multi-Node / can merge 3 nodes into 1",
			in: input(pools(pool("default")),
				node("n1", "default", "c.xlarge", running(pod("a", "2", "1Gi"))),
				node("n2", "default", "c.xlarge", running(pod("b", "2", "1Gi"))),
				node("n3", "default", "c.xlarge", running(pod("c", "2", "1Gi")))),
			want: []string{"Underutilized/replace [n1 n2 n3] → [c.large/on-demand]"},
		},
		{
			name:   "multi-node: several nodes deleted when their pods fit the rest",
			source: "consolidation_test.go: Multi-Node / can delete multiple nodes",
			in: input(pools(pool("default")),
				node("n1", "default", "c.large", running(pod("a", "1", "1Gi"))),
				node("n2", "default", "c.large", running(pod("b", "1", "1Gi"))),
				node("n3", "default", "c.large", running(pods(4, "c", "1", "1Gi")...))),
			want: []string{"Underutilized/delete [n1 n2]"},
		},
		{
			name:   "multi-node does not replace nodes by one of their own type",
			source: "consolidation_test.go: Multi-Node / won't merge 2 nodes into 1 of the same type",
			in: input(pools(pool("default")),
				node("n1", "default", "c.large", running(pod("a", "3", "1Gi"))),
				node("n2", "default", "c.medium", running(pod("b", "3", "1Gi")))),
			want: []string{"Underutilized/replace [n1] → [c.medium/on-demand]"},
		},
		{
			name:   "pending pods take free room before a candidate's pods",
			source: "consolidation_test.go: Pending pods / doesn't delete a node whose room pending pods need",
			in: pending(input(pools(pool("default", consolidateAfter("1m"))),
				node("n1", "default", "c.medium", running(pod("a", "2", "1Gi")), lastPodEvent(now)),
				node("n2", "default", "c.medium", running(pod("b", "2", "1Gi")))),
				pod("pending", "2", "1Gi")),
			// Without the pending pod, n2's pod would fit n1 and n2 be deleted.
			want:     []string{"Underutilized/replace [n2] → [c.small/on-demand]"},
			verdicts: map[string]string{"n1": "node is nominated for a pending pod"},
		},
		{
			name:   "a node pending pods would land on is nominated, even when empty",
			source: "suite_test.go: Candidate Filtering / should not consider candidates that are nominated (by the provisioner)",
			in: pending(input(pools(pool("default")), node("n1", "default", "c.large")),
				pod("pending", "1", "1Gi")),
			verdicts: map[string]string{"n1": "node is nominated for a pending pod"},
		},
		{
			name:   "a node the pods of a deleting node would land on is nominated",
			source: "provisioner.go: Schedule / deleting nodes' pods are scheduled with the pending ones, and the nodes they land on nominated",
			in: input(pools(pool("default")),
				node("gone", "default", "c.large", deleting, running(pod("a", "1", "1Gi"))),
				node("n1", "default", "c.large")),
			verdicts: map[string]string{"n1": "node is nominated for a pod leaving a disrupted node"},
		},
		{
			name:   "so is one the pods of a node an admitted command holds would land on",
			source: "provisioner.go: Schedule / nodes marked for deletion",
			in: input(pools(pool("default")),
				node("held", "default", "c.large", heldUncharged, running(pod("a", "1", "1Gi"))),
				node("n1", "default", "c.large")),
			verdicts: map[string]string{"n1": "node is nominated for a pod leaving a disrupted node"},
		},
		{
			name: "the pods of a node still validating nominate nothing: they leave after a node chosen now has the candidate taint",
			in: input(pools(pool("default")),
				node("v", "default", "c.large", validating, running(pod("a", "1", "1Gi"))),
				node("n1", "default", "c.large")),
			want: []string{"Empty/delete [n1]"},
		},
		{
			name:   "an outlier is not nominated for the pods leaving a disrupted node: they are steered off it",
			source: "Millwright: waste first (waste.go) with nominations",
			// big is the emptiest node, where LeastAllocated would put
			// gone's pod; as an outlier it has no room in any simulation
			// (and the outlier taint), so it goes first, as without gone.
			in: input(pools(pool("default", budgets(budget("2")))),
				node("gone", "default", "c.small", deleting, running(pods(1, "g", "1", "1Gi")...)),
				node("s1", "default", "c.small", running(pods(1, "a", "1", "1Gi")...)),
				node("s2", "default", "c.small", running(pods(1, "b", "1", "1Gi")...)),
				node("s3", "default", "c.small", running(pods(1, "c", "1", "1Gi")...)),
				node("s4", "default", "c.small", running(pods(1, "d", "1", "1Gi")...)),
				node("big", "default", "c.xlarge", running(pods(3, "e", "1", "1Gi")...))),
			want: []string{"Underutilized/delete [big]"},
		},
		{
			name: "nor do a deleting node's in a validation: the command's candidates carry the candidate taint",
			in: validation(input(pools(pool("default")),
				node("gone", "default", "c.large", deleting, running(pod("a", "1", "1Gi"))),
				node("n1", "default", "c.large"))),
			want: []string{"Empty/delete [n1]"},
		},
		{
			name:   "the Balanced score refuses a replacement that saves little",
			source: "balanced_test.go: rejects moves below the 1/k threshold",
			in: input(pools(pool("default", launchTypes(append(types(), cheapLarge)))),
				node("n1", "default", "c.large", running(pods(5, "a", "1", "1Gi")...))),
			verdicts: map[string]string{"n1": "Not worth the disruption"},
		},
		{
			name:   "a delete is not scored",
			source: "consolidation_test.go: Delete / can delete nodes (WhenEmptyOrUnderutilized takes any delete)",
			// Deleting s1 saves 2.4% of the pool's cost for 6.3% of its
			// disruption: a score of 0.39, below 1/2, but it launches
			// nothing, so it cannot start a chain.
			in: input(pools(pool("default", budgets(budget("1")))),
				node("s1", "default", "c.small", running(pods(4, "s", "250m", "256Mi")...)),
				node("l1", "default", "c.large", running(pods(6, "a", "1", "1Gi")...)),
				node("l2", "default", "c.large", running(pods(6, "b", "1", "1Gi")...)),
				node("l3", "default", "c.large", running(pods(6, "c", "1", "1Gi")...)),
				node("l4", "default", "c.large", running(pods(6, "d", "1", "1Gi")...)),
				node("l5", "default", "c.large", running(pods(6, "e", "1", "1Gi")...)),
				node("l6", "default", "c.large", running(pods(6, "f", "1", "1Gi")...)),
				node("l7", "default", "c.large", running(pods(6, "g", "1", "1Gi")...)),
				node("l8", "default", "c.large", running(pods(6, "h", "1", "1Gi")...)),
				node("l9", "default", "c.large", running(pods(6, "i", "1", "1Gi")...)),
				node("l10", "default", "c.large", running(pods(6, "j", "1", "1Gi")...))),
			want: []string{"Underutilized/delete [s1]"},
		},
		{
			name:   "a node that takes another command's pods is no candidate in the same pass",
			source: "Millwright: several commands a pass (Karpenter decides one)",
			// x's pod is planned onto y (the emptiest); y's own pods would
			// fit z, but deleting y would leave x's pod without the place
			// it was planned on.
			in: singleNodeOnly(input(pools(pool("default")),
				node("x", "default", "c.small", running(pods(1, "x", "1", "1Gi")...)),
				node("y", "default", "c.xlarge", running(pods(3, "y", "1", "1Gi")...)),
				node("z", "default", "c.xlarge", running(pods(10, "z", "1", "1Gi")...)))),
			// Without the rule, y went too; now z does (its pods fit y).
			want:     []string{"Underutilized/delete [x]", "Underutilized/delete [z]"},
			verdicts: map[string]string{"y": "Receives the pods of a disruption decided in this pass"},
		},
		{
			name:   "an outlier wasting a tenth of its pool goes before Karpenter's order",
			source: "Millwright: waste first (waste.go)",
			// Budget 1: Karpenter's order takes a small node (one pod);
			// big costs 8× the median and leaves 13 of its 16 CPUs unused
			// ($0.65/h of the pool's $1.20/h), so it goes first.
			in: input(pools(pool("default", budgets(budget("1")))),
				node("s1", "default", "c.small", running(pods(1, "a", "1", "1Gi")...)),
				node("s2", "default", "c.small", running(pods(1, "b", "1", "1Gi")...)),
				node("s3", "default", "c.small", running(pods(1, "c", "1", "1Gi")...)),
				node("s4", "default", "c.small", running(pods(1, "d", "1", "1Gi")...)),
				node("big", "default", "c.xlarge", running(pods(3, "e", "1", "1Gi")...))),
			want: []string{"Underutilized/delete [big]"},
		},
		{
			name:   "an admission decides only for the command's own candidates",
			source: "Millwright: admission (Input.Only, change admit-own-candidates)",
			// Budget 1: Karpenter's order would take s1 (fewer pods) and
			// leave s2, the admitted command's candidate, refused.
			in: func() disruption.Input {
				in := input(pools(pool("default", budgets(budget("1")))),
					node("s1", "default", "c.small", running(pods(1, "a", "250m", "256Mi")...)),
					node("s2", "default", "c.small", running(pods(2, "b", "250m", "256Mi")...)),
					node("room", "default", "c.xlarge", annotated(apisv1.AnnotationDoNotDisrupt, "true")))
				in.Only = []string{"s2"}
				return in
			}(),
			want: []string{"Underutilized/delete [s2]"},
		},
		{
			name:   "with the score off, any saving is taken",
			source: "consolidation_test.go: Replace / can replace node (pre-balanced behaviour)",
			in: withThreshold(input(pools(pool("default", launchTypes(append(types(), cheapLarge)))),
				node("n1", "default", "c.large", running(pods(5, "a", "1", "1Gi")...))), -1),
			want: []string{"Underutilized/replace [n1] → [c.large-cheap/on-demand]"},
		},
		{
			// n1's 5 pods are 6 of the pool's 8 disruption points (75%) and
			// the $0.14/h it saves 23% of the pool's $0.60/h: score 0.31.
			name:   "a dense node's replacement saving 30% of its price is taken whatever the score",
			source: "Millwright: Options.ReplaceSavingsFraction (default 0.3); Karpenter's WhenEmptyOrUnderutilized takes any saving",
			in: input(pools(pool("default", launchTypes(append(types(), instanceType("c.large-26", 8, 32, 0.26, 0.10))))),
				node("n1", "default", "c.large", running(pods(5, "a", "1", "1Gi")...)),
				node("n2", "default", "c.medium", running(pod("b", "3500m", "1Gi")))),
			want: []string{"Underutilized/replace [n1] → [c.large-26/on-demand]"},
		},
		{
			name:   "one saving less than 30% of its price is scored",
			source: "Millwright: the same move at $0.30/h saves 25% of n1's price (score 0.22)",
			in: input(pools(pool("default", launchTypes(append(types(), instanceType("c.large-30", 8, 32, 0.30, 0.12))))),
				node("n1", "default", "c.large", running(pods(5, "a", "1", "1Gi")...)),
				node("n2", "default", "c.medium", running(pod("b", "3500m", "1Gi")))),
			verdicts: map[string]string{"n1": "Not worth the disruption: saves 16.7% of NodePool \"default\"'s cost for 75.0% of its disruption (score 0.22 < 0.50) and 25% of its nodes' price (< 30%)"},
		},
		{
			name:   "a Balanced pool scores a replacement whatever the worker's threshold",
			source: "balanced_test.go (Karpenter's Balanced policy, k = 2)",
			in: withThreshold(input(pools(pool("default", launchTypes(append(types(), cheapLarge)), policy(apisv1.ConsolidationPolicyBalanced))),
				node("n1", "default", "c.large", running(pods(5, "a", "1", "1Gi")...))), -1),
			verdicts: map[string]string{"n1": "Not worth the disruption"},
		},
		{
			// Deleting a saves 33% of the pool's cost for 80% of its
			// disruption (score 0.42); b's 3-CPU pod fits nowhere cheaper.
			name:   "a Balanced pool scores a delete",
			source: "balanced.go CanPassThreshold (Karpenter scores deletes of Balanced pools)",
			in: input(pools(pool("default", policy(apisv1.ConsolidationPolicyBalanced))),
				node("a", "default", "c.small", running(pods(4, "a", "250m", "256Mi")...)),
				node("b", "default", "c.medium", running(pods(1, "b", "3", "1Gi")...))),
			verdicts: map[string]string{"a": "Not worth the disruption"},
		},
		{
			name:   "the same delete under WhenEmptyOrUnderutilized is taken",
			source: "consolidation_test.go: Delete / can delete nodes",
			in: input(pools(pool("default")),
				node("a", "default", "c.small", running(pods(4, "a", "250m", "256Mi")...)),
				node("b", "default", "c.medium", running(pods(1, "b", "3", "1Gi")...))),
			want: []string{"Underutilized/delete [a]"},
		},
		{
			name:   "an explicit $/h floor refuses small savings",
			source: "Millwright: Options.MinSavingsPerHour (Karpenter's one-node replace; splitting off, see TestSplit)",
			in: withoutSplit(withMinSavings(input(pools(pool("default", launchTypes(append(types(), cheapLarge)))),
				node("n1", "default", "c.large", running(pods(5, "a", "1", "1Gi")...))), 0.05)),
			verdicts: map[string]string{"n1": "below the $0.05/h threshold"},
		},
	})
}

// TestOutliersTakeNoPods: an outlier whose consolidateAfter has not passed
// yet is no destination for the other candidates' pods, and its verdict
// says Outlier (the workflow taints it PreferNoSchedule, so kube-scheduler
// keeps evicted pods off it too); one consolidation finds nothing for is a
// destination again.
func TestOutliersTakeNoPods(t *testing.T) {
	smalls := func() []disruption.Node {
		return []disruption.Node{
			node("s1", "default", "c.small", running(pods(1, "a", "1", "1Gi")...)),
			node("s2", "default", "c.small", running(pods(1, "b", "1", "1Gi")...)),
			node("s3", "default", "c.small", running(pods(1, "c", "1", "1Gi")...)),
			node("s4", "default", "c.small", running(pods(1, "d", "1", "1Gi")...)),
		}
	}
	cases := []struct {
		name        string
		big         disruption.Node
		want        []string
		wantOutlier bool
	}{
		{
			// big (8× the median, 13 of 16 CPUs unused) had a pod event
			// 5 s ago: without the rule all four small nodes' pods went
			// onto it ("delete [s1 s2 s3 s4]").
			name:        "within its consolidateAfter, the outlier takes no pods",
			big:         node("big", "default", "c.xlarge", lastPodEvent(now.Add(-5*time.Second)), running(pods(3, "e", "1", "1Gi")...)),
			want:        []string{"Underutilized/delete [s1 s2]"},
			wantOutlier: true,
		},
		{
			// Its pods block its own consolidation: it is no outlier, and
			// the small nodes' pods may go onto it.
			name:        "an outlier consolidation cannot take is a destination",
			big:         node("big", "default", "c.xlarge", lastPodEvent(now.Add(-5*time.Second)), running(pods(3, "e", "1", "1Gi", podAnnotated(apisv1.AnnotationDoNotDisrupt, "true"))...)),
			want:        []string{"Underutilized/delete [s1 s2 s3 s4]"},
			wantOutlier: false,
		},
		{
			// It uses 3 of 16 CPUs but its one GPU: no waste.
			name:        "a node whose accelerator is in use is no outlier",
			big:         gpuNode(),
			want:        []string{"Underutilized/delete [s1 s2 s3 s4]"},
			wantOutlier: false,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := input(pools(pool("default", consolidateAfter("30s"), budgets(budget("100%")))), append(smalls(), tc.big)...)
			r := disruption.Compute(in)
			if got := summaries(r); !slices.Equal(got, tc.want) {
				t.Errorf("commands:\n got %q\nwant %q", got, tc.want)
			}
			v, _ := verdictOf(r, "big")
			if v.Outlier != tc.wantOutlier {
				t.Errorf("big: Outlier = %v, want %v (verdict %q)", v.Outlier, tc.wantOutlier, v.Message)
			}
			for _, name := range []string{"s1", "s2", "s3", "s4"} {
				if v, _ := verdictOf(r, name); v.Outlier {
					t.Errorf("%s: Outlier, want not (priced at the median)", name)
				}
			}
		})
	}
}

// gpuNode is a c.xlarge with one GPU, held by one of its three pods, and
// a pod event 5 s ago.
func gpuNode() disruption.Node {
	gpu := scheduling.MustResources(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")})
	holder := pod("e-gpu", "1", "1Gi")
	holder.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
	holder.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	n := node("big", "default", "c.xlarge", lastPodEvent(now.Add(-5*time.Second)), running(append(pods(2, "e", "1", "1Gi"), holder)...))
	n.Allocatable = n.Allocatable.Add(gpu)
	return n
}

func withoutSplit(in disruption.Input) disruption.Input { in.Options.DisableSplit = true; return in }

// singleNodeOnly leaves multi-node consolidation nothing to search (it
// needs two candidates).
func singleNodeOnly(in disruption.Input) disruption.Input {
	in.Options.MultiNodeMaxCandidates = 1
	return in
}

// TestSplit covers Millwright's one addition to Karpenter's consolidation:
// a node Karpenter keeps because no single cheaper node holds its pods is
// replaced by several nodes that together cost less (split.go).
func TestSplit(t *testing.T) {
	// n1 holds 9 cpu on a 16-cpu c.xlarge ($0.80): no cheaper single type
	// holds 9 cpu, c.large + c.small ($0.50) do. n2 is full, so the split
	// is a small share of the pool's disruption (the Balanced score).
	underused := func(opts ...nodeOpt) []disruption.Node {
		return []disruption.Node{
			node("n1", "default", "c.xlarge", append([]nodeOpt{running(pods(9, "a", "1", "1Gi")...)}, opts...)...),
			node("n2", "default", "c.xlarge", running(pods(16, "b", "1", "1Gi")...)),
		}
	}
	onDemand := pools(pool("default"))
	spotPool := pools(pool("default", launchTypes(append(types(), manySpotTypes(20)...)), spotLaunches))
	withMinSavings := func(in disruption.Input, v float64) disruption.Input { in.Options.MinSavingsPerHour = v; return in }
	noSpotToSpot := func(in disruption.Input) disruption.Input { in.Options.DisableSpotToSpot = true; return in }
	scoreOnly := func(in disruption.Input) disruption.Input { in.Options.ReplaceSavingsFraction = -1; return in }
	spotNodes := func() []disruption.Node {
		nodes := underused()
		for i := range nodes {
			spot(&nodes[i])
		}
		return nodes
	}

	runCases(t, []computeCase{
		{
			name:     "a node no single cheaper node can hold is split into cheaper nodes",
			source:   "Millwright; Karpenter: \"Can't replace with a cheaper node\" (kubernetes-sigs/karpenter#1442)",
			in:       input(onDemand, underused()...),
			want:     []string{"Underutilized/replace [n1] → [c.small/on-demand c.small/on-demand c.small/on-demand c.small/on-demand c.small/on-demand]"},
			verdicts: map[string]string{"n2": "Can't replace with a cheaper node; splitting: 8 nodes would cost $0.80/h, not less than $0.80/h"},
		},
		{
			name:     "with splitting off, Karpenter's verdict",
			source:   "consolidation.go: Can't replace with a cheaper node",
			in:       withoutSplit(input(onDemand, underused()...)),
			verdicts: map[string]string{"n1": "Can't replace with a cheaper node"},
		},
		{
			// n2's split (7 of its pods onto n1) fails the score; it saves
			// 37.5% of n2's price, which ReplaceSavingsFraction would take.
			name:     "a node a consolidation launched is not split",
			source:   "Millwright: no merge-then-split chain (TestNoReplaceChains)",
			in:       scoreOnly(input(onDemand, underused(launchedByConsolidation(now.Add(-time.Hour)))...)),
			verdicts: map[string]string{"n1": "Can't replace with a cheaper node"},
		},
		{
			name:   "a one-node replace is preferred to a split",
			source: "Millwright: splitting acts only where Karpenter keeps the node",
			in: input(onDemand,
				node("n1", "default", "c.xlarge", running(pods(3, "a", "1", "1Gi")...)),
				node("n2", "default", "c.xlarge", running(pods(16, "b", "1", "1Gi")...))),
			want: []string{"Underutilized/replace [n1] → [c.medium/on-demand]"},
		},
		{
			name:     "the $/h floor applies to a split",
			source:   "Millwright: Options.MinSavingsPerHour",
			in:       withMinSavings(input(onDemand, underused()...), 0.5),
			verdicts: map[string]string{"n1": "Can't replace with a cheaper node; splitting saves $0.30/h, below the $0.50/h threshold"},
		},
		{
			name:     "the Balanced score applies to a split",
			source:   "Millwright: a lone node's split saves 37.5% of the pool for 100% of its disruption (score 0.38 < 0.50)",
			in:       scoreOnly(input(onDemand, underused()[0])),
			verdicts: map[string]string{"n1": "splitting: Not worth the disruption"},
		},
		{
			name:   "a split saving 30% of its node's price is taken whatever the score",
			source: "Millwright: Options.ReplaceSavingsFraction (default 0.3); the same split saves 37.5% of n1's price",
			in:     input(onDemand, underused()[0]),
			want:   []string{"Underutilized/replace [n1] → [c.small/on-demand c.small/on-demand c.small/on-demand c.small/on-demand c.small/on-demand]"},
		},
		{
			name:     "a Balanced pool's split is scored whatever it saves",
			source:   "balanced.go: every move of a Balanced pool is scored",
			in:       input(pools(pool("default", policy(apisv1.ConsolidationPolicyBalanced))), underused()[0]),
			verdicts: map[string]string{"n1": "splitting: Not worth the disruption: saves 37.5% of NodePool \"default\"'s cost for 100.0% of its disruption (score 0.38 < 0.50)"},
		},
		{
			name:   "spot nodes are split into spot nodes",
			source: "Millwright; options cut to the cheapest 15 (TestSplitOptionsStayCheaper); s.* hold 4 cpu for $0.01/h",
			in:     input(spotPool, spotNodes()...),
			want: []string{"Underutilized/replace [n1] → [s.00/spot s.00/spot s.00/spot]",
				"Underutilized/replace [n2] → [s.00/spot s.00/spot s.00/spot s.00/spot]"},
		},
		{
			name:     "spot→spot off: no spot split",
			source:   "consolidation_test.go: cannot replace spot with spot if the spotToSpotConsolidation is disabled",
			in:       noSpotToSpot(input(spotPool, spotNodes()...)),
			verdicts: map[string]string{"n1": "can't replace spot nodes with spot nodes"},
		},
	})
}

// TestSplitOptionsStayCheaper: whichever options the spot launches land
// on, the split's nodes together cost less than the node they replace.
func TestSplitOptionsStayCheaper(t *testing.T) {
	spotNode := func(name, typeName string, opts ...nodeOpt) disruption.Node {
		n := node(name, "default", typeName, opts...)
		spot(&n)
		return n
	}
	// dearSpread: 4-cpu spot types from $0.05/h up by $0.01/h; two of the
	// cheapest hold 6 cpu for $0.10/h against the c.large's $0.16/h, so
	// only options up to 1.6× the cheapest are kept.
	var dearSpread []*catalog.InstanceType
	for i := range 20 {
		it := instanceType(fmt.Sprintf("t.%02d", i), 4, 16, 1, 0.05+0.01*float64(i))
		it.Offerings = it.Offerings[1:]
		dearSpread = append(dearSpread, it)
	}
	cases := map[string]disruption.Input{
		"cheap spot types": input(pools(pool("default", launchTypes(append(types(), manySpotTypes(20)...)), spotLaunches)),
			spotNode("n1", "c.xlarge", running(pods(9, "a", "1", "1Gi")...)),
			spotNode("n2", "c.xlarge", running(pods(16, "b", "1", "1Gi")...))),
		"a wide price spread": input(pools(pool("default", launchTypes(append(types(), dearSpread...)), spotLaunches)),
			spotNode("n1", "c.large", running(pods(6, "a", "1", "1Gi")...)),
			spotNode("n2", "c.xlarge", running(pods(16, "b", "1", "1Gi")...))),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) { checkSplitOptions(t, disruption.Compute(in)) })
	}
}

func checkSplitOptions(t *testing.T, r disruption.Result) {
	t.Helper()
	if len(r.Commands) == 0 {
		t.Fatal("want splits, got no command")
	}
	for _, cmd := range r.Commands {
		if len(cmd.Replacements) < 2 {
			t.Errorf("want a split, got %s", summary(cmd))
			continue
		}
		dearest := 0.0
		for _, plan := range cmd.Replacements {
			if n := packer.OptionTypes(plan.Options); n > disruption.MinSpotToSpotOptions {
				t.Errorf("%s has options of %d types, want at most %d", plan.Name, n, disruption.MinSpotToSpotOptions)
			}
			worst := plan.Options[0]
			for _, o := range plan.Options {
				if o.CapacityType != apisv1.CapacityTypeSpot {
					t.Errorf("%s: option %s is %s", plan.Name, o.InstanceType, o.CapacityType)
				}
				if o.Price > worst.Price {
					worst = o
				}
			}
			dearest += worst.Price
		}
		if price := cmd.Candidates[0].Price; dearest >= price {
			t.Errorf("%s: the dearest launches cost $%.3f/h, not less than the node's $%.3f/h", cmd.Message, dearest, price)
		}
		t.Logf("%s; dearest launches $%.3f/h", cmd.Message, dearest)
	}
}

func TestCandidateFiltering(t *testing.T) {
	runCases(t, []computeCase{
		{
			name:     "not initialized",
			source:   "consolidation_test.go: won't consolidate a node that isn't initialized",
			in:       input(pools(pool("default")), node("n1", "default", "c.large", uninitialized)),
			verdicts: map[string]string{"n1": "node isn't initialized"},
		},
		{
			name:     "deleting",
			source:   "suite_test.go: Candidate Filtering / should not consider candidates that are deleting",
			in:       input(pools(pool("default")), node("n1", "default", "c.large", deleting)),
			verdicts: map[string]string{"n1": "node is deleting or marked for deletion"},
		},
		{
			name:     "nominated for pending pods",
			source:   "suite_test.go: Candidate Filtering / should not consider candidates that are nominated",
			in:       input(pools(pool("default")), node("n1", "default", "c.large", nominatedUntil(now.Add(5*time.Second)))),
			verdicts: map[string]string{"n1": "node is nominated for a pending pod"},
		},
		{
			name:   "nomination expired",
			source: "suite_test.go: Candidate Filtering / should consider candidates whose nomination expired",
			in:     input(pools(pool("default")), node("n1", "default", "c.large", nominatedUntil(now.Add(-time.Second)))),
			want:   []string{"Empty/delete [n1]"},
		},
		{
			name:     "replacement of a running command, empty while its candidate drains",
			source:   "Millwright: Karpenter keeps such a node nominated for the deleting node's pods",
			in:       input(pools(pool("default")), node("n1", "default", "c.large", replacementFor("disruption/c1/command-1"))),
			verdicts: map[string]string{"n1": "node is a replacement of running disruption command disruption/c1/command-1"},
		},
		{
			name:     "karpenter.sh/do-not-disrupt on the node",
			source:   "suite_test.go: Candidate Filtering / should not consider candidates that have do-not-disrupt on nodes",
			in:       input(pools(pool("default")), node("n1", "default", "c.large", annotated("karpenter.sh/do-not-disrupt", "true"))),
			verdicts: map[string]string{"n1": `disruption is blocked through the "karpenter.sh/do-not-disrupt" annotation`},
		},
		{
			name:   "millwright.dev/do-not-disrupt on a pod",
			source: "suite_test.go: Candidate Filtering / should not consider candidates that have do-not-disrupt pods scheduled",
			in: input(pools(pool("default")),
				node("n1", "default", "c.large", running(pod("a", "1", "1Gi", podAnnotated("millwright.dev/do-not-disrupt", "true")))),
				node("n2", "default", "c.large", running(pods(2, "b", "1", "1Gi")...))),
			want:     []string{"Underutilized/delete [n2]"}, // n1 stays, and takes n2's pods
			verdicts: map[string]string{"n1": `pod default/a has "millwright.dev/do-not-disrupt" annotation`},
		},
		{
			name:   "do-not-disrupt for a duration still running",
			source: "Millwright: a do-not-disrupt duration counts from the pod's start",
			in: input(pools(pool("default")),
				node("n1", "default", "c.large", running(pod("a", "1", "1Gi", startedAt(now.Add(-30*time.Minute)), podAnnotated("karpenter.sh/do-not-disrupt", "1h"))))),
			verdicts: map[string]string{"n1": "annotation until 2026-12-01T12:30:00Z"},
		},
		{
			name:   "do-not-disrupt for a duration that has passed",
			source: "Millwright: a do-not-disrupt duration counts from the pod's start",
			in: input(pools(pool("default")),
				node("n1", "default", "c.large", running(pod("a", "1", "1Gi", startedAt(now.Add(-2*time.Hour)), podAnnotated("karpenter.sh/do-not-disrupt", "1h"))))),
			want: []string{"Underutilized/replace [n1] → [c.small/on-demand]"},
		},
		{
			name:     "a PDB allowing no eviction",
			source:   "suite_test.go: Candidate Filtering / should not consider candidates that have fully blocking PDBs",
			in:       input(pools(pool("default")), node("n1", "default", "c.large", pdbBlocked(pod("a", "1", "1Gi"), "default/web"))),
			verdicts: map[string]string{"n1": "pdb default/web prevents pod evictions"},
		},
		{
			name:     "two PDBs on one pod",
			source:   "suite_test.go: Candidate Filtering / should not consider candidates that have multiple PDBs on the same pod",
			in:       input(pools(pool("default")), node("n1", "default", "c.large", pdbBlocked(pod("a", "1", "1Gi"), "default/a", "default/b"))),
			verdicts: map[string]string{"n1": "eviction does not support multiple PDBs"},
		},
		{
			name:     "consolidateAfter counts from the last pod event",
			source:   "nodeclaim/disruption/consolidation_test.go: should not mark consolidatable before consolidateAfter since the last pod event",
			in:       input(pools(pool("default", consolidateAfter("5m"))), node("n1", "default", "c.large", lastPodEvent(now.Add(-time.Minute)))),
			verdicts: map[string]string{"n1": "consolidateAfter 5m0s has not passed since the last pod event (1m0s ago)"},
		},
		{
			name:   "consolidateAfter passed",
			source: "nodeclaim/disruption/consolidation_test.go: should mark consolidatable after consolidateAfter",
			in:     input(pools(pool("default", consolidateAfter("5m"))), node("n1", "default", "c.large", lastPodEvent(now.Add(-6*time.Minute)))),
			want:   []string{"Empty/delete [n1]"},
		},
		{
			name:     "consolidateAfter Never",
			source:   "emptiness_test.go: should not consider candidates when consolidation is disabled",
			in:       input(pools(pool("default", consolidateAfter("Never"))), node("n1", "default", "c.large")),
			verdicts: map[string]string{"n1": `NodePool "default" has consolidation disabled`},
		},
		{
			name:   "WhenEmpty does not consolidate non-empty nodes",
			source: "consolidation_test.go: should not consolidate when policy is WhenEmpty and the node is not empty",
			in: input(pools(pool("default", policy(apisv1.ConsolidationPolicyWhenEmpty))),
				node("n1", "default", "c.xlarge", running(pod("a", "1", "1Gi"))),
				node("n2", "default", "c.xlarge")),
			want:     []string{"Empty/delete [n2]"},
			verdicts: map[string]string{"n1": "has consolidation policy WhenEmpty, but node is not empty"},
		},
		{
			name:   "a consolidation replacement is not consolidated within its consolidateAfter",
			source: "Millwright anti-churn: launched-by-consolidation",
			in: input(pools(pool("default", consolidateAfter("10m"))),
				node("n1", "default", "c.xlarge", running(pod("a", "1", "1Gi")), launchedByConsolidation(now.Add(-5*time.Minute)))),
			verdicts: map[string]string{"n1": "launched by consolidation 5m0s ago"},
		},
		{
			name:   "DaemonSet pods do not make a node non-empty",
			source: "emptiness_test.go: can delete empty nodes with DaemonSet pods",
			in:     input(pools(pool("default")), node("n1", "default", "c.large", running(pod("ds", "100m", "100Mi", daemonSetPod)))),
			want:   []string{"Empty/delete [n1]"},
		},
		{
			name:     "nodes of an unknown pool are not candidates",
			source:   "suite_test.go: Candidate Filtering / should not consider candidates without a NodePool",
			in:       input(pools(pool("default")), node("n1", "gone", "c.large")),
			verdicts: map[string]string{"n1": "NodePool not found (NodePool=gone)"},
		},
	})
}

// TestSingleNodeConsolidationTakesTurnsBeyondItsSimulations: with more
// candidates than SingleNodeMaxSimulations, half of the simulations go to
// the cheapest to disrupt every pass and the other half take turns over
// the rest, so over consecutive passes every candidate is simulated (before,
// the same cheapest ones were, pass after pass, and when none of them could
// go no costlier one ever was).
func TestSingleNodeConsolidationTakesTurnsBeyondItsSimulations(t *testing.T) {
	// No node can go (its pods fit nowhere else and nothing cheaper holds
	// them), so the same input stands for every pass; a deleted node's
	// pods would make their destinations skip their turn.
	in := input(pools(pool("default", budgets(budget("100%")))),
		node("n1", "default", "c.xlarge", running(pods(2, "a", "6", "256Mi")...)),
		node("n2", "default", "c.xlarge", running(pods(2, "b", "6", "256Mi")...)),
		node("n3", "default", "c.xlarge", running(pods(2, "c", "6", "256Mi")...)),
		node("n4", "default", "c.xlarge", running(pods(2, "d", "6", "256Mi")...)))
	// Multi-node consolidation off (one candidate at most), so single-node
	// consolidation decides alone; two simulations per pass.
	in.Options.MultiNodeMaxCandidates, in.Options.SingleNodeMaxSimulations, in.Options.ConsolidationThreshold = 1, 2, -1
	simulated := map[string]int{}
	for pass := range 3 {
		in.Now = now.Add(time.Duration(pass) * 10 * time.Second)
		r := disruption.Compute(in)
		evaluated := 0
		for _, v := range r.Verdicts {
			if !strings.Contains(v.Message, "Not evaluated in this pass") {
				simulated[v.NodeName]++
				evaluated++
			}
		}
		if evaluated != 2 {
			t.Errorf("pass %d: %d nodes simulated, want 2 (SingleNodeMaxSimulations)", pass, evaluated)
		}
	}
	for _, name := range []string{"n1", "n2", "n3", "n4"} {
		if simulated[name] == 0 {
			t.Errorf("%s never simulated in three passes (simulated: %v)", name, simulated)
		}
	}
	if simulated["n1"] != 3 {
		t.Errorf("n1, the cheapest to disrupt, simulated in %d of 3 passes, want every pass", simulated["n1"])
	}
}

// TestAdmissionAvoidsTheOutliersThePassAvoided: an admission (Input.Only)
// decides for its command's candidates alone, but must see the same
// destinations as the pass that decided the command. Here the pass tries
// the outlier big first, finds nothing for it (its 9-CPU pod fits no
// cheaper node), and so lets the small nodes' pods go onto it (they fit
// nowhere else); the admission of that command must do the same, not keep
// big out of reach because it is no candidate of its own.
func TestAdmissionAvoidsTheOutliersThePassAvoided(t *testing.T) {
	in := input(pools(pool("default", consolidateAfter("30s"), budgets(budget("100%")))),
		node("s1", "default", "c.small", running(pods(1, "a", "1500m", "1Gi")...)),
		node("s2", "default", "c.small", running(pods(1, "b", "1500m", "1Gi")...)),
		node("s3", "default", "c.small", running(pods(1, "c", "1500m", "1Gi")...)),
		node("s4", "default", "c.small", running(pods(1, "d", "1500m", "1Gi")...)),
		node("big", "default", "c.xlarge", running(pods(1, "e", "9", "1Gi")...)),
	)
	pass := disruption.Compute(in)
	if len(pass.Commands) == 0 {
		t.Fatalf("pass: no command, want the small nodes' pods moved onto big")
	}
	for _, cmd := range pass.Commands {
		admission := in
		admission.Validation = true
		for _, c := range cmd.Candidates {
			admission.Only = append(admission.Only, c.ClaimName)
		}
		want := summaries(disruption.Result{Commands: []disruption.Command{cmd}})
		if got := summaries(disruption.Compute(admission)); !slices.Equal(got, want) {
			t.Errorf("admission of %q: commands %q, want the pass's", want, got)
		}
	}
}

// An admission decides as its command was decided: the pods of a command
// decided after it and still validating stay put (Node.DecidedAfter),
// while those of commands decided before it, or admitted, compete first.
// On mixed-600 two commands validating at once each counted the other's
// pods first, and both were refused.
func TestAdmissionLeavesLaterCommandsPodsPut(t *testing.T) {
	decidedAfter := func(n *disruption.Node) { heldUncharged(n); n.DecidedAfter = true }
	for _, tc := range []struct {
		name string
		held nodeOpt
		want []string
	}{
		{"held by a command decided later", decidedAfter, []string{"Underutilized/delete [b]"}},
		{"held by a command decided earlier", heldUncharged, nil},
		{"held by an admitted command", func(n *disruption.Node) { n.Disrupting = true }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := input(pools(pool("default", consolidateAfter("30s"), budgets(budget("100%")))),
				node("b", "default", "c.small", running(pods(1, "b", "1500m", "1Gi")...)),
				node("c", "default", "c.small", tc.held, running(pods(1, "c", "1500m", "1Gi")...)),
				node("x", "default", "c.small", running(pods(1, "x", "500m", "1Gi")...)),
			)
			in.Validation, in.Only = true, []string{"b"}
			if got := summaries(disruption.Compute(in)); !slices.Equal(got, tc.want) {
				t.Errorf("admission of b: %q, want %q", got, tc.want)
			}
		})
	}
}
