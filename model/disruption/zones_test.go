package disruption_test

import (
	"strings"
	"testing"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/disruption"
	"github.com/millwright/millwright/model/packer"
)

// inThreeZones offers each type's spot offering in zone-b and zone-c too,
// at the same price.
func inThreeZones(ts []*catalog.InstanceType) []*catalog.InstanceType {
	var out []*catalog.InstanceType
	for _, it := range ts {
		c := *it
		c.Offerings = nil
		for _, o := range it.Offerings {
			for _, z := range []string{"zone-a", "zone-b", "zone-c"} {
				o.Zone = z
				c.Offerings = append(c.Offerings, o)
			}
		}
		out = append(out, &c)
	}
	return out
}

// A replacement whose pods do not depend on the zone is offered in every
// zone, so its options hold a type once per zone: Karpenter's spot→spot
// rule still counts instance types, and truncates to the offerings of the
// 15 cheapest types.
func TestSpotToSpotCountsInstanceTypesAcrossZones(t *testing.T) {
	spotPool := pools(pool("default", launchTypes(inThreeZones(manySpotTypes(20))), spotLaunches))
	t.Run("10 cheaper types in 3 zones are 10 options", func(t *testing.T) {
		r := disruption.Compute(input(spotPool, node("n1", "default", "s.10", running(pod("a", "1", "1Gi")))))
		if len(r.Commands) != 0 {
			t.Fatalf("want no command, got %s", summary(r.Commands[0]))
		}
		if v, _ := verdictOf(r, "n1"); !strings.Contains(v.Message, "got 10") {
			t.Fatalf("verdict %q, want the 10 cheaper types counted once each", v.Message)
		}
	})
	t.Run("19 cheaper types: the replacement launches among the 15 cheapest, in every zone", func(t *testing.T) {
		in := input(spotPool, node("n1", "default", "s.19", running(pod("a", "1", "1Gi"))))
		in.Options.ConsolidationThreshold = -1 // no score: it would narrow the options further
		r := disruption.Compute(in)
		if len(r.Commands) != 1 || len(r.Commands[0].Replacements) != 1 {
			t.Fatalf("want one replacement, got %+v", r.Commands)
		}
		plan := r.Commands[0].Replacements[0]
		if got := packer.OptionTypes(plan.Options); got != disruption.MinSpotToSpotOptions {
			t.Errorf("options span %d types, want %d", got, disruption.MinSpotToSpotOptions)
		}
		zones := map[string]bool{}
		for _, o := range plan.Options {
			zones[plan.ZoneOf(o)] = true
			if o.CapacityType != apisv1.CapacityTypeSpot || o.Price >= r.Commands[0].Candidates[0].Price {
				t.Errorf("option %+v: want a spot offering cheaper than the candidate", o)
			}
		}
		if len(zones) != 3 || len(plan.Zones) != 3 {
			t.Errorf("options in zones %v (plan zones %v), want all three", zones, plan.Zones)
		}
	})
}

// Whichever option CreateFleet launches, the replacement saves what the
// score (or the savings fraction) asks: options dearer than that are
// dropped. Alone in its pool, a node's move causes all of the pool's
// disruption, so under k = 2 the score asks for half its price; the default
// ReplaceSavingsFraction takes 30%. Of the 19 cheaper types (s.00 at
// $0.010/h to s.18 at $0.028/h; the node is an s.19 at $0.029/h), s.00–s.04
// save half, s.00–s.10 30%.
func TestReplacementOptionsAllPassTheScore(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fraction float64
		policy   apisv1.ConsolidationPolicy
		share    float64 // of the node's price each option must save
		want     string
	}{
		{name: "default: 30% of the price", share: 0.3, want: "s.00 s.01 s.02 s.03 s.04 s.05 s.06 s.07 s.08 s.09 s.10"},
		{name: "the score alone: half", fraction: -1, share: 0.5, want: "s.00 s.01 s.02 s.03 s.04"},
		{name: "a Balanced pool: half", policy: apisv1.ConsolidationPolicyBalanced, share: 0.5, want: "s.00 s.01 s.02 s.03 s.04"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pool("default", launchTypes(manySpotTypes(20)), spotLaunches)
			if tc.policy != "" {
				p = pool("default", launchTypes(manySpotTypes(20)), spotLaunches, policy(tc.policy))
			}
			in := input(pools(p), node("n1", "default", "s.19", running(pod("a", "1", "1Gi"))))
			in.Options.ReplaceSavingsFraction = tc.fraction
			r := disruption.Compute(in)
			if len(r.Commands) != 1 || len(r.Commands[0].Replacements) != 1 {
				t.Fatalf("want one replacement, got %+v", r.Commands)
			}
			cmd := r.Commands[0]
			price := cmd.Candidates[0].Price
			var names []string
			for _, o := range cmd.Replacements[0].Options {
				names = append(names, o.InstanceType)
				if saved := price - o.Price; saved < price*tc.share-1e-9 {
					t.Errorf("option %s at $%.3f/h saves $%.3f/h, less than %.2f of $%.3f/h", o.InstanceType, o.Price, saved, tc.share, price)
				}
			}
			if got := strings.Join(names, " "); got != tc.want {
				t.Errorf("options %s, want %s", got, tc.want)
			}
		})
	}
}
