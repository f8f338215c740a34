package disruption

import (
	"fmt"
	"sort"
	"strings"

	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// A NodePool requirement's minValues asks every launch of the pool to span
// that many distinct values of its key (instance types, families...), so
// the launch has types to fall back on. The packer plans launches that
// span them; a replacement's options are then cut (cheaper than the
// candidates, spot only, the cheapest few, what saves enough), and the cut
// must still span them: Karpenter's RemoveInstanceTypeOptionsByPriceAndMinValues
// refuses the move otherwise, and widens the spot→spot truncation to as
// many types as minValues needs.

// typeLabels are the labels of the instance types pool launches, by name.
func (c *computation) typeLabels(pool string) map[string]map[string]string {
	pi := c.pools[pool]
	if pi == nil {
		return nil
	}
	if pi.typeLabels == nil {
		pi.typeLabels = make(map[string]map[string]string, len(pi.spec.Launch.InstanceTypes))
		for _, it := range pi.spec.Launch.InstanceTypes {
			pi.typeLabels[it.Name] = scheduling.CanonicalLabels(it.Labels)
		}
	}
	return pi.typeLabels
}

// minValuesOf are pool's minValues, keys canonical and sorted.
func (c *computation) minValuesOf(pool string) []string {
	pi := c.pools[pool]
	if pi == nil || len(pi.spec.Launch.MinValues) == 0 {
		return nil
	}
	keys := make([]string, 0, len(pi.spec.Launch.MinValues))
	for k := range pi.spec.Launch.MinValues {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// minValuesUnmet says which of pool's minValues opts do not span, in
// Karpenter's words ("" when they span all, or the pool has none).
func (c *computation) minValuesUnmet(pool string, opts []packer.InstanceTypeOption) string {
	keys := c.minValuesOf(pool)
	if len(keys) == 0 {
		return ""
	}
	labels := c.typeLabels(pool)
	var unmet []string
	for _, k := range keys {
		want := c.pools[pool].spec.Launch.MinValues[k]
		key := scheduling.CanonicalLabelKey(k)
		seen := map[string]bool{}
		for _, o := range opts {
			if v, ok := labels[o.InstanceType][key]; ok {
				seen[v] = true
			}
		}
		if len(seen) < want {
			unmet = append(unmet, fmt.Sprintf("%s (%d of %d values)", k, len(seen), want))
		}
	}
	if len(unmet) == 0 {
		return ""
	}
	return "minValues requirement is not met for label(s) " + strings.Join(unmet, ", ")
}

// typesForMinValues is how many of the cheapest instance types of opts
// (cheapest first, a type once however many zones offer it) span pool's
// minValues: 0 when the pool has none or all of opts do not span them.
func (c *computation) typesForMinValues(pool string, opts []packer.InstanceTypeOption) int {
	if len(c.minValuesOf(pool)) == 0 {
		return 0
	}
	var cheapest []packer.InstanceTypeOption // one per type, cheapest first
	seen := map[string]bool{}
	for _, o := range opts {
		if !seen[o.InstanceType] {
			seen[o.InstanceType] = true
			cheapest = append(cheapest, packer.InstanceTypeOption{InstanceType: o.InstanceType})
		}
	}
	for n := 1; n <= len(cheapest); n++ {
		if c.minValuesUnmet(pool, cheapest[:n]) == "" {
			return n
		}
	}
	return 0
}

// cheapestSpot keeps the offerings of the cheapest MinSpotToSpotOptions
// instance types of spot opts (cheapest first; a type may be offered in
// several zones), or of as many as pool's minValues need when that is more
// (Karpenter: max(15, the types minValues needs)). A spot launch may land
// on any option: keeping these means the node it becomes never has that
// many cheaper types, so it cannot be replaced again at once (Karpenter
// truncates spot→spot to 15 types; we also truncate on-demand→spot and
// splits).
func (c *computation) cheapestSpot(pool string, opts []packer.InstanceTypeOption) []packer.InstanceTypeOption {
	keep := max(MinSpotToSpotOptions, c.typesForMinValues(pool, opts))
	kept := map[string]bool{}
	var out []packer.InstanceTypeOption
	for _, o := range opts {
		if !kept[o.InstanceType] {
			if len(kept) == keep {
				continue
			}
			kept[o.InstanceType] = true
		}
		out = append(out, o)
	}
	return out
}
