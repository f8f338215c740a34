package disruption_test

import (
	"strings"
	"testing"

	"github.com/millwright/millwright/model/disruption"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// minValues gives the pool a requirement's minValues on key.
func minValues(key string, n int) poolOpt {
	return func(np *disruption.NodePool) {
		if np.Launch.MinValues == nil {
			np.Launch.MinValues = map[string]int{}
		}
		np.Launch.MinValues[key] = n
	}
}

// typesOf are the distinct instance types of plan's options.
func typesOf(plan packer.NodePlan) map[string]bool {
	out := map[string]bool{}
	for _, o := range plan.Options {
		out[o.InstanceType] = true
	}
	return out
}

// A replacement's options are cut to those cheaper than the candidates
// (and, for spot, to the cheapest few); the cut must still span the pool's
// minValues, as Karpenter's RemoveInstanceTypeOptionsByPriceAndMinValues
// requires, and a spot→spot truncation keeps as many types as minValues
// needs.
func TestConsolidationKeepsMinValues(t *testing.T) {
	// A c.large holding a 1-cpu pod: c.small and c.medium are cheaper and
	// fit, two instance types.
	onDemand := func(n int) disruption.Input {
		return withoutScore(input(pools(pool("default", minValues(scheduling.LabelInstanceType, n))),
			node("n1", "default", "c.large", running(pod("a", "1", "1Gi")))))
	}
	runCases(t, []computeCase{
		{
			name:   "the cheaper types span minValues: replaced",
			source: "consolidation_test.go: Replace / can replace node (with minValues met)",
			in:     onDemand(2),
			want:   []string{"Underutilized/replace [n1] → [c.small/on-demand]"},
		},
		{
			name:     "filtering by price breaks minValues: kept",
			source:   "consolidation_test.go: Consolidation should fail if filterByPrice breaks the minimum requirement from the NodePools",
			in:       onDemand(3),
			verdicts: map[string]string{"n1": "Filtering by price: minValues requirement is not met for label(s) " + scheduling.LabelInstanceType + " (2 of 3 values)"},
		},
	})

	t.Run("the replacement's options span minValues", func(t *testing.T) {
		r := disruption.Compute(onDemand(2))
		if len(r.Commands) != 1 || len(r.Commands[0].Replacements) != 1 {
			t.Fatalf("commands %q, want one replacement", summaries(r))
		}
		if got := typesOf(r.Commands[0].Replacements[0]); !got["c.small"] || !got["c.medium"] {
			t.Errorf("options span %v, want c.small and c.medium", got)
		}
	})

	// An s.19 spot node holding a small pod: s.00–s.18 are cheaper.
	spot := func(opts ...poolOpt) disruption.Input {
		opts = append([]poolOpt{launchTypes(manySpotTypes(20)), spotLaunches}, opts...)
		return withoutScore(input(pools(pool("default", opts...)), node("n1", "default", "s.19", running(pod("a", "1", "1Gi")))))
	}
	for _, tc := range []struct {
		name, source string
		in           disruption.Input
		types        int
	}{
		{name: "spot→spot keeps the 15 cheapest types", source: "consolidation_test.go: spot to spot consolidation (truncation to 15)",
			in: spot(), types: disruption.MinSpotToSpotOptions},
		{name: "minValues under 15 changes nothing", source: "consolidation_test.go: spot to spot consolidation should consider the max of default and minimum number of instanceTypeOptions from minValues",
			in: spot(minValues(scheduling.LabelInstanceType, 5)), types: disruption.MinSpotToSpotOptions},
		{name: "minValues over 15 keeps as many types as it needs", source: "consolidation_test.go: spot to spot consolidation should consider the max of default and minimum number of instanceTypeOptions from minValues",
			in: spot(minValues(scheduling.LabelInstanceType, 17)), types: 17},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := disruption.Compute(tc.in)
			if len(r.Commands) != 1 || len(r.Commands[0].Replacements) != 1 {
				v, _ := verdictOf(r, "n1")
				t.Fatalf("commands %q (verdict %q), want one replacement (%s)", summaries(r), v.Message, tc.source)
			}
			if got := packer.OptionTypes(r.Commands[0].Replacements[0].Options); got != tc.types {
				t.Errorf("options span %d types, want %d (%s)", got, tc.types, tc.source)
			}
		})
	}
	t.Run("minValues the cheaper spot types cannot span: kept", func(t *testing.T) {
		r := disruption.Compute(spot(minValues(scheduling.LabelInstanceType, 20)))
		if len(r.Commands) != 0 {
			t.Fatalf("commands %q, want none: 19 cheaper types cannot span 20", summaries(r))
		}
		if v, _ := verdictOf(r, "n1"); !strings.Contains(v.Message, "minValues requirement is not met") {
			t.Errorf("verdict %q, want the minValues refusal", v.Message)
		}
	})
}
