package disruption

import (
	"sort"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/scheduling"
)

// Waste first is Millwright's one change to Karpenter's consolidation
// order. Karpenter takes the candidates cheapest to disrupt first (fewest
// pods), so under a 10% budget a scale-down spends its rounds on the small
// nodes, and kube-scheduler (LeastAllocated) sends their evicted pods to
// the emptiest node left: the large one launched for the burst. On the
// consolidation benchmark (600 mixed pods scaled to 180) an m7i.48xlarge
// spot node at $3.77/h, more than a fresh plan of all 180 pods, went from
// ~40 pods to 56–99 before its turn came, and by then no move the Balanced
// score allows could take it (a split saving 25% of the pool's cost for
// 53% of its disruption scores 0.46).
//
// So before multi-node consolidation, an outlier — a candidate priced at
// least OutlierPriceFactor times its pool's median node and wasting at
// least WastefulShare of the pool's cost (price × the share of the node its
// pods leave unused) — is consolidated first, the most wasteful first, by
// the same rules as single-node consolidation (delete, one cheaper node, or
// a split). Karpenter's order decides everything else, and in pools of
// like-sized nodes (Karpenter's test cases) nothing changes.

// WastefulShare is the share of its pool's hourly cost a node must waste
// to be consolidated before Karpenter's order.
const WastefulShare = 0.10

// OutlierPriceFactor is how many times its pool's median node price a node
// must cost to be consolidated before Karpenter's order.
const OutlierPriceFactor = 4

// maxWastefulPerPass bounds the simulations of the waste-first pass.
const maxWastefulPerPass = 3

// wastefulFirst consolidates the most wasteful outliers first, and stops
// avoiding those it found nothing for: they stay destinations for the
// other candidates' pods, as in Karpenter.
//
// An admission (Input.Only) decides for its own candidates alone, but the
// pass whose command it checks probed the outliers first: it probes the
// other outliers too, deciding nothing for them, so that it avoids the
// same ones as the pass. Otherwise an outlier the pass found nothing for
// stayed out of reach in the admission, which then refused every command
// that counted on its room (TestAdmissionAvoidsTheOutliersThePassAvoided).
func (c *computation) wastefulFirst() {
	var list []*nodeInfo
	for _, ni := range c.consolidationCandidatesAndBystanders() {
		if ni.outlier {
			list = append(list, ni)
		}
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].waste > list[j].waste })
	for k, ni := range list {
		if k == maxWastefulPerPass || c.full() {
			return
		}
		if ni.command >= 0 || ni.receiving || !ni.pool.allows(ReasonUnderutilized, 1, 0) {
			continue
		}
		if found, _ := c.consolidate([]*nodeInfo{ni}); found != nil {
			if !ni.bystander {
				c.commit(found.cmd, found.cands, found.placements)
			}
			continue
		}
		c.stopAvoiding(ni)
	}
}

// markOutliers finds the outliers of pools that consolidate underutilized
// nodes: nodes priced at least OutlierPriceFactor times their pool's median
// node that waste at least WastefulShare of its cost, whatever their
// consolidateAfter says. Until consolidation takes them, no simulation
// moves pods onto them, and the disruption workflow taints them
// OutlierTaintKey (PreferNoSchedule, Result's Verdict.Outlier) so that
// kube-scheduler sends the pods evicted meanwhile elsewhere: an outlier
// that takes them restarts its consolidateAfter with each one and, fuller,
// is no longer worth splitting (the sink this replaces: an m7i.48xlarge
// went from 40 to 80–123 pods while the small nodes were consolidated, and
// its split came 4 minutes later or never).
func (c *computation) markOutliers() {
	median := c.medianPrices()
	for _, ni := range c.nodes {
		pl := ni.pool
		if pl == nil || pl.cost <= 0 || median[pl] <= 0 || ni.node.Price < OutlierPriceFactor*median[pl] ||
			ni.blocked != "" || ni.podBlocked != "" || ni.command >= 0 || ni.empty() {
			continue
		}
		np := pl.spec.Pool
		if _, never := np.ConsolidateAfterDuration(); never || np.ConsolidationPolicyOrDefault() == apisv1.ConsolidationPolicyWhenEmpty {
			continue
		}
		waste := ni.node.Price * (1 - c.utilization(ni))
		if waste < WastefulShare*pl.cost {
			continue
		}
		ni.outlier, ni.waste = true, waste
		c.capacity.avoid(ni.node.Name)
	}
}

// stopAvoiding makes an outlier consolidation found nothing for a
// destination again.
func (c *computation) stopAvoiding(ni *nodeInfo) {
	ni.outlier = false
	c.capacity.unavoid(ni.node.Name)
}

// medianPrices are the median prices of each pool's nodes.
func (c *computation) medianPrices() map[*poolInfo]float64 {
	prices := map[*poolInfo][]float64{}
	for _, ni := range c.nodes {
		if ni.pool != nil {
			prices[ni.pool] = append(prices[ni.pool], ni.node.Price)
		}
	}
	out := make(map[*poolInfo]float64, len(prices))
	for pl, ps := range prices {
		sort.Float64s(ps)
		out[pl] = ps[len(ps)/2]
	}
	return out
}

// utilization is the largest share of any of the node's resources (CPU,
// memory, ephemeral storage, accelerators; not pod slots) its active pods
// request: a GPU node whose one pod holds its GPU is fully used however
// little CPU that pod asks for.
func (c *computation) utilization(ni *nodeInfo) float64 {
	alloc := ni.node.Allocatable
	if alloc[scheduling.IndexCPU] <= 0 || alloc[scheduling.IndexMemory] <= 0 {
		return 1
	}
	used := scheduling.Resources{}
	for _, p := range ni.node.Pods {
		if p.Pod != nil && active(p.Pod) {
			used = used.Add(c.requests(p.Pod))
		}
	}
	share := 0.0
	for i := range alloc {
		if i == scheduling.IndexPods || alloc[i] <= 0 {
			continue
		}
		share = max(share, float64(used[i])/float64(alloc[i]))
	}
	return min(share, 1)
}
