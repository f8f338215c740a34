package disruption

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	intstr "k8s.io/apimachinery/pkg/util/intstr"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/packer"
)

// The disruption methods, in the order Compute runs them. Each appends
// commands (commit) and spends the pools' budgets.

// repair replaces initialized nodes whose Ready condition has been False or
// Unknown past the toleration, or that the node monitoring agent has called
// faulty past its policy's (MonitoringRepairPolicies), as Karpenter's node
// health controller does with the AWS provider's repair policies. Pod
// protections do not hold a broken node; a pool with more than
// RepairMaxFraction of its nodes unhealthy is left alone (the fault is
// likely not the nodes').
func (c *computation) repair() {
	for _, ni := range c.nodes {
		if ni.unhealthy == "" || ni.bystander || ni.pool == nil || ni.command >= 0 || !ni.node.Initialized || ni.node.Deleting || ni.node.Disrupting || c.full() {
			continue
		}
		pl := ni.pool
		pct := intstr.FromString(fmt.Sprintf("%d%%", int(math.Round(c.opts.RepairMaxFraction*100))))
		limit, _ := intstr.GetScaledValueFromIntOrPercent(&pct, pl.total, true)
		if pl.unhealthy > limit {
			ni.refused = fmt.Sprintf("more than %s nodes are unhealthy in the nodepool", pct.String())
			continue
		}
		sim := c.simulate([]*nodeInfo{ni}, launchRepair, math.Inf(1))
		// A broken node goes even if some of its pods find no place.
		cmd := c.replaceOrDelete(ReasonUnhealthy, []*nodeInfo{ni}, sim.newNodes)
		cmd.Message = fmt.Sprintf("Unhealthy: %s", ni.unhealthy)
		c.commit(cmd, []*nodeInfo{ni}, sim.placements)
	}
}

// drift replaces drifted nodes, empty ones first and then the earliest
// drifted (Karpenter's order), up to the Drifted budget; each is simulated
// like a consolidation but need not be cheaper.
// Under a terminationGracePeriod, pods that block eviction do not stop it
// (Karpenter's eventual disruption).
func (c *computation) drift() {
	var cands []*nodeInfo
	for _, ni := range c.nodes {
		if ni.drifted == "" || ni.blocked != "" || ni.command >= 0 || ni.bystander {
			continue
		}
		if _, tgp := ni.pool.spec.Pool.TerminationGracePeriodDuration(); ni.podBlocked != "" && !tgp {
			continue
		}
		cands = append(cands, ni)
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if a, b := cands[i].empty(), cands[j].empty(); a != b {
			return a
		}
		if a, b := cands[i].node.DriftedSince, cands[j].node.DriftedSince; !a.Equal(b) {
			// Unknown (zero) is this pass: the latest.
			return !a.IsZero() && (b.IsZero() || a.Before(b))
		}
		return c.cheaperToDisrupt(cands[i], cands[j])
	})
	for _, ni := range cands {
		if c.full() {
			return
		}
		if ni.receiving {
			continue
		}
		if !ni.pool.allows(ReasonDrifted, 1, 0) {
			ni.refused = budgetMessage(ni.pool, ReasonDrifted)
			continue
		}
		sim := c.simulate([]*nodeInfo{ni.withoutStuckPods(c.in.Now)}, launchAny, math.Inf(1))
		if sim.failed != "" {
			ni.refused = sim.failed
			continue
		}
		cmd := c.replaceOrDelete(ReasonDrifted, []*nodeInfo{ni}, sim.newNodes)
		cmd.Candidates[0].Why = ni.drifted
		cmd.Message = "Drifted: " + ni.drifted
		c.commit(cmd, []*nodeInfo{ni}, sim.placements)
	}
}

// replaceOrDelete builds the command whose replacements are plans.
func (c *computation) replaceOrDelete(reason Reason, cands []*nodeInfo, plans []packer.NodePlan) Command {
	cmd := Command{Reason: reason, Kind: KindDelete, Candidates: c.candidates(cands)}
	if len(plans) > 0 {
		cmd.Kind, cmd.Replacements = KindReplace, plans
	}
	cmd.SavingsPerHour = sumPrices(cands) - packer.Result{NewNodes: plans}.TotalPrice()
	return cmd
}

// emptiness deletes the empty consolidatable candidates of each pool
// together, up to the pool's Empty budget (Karpenter's Emptiness).
func (c *computation) emptiness() {
	byPool := map[*poolInfo][]*nodeInfo{}
	var pools []*poolInfo
	for _, ni := range c.nodes {
		if !ni.candidate() || !ni.empty() || ni.notConsolidatable != "" {
			continue
		}
		if byPool[ni.pool] == nil {
			pools = append(pools, ni.pool)
		}
		byPool[ni.pool] = append(byPool[ni.pool], ni)
	}
	sort.Slice(pools, func(i, j int) bool { return pools[i].spec.Pool.Name < pools[j].spec.Pool.Name })
	for _, pl := range pools {
		if c.full() {
			return
		}
		cands := byPool[pl]
		sort.SliceStable(cands, func(i, j int) bool { return c.emptiedFirst(cands[i], cands[j]) })
		var take []*nodeInfo
		for _, ni := range cands {
			if pl.allows(ReasonEmpty, len(take)+1, len(take)+1) {
				take = append(take, ni)
			} else {
				ni.refused = budgetMessage(pl, ReasonEmpty)
			}
		}
		if len(take) == 0 {
			continue
		}
		cmd := Command{Reason: ReasonEmpty, Kind: KindDelete, Candidates: c.candidates(take), SavingsPerHour: sumPrices(take)}
		cmd.Message = fmt.Sprintf("Empty: %s (%s) saves $%.2f/h", nodesText(len(take)), describeTypes(typesOf(take)), cmd.SavingsPerHour)
		c.commit(cmd, take, nil)
	}
}

// consolidationCandidates are the non-empty candidates consolidation may
// take, cheapest to disrupt first.
func (c *computation) consolidationCandidates() []*nodeInfo {
	return c.consolidatableNodes(false)
}

// consolidationCandidatesAndBystanders adds to consolidationCandidates the
// nodes an admission decides nothing for (Input.Only) that would be
// candidates in a pass.
func (c *computation) consolidationCandidatesAndBystanders() []*nodeInfo {
	return c.consolidatableNodes(true)
}

func (c *computation) consolidatableNodes(bystanders bool) []*nodeInfo {
	var out []*nodeInfo
	for _, ni := range c.nodes {
		if (ni.bystander && !bystanders) || !ni.candidateInAPass() || ni.empty() || ni.notConsolidatable != "" {
			continue
		}
		np := ni.pool.spec.Pool
		if np.ConsolidationPolicyOrDefault() == apisv1.ConsolidationPolicyWhenEmpty {
			ni.refused = fmt.Sprintf("NodePool %q has consolidation policy WhenEmpty, but node is not empty", np.Name)
			continue
		}
		out = append(out, ni)
	}
	sort.SliceStable(out, func(i, j int) bool { return c.cheaperToDisrupt(out[i], out[j]) })
	return out
}

// multiNodeConsolidation finds the longest prefix of the cheapest-to-disrupt
// candidates (within budgets, at most MultiNodeMaxCandidates) whose pods fit
// the other nodes plus at most one cheaper new node, by binary search over
// the prefix length, as Karpenter does; at least two nodes.
func (c *computation) multiNodeConsolidation() {
	if c.full() {
		return
	}
	var cands []*nodeInfo
	counted := map[*poolInfo]int{}
	for _, ni := range c.consolidationCandidates() {
		if len(cands) == c.opts.MultiNodeMaxCandidates {
			break
		}
		if !ni.pool.allows(ReasonUnderutilized, counted[ni.pool]+1, 0) {
			continue
		}
		counted[ni.pool]++
		cands = append(cands, ni)
	}
	if len(cands) < 2 {
		return
	}
	if len(c.in.Only) > 0 {
		// An admission re-checks one command: its candidates are exactly
		// these, and the pass found them by a binary search over a longer
		// list. The search is not monotonic (3 nodes may go to one cheaper
		// node where the first 2 cannot), so searching again from 2 could
		// miss the whole set: simulate it first, as Karpenter's validation
		// simulates the command's candidates.
		if found, _ := c.consolidate(cands); found != nil {
			c.commit(found.cmd, found.cands, found.placements)
			return
		}
		// A pair the pass repacked (repack.go) is checked whole too,
		// before single-node consolidation may take one of its nodes
		// alone and leave the other refused: on mixed-600 one such pair
		// was decided and refused at admission four times in a row.
		if found := c.repackPair(cands); found != nil {
			c.commit(found.cmd, found.cands, found.placements)
			return
		}
	}
	lo, hi := 1, len(cands)-1
	var best *consolidation
	for lo <= hi {
		mid := (lo + hi) / 2
		if found, _ := c.consolidate(cands[:mid+1]); found != nil {
			best, lo = found, mid+1
		} else {
			hi = mid - 1
		}
	}
	if best != nil {
		c.commit(best.cmd, best.cands, best.placements)
	}
}

// singleNodeConsolidation tries every remaining candidate alone: delete it
// if its pods fit elsewhere, else replace it by one cheaper node. Pools take
// turns so one large pool does not starve the others (Karpenter's order).
// At most SingleNodeMaxSimulations candidates are simulated; the rest wait
// for the next pass (Karpenter stops at a timeout instead).
func (c *computation) singleNodeConsolidation() {
	cands := c.consolidationCandidates()
	byPool := map[string][]*nodeInfo{}
	var names []string
	for _, ni := range cands {
		if byPool[ni.node.NodePool] == nil {
			names = append(names, ni.node.NodePool)
		}
		byPool[ni.node.NodePool] = append(byPool[ni.node.NodePool], ni)
	}
	sort.Strings(names)
	var order []*nodeInfo
	for i := 0; len(order) < len(cands); i++ {
		for _, name := range names {
			if i < len(byPool[name]) {
				order = append(order, byPool[name][i])
			}
		}
	}
	order = c.rotate(order, c.opts.SingleNodeMaxSimulations)
	simulations := 0
	for _, ni := range order {
		if c.full() {
			return
		}
		if ni.command >= 0 || ni.receiving {
			continue
		}
		if limit := c.opts.SingleNodeMaxSimulations; limit > 0 && simulations >= limit {
			ni.refused = fmt.Sprintf("Not evaluated in this pass: single-node consolidation simulated %d other candidates first (the rest take turns in later passes)", limit)
			continue
		}
		if !ni.pool.allows(ReasonUnderutilized, 1, 0) {
			ni.refused = budgetMessage(ni.pool, ReasonUnderutilized)
			continue
		}
		simulations++
		found, why := c.consolidate([]*nodeInfo{ni})
		if found == nil {
			ni.refused, ni.keptAlone = why, true
			continue
		}
		c.commit(found.cmd, found.cands, found.placements)
	}
}

// singleNodeRotationStep is how far apart in time two passes are taken to
// be (the disruption workflow's poll interval) when the candidates beyond
// the first simulations take turns.
const singleNodeRotationStep = 10 * time.Second

// rotate lets every candidate be simulated eventually when there are more
// than limit (single-node consolidation's SingleNodeMaxSimulations, the
// repack's probes): the first half of the
// simulations go to the cheapest to disrupt, always (Karpenter's order);
// the other half to the rest in turns, the window moving on by its own
// width every singleNodeRotationStep of Input.Now. Without it the same
// cheapest candidates were simulated pass after pass, and when none of them
// could go, no costlier one ever was.
func (c *computation) rotate(order []*nodeInfo, limit int) []*nodeInfo {
	if limit <= 1 || len(order) <= limit {
		return order
	}
	head := limit / 2
	rest := order[head:]
	window := limit - head
	pass := c.in.Now.UnixNano() / int64(singleNodeRotationStep)
	if pass < 0 {
		pass = -pass
	}
	offset := int((pass * int64(window)) % int64(len(rest)))
	out := make([]*nodeInfo, 0, len(order))
	out = append(out, order[:head]...)
	out = append(out, rest[offset:]...)
	return append(out, rest[:offset]...)
}

// consolidation is a consolidation found for some candidates.
type consolidation struct {
	cmd        Command
	cands      []*nodeInfo
	placements []packer.Placement
}

// consolidate decides whether cands can go: deleted when their pods fit on
// the other nodes, or replaced by one node cheaper than all of them
// together. It returns nil and why not otherwise (Karpenter's words).
// Where Karpenter keeps a single node, and only there, it may be split
// into several cheaper nodes (split.go).
func (c *computation) consolidate(cands []*nodeInfo) (*consolidation, string) {
	one, why := c.consolidateToOne(cands)
	if one != nil || !c.splittable(cands) {
		return one, why
	}
	split, splitWhy := c.split(cands[0])
	if split != nil {
		return split, ""
	}
	if splitWhy != "" {
		why += "; " + splitWhy
	}
	return nil, why
}

// consolidateToOne is Karpenter's decision: delete cands, or replace them
// by one cheaper node.
func (c *computation) consolidateToOne(cands []*nodeInfo) (*consolidation, string) {
	price := sumPrices(cands)
	removed := len(cands)
	mode, unpriced := launchOneCheaper, ""
	for _, ni := range cands {
		if ni.node.Price <= 0 {
			mode, unpriced = launchNothing, fmt.Sprintf("Instance Type %q has no known price", ni.node.InstanceType)
		}
	}
	if why := c.unplaceable(cands); why != "" {
		return nil, why
	}
	sim := c.simulate(cands, mode, price)
	if sim.failed == "" && len(sim.newNodes) == 0 {
		if !c.poolsAllow(cands, removed) {
			return nil, "deleting it would take the NodePool below minNodes"
		}
		// No score for a delete: it saves the whole price of its nodes and
		// launches nothing that could be replaced again, so it cannot start
		// a chain; WhenEmptyOrUnderutilized takes it (Karpenter's rule).
		// Scored, the last few nodes of a scaled-down pool, each holding a
		// few pods that fit elsewhere, were kept at 1.5× a fresh plan. A
		// Balanced pool scores it, as Karpenter does.
		if why := c.scoreRefusal(cands, price, true, c.opts.ReplaceSavingsFraction); why != "" {
			return nil, why
		}
		cmd := Command{Reason: ReasonUnderutilized, Kind: KindDelete, Candidates: c.candidates(cands), SavingsPerHour: price}
		cmd.Message = fmt.Sprintf("Underutilized: %s (%s) deleted, their pods fit on other nodes, saves $%.2f/h", nodesText(len(cands)), describeTypes(typesOf(cands)), price)
		return &consolidation{cmd: cmd, cands: cands, placements: sim.placements}, ""
	}
	switch {
	case unpriced != "":
		return nil, unpriced
	case sim.uninitialized:
		// Karpenter's Unconsolidatable event for a plan that needs a node
		// not initialized yet.
		return nil, "Not all pods would schedule, " + sim.failed
	case sim.failed != "" && strings.Contains(sim.failed, "minValues"):
		// The types cheaper than the candidates cannot span the pool's
		// minValues (the packer plans launches that do).
		return nil, "Filtering by price: minValues requirement is not met: " + sim.failed
	case sim.failed != "":
		return nil, "Can't replace with a cheaper node"
	case len(sim.newNodes) != 1:
		return nil, fmt.Sprintf("Can't remove without creating %d candidates", len(sim.newNodes))
	}
	plan := sim.newNodes[0]
	limit := price
	if len(cands) > 1 {
		limit = min(limit, sameTypeLimit(cands, plan.Options))
	}
	opts := cheaperOptions(plan.Options, limit)
	if why := c.minValuesUnmet(plan.NodePool, opts); why != "" && len(opts) > 0 {
		return nil, "Filtering by price: " + why
	}
	if len(opts) > 0 && opts[0].CapacityType == apisv1.CapacityTypeSpot {
		opts = spotOnly(opts)
		if allSpot(cands) {
			if c.opts.DisableSpotToSpot {
				return nil, "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"
			}
			if types := packer.OptionTypes(opts); len(cands) == 1 && types < MinSpotToSpotOptions {
				return nil, fmt.Sprintf("SpotToSpotConsolidation requires %d cheaper instance type options than the current candidate to consolidate, got %d", MinSpotToSpotOptions, types)
			}
		}
		opts = c.cheapestSpot(plan.NodePool, opts)
	}
	if len(opts) == 0 {
		return nil, "Can't replace with a cheaper node"
	}
	if why := c.minValuesUnmet(plan.NodePool, opts); why != "" {
		return nil, "Filtering by price: " + why
	}
	plan = withOptions(plan, opts)
	savings := price - plan.Price
	// Whichever option CreateFleet launches must save what the threshold
	// asks: options dearer than that are dropped (the cheapest decides
	// whether the move is taken at all).
	if worst := price - c.requiredSavings(cands, c.opts.ReplaceSavingsFraction); worst >= plan.Price {
		plan = withOptions(plan, cheaperOptions(plan.Options, worst+1e-9))
		if why := c.minValuesUnmet(plan.NodePool, plan.Options); why != "" {
			return nil, fmt.Sprintf("Replacing saves too little with options that meet minValues: the options saving what is asked miss it (%s)", why)
		}
	}
	if savings < c.opts.MinSavingsPerHour {
		return nil, fmt.Sprintf("Replacing saves $%.2f/h, below the $%.2f/h threshold", savings, c.opts.MinSavingsPerHour)
	}
	if why := c.scoreRefusal(cands, savings, false, c.opts.ReplaceSavingsFraction); why != "" {
		return nil, why
	}
	if !c.poolsAllow(cands, removed) {
		return nil, "replacing would take the NodePool below minNodes"
	}
	cmd := Command{Reason: ReasonUnderutilized, Kind: KindReplace, Candidates: c.candidates(cands),
		Replacements: []packer.NodePlan{plan}, SavingsPerHour: savings}
	cmd.Message = fmt.Sprintf("Underutilized: %s → 1 %s saves $%.2f/h", nodesText(len(cands)), launchText(plan), savings)
	return &consolidation{cmd: cmd, cands: cands, placements: sim.placements}, ""
}

// unplaceable says why a pod of cands can go nowhere at all (its volume
// claim does not exist), "" when none is known to.
func (c *computation) unplaceable(cands []*nodeInfo) string {
	for _, ni := range cands {
		for _, pod := range ni.moving {
			if why := c.factsOf(pod).why; why != "" {
				return fmt.Sprintf("pod %s cannot be rescheduled: %s", podKey(pod), why)
			}
		}
	}
	return ""
}

// poolsAllow checks minNodes for removing cands (net of one replacement
// counted in its own pool by the caller's budget; conservative here).
func (c *computation) poolsAllow(cands []*nodeInfo, _ int) bool {
	per := map[*poolInfo]int{}
	for _, ni := range cands {
		per[ni.pool]++
	}
	for pl, n := range per {
		if !pl.allows(ReasonUnderutilized, n, n) {
			return false
		}
	}
	return true
}

// scoreRefusal applies the Balanced score to a move (savings share of the
// pool's cost over disruption share of the pool's disruption ≥ 1/k), per
// pool of the candidates; "" when every pool approves. A Balanced pool
// scores every move with BalancedK; another pool scores replacements (not
// deletes) with Options.ConsolidationThreshold, unless it is negative, and
// approves one that saves Options.ReplaceSavingsFraction of its candidates'
// price whatever its score.
func (c *computation) scoreRefusal(cands []*nodeInfo, savings float64, deleting bool, fraction float64) string {
	total := sumPrices(cands)
	selfWorth := !deleting && fraction > 0 && savings >= fraction*total
	per, pools := byPool(cands)
	for _, pl := range pools {
		k := c.thresholdOf(pl, deleting)
		if k < 0 || pl.cost <= 0 || pl.disruption <= 0 {
			continue
		}
		if selfWorth && !pl.balanced() {
			continue
		}
		poolSavings := savings
		if total > 0 && len(pools) > 1 {
			poolSavings = savings * sumPrices(per[pl]) / total
		}
		disruption := 0.0
		for _, ni := range per[pl] {
			disruption += ni.rescheduleCost()
		}
		sf, df := poolSavings/pl.cost, disruption/pl.disruption
		score := math.Inf(1)
		if df > 0 {
			score = sf / df
		}
		if sf <= 0 {
			score = 0
		}
		if threshold := 1 / float64(k); score < threshold {
			why := fmt.Sprintf("Not worth the disruption: saves %.1f%% of NodePool %q's cost for %.1f%% of its disruption (score %.2f < %.2f)",
				sf*100, pl.spec.Pool.Name, df*100, score, threshold)
			if !deleting && fraction > 0 && !pl.balanced() && total > 0 {
				why += fmt.Sprintf(" and %.0f%% of its nodes' price (< %.0f%%)", 100*savings/total, 100*fraction)
			}
			return why
		}
	}
	return ""
}

// requiredSavings is the least a replacement of cands must save per hour
// to pass the score (scoreRefusal) and the $/h floor: per pool, its share
// of the savings must be at least 1/k of the pool's cost times the share
// of the pool's disruption the move causes, or (not in a Balanced pool)
// Options.ReplaceSavingsFraction of the candidates' price.
func (c *computation) requiredSavings(cands []*nodeInfo, fraction float64) float64 {
	required := max(c.opts.MinSavingsPerHour, 0)
	total := sumPrices(cands)
	per, pools := byPool(cands)
	for _, pl := range pools {
		k := c.thresholdOf(pl, false)
		if k <= 0 || pl.cost <= 0 || pl.disruption <= 0 {
			continue
		}
		share := 1.0
		if total > 0 && len(pools) > 1 {
			share = sumPrices(per[pl]) / total
		}
		disruption := 0.0
		for _, ni := range per[pl] {
			disruption += ni.rescheduleCost()
		}
		if share > 0 {
			poolRequired := pl.cost * (disruption / pl.disruption) / float64(k) / share
			if fraction > 0 && !pl.balanced() {
				poolRequired = min(poolRequired, fraction*total)
			}
			required = max(required, poolRequired)
		}
	}
	return required
}

// byPool groups cands by pool, pools in the order they first appear.
func byPool(cands []*nodeInfo) (map[*poolInfo][]*nodeInfo, []*poolInfo) {
	per := map[*poolInfo][]*nodeInfo{}
	var pools []*poolInfo
	for _, ni := range cands {
		if per[ni.pool] == nil {
			pools = append(pools, ni.pool)
		}
		per[ni.pool] = append(per[ni.pool], ni)
	}
	return per, pools
}

// thresholdOf is the Balanced k a move of pl's nodes must meet, negative
// when it is not scored: BalancedK in a Balanced pool, else
// Options.ConsolidationThreshold for a replacement and nothing for a delete.
func (c *computation) thresholdOf(pl *poolInfo, deleting bool) int {
	switch {
	case pl.balanced():
		return apisv1.BalancedK
	case deleting:
		return -1
	}
	return c.opts.ConsolidationThreshold
}

// sameTypeLimit is, for a multi-node replace, the lowest price among the
// candidates whose instance type is among the options: replacing several
// nodes by one of the same type must be cheaper than that type
// (Karpenter's filterOutSameInstanceType).
func sameTypeLimit(cands []*nodeInfo, opts []packer.InstanceTypeOption) float64 {
	limit := math.Inf(1)
	for _, o := range opts {
		for _, ni := range cands {
			if ni.node.InstanceType == o.InstanceType && ni.node.Price > 0 {
				limit = min(limit, ni.node.Price)
			}
		}
	}
	return limit
}

func cheaperOptions(opts []packer.InstanceTypeOption, limit float64) []packer.InstanceTypeOption {
	var out []packer.InstanceTypeOption
	for _, o := range opts {
		if o.Price < limit {
			out = append(out, o)
		}
	}
	return out
}

// launchText names a plan's launch, "c6i.2xlarge (spot)".
func launchText(plan packer.NodePlan) string {
	if plan.CapacityType == apisv1.CapacityTypeSpot {
		return plan.InstanceType + " (spot)"
	}
	return plan.InstanceType
}

func spotOnly(opts []packer.InstanceTypeOption) []packer.InstanceTypeOption {
	var out []packer.InstanceTypeOption
	for _, o := range opts {
		if o.CapacityType == apisv1.CapacityTypeSpot {
			out = append(out, o)
		}
	}
	return out
}

// withOptions narrows plan to opts (cheapest first) and launches opts[0].
func withOptions(plan packer.NodePlan, opts []packer.InstanceTypeOption) packer.NodePlan {
	plan.Options = opts
	plan.InstanceType, plan.CapacityType, plan.Price = opts[0].InstanceType, opts[0].CapacityType, opts[0].Price
	var cts []string
	for _, o := range opts {
		if !slices.Contains(cts, o.CapacityType) {
			cts = append(cts, o.CapacityType)
		}
	}
	plan.CapacityTypes = cts
	return plan
}

func allSpot(cands []*nodeInfo) bool {
	for _, ni := range cands {
		if ni.node.CapacityType != apisv1.CapacityTypeSpot {
			return false
		}
	}
	return true
}

// emptiedFirst orders empty candidates of equal disruption cost by how
// long they have been empty (their last pod event, or their creation),
// then by savings; the pool's budget takes them in that order. Ordered by
// price alone, a cheap node emptied early could wait behind every dearer
// one emptied after it: in a 194-node scale-down under the 10% budget one
// node went 1 min 54 s after its last pod left (consolidateAfter 30 s;
// median 42 s), where the target is consolidateAfter + 60 s.
func (c *computation) emptiedFirst(a, b *nodeInfo) bool {
	if ea, eb := a.node.lastPodEvent(), b.node.lastPodEvent(); a.cost == b.cost && !ea.Equal(eb) {
		return ea.Before(eb)
	}
	return c.cheaperToDisrupt(a, b)
}

// cheaperToDisrupt orders candidates: lowest disruption cost first, then
// the more expensive node (more to save), then by name.
func (c *computation) cheaperToDisrupt(a, b *nodeInfo) bool {
	if a.cost != b.cost {
		return a.cost < b.cost
	}
	if a.node.Price != b.node.Price {
		return a.node.Price > b.node.Price
	}
	return a.node.Name < b.node.Name
}

func (c *computation) candidates(nis []*nodeInfo) []Candidate {
	out := make([]Candidate, len(nis))
	for i, ni := range nis {
		n := ni.node
		out[i] = Candidate{ClaimName: n.ClaimName, NodeName: n.Name, NodePool: n.NodePool, InstanceType: n.InstanceType,
			CapacityType: n.CapacityType, Price: n.Price, Pods: ni.podKeys(), DisruptionCost: ni.cost}
	}
	return out
}

func sumPrices(nis []*nodeInfo) float64 {
	total := 0.0
	for _, ni := range nis {
		total += ni.node.Price
	}
	return total
}

func typesOf(nis []*nodeInfo) []string {
	out := make([]string, len(nis))
	for i, ni := range nis {
		out[i] = ni.node.InstanceType
	}
	return out
}

func nodesText(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}

// budgetMessage says a budget stops the pool (Karpenter's
// DisruptionBlocked wording for a pool's budget).
func budgetMessage(pl *poolInfo, reason Reason) string {
	return fmt.Sprintf("No allowed disruptions for disruption reason %s due to blocking budget (NodePool=%s)", reason, pl.spec.Pool.Name)
}
