package disruption

import (
	"fmt"
	"math"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// Splitting is where Millwright goes beyond Karpenter's consolidation:
// one underutilized node whose pods no single cheaper node can hold is
// replaced by several nodes that together cost less. Karpenter refuses
// ("Can't remove without creating N candidates"), so a node launched
// large for a burst keeps costing its whole price once the burst is gone:
// after 600 mixed pods were scaled to 30%, the last large spot nodes were
// kept at 1.8–2.6× a fresh plan of the pods left. Karpenter's users ask
// for the same (kubernetes-sigs/karpenter#1442).
//
// A split is held to the rules of a replace: the replacements together
// cost less than the node even if every spot launch lands on the dearest
// option it is given (each plan's options are cut to keep that true, and
// spot ones to the cheapest MinSpotToSpotOptions, so no replacement can be
// replaced again by a cheaper single node at once); the saving passes the
// Balanced score and MinSavingsPerHour; spot→spot needs the feature on.
// Every command lowers the pools' cost, so splits and merges cannot chain
// forever. Options.DisableSplit gives Karpenter's behaviour.

// splittable: splitting is on, and cands is one node that no consolidation
// launched. A replacement is already the cheapest single node for the pods
// it was launched for; splitting it next would make the command that
// launched it the first step of a chain (a merge of five nodes into one,
// then that one into three): only nodes the provisioner launched are
// split.
func (c *computation) splittable(cands []*nodeInfo) bool {
	return !c.opts.DisableSplit && len(cands) == 1 && cands[0].node.LaunchedByConsolidationAt.IsZero() && cands[0].node.Price > 0
}

// split decides whether ni can be replaced by several nodes that together
// cost less; it returns nil and why not ("" when splitting has nothing to
// add to Karpenter's verdict: the pods need one node at most).
func (c *computation) split(ni *nodeInfo) (*consolidation, string) {
	return c.repackInto(ni.node.InstanceType, []*nodeInfo{ni}, 2, c.opts.ReplaceSavingsFraction)
}

// repackInto decides whether cands can be replaced by at least least new
// nodes (their pods planned afresh, beside the other nodes' room) that
// together cost less than cands; what says what the candidates are in the
// command's message. It returns nil and why not ("" when the pods need
// fewer than least new nodes: Karpenter's verdict stands).
func (c *computation) repackInto(what string, cands []*nodeInfo, least int, fraction float64) (*consolidation, string) {
	price := sumPrices(cands)
	spot := allSpot(cands)
	sim := c.simulate(cands, launchSplit, price)
	if sim.failed != "" || len(sim.newNodes) < least {
		return nil, ""
	}
	plans := make([]packer.NodePlan, len(sim.newNodes))
	expected := 0.0
	for i, plan := range sim.newNodes {
		opts := plan.Options
		if len(opts) == 0 {
			return nil, ""
		}
		if opts[0].CapacityType == apisv1.CapacityTypeSpot {
			if spot && c.opts.DisableSpotToSpot {
				return nil, "splitting: SpotToSpotConsolidation is disabled, can't replace spot nodes with spot nodes"
			}
			opts = c.cheapestSpot(plan.NodePool, spotOnly(opts))
		}
		if why := c.minValuesUnmet(plan.NodePool, opts); why != "" {
			return nil, "splitting: " + why
		}
		plans[i] = withOptions(plan, opts)
		expected += plans[i].Price
	}
	if price-expected < 1e-9 { // equal prices may differ in the last bits
		return nil, fmt.Sprintf("splitting: %d nodes would cost $%.2f/h, not less than $%.2f/h", len(plans), expected, price)
	}
	// Each plan keeps the options within the same factor of its cheapest,
	// so that even the dearest launches together cost less than cands and
	// save what the threshold asks (when the cheapest do).
	factor := price / expected
	if worst := price - c.requiredSavings(cands, fraction); worst > expected {
		factor = worst / expected
	}
	for i := range plans {
		keep := []packer.InstanceTypeOption{plans[i].Options[0]}
		for _, o := range plans[i].Options[1:] {
			if o.Price < plans[i].Options[0].Price*factor {
				keep = append(keep, o)
			}
		}
		plans[i].Options = keep
		if why := c.minValuesUnmet(plans[i].NodePool, keep); why != "" {
			return nil, "splitting saves too little with options that meet minValues: " + why
		}
	}
	savings := price - expected
	if savings < c.opts.MinSavingsPerHour {
		return nil, fmt.Sprintf("splitting saves $%.2f/h, below the $%.2f/h threshold", savings, c.opts.MinSavingsPerHour)
	}
	if why := c.scoreRefusal(cands, savings, false, fraction); why != "" {
		return nil, "splitting: " + why
	}
	if !c.poolsAllow(cands, 1) {
		return nil, ""
	}
	cmd := Command{Reason: ReasonUnderutilized, Kind: KindReplace, Candidates: c.candidates(cands),
		Replacements: plans, SavingsPerHour: savings}
	types := make([]string, len(plans))
	for i, plan := range plans {
		types[i] = launchText(plan)
	}
	cmd.Message = fmt.Sprintf("Underutilized: %s (%s) → %s (%s) saves $%.2f/h",
		nodesText(len(cands)), what, nodesText(len(plans)), describeTypes(types), savings)
	return &consolidation{cmd: cmd, cands: cands, placements: sim.placements}, ""
}

// splitPools are the launchable pools' packer views for a split: every
// instance type with an available offering under maxPrice (a type dearer
// than the whole node cannot be part of a cheaper split); as many nodes as
// the pods need.
func (c *computation) splitPools(maxPrice float64) []packer.NodePool {
	var out []packer.NodePool
	for _, lp := range c.launchPools(math.Inf(1), scheduling.Resources{}, nil) {
		lp.InstanceTypes = offeredUnder(lp.InstanceTypes, maxPrice)
		if len(lp.InstanceTypes) > 0 {
			out = append(out, lp)
		}
	}
	return out
}

// offeredUnder keeps the types with an available offering under maxPrice.
func offeredUnder(types []*catalog.InstanceType, maxPrice float64) []*catalog.InstanceType {
	var out []*catalog.InstanceType
	for _, it := range types {
		for _, o := range it.Offerings {
			if o.Available && o.Price < maxPrice {
				out = append(out, it)
				break
			}
		}
	}
	return out
}
