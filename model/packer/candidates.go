package packer

import (
	"sort"
	"strings"

	"github.com/millwright/millwright/model/scheduling"
)

// buildCandidates groups pools into weight tiers and lists, per pool, the
// launches (pool type, slot) worth considering for a new node: a launch is
// dropped when another one of the same pool and slot, suiting exactly the
// same pod classes and topology domains, costs no more and offers at least
// as much of every resource after DaemonSets. Pools with resource limits
// keep every launch (a smaller type may fit under the limit when a larger
// one does not).
func (p *packer) buildCandidates() {
	order := make([]int, len(p.pools))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return p.pools[order[i]].weight > p.pools[order[j]].weight })
	for i, pi := range order {
		if i == 0 || p.pools[pi].weight != p.pools[order[i-1]].weight {
			p.tiers = append(p.tiers, nil)
		}
		p.tiers[len(p.tiers)-1] = append(p.tiers[len(p.tiers)-1], pi)
	}

	// Distinct compatibility masks (classes with equal node requirements share one).
	var masks [][]uint64
	seen := map[*uint64]bool{}
	for _, c := range p.classes {
		if c.err != nil || len(c.mask) == 0 {
			continue
		}
		if !seen[&c.mask[0]] {
			seen[&c.mask[0]] = true
			masks = append(masks, c.mask)
		}
	}
	var otherKeys []int
	for ki, k := range p.keys {
		if !k.hostname {
			otherKeys = append(otherKeys, ki)
		}
	}

	p.cands = make([][]candidate, len(p.pools))
	p.byPrice = make([][][]int32, len(p.pools))
	for _, pl := range p.pools {
		p.byPrice[pl.idx] = make([][]int32, p.nSlots)
		resourceLimited := pl.usage.limited != [scheduling.MaxResources]bool{}
		for s := 0; s < p.nSlots; s++ {
			var all []int32
			for _, pti := range pl.pts {
				if p.pts[pti].usable&(1<<s) != 0 {
					all = append(all, int32(pti))
				}
			}
			sort.SliceStable(all, func(i, j int) bool {
				a, b := p.pts[all[i]], p.pts[all[j]]
				if a.price[s] != b.price[s] {
					return a.price[s] < b.price[s]
				}
				return a.it.Name < b.it.Name
			})
			p.byPrice[pl.idx][s] = all
			if resourceLimited {
				for _, pti := range all {
					p.cands[pl.idx] = append(p.cands[pl.idx], candidate{pt: pti, slot: int32(s), price: p.pts[pti].price[s]})
				}
				continue
			}
			// Pareto front per signature, scanning cheapest first.
			fronts := map[string][]int32{}
			var sig strings.Builder
			for _, pti := range all {
				pt := p.pts[pti]
				sig.Reset()
				for _, m := range masks {
					if m[pti]&(1<<s) != 0 {
						sig.WriteByte('1')
					} else {
						sig.WriteByte('0')
					}
				}
				for _, ki := range otherKeys {
					sig.WriteByte('|')
					if d := p.domainOf(ki, pt, s); d >= 0 {
						sig.WriteString(p.keys[ki].values[d])
					}
				}
				key := sig.String()
				dominated := false
				for _, other := range fronts[key] {
					if pt.alloc[s].Fits(p.pts[other].alloc[s]) {
						dominated = true
						break
					}
				}
				if dominated {
					continue
				}
				fronts[key] = append(fronts[key], pti)
				p.cands[pl.idx] = append(p.cands[pl.idx], candidate{pt: pti, slot: int32(s), price: pt.price[s]})
			}
		}
	}
}
