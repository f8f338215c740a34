package disruption

import (
	"sort"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// Repacking pairs is where Millwright goes beyond Karpenter's
// multi-node consolidation, which only ever tries the cheapest-to-disrupt
// candidates as one prefix, into one node. After a scale-down,
// kube-scheduler refills the nodes that are left with whatever pods it
// evicts, so a node launched for memory-heavy pods ends up full of
// CPU-heavy ones: at the local stack's prices, spot m5a.2xlarge nodes at
// $0.12/h with 98% of their CPU and 40% of their memory requested, pods a
// $0.09/h c6a.2xlarge holds. Alone such a node stays, rightly: a spot node
// is replaced by a cheaper spot node only with MinSpotToSpotOptions
// cheaper types, and it has 1–3. The consolidation benchmark then settled
// at 1.26× a fresh plan of its pods (TestConsolidationSettles, the stack's
// prices), every remaining node refused.
//
// So once single-node consolidation has had its turn, the nodes it
// simulated and kept are taken two at a time (the same pool, neither
// launched by a consolidation): a fresh plan of each one's pods alone
// (beside the other nodes' room) says what it could save, the nodes that
// would save the largest share of their price go first, each with up to
// maxRepackPartners of the next, and a pair is replaced by the nodes a
// fresh plan of both nodes' pods needs when they cost less. It is held to
// a split's rules — every option CreateFleet may take saves what the
// threshold asks (the Balanced score, or RepackSavingsFraction of the
// pair's price outside Balanced pools), spot options cut to the cheapest
// MinSpotToSpotOptions types — and, as a multi-node command, to
// Karpenter's multi-node rule for spot: no minimum count of cheaper types.
// Nodes a consolidation launched are never repacked (as they are never
// split), so a repack cannot chain: what it launches is the plan of its
// pods, and only Karpenter's own moves may take it later.
// Options.DisableSplit turns repacking off with splitting.
//
// RepackSavingsFraction (10%) is lower than ReplaceSavingsFraction (30%):
// the pairs left on the benchmark save 10–25% of their price, and a
// replace or split at 10% churned on the stack (a $0.21/h node split into
// three for $0.03/h, then three nodes merged back into one).

// maxRepackProbes bounds how many refused candidates a pass plans alone
// to learn what repacking them could save (the rest take turns in later
// passes), and maxRepackPartners how many partners each one tries.
const (
	maxRepackProbes   = 16
	maxRepackPartners = 4
)

// repackPairs replaces pairs of candidates single-node consolidation
// refused by the cheaper nodes a fresh plan of their pods needs.
func (c *computation) repackPairs() {
	if c.opts.DisableSplit || c.full() {
		return
	}
	var refused []*nodeInfo
	for _, ni := range c.consolidationCandidates() {
		if !ni.keptAlone || ni.node.Price <= 0 || !ni.node.LaunchedByConsolidationAt.IsZero() || !c.free(ni) {
			continue
		}
		refused = append(refused, ni)
	}
	refused = c.rotate(refused, maxRepackProbes)
	if len(refused) > maxRepackProbes {
		refused = refused[:maxRepackProbes]
	}
	// What a fresh plan of each node's pods alone would save: the pairs
	// are made of the nodes that gain most, in proportion to their price.
	gain := map[*nodeInfo]float64{}
	var probed []*nodeInfo
	for _, ni := range refused {
		if saved := ni.node.Price - c.alonePrice(ni); saved > 0 {
			gain[ni] = saved / ni.node.Price
			probed = append(probed, ni)
		}
	}
	sort.SliceStable(probed, func(i, j int) bool { return gain[probed[i]] > gain[probed[j]] })
	for i, a := range probed {
		if c.full() {
			return
		}
		if !c.free(a) || !a.pool.allows(ReasonUnderutilized, 2, 0) {
			continue
		}
		tried := 0
		for _, b := range probed[i+1:] {
			if tried == maxRepackPartners {
				break
			}
			if b.pool != a.pool || !c.free(b) {
				continue
			}
			tried++
			pair := []*nodeInfo{a, b}
			if found, _ := c.repackInto(describeTypes(typesOf(pair)), pair, 1, c.opts.RepackSavingsFraction); found != nil {
				c.commit(found.cmd, found.cands, found.placements)
				break
			}
		}
	}
}

// repackPair re-checks, in an admission, the pair a pass repacked: the
// same rules as repackPairs but for the probes that chose the pair (what
// each node alone would save, which moves as the cluster does). nil when
// cands are not such a pair or no longer repack.
func (c *computation) repackPair(cands []*nodeInfo) *consolidation {
	if c.opts.DisableSplit || len(cands) != 2 || cands[0].pool != cands[1].pool || !cands[0].pool.allows(ReasonUnderutilized, 2, 0) {
		return nil
	}
	for _, ni := range cands {
		if ni.node.Price <= 0 || !ni.node.LaunchedByConsolidationAt.IsZero() || !c.free(ni) {
			return nil
		}
	}
	found, _ := c.repackInto(describeTypes(typesOf(cands)), cands, 1, c.opts.RepackSavingsFraction)
	return found
}

// alonePrice is what the nodes a fresh plan of ni's pods needs would cost
// at their cheapest options (spot ones among the cheapest
// MinSpotToSpotOptions types), beside the other nodes' room; ni's own
// price when they cannot be planned.
func (c *computation) alonePrice(ni *nodeInfo) float64 {
	sim := c.simulate([]*nodeInfo{ni}, launchSplit, ni.node.Price)
	if sim.failed != "" {
		return ni.node.Price
	}
	total := 0.0
	for _, plan := range sim.newNodes {
		opts := plan.Options
		if len(opts) > 0 && opts[0].CapacityType == apisv1.CapacityTypeSpot {
			opts = c.cheapestSpot(plan.NodePool, spotOnly(opts))
		}
		if len(opts) == 0 {
			return ni.node.Price
		}
		total += withOptions(plan, opts).Price
	}
	return total
}

// free: no command of this pass takes ni or moves pods onto it.
func (c *computation) free(ni *nodeInfo) bool {
	return ni.command < 0 && !ni.receiving
}
