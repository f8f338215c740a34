package packer

import (
	"math"
	"sort"

	"github.com/millwright/millwright/model/scheduling"
)

// packer holds one run's state. Indices (pools, pool types, classes,
// nodes, groups) are assigned in input or name order so that every
// iteration is deterministic.
type packer struct {
	in      Input
	zones   []string
	zoneIdx map[string]int
	cts     []string
	ctIdx   map[string]int
	nSlots  int

	pools      []*pool
	tiers      [][]int // pool indices grouped by weight, highest first
	pts        []*poolType
	cands      [][]candidate // per pool: non-dominated (pool type, slot) launches
	byPrice    [][][]int32   // per pool, per slot: every usable pool type, cheapest first
	daemonSets []*daemonSet

	classes   []*podClass
	nodes     []*node
	nExisting int

	keys        []*topoKey
	groups      []*group
	local       []int32
	localOwners []int32
	touched     []int32

	level int // relaxation level (see active)

	// Valuation: LP duals per resource dimension over the pending demand.
	demand      scheduling.Resources
	valuedAt    scheduling.Resources
	duals       [scheduling.MaxResources]float64
	lpDims      []int
	lpPrices    []float64 // LP columns: each pool type at its cheapest slot
	lpAllocs    []*scheduling.Resources
	lpCovered   [scheduling.MaxResources]bool // dimensions some column offers
	bonusExcess float64                       // Σ over pending exclusive classes of bonus above value
	fillOrder   []*podClass
	activeList  []*podClass

	epoch      int           // bumped whenever values change
	call       int           // newNode calls so far
	heaps      []*launchHeap // per weight tier
	parked     []scoredCandidate
	density    [scheduling.MaxResources]float64 // highest value per unit of each dimension among pending classes
	exclusives []*podClass                      // classes that need a node of their own

	maskCache map[string][]uint64 // compatibility masks by node requirements
	builder   *groupBuilder
	storage   *storageIndex
	classOf   []int32 // per input pod: its class

	minReq    scheduling.Resources // smallest cpu and memory request among active classes
	candBuf   []scoredCandidate
	takesBuf  []take
	bestTakes []take
	domBuf    []int32
}

type candidate struct {
	pt    int32
	slot  int32
	price float64
}

type scoredCandidate struct {
	candidate
	ub float64 // worth per dollar: an upper bound, or the last simulated worth
}

// acceptWithin lets newNode take the best simulated launch once no stale
// bound exceeds its worth by more than this fraction: 1% costs nothing
// measurable on the example workloads and halves the simulations.
const acceptWithin = 0.01

type take struct {
	c *podClass
	k int
}

// Pack plans the input. It fails only on malformed input (an error naming
// the field); pods that cannot be placed are reported in the Result.
func Pack(in Input) (Result, error) {
	p, err := newPacker(in)
	if err != nil {
		return Result{}, err
	}
	p.run()
	p.finalize()
	return p.result(), nil
}

func (p *packer) run() {
	p.demand = scheduling.Resources{}
	for _, c := range p.classes {
		if c.err == nil {
			p.demand = p.demand.Add(c.req.Scale(int64(c.pending())))
		}
	}
	p.refreshValues(true)
	order := make([]*podClass, 0, len(p.classes))
	for _, c := range p.classes {
		if c.err == nil {
			order = append(order, c)
		}
	}
	// Pods pinned where a spread constraint counts them go first, so the
	// pods carrying the constraint balance around them; then pods that need
	// a node of their own, so the nodes they force are filled with others;
	// then hostname-spread pods; then the most valuable (largest) first.
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if a.pinned != b.pinned {
			return a.pinned
		}
		if a.exclusive != b.exclusive {
			return a.exclusive
		}
		if a.hostSpread != b.hostSpread {
			return a.hostSpread
		}
		if a.value != b.value {
			return a.value > b.value
		}
		return a.idx < b.idx
	})
	for {
		for p.level = 0; p.level <= 1; p.level++ {
			// Room on nodes that exist (or are already planned) costs nothing:
			// use it before a new node's fill pulls pods away.
			for _, c := range order {
				if c.pending() > 0 && c.err == nil {
					p.placeOnNodes(c)
				}
			}
			for progress := true; progress; {
				progress = false
				for _, c := range order {
					if c.pending() == 0 || c.err != nil {
						continue
					}
					before := c.pending()
					p.placeOnNodes(c)
					for c.pending() > 0 && p.newNode(c) {
					}
					if c.pending() < before {
						progress = true
					}
				}
			}
		}
		if !p.relaxLeftovers() {
			return
		}
	}
}

// relaxLeftovers gives up one preference of every class with pods left
// over (see preferences.go) and reports whether any did.
func (p *packer) relaxLeftovers() bool {
	relaxed := false
	for _, c := range p.classes {
		if c.err == nil && c.pending() > 0 && len(c.ladder) > 0 {
			p.relax(c)
			relaxed = true
		}
	}
	if relaxed {
		p.refreshValues(true)
	}
	return relaxed
}

// placeOnNodes puts as many pods of c as fit on nodes that exist or are
// already planned, first fit in node order (existing nodes first).
func (p *packer) placeOnNodes(c *podClass) {
	for _, n := range p.nodes {
		if c.pending() == 0 {
			return
		}
		if n.sealed || !p.suits(c, n) {
			continue
		}
		k := resourceFit(c, &n.free, c.pending())
		if k == 0 {
			continue
		}
		if c.ports != nil {
			if _, bad := n.ports.conflicts(c.ports); bad {
				continue
			}
			k = 1
		}
		if k = p.topologyCap(c, n.doms, k); k > 0 {
			p.place(n, c, k)
		}
	}
}

// place binds the next k pending pods of c to n.
func (p *packer) place(n *node, c *podClass, k int) {
	for _, i := range c.nz {
		n.free[i] -= c.req[i] * int64(k)
		n.podReq[i] += c.req[i] * int64(k)
		p.demand[i] -= c.req[i] * int64(k)
	}
	n.pods = append(n.pods, c.pods[c.next:c.next+k]...)
	n.ports = append(n.ports, c.ports...)
	c.next += k
	n.addClass(int32(c.idx))
	p.record(c, n.doms, int32(k), true)
	if c.exclusive && c.pending() == 0 {
		p.bonusExcess -= max(0, c.bonus-p.plainValue(c))
	}
}

func (p *packer) plainValue(c *podClass) float64 {
	v := 0.0
	for _, d := range p.lpDims {
		v += p.duals[d] * float64(c.req[d])
	}
	return v
}

// refreshValues re-solves the covering LP over the pending demand when it
// has shrunk noticeably, and re-values every class with its duals.
func (p *packer) refreshValues(force bool) {
	if !force {
		stale := false
		for _, d := range p.lpDims {
			if float64(p.demand[d]) < 0.8*float64(p.valuedAt[d]) {
				stale = true
				break
			}
		}
		if !stale {
			return
		}
	}
	p.valuedAt = p.demand
	p.lpDims = p.lpDims[:0]
	p.duals = [scheduling.MaxResources]float64{}
	if p.lpPrices == nil {
		// Columns: each pool type at its cheapest usable slot.
		for _, pt := range p.pts {
			best := -1
			for s := 0; s < p.nSlots; s++ {
				if pt.usable&(1<<s) != 0 && (best < 0 || pt.price[s] < pt.price[best]) {
					best = s
				}
			}
			if best < 0 || pt.price[best] <= 0 {
				continue
			}
			p.lpPrices = append(p.lpPrices, pt.price[best])
			p.lpAllocs = append(p.lpAllocs, &pt.alloc[best])
			for d, v := range pt.alloc[best] {
				if v > 0 {
					p.lpCovered[d] = true
				}
			}
		}
	}
	for d, v := range p.demand {
		if v > 0 && p.lpCovered[d] {
			p.lpDims = append(p.lpDims, d)
		}
	}
	prices := p.lpPrices
	var cols [][]float64
	if len(p.lpDims) > 0 {
		m := len(p.lpDims)
		flat := make([]float64, len(prices)*m)
		cols = make([][]float64, len(prices))
		for j, alloc := range p.lpAllocs {
			col := flat[j*m : (j+1)*m : (j+1)*m]
			for i, d := range p.lpDims {
				col[i] = float64(max(0, alloc[d]))
			}
			cols[j] = col
		}
		b := make([]float64, len(p.lpDims))
		for i, d := range p.lpDims {
			b[i] = float64(p.demand[d])
		}
		if _, duals, ok := coverLP(prices, cols, b); ok {
			for i, d := range p.lpDims {
				p.duals[d] = duals[i]
			}
		} else {
			// Fall back to valuing each dimension at the cheapest rate any type offers it.
			for _, d := range p.lpDims {
				rate := math.Inf(1)
				for j, col := range cols {
					for i, dd := range p.lpDims {
						if dd == d && col[i] > 0 {
							rate = math.Min(rate, prices[j]/col[i])
						}
					}
				}
				if !math.IsInf(rate, 1) {
					p.duals[d] = rate / float64(len(p.lpDims))
				}
			}
		}
	}
	p.bonusExcess = 0
	for _, c := range p.classes {
		if c.err != nil {
			continue
		}
		c.value = p.plainValue(c)
		if c.exclusive {
			if c.bonus == 0 {
				c.bonus = p.cheapestAlone(c)
			}
			if c.pending() > 0 {
				p.bonusExcess += max(0, c.bonus-c.value)
			}
			c.value = max(c.value, c.bonus)
		}
	}
	p.epoch++
	p.density = [scheduling.MaxResources]float64{}
	p.exclusives = p.exclusives[:0]
	for _, c := range p.classes {
		if c.err != nil || c.pending() == 0 {
			continue
		}
		if c.exclusive {
			p.exclusives = append(p.exclusives, c)
		}
		for _, d := range p.lpDims {
			if c.req[d] > 0 {
				p.density[d] = max(p.density[d], p.plainValue(c)/float64(c.req[d]))
			} else {
				p.density[d] = math.Inf(1) // a class free of d: no bound from d
			}
		}
	}
	p.fillOrder = p.fillOrder[:0]
	for _, c := range p.classes {
		if c.err == nil {
			p.fillOrder = append(p.fillOrder, c)
		}
	}
	sort.SliceStable(p.fillOrder, func(i, j int) bool {
		a, b := p.fillOrder[i], p.fillOrder[j]
		if a.value != b.value {
			return a.value > b.value
		}
		return a.idx < b.idx
	})
}

// cheapestAlone is the price of the cheapest launch that can host one pod
// of c by itself: what a pod that needs its own node is worth at least.
func (p *packer) cheapestAlone(c *podClass) float64 {
	best := math.Inf(1)
	for pi, cands := range p.cands {
		if !c.tol[pi] {
			continue
		}
		for _, cd := range cands {
			if cd.price < best && c.mask[cd.pt]&(1<<cd.slot) != 0 && c.req.Fits(p.pts[cd.pt].alloc[cd.slot]) {
				best = cd.price
			}
		}
	}
	if math.IsInf(best, 1) {
		return 0
	}
	return best
}

// upperBound bounds the value any fill of a node of this launch can reach:
// the dual value of what it offers (capped by what is pending), or of the
// pods it could hold at the densest value per unit of one dimension,
// whichever is less, plus the bonus of the exclusive pods that fit it.
func (p *packer) upperBound(cd candidate, alloc *scheduling.Resources) float64 {
	v := 0.0
	for _, d := range p.lpDims {
		v += p.duals[d] * float64(min(alloc[d], p.demand[d]))
	}
	for _, d := range p.lpDims {
		if dense := p.density[d] * float64(min(alloc[d], p.demand[d])); dense < v {
			v = dense
		}
	}
	for _, c := range p.exclusives {
		if c.pending() > 0 && c.mask[cd.pt]&(1<<cd.slot) != 0 && c.req.Fits(*alloc) {
			v += max(0, c.bonus-p.plainValue(c))
		}
	}
	return v
}

// newNode plans one node for seed's pending pods: among the launches of the
// highest-weight NodePools that can take seed, the one whose greedy fill
// with pending pods is worth the most per dollar. It returns false when no
// launch can take even one seed pod.
//
// Launches are kept in a max-heap keyed by their last known worth (at
// first an upper bound), and only the top is re-simulated ("lazy greedy"):
// as pods get placed a fill can only lose worth, so a launch whose fresh
// worth still tops every stale key is the best one. This turns hundreds of
// simulations per node into a handful.
func (p *packer) newNode(seed *podClass) bool {
	p.refreshValues(false)
	p.activeList = p.activeList[:0]
	p.minReq[scheduling.IndexCPU], p.minReq[scheduling.IndexMemory] = math.MaxInt64, math.MaxInt64
	waiting := p.groupsAwaitingPinned()
	for _, c := range p.fillOrder {
		if c.pending() > 0 && c != seed && (waiting == nil || !c.ownsAny(waiting)) {
			p.activeList = append(p.activeList, c)
			p.minReq[scheduling.IndexCPU] = min(p.minReq[scheduling.IndexCPU], c.req[scheduling.IndexCPU])
			p.minReq[scheduling.IndexMemory] = min(p.minReq[scheduling.IndexMemory], c.req[scheduling.IndexMemory])
		}
	}
	for ti := range p.tiers {
		h := p.heapFor(seed, ti)
		parked := p.parked[:0]
		var best scoredCandidate
		haveBest, bestScore := false, 0.0
		for h.Len() > 0 || haveBest {
			if haveBest && (h.Len() == 0 || bestScore >= h.items[0].ub*(1-acceptWithin)) {
				// Fresh and above every other launch's bound: the best.
				p.commit(best.candidate, p.bestTakes)
				h.push(best)
				for _, c := range parked {
					h.push(c)
				}
				p.parked = parked[:0]
				return true
			}
			top := h.pop()
			pt := p.pts[top.pt]
			pl := p.pools[pt.pool]
			if (pl.usage.nodesLimit >= 0 && pl.usage.nodes+1 > pl.usage.nodesLimit) || (pl.hasLims && !pl.usage.allows(pt.it.Capacity)) {
				continue // limits only tighten: the launch is gone for good
			}
			value, ok := p.simulate(pt, int(top.slot), seed)
			if !ok {
				parked = append(parked, top) // blocked now (topology); may open up later
				continue
			}
			top.ub = value / top.price
			if !haveBest || top.ub > bestScore {
				if haveBest {
					h.push(best)
				}
				best, bestScore, haveBest = top, top.ub, true
				p.bestTakes = append(p.bestTakes[:0], p.takesBuf...)
			} else {
				h.push(top)
			}
		}
		for _, c := range parked {
			h.push(c)
		}
		p.parked = parked[:0]
	}
	return false
}

// groupsAwaitingPinned marks the spread groups that pinned classes with
// pods still pending count for (nil when none): their owners must not be
// placed by a fill before those pods land, or the pinned pods could skew
// the owners' domains afterwards (pinned classes go first, but a fill of
// a pinned seed's node would otherwise take owners along).
func (p *packer) groupsAwaitingPinned() []bool {
	var out []bool
	for _, c := range p.classes {
		if !c.pinned || c.err != nil || c.pending() == 0 {
			continue
		}
		for _, r := range c.rules {
			if r.pinned {
				if out == nil {
					out = make([]bool, len(p.groups))
				}
				out[r.g] = true
			}
		}
	}
	return out
}

// ownsAny reports whether the class owns one of the marked groups.
func (c *podClass) ownsAny(marked []bool) bool {
	for _, r := range c.rules {
		if r.owner && marked[r.g] {
			return true
		}
	}
	return false
}

// heapFor returns the launch heap of a weight tier for seed, rebuilt when
// the seed or the valuation changed: every launch that suits seed and fits
// one of its pods, keyed by an upper bound on its worth.
func (p *packer) heapFor(seed *podClass, ti int) *launchHeap {
	for len(p.heaps) <= ti {
		p.heaps = append(p.heaps, &launchHeap{})
	}
	h := p.heaps[ti]
	if h.seed == seed && h.epoch == p.epoch {
		return h
	}
	h.seed, h.epoch = seed, p.epoch
	h.items = h.items[:0]
	for _, pi := range p.tiers[ti] {
		pl := p.pools[pi]
		if !seed.tol[pi] {
			continue
		}
		for _, cd := range p.cands[pi] {
			if seed.mask[cd.pt]&(1<<cd.slot) == 0 {
				continue
			}
			pt := p.pts[cd.pt]
			alloc := &pt.alloc[cd.slot]
			if resourceFit(seed, alloc, 1) == 0 {
				continue
			}
			if pl.hasLims && !pl.usage.allows(pt.it.Capacity) {
				continue
			}
			h.items = append(h.items, scoredCandidate{candidate: cd, ub: p.upperBound(cd, alloc) / cd.price})
		}
	}
	h.init()
	return h
}

// launchHeap is a max-heap of launches by worth; ties go to the cheaper
// launch, then to index order, so that choices are deterministic.
type launchHeap struct {
	seed  *podClass
	epoch int
	items []scoredCandidate
}

func (h *launchHeap) Len() int { return len(h.items) }

// The heap operations are written out (rather than container/heap) so that
// pushing and popping does not box every launch in an interface.
func (h *launchHeap) init() {
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *launchHeap) push(x scoredCandidate) {
	h.items = append(h.items, x)
	for i := len(h.items) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			break
		}
		h.items[i], h.items[parent] = h.items[parent], h.items[i]
		i = parent
	}
}

func (h *launchHeap) pop() scoredCandidate {
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items = h.items[:last]
	if last > 0 {
		h.down(0)
	}
	return top
}

func (h *launchHeap) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		best := l
		if r := l + 1; r < n && h.less(r, l) {
			best = r
		}
		if !h.less(best, i) {
			return
		}
		h.items[i], h.items[best] = h.items[best], h.items[i]
		i = best
	}
}

func (h *launchHeap) less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	switch {
	case a.ub != b.ub:
		return a.ub > b.ub
	case a.price != b.price:
		return a.price < b.price
	case a.pt != b.pt:
		return a.pt < b.pt
	}
	return a.slot < b.slot
}
func (h *launchHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *launchHeap) Push(x any)    { h.items = append(h.items, x.(scoredCandidate)) }
func (h *launchHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

// commit opens the node of a launch and places a simulated fill on it.
func (p *packer) commit(cd candidate, takes []take) {
	n := p.openNode(p.pts[cd.pt], int(cd.slot))
	for _, t := range takes {
		p.place(n, t.c, t.k)
	}
}

// simulate fills a would-be node of pt in slot: as many seed pods as fit,
// then every other pending class in fill order, as many as fit. It returns
// the fill's value and leaves the takes in p.takesBuf.
func (p *packer) simulate(pt *poolType, slot int, seed *podClass) (float64, bool) {
	p.resetLocal()
	defer p.resetLocal()
	free := pt.alloc[slot]
	p.domBuf = p.domainsFor(pt, slot, int32(len(p.nodes)), p.domBuf)
	doms := p.domBuf
	takes := p.takesBuf[:0]
	value := 0.0
	add := func(c *podClass, k int) {
		for _, i := range c.nz {
			free[i] -= c.req[i] * int64(k)
		}
		p.record(c, doms, int32(k), false)
		takes = append(takes, take{c: c, k: k})
		value += float64(k) * c.value
	}
	k := resourceFit(seed, &free, seed.pending())
	if seed.ports != nil {
		k = min(k, 1)
	}
	if k = p.topologyCap(seed, doms, k); k == 0 {
		p.takesBuf = takes
		return 0, false
	}
	add(seed, k)
	ports := seed.ports
	bit := uint64(1) << slot
	for _, c := range p.activeList {
		// Every pending pod needs cpu, memory and a pod slot at least this
		// much: once the node is below it, nothing more fits.
		if free[scheduling.IndexPods] < 1 || free[scheduling.IndexCPU] < p.minReq[scheduling.IndexCPU] || free[scheduling.IndexMemory] < p.minReq[scheduling.IndexMemory] {
			break
		}
		if c.mask[pt.idx]&bit == 0 || !c.tol[pt.pool] {
			continue
		}
		k := resourceFit(c, &free, c.pending())
		if k == 0 {
			continue
		}
		if c.ports != nil {
			if _, bad := ports.conflicts(c.ports); bad {
				continue
			}
			k = 1
		}
		if k = p.topologyCap(c, doms, k); k > 0 {
			add(c, k)
			if c.ports != nil {
				ports = append(ports[:len(ports):len(ports)], c.ports...)
			}
		}
	}
	p.takesBuf = takes
	return value, true
}

// openNode adds a planned node and charges it to its pool's limits.
func (p *packer) openNode(pt *poolType, slot int) *node {
	n := &node{idx: len(p.nodes), pt: pt.idx, slot: slot, free: pt.alloc[slot]}
	n.doms = p.domainsFor(pt, slot, int32(n.idx), nil)
	p.nodes = append(p.nodes, n)
	u := p.pools[pt.pool].usage
	u.used = u.used.Add(pt.it.Capacity)
	u.nodes++
	return n
}
