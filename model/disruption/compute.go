package disruption

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/model/packer"
)

// Compute decides the commands to run now for in. It never fails: a node or
// pool it cannot judge gets a Verdict saying why and no command.
//
// The order is Karpenter's: repair (Unhealthy) first, then Drifted, Empty,
// multi-node and single-node consolidation (Underutilized). Each command is
// simulated against the cluster as the earlier commands of the same Result
// leave it (their candidates gone, their replacements in flight), so the
// commands can run side by side.
func Compute(in Input) Result {
	c := newComputation(in)
	c.run()
	return c.result()
}

// computation is one Compute call's state.
type computation struct {
	in    Input
	opts  Options
	pools map[string]*poolInfo
	nodes []*nodeInfo // managed nodes, input order
	// byName indexes every input node (managed or not) by Node name;
	// managed the managed ones' nodeInfo.
	byName  map[string]int
	managed map[string]*nodeInfo

	// capacity is where pods can be simulated onto (built by run).
	capacity *capacity

	// facts caches pods' requests and requirements (volumes' topology
	// included).
	facts   map[*corev1.Pod]*podFacts
	volumes *packer.VolumeConstraints
	// tolerant caches the copies of pods that tolerate settlingTaint.
	tolerant map[*corev1.Pod]*corev1.Pod
	// podClass, classIndex and classes group pods by namespace and labels
	// (relevance.go).
	podClass   map[*corev1.Pod]int
	classIndex map[string]int
	classes    []labelClass

	commands []Command
	// recheck is the earliest time a node held back only by
	// consolidateAfter becomes consolidatable (Result.RecheckAt).
	recheck time.Time
}

func newComputation(in Input) *computation {
	c := &computation{in: in, opts: in.Options.withDefaults(), pools: map[string]*poolInfo{},
		byName: map[string]int{}, managed: map[string]*nodeInfo{}, facts: map[*corev1.Pod]*podFacts{},
		volumes: packer.NewVolumeConstraints(in.Storage), podClass: map[*corev1.Pod]int{}, classIndex: map[string]int{}}
	for i := range in.NodePools {
		np := &in.NodePools[i]
		if np.Pool == nil {
			continue
		}
		c.pools[np.Pool.Name] = &poolInfo{spec: np}
	}
	for i := range in.Nodes {
		n := &in.Nodes[i]
		c.byName[n.Name] = i
		if n.NodePool == "" || n.ClaimName == "" {
			continue
		}
		ni := &nodeInfo{idx: i, node: n, pool: c.pools[n.NodePool], command: -1}
		c.nodes = append(c.nodes, ni)
		c.managed[n.Name] = ni
	}
	for _, ni := range c.nodes {
		c.judge(ni)
	}
	if len(in.Only) > 0 {
		only := make(map[string]bool, len(in.Only))
		for _, claim := range in.Only {
			only[claim] = true
		}
		for _, ni := range c.nodes {
			ni.bystander = !only[ni.node.ClaimName]
		}
	}
	c.countBudgets()
	return c
}

func (c *computation) run() {
	c.buildCapacity()
	c.nominate()
	c.repair()
	c.drift()
	c.markOutliers()
	c.nominateLeaving()
	c.emptiness()
	c.wastefulFirst()
	c.multiNodeConsolidation()
	c.singleNodeConsolidation()
	c.repackPairs()
}

// result assembles the Result.
func (c *computation) result() Result {
	r := Result{Commands: c.commands, RecheckAt: c.recheck}
	for _, ni := range c.nodes {
		r.Verdicts = append(r.Verdicts, ni.verdict())
	}
	names := make([]string, 0, len(c.pools))
	for name := range c.pools {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r.Budgets = append(r.Budgets, c.pools[name].budget())
	}
	return r
}

func (o Options) withDefaults() Options {
	if o.ConsolidationThreshold == 0 {
		o.ConsolidationThreshold = DefaultConsolidationThreshold
	}
	if o.ReplaceSavingsFraction == 0 {
		o.ReplaceSavingsFraction = DefaultReplaceSavingsFraction
	}
	if o.RepackSavingsFraction == 0 {
		o.RepackSavingsFraction = DefaultRepackSavingsFraction
	}
	if o.RepairToleration <= 0 {
		o.RepairToleration = DefaultRepairToleration
	}
	if o.RepairMaxFraction <= 0 {
		o.RepairMaxFraction = DefaultRepairMaxFraction
	}
	if o.SingleNodeMaxSimulations == 0 {
		o.SingleNodeMaxSimulations = DefaultSingleNodeMaxSimulations
	}
	if o.MultiNodeMaxCandidates <= 0 {
		o.MultiNodeMaxCandidates = DefaultMultiNodeMaxCandidates
	}
	return o
}

// full reports whether the Result holds Options.MaxCommands commands.
func (c *computation) full() bool {
	return c.opts.MaxCommands > 0 && len(c.commands) >= c.opts.MaxCommands
}

// nominate protects the nodes pending pods would land on now, as
// Karpenter's provisioner nominates the nodes it schedules pending pods to:
// a node about to receive pods is not empty, and its room is spoken for.
func (c *computation) nominate() {
	c.nominateFor(c.in.PendingPods, "node is nominated for a pending pod")
}

// nominateLeaving protects, in a pass, the nodes that the pods of nodes
// already being taken apart (deleting, or held by a drain or an admitted
// command) would land on, as Karpenter's provisioner schedules them with
// the pending pods and nominates the nodes they land on. kube-scheduler
// sends them to the emptiest nodes, which are the nodes consolidation
// tries first: chosen while those pods bind, such a node takes some before
// its candidate taint lands (and that taint only steers kube-scheduler),
// and its command is invalidated at validation after holding budget for
// the delay: 37 of 102 consolidation commands in one mixed-600 run on the
// local stack, 21 of them because the candidate's pods had grown past
// what Karpenter's spot→spot rule allows.
//
// It runs after markOutliers (and before emptiness, whose empty nodes are
// no outliers): outliers have no room in any simulation and the outlier
// taint steers kube-scheduler off them, so they are not nominated (a
// large node launched for the burst, always the emptiest, would otherwise
// be nominated while anything drained, and fill up).
//
// Not in a validation (Input.Validation): the command's candidates have
// the candidate taint. Nor for the pods of commands still waiting out
// their validation (capacity.leaving leaves them out): they leave only
// after it is admitted, when a node chosen now has the taint too.
func (c *computation) nominateLeaving() {
	if c.in.Validation {
		return
	}
	c.nominateFor(c.capacity.leaving, "node is nominated for a pod leaving a disrupted node")
}

// nominateFor blocks, with why, the managed nodes pods would land on now
// (kube-scheduler's LeastAllocated, or the packer with topology).
func (c *computation) nominateFor(pods []*corev1.Pod, why string) {
	if len(pods) == 0 {
		return
	}
	cp := c.capacity
	usable := make([]int, 0, len(cp.nodes))
	for i := range cp.nodes {
		usable = append(usable, i)
	}
	var placed []packer.Placement
	if cp.topology {
		if r, err := packer.Pack(packer.Input{Pods: pods, Nodes: cp.nodes, Storage: c.in.Storage, Volumes: c.volumes, Namespaces: c.in.Namespaces}); err == nil {
			placed = r.Placements
		}
	} else {
		placed, _, _ = c.quickFit(pods, usable, nil, closedTo{})
	}
	for _, pl := range placed {
		if ni := c.managed[pl.Node]; ni != nil && ni.blocked == "" {
			ni.blocked = why
		}
	}
}
