package disruption

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// poolInfo is a NodePool with its budget ledger for this Compute call.
type poolInfo struct {
	spec *NodePool
	// typeLabels caches the labels of the types it launches (minvalues.go).
	typeLabels map[string]map[string]string
	// nodes counts the pool's initialized nodes (the budgets' base);
	// disrupting those deleting, disrupting or not Ready.
	nodes, disrupting int
	// waiting counts the Waiting nodes (see Node.Waiting).
	waiting int
	// live counts nodes not going away (for minNodes); unhealthy those
	// whose Ready condition is False or Unknown.
	live, unhealthy int
	// total counts every managed node of the pool (repair's base); cost and
	// disruption sum the prices and reschedule costs of the pool's nodes
	// (the Balanced score's denominators).
	total            int
	cost, disruption float64
	// allowed is what each reason may still disrupt in this Result;
	// initial what it allowed before any command; limit the budget before
	// the disrupting nodes were taken off.
	allowed, initial, limit map[Reason]int
	errs                    []string
}

// balanced says whether the pool's consolidation policy is Balanced, which
// scores every move with Karpenter's k, deletes included.
func (pl *poolInfo) balanced() bool {
	return pl.spec.Pool.ConsolidationPolicyOrDefault() == apisv1.ConsolidationPolicyBalanced
}

// budgetReasons are the reasons NodePool budgets govern.
var budgetReasons = []Reason{ReasonDrifted, ReasonEmpty, ReasonUnderutilized}

// passiveClock reads as a fixed time (apisv1 budgets take a clock).
type passiveClock struct{ now time.Time }

func (p passiveClock) Now() time.Time                  { return p.now }
func (p passiveClock) Since(t time.Time) time.Duration { return p.now.Sub(t) }

// countBudgets fills every pool's ledger, as Karpenter's
// BuildDisruptionBudgetMapping: the base is the pool's initialized nodes;
// nodes not Ready, deleting or already disrupting use up budget.
func (c *computation) countBudgets() {
	for _, ni := range c.nodes {
		pl, n := ni.pool, ni.node
		if pl == nil {
			continue
		}
		pl.total++
		pl.cost += n.Price
		pl.disruption += ni.rescheduleCost()
		if !n.Deleting && !n.Disrupting {
			pl.live++
		}
		if n.Initialized && unhealthyNow(n) {
			pl.unhealthy++
		}
		if !n.Initialized {
			continue
		}
		pl.nodes++
		if n.Uncharged {
			if n.Waiting {
				pl.waiting++
			}
			continue
		}
		if n.Ready != corev1.ConditionTrue || n.Deleting || n.Disrupting {
			pl.disrupting++
		}
	}
	clk := passiveClock{c.in.Now}
	for _, pl := range c.pools {
		pl.allowed, pl.initial, pl.limit = map[Reason]int{}, map[Reason]int{}, map[Reason]int{}
		for _, reason := range budgetReasons {
			n, err := pl.spec.Pool.AllowedDisruptions(clk, pl.nodes, apisv1.DisruptionReason(reason))
			if err != nil {
				pl.errs = append(pl.errs, err.Error())
			}
			pl.limit[reason] = n
			if ahead := c.opts.ValidationLookahead; ahead > 0 && reason != ReasonEmpty {
				n = max(min(n, ahead*n-pl.disrupting-pl.waiting), 0)
			} else {
				// An Empty command waits out no validation: the pass that
				// decides it admits it (change empty-admitted-at-start),
				// so it never goes ahead of the budget.
				n = max(min(n-pl.disrupting, n-pl.waiting), 0)
			}
			pl.allowed[reason], pl.initial[reason] = n, n
		}
	}
}

// allows reports whether the pool may disrupt k more nodes for reason;
// deleting (net) removed nodes must also keep minNodes.
func (pl *poolInfo) allows(reason Reason, k, removed int) bool {
	if reason != ReasonUnhealthy && pl.allowed[reason] < k {
		return false
	}
	return removed <= 0 || pl.live-removed >= int(pl.spec.Pool.MinNodesOrZero())
}

// spend records k more disrupting nodes, removed of them net removals.
// A disrupting node uses up the budget of every reason (Karpenter
// subtracts all disrupting nodes from each reason's allowance); repair
// spends none (its nodes are not Ready, so they already count).
func (pl *poolInfo) spend(reason Reason, k, removed int) {
	if reason != ReasonUnhealthy {
		for _, r := range budgetReasons {
			pl.allowed[r] -= k
		}
	}
	pl.live -= removed
}

func (pl *poolInfo) budget() PoolBudget {
	b := PoolBudget{NodePool: pl.spec.Pool.Name, Nodes: pl.nodes, Disrupting: pl.disrupting,
		Allowed: map[Reason]int{}, Limit: map[Reason]int{}, Errors: pl.errs}
	for r, n := range pl.initial {
		b.Allowed[r] = n
	}
	for r, n := range pl.limit {
		b.Limit[r] = n
	}
	return b
}
