package packer

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/model/scheduling"
)

// maxMinValuesRounds bounds how often nodes that miss their pool's
// minValues are split and their pods planned again.
const maxMinValuesRounds = 4

// finalize right-sizes every planned node and lists its launch options;
// nodes whose options miss their pool's minValues shed pods, which are
// planned again, until every node meets them (or the pods are
// unschedulable in that pool).
func (p *packer) finalize() {
	for round := 0; ; round++ {
		failed := p.finalizeNodes()
		if len(failed) == 0 {
			return
		}
		for _, n := range failed {
			p.shed(n, round >= maxMinValuesRounds)
		}
		p.run()
	}
}

// shed takes pods off a node that misses its pool's minValues, last placed
// first, until the rest meet them; the node then takes no more pods. A pod
// that misses them alone (or every pod, when final) may not use the pool.
func (p *packer) shed(n *node, final bool) {
	pl := p.pools[p.pts[n.pt].pool]
	for len(n.pods) > 0 {
		last := n.pods[len(n.pods)-1]
		c := p.classes[p.classOf[last]]
		if len(n.pods) == 1 || final {
			c.tol[pl.idx] = false
			c.blocked = minValuesReason(pl.name, n.unmet)
		}
		p.unplace(n, last)
		if !final && len(n.pods) > 0 {
			if _, unmet := p.optionsWithMinValues(n, MaxInstanceTypeOptions); unmet == "" {
				break
			}
		}
	}
	n.sealed = true
	n.unmet = ""
	if len(n.pods) == 0 {
		u := pl.usage
		u.used = u.used.Sub(p.pts[n.pt].it.Capacity)
		u.nodes--
	}
}

// unplace takes input pod i off planned node n and makes it pending again.
func (p *packer) unplace(n *node, i int) {
	c := p.classes[p.classOf[i]]
	for j := len(n.pods) - 1; j >= 0; j-- {
		if n.pods[j] == i {
			n.pods = append(n.pods[:j], n.pods[j+1:]...)
			break
		}
	}
	for j := 0; j < c.next; j++ {
		if c.pods[j] == i {
			c.pods[j], c.pods[c.next-1] = c.pods[c.next-1], c.pods[j]
			break
		}
	}
	c.next--
	n.podReq = n.podReq.Sub(c.req)
	n.free = n.free.Add(c.req)
	p.record(c, n.doms, -1, true)
	n.classes, n.ports = n.classes[:0], nil
	for _, pi := range n.pods {
		ci := p.classOf[pi]
		n.addClass(ci)
		n.ports = append(n.ports, p.classes[ci].ports...)
	}
}

// finalizeNodes right-sizes the planned nodes (the cheapest launch in the
// same pool and zone that still hosts their pods), lists their launch
// options and returns the nodes whose options miss their pool's minValues.
func (p *packer) finalizeNodes() []*node {
	var failed []*node
	resizable := true
	for _, k := range p.keys {
		if !k.hostname && k.name != scheduling.LabelZone {
			resizable = false // a type or capacity-type label is a topology domain
		}
	}
	for _, n := range p.nodes {
		if n.existing || len(n.pods) == 0 {
			continue
		}
		opts, unmet := p.optionsWithMinValues(n, MaxInstanceTypeOptions)
		if unmet != "" {
			n.unmet = unmet
			failed = append(failed, n)
			continue
		}
		if len(opts) == 0 {
			continue // cannot happen: the node's own launch always qualifies
		}
		if resizable && (opts[0].pt != int32(n.pt) || opts[0].slot != int32(n.slot)) {
			u := p.pools[p.pts[n.pt].pool].usage
			u.used = u.used.Sub(p.pts[n.pt].it.Capacity).Add(p.pts[opts[0].pt].it.Capacity)
			n.pt, n.slot = int(opts[0].pt), int(opts[0].slot)
			n.free = p.pts[n.pt].alloc[n.slot].Sub(n.podReq)
		}
		n.options = opts
	}
	return failed
}

// optionsWithMinValues is launchOptions, widened to span the pool's
// minValues when the capacity-type rule's picks do not: first among the
// preferred capacity type's launches, then among every capacity type's.
// It returns the first unmet minValues ("" when met).
func (p *packer) optionsWithMinValues(n *node, limit int) ([]candidate, string) {
	mvs := p.pools[p.pts[n.pt].pool].mvs
	if len(mvs) == 0 {
		return p.launchOptions(n, limit), ""
	}
	preferred := p.launchOptions(n, len(p.pts))
	opts, unmet := p.withMinValues(mvs, preferred, limit)
	if unmet == "" {
		return opts, ""
	}
	all := p.feasibleLaunches(n)
	return p.withMinValues(mvs, all, limit)
}

// feasibleLaunches lists every launch in n's pool and zone, any capacity
// type, that launchOptions' feasibility allows, cheapest first (spot first
// on a tie).
func (p *packer) feasibleLaunches(n *node) []candidate {
	pl := p.pools[p.pts[n.pt].pool]
	zone := p.zoneIdx[p.slotZone(n.slot)]
	var out []candidate
	for ci := range p.cts {
		s := zone*len(p.cts) + ci
		for _, pti := range p.byPrice[pl.idx][s] {
			if p.launchFeasible(n, pti, s) {
				out = append(out, candidate{pt: pti, slot: int32(s), price: p.pts[pti].price[s]})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].price < out[j].price })
	return out
}

// launchFeasible reports whether launch (pti, s) suits every pod on n, fits
// them after DaemonSets and stays within the pool's limits.
func (p *packer) launchFeasible(n *node, pti int32, s int) bool {
	cur := p.pts[n.pt]
	pl := p.pools[cur.pool]
	pt := p.pts[pti]
	bit := uint64(1) << s
	for _, ci := range n.classes {
		if p.classes[ci].mask[pti]&bit == 0 {
			return false
		}
	}
	if !n.podReq.Fits(pt.alloc[s]) {
		return false
	}
	if pl.hasLims && pti != int32(n.pt) {
		u := pl.usage
		capDelta := pt.it.Capacity.Sub(cur.it.Capacity)
		for i, on := range u.limited {
			if on && u.used[i]+capDelta[i] > u.limits[i] {
				return false
			}
		}
	}
	return true
}

// launchOptions lists the launches in n's pool and zone that suit every pod
// on n, fit them after DaemonSets and stay within the pool's limits,
// cheapest first, with the capacity-type rule applied across them (spot
// preferred; spot priced above the cheapest on-demand option dropped).
func (p *packer) launchOptions(n *node, limit int) []candidate {
	pl := p.pools[p.pts[n.pt].pool]
	zone := p.slotZone(n.slot)
	feasible := func(pti int32, s int) bool { return p.launchFeasible(n, pti, s) }
	spotSlot := p.slotOf(zone, scheduling.CapacityTypeSpot)
	var others []candidate // on-demand and any other capacity type
	for ci, ct := range p.cts {
		if ct == scheduling.CapacityTypeSpot {
			continue
		}
		s := p.zoneIdx[zone]*len(p.cts) + ci
		found := 0
		for _, pti := range p.byPrice[pl.idx][s] {
			if feasible(pti, s) {
				others = append(others, candidate{pt: pti, slot: int32(s), price: p.pts[pti].price[s]})
				if found++; found == limit {
					break
				}
			}
		}
	}
	sort.SliceStable(others, func(i, j int) bool { return others[i].price < others[j].price })
	cheapestOther := -1.0
	if len(others) > 0 {
		cheapestOther = others[0].price
	}
	var spot []candidate
	for _, pti := range p.byPrice[pl.idx][spotSlot] {
		price := p.pts[pti].price[spotSlot]
		if cheapestOther >= 0 && price > cheapestOther {
			break
		}
		if feasible(pti, spotSlot) {
			spot = append(spot, candidate{pt: pti, slot: int32(spotSlot), price: price})
			if len(spot) == limit {
				break
			}
		}
	}
	if len(spot) > 0 {
		return spot
	}
	if len(others) > limit {
		others = others[:limit]
	}
	return others
}

func (p *packer) result() Result {
	var r Result
	for _, n := range p.nodes[:p.nExisting] {
		for _, i := range n.pods {
			r.Placements = append(r.Placements, Placement{Pod: p.in.Pods[i], Node: n.name})
		}
	}
	labelCache := map[[2]int]map[string]string{}
	for _, n := range p.nodes[p.nExisting:] {
		if len(n.pods) == 0 {
			continue
		}
		options := n.options
		ptIdx, slot := n.pt, n.slot
		if len(options) > 0 && p.zoneFree(n) {
			options = p.acrossZones(n, options)
			// The cheapest offering of any zone is the launch the plan
			// prices; its pods do not care which zone it is in.
			ptIdx, slot = int(options[0].pt), int(options[0].slot)
		}
		pt := p.pts[ptIdx]
		pl := p.pools[pt.pool]
		zone, ct := p.slotZone(slot), p.slotCT(slot)
		key := [2]int{ptIdx, slot}
		labels, ok := labelCache[key]
		if !ok {
			labels = make(map[string]string, len(pt.labels)+2)
			for k, v := range pt.labels {
				labels[k] = v
			}
			labels[scheduling.LabelZone] = zone
			labels[scheduling.LabelCapacityType] = ct
			labels = scheduling.WithAliases(labels)
			labelCache[key] = labels
		}
		plan := NodePlan{
			Name:          fmt.Sprintf("new-node-%d", len(r.NewNodes)+1),
			NodePool:      pl.name,
			InstanceType:  pt.it.Name,
			Zone:          zone,
			CapacityType:  ct,
			Price:         pt.price[slot],
			Labels:        labels,
			Taints:        append([]corev1.Taint(nil), pl.taints...),
			StartupTaints: append([]corev1.Taint(nil), pl.spec.StartupTaints...),
			Requests:      n.podReq,
		}
		cts, zones := map[string]bool{}, map[string]bool{}
		plan.Options = make([]InstanceTypeOption, 0, len(options))
		for _, o := range options {
			oct, oz := p.slotCT(int(o.slot)), p.slotZone(int(o.slot))
			plan.Options = append(plan.Options, InstanceTypeOption{InstanceType: p.pts[o.pt].it.Name, CapacityType: oct, Zone: oz, Price: o.price})
			cts[oct], zones[oz] = true, true
		}
		for _, c := range p.cts {
			if cts[c] {
				plan.CapacityTypes = append(plan.CapacityTypes, c)
			}
		}
		plan.Zones = []string{zone}
		for _, z := range p.zones {
			if zones[z] && z != zone {
				plan.Zones = append(plan.Zones, z)
			}
		}
		for _, i := range n.pods {
			plan.Pods = append(plan.Pods, p.in.Pods[i])
		}
		for _, ds := range p.daemonSets {
			if ds.mask[pt.idx]&(1<<slot) != 0 {
				plan.DaemonSetPods = append(plan.DaemonSetPods, ds.pod)
				plan.Requests = plan.Requests.Add(ds.req)
			}
		}
		r.NewNodes = append(r.NewNodes, plan)
	}
	type pending struct {
		idx    int
		reason string
	}
	var un []pending
	for _, c := range p.classes {
		if c.pending() == 0 {
			continue
		}
		reason := p.diagnose(c)
		for _, i := range c.pods[c.next:] {
			un = append(un, pending{i, reason})
		}
	}
	sort.Slice(un, func(i, j int) bool { return un[i].idx < un[j].idx })
	for _, u := range un {
		r.Unschedulable = append(r.Unschedulable, Unschedulable{Pod: p.in.Pods[u.idx], Reason: u.reason})
	}
	return r
}

// zoneFree reports whether no pod on planned node n depends on the zone the
// node lands in: no class on it carries or is counted by a topology rule on
// any key but the hostname (a zone spread, a zonal (anti-)affinity, or a
// rule on a label that varies between launches). Requirements on the zone
// (a node selector, a volume's topology) are not rules: they narrow the
// slots the class suits, which acrossZones checks per offering.
func (p *packer) zoneFree(n *node) bool {
	for _, ci := range n.classes {
		c := p.classes[ci]
		if c.pinned {
			return false
		}
		for _, r := range c.rules {
			if !p.groups[r.g].hostname {
				return false
			}
		}
	}
	return true
}

// acrossZones widens a zone-free node's options (its zone's, cheapest first)
// to the same instance types' offerings of the same capacity type in the
// other zones that suit every pod on it, fit them and are priced at most
// the dearest of opts, cheapest first. The cap keeps the launch within the
// price range the plan accepted in its own zone whichever pool CreateFleet
// takes.
func (p *packer) acrossZones(n *node, opts []candidate) []candidate {
	limit := 0.0
	for _, o := range opts {
		limit = max(limit, o.price)
	}
	// opts are all in n's zone, one per (type, capacity type): the
	// launches added are new.
	own := p.zoneIdx[p.slotZone(n.slot)]
	nCT := len(p.cts)
	out := make([]candidate, len(opts), len(opts)*len(p.zones))
	copy(out, opts)
	for _, o := range opts {
		pt := p.pts[o.pt]
		ct := int(o.slot) % nCT
		for z := range p.zones {
			s := z*nCT + ct
			if z == own || pt.offered&(1<<s) == 0 || pt.price[s] > limit || !p.launchFeasible(n, o.pt, s) {
				continue
			}
			out = append(out, candidate{pt: o.pt, slot: int32(s), price: pt.price[s]})
		}
	}
	slices.SortStableFunc(out, func(a, b candidate) int { return cmp.Compare(a.price, b.price) })
	return out
}
