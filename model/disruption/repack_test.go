package disruption_test

import (
	"slices"
	"testing"
	"time"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/disruption"
	"github.com/millwright/millwright/model/scheduling"
)

// onSpotType makes the node a spot node of it.
func onSpotType(it *catalog.InstanceType) nodeOpt {
	return func(n *disruption.Node) {
		n.InstanceType, n.Allocatable = it.Name, it.Allocatable
		n.Labels[scheduling.LabelInstanceType] = it.Name
		n.CapacityType = apisv1.CapacityTypeSpot
		n.Labels[scheduling.LabelCapacityType] = apisv1.CapacityTypeSpot
		for _, o := range it.Offerings {
			if o.CapacityType == apisv1.CapacityTypeSpot {
				n.Price = o.Price
			}
		}
	}
}

func withRepackFraction(in disruption.Input, f float64) disruption.Input {
	in.Options.RepackSavingsFraction = f
	return in
}

// TestRepack: two spot nodes of a general-purpose type full of CPU-heavy
// pods, which a cheaper compute type holds but which no single cheaper
// spot node may replace (Karpenter's spot→spot rule wants 15 cheaper
// types, there is one), are replaced together (repack.go).
func TestRepack(t *testing.T) {
	general := instanceType("m.big", 8, 32, 0.40, 0.12)
	compute := func(spot float64) *catalog.InstanceType { return instanceType("c.fit", 8, 16, 0.34, spot) }
	stranded := func(name, app string, opts ...nodeOpt) disruption.Node {
		return node(name, "default", "c.large", append([]nodeOpt{onSpotType(general), running(pods(7, app, "1", "1Gi")...)}, opts...)...)
	}
	spotPool := func(computeSpot float64, opts ...poolOpt) disruption.NodePool {
		return pool("default", append([]poolOpt{launchTypes([]*catalog.InstanceType{general, compute(computeSpot)}), spotLaunches}, opts...)...)
	}
	runCases(t, []computeCase{
		{
			name:   "two nodes no single cheaper spot node may replace are replaced together",
			source: "Millwright: repack (2 × $0.12/h → 2 × $0.09/h saves 25%, 10% asked)",
			in:     input(pools(spotPool(0.09)), stranded("n1", "a"), stranded("n2", "b")),
			want:   []string{"Underutilized/replace [n1 n2] → [c.fit/spot c.fit/spot]"},
		},
		{
			name:     "alone, each is kept by the spot→spot rule",
			source:   "consolidation_test.go: spot-to-spot needs 15 cheaper instance types",
			in:       input(pools(spotPool(0.09)), stranded("n1", "a"), node("n2", "default", "c.large", onSpotType(general))),
			want:     []string{"Empty/delete [n2]"},
			verdicts: map[string]string{"n1": "SpotToSpotConsolidation requires 15 cheaper instance type options than the current candidate to consolidate, got 1"},
		},
		{
			name:     "nodes a consolidation launched are not repacked",
			source:   "Millwright: repack cannot chain",
			in:       input(pools(spotPool(0.09)), stranded("n1", "a", launchedByConsolidation(now.Add(-time.Hour))), stranded("n2", "b", launchedByConsolidation(now.Add(-time.Hour)))),
			verdicts: map[string]string{"n1": "SpotToSpotConsolidation requires 15", "n2": "SpotToSpotConsolidation requires 15"},
		},
		{
			name:   "a budget of one node keeps the pair",
			source: "nodepool_budgets_test.go: a command takes no more nodes than the budget allows",
			in:     input(pools(spotPool(0.09, budgets(budget("1")))), stranded("n1", "a"), stranded("n2", "b")),
		},
		{
			name:   "splitting off turns repacking off",
			source: "Millwright: Options.DisableSplit gives Karpenter's behaviour",
			in: func() disruption.Input {
				in := input(pools(spotPool(0.09)), stranded("n1", "a"), stranded("n2", "b"))
				in.Options.DisableSplit = true
				return in
			}(),
		},
		{
			name:   "a repack saving less than the threshold asks is not taken",
			source: "Millwright: 2 × $0.12/h → 2 × $0.115/h saves 4%: below 10% of the price, score 0.04",
			in:     input(pools(spotPool(0.115)), stranded("n1", "a"), stranded("n2", "b")),
		},
		{
			name:   "the repack fraction is its own setting",
			source: "Millwright: Options.RepackSavingsFraction 0.3 refuses a repack saving 25% (score 0.25)",
			in:     withRepackFraction(input(pools(spotPool(0.09)), stranded("n1", "a"), stranded("n2", "b")), 0.3),
		},
		{
			name:   "a negative repack fraction leaves the score alone",
			source: "Millwright: Options.RepackSavingsFraction −1; 25% of the pool's cost for all of its disruption scores 0.25 < 1/2",
			in:     withRepackFraction(input(pools(spotPool(0.09)), stranded("n1", "a"), stranded("n2", "b")), -1),
		},
		{
			name:   "the replace fraction does not apply to a repack",
			source: "Millwright: Options.ReplaceSavingsFraction 0.5",
			in: func() disruption.Input {
				in := input(pools(spotPool(0.09)), stranded("n1", "a"), stranded("n2", "b"))
				in.Options.ReplaceSavingsFraction = 0.5
				return in
			}(),
			want: []string{"Underutilized/replace [n1 n2] → [c.fit/spot c.fit/spot]"},
		},
		{
			name:   "a Balanced pool scores the repack",
			source: "balanced_test.go: 25% of the pool's cost for all of its disruption scores 0.25 < 1/2",
			in:     input(pools(spotPool(0.09, policy(apisv1.ConsolidationPolicyBalanced))), stranded("n1", "a"), stranded("n2", "b")),
		},
		{
			name:   "a pair is made within one pool",
			source: "Millwright: repack",
			in: input(pools(spotPool(0.09), pool("other", launchTypes([]*catalog.InstanceType{general, compute(0.09)}), spotLaunches)),
				stranded("n1", "a"), node("n2", "other", "c.large", onSpotType(general), running(pods(7, "b", "1", "1Gi")...))),
		},
	})
}

// TestAdmissionRechecksARepackedPair: an admission of a pair re-checks the
// pair whole, whatever the probes that chose it would say now. Here n2
// alone saves nothing (it is of the cheapest type), so a pass's probes
// never pair it; the pair still repacks (12 pods into 2 × c.fit, $0.18/h
// for $0.21/h), and an admission of it finds that.
func TestAdmissionRechecksARepackedPair(t *testing.T) {
	general := instanceType("m.big", 8, 32, 0.40, 0.12)
	compute := instanceType("c.fit", 8, 16, 0.34, 0.09)
	spotPool := pool("default", launchTypes([]*catalog.InstanceType{general, compute}), spotLaunches)
	cluster := func() disruption.Input {
		return input(pools(spotPool),
			node("n1", "default", "c.large", onSpotType(general), running(pods(7, "a", "1", "1Gi")...)),
			node("n2", "default", "c.large", onSpotType(compute), running(pods(5, "b", "1", "2Gi")...)))
	}
	if r := disruption.Compute(cluster()); len(r.Commands) != 0 {
		t.Fatalf("a pass decided %q, want nothing (its probes leave n2 out)", summaries(r))
	}
	admission := cluster()
	admission.Only, admission.Validation = []string{"n1", "n2"}, true
	r := disruption.Compute(admission)
	if got, want := summaries(r), []string{"Underutilized/replace [n2 n1] → [c.fit/spot c.fit/spot]"}; !slices.Equal(got, want) {
		t.Errorf("admission decided %q, want %q", got, want)
	}
}
