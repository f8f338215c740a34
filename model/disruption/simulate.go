package disruption

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// capacity is the room pods can be simulated onto: every node not going
// away (registered and in flight), less the room the commands of this
// Result already gave to the pods they move.
type capacity struct {
	nodes []packer.Node
	// byName indexes nodes.
	byName map[string]int
	// excluded marks nodes (by index into nodes) a command removes.
	excluded []bool
	// first are the pods that compete for room in every simulation: pending
	// pods and the pods of nodes already being deleted. They need not find
	// a place (the provisioner launches for them), but they may take room
	// before a candidate's pods do, as in Karpenter's simulation.
	first []*corev1.Pod
	// topology is true when some pod in the cluster has topology spread or
	// pod (anti-)affinity: every node must then be simulated, full or not,
	// because its pods count in the constraints.
	topology bool
}

// buildCapacity prepares the capacity.
func (c *computation) buildCapacity() {
	cp := &capacity{byName: map[string]int{}}
	for i := range c.in.Nodes {
		n := &c.in.Nodes[i]
		for _, p := range n.Pods {
			if p.Pod != nil && hasTopology(p.Pod) {
				cp.topology = true
			}
		}
		if n.Deleting || n.Disrupting {
			for _, p := range n.Pods {
				if p.Pod != nil && reschedulable(p.Pod) {
					cp.first = append(cp.first, p.Pod)
				}
			}
			continue
		}
		cp.add(packerNode(n))
	}
	for _, n := range c.in.InFlight {
		n.InFlight = true
		cp.add(n)
	}
	for _, pod := range c.in.PendingPods {
		if hasTopology(pod) {
			cp.topology = true
		}
	}
	cp.first = append(cp.first, c.in.PendingPods...)
	c.capacity = cp
}

func (cp *capacity) add(n packer.Node) {
	cp.byName[n.Name] = len(cp.nodes)
	cp.nodes = append(cp.nodes, n)
	cp.excluded = append(cp.excluded, false)
}

// place puts placed pods on their nodes (in nodes, indexed by byName).
func place(nodes []packer.Node, byName map[string]int, placements []packer.Placement) {
	for _, pl := range placements {
		i, ok := byName[pl.Node]
		if !ok {
			continue
		}
		n := &nodes[i]
		req, _ := scheduling.EffectiveRequests(pl.Pod)
		n.Available = n.Available.Sub(req)
		n.Pods = append(n.Pods[:len(n.Pods):len(n.Pods)], pl.Pod)
	}
}

// packerNode is a registered node as capacity: allocatable minus the
// requests of its active pods.
func packerNode(n *Node) packer.Node {
	avail := n.Allocatable
	var pods []*corev1.Pod
	for _, p := range n.Pods {
		if p.Pod == nil || !active(p.Pod) {
			continue
		}
		if req, err := scheduling.EffectiveRequests(p.Pod); err == nil {
			avail = avail.Sub(req)
		}
		pods = append(pods, p.Pod)
	}
	return packer.Node{Name: n.Name, NodePool: n.NodePool, Labels: n.Labels, Taints: n.Taints, Available: avail, Pods: pods}
}

func hasTopology(pod *corev1.Pod) bool {
	if len(pod.Spec.TopologySpreadConstraints) > 0 {
		return true
	}
	a := pod.Spec.Affinity
	return a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil)
}

// launchMode says what a simulation may launch for pods that do not fit
// the remaining nodes.
type launchMode int

const (
	// launchNothing: the pods must fit the remaining nodes (delete).
	launchNothing launchMode = iota
	// launchOneCheaper: at most one new node per pool, of an instance type
	// cheaper than maxPrice that holds them all (consolidation replace).
	launchOneCheaper
	// launchAny: as many nodes as the pods need (drift, repair).
	launchAny
)

// simulation is the outcome of moving some candidates' pods.
type simulation struct {
	// placements put moved pods on remaining nodes; newNodes hold the rest.
	placements []packer.Placement
	newNodes   []packer.NodePlan
	// failed says why not every pod found a place ("" when all did).
	failed string
}

// simulate moves the pods of cands: first onto the remaining nodes (with
// the pods that come first), then, as mode allows, onto new nodes.
func (c *computation) simulate(cands []*nodeInfo, mode launchMode, maxPrice float64) simulation {
	cp := c.capacity
	var moving []*corev1.Pod
	skip := map[int]bool{}
	for _, ni := range cands {
		moving = append(moving, ni.moving...)
		if i, ok := cp.byName[ni.node.Name]; ok {
			skip[i] = true
		}
	}
	if len(moving) == 0 {
		return simulation{}
	}
	pods := append(slices.Clip(cp.first), moving...)
	minReq := smallestRequest(pods)
	nodes := make([]packer.Node, 0, len(cp.nodes))
	for i, n := range cp.nodes {
		if skip[i] || cp.excluded[i] {
			continue
		}
		if !cp.topology && !roomFor(n.Available, minReq) {
			continue
		}
		nodes = append(nodes, n)
	}
	r, err := packer.Pack(packer.Input{Pods: pods, Nodes: nodes})
	if err != nil {
		return simulation{failed: err.Error()}
	}
	isMoving := make(map[*corev1.Pod]bool, len(moving))
	for _, pod := range moving {
		isMoving[pod] = true
	}
	var s simulation
	for _, pl := range r.Placements {
		if isMoving[pl.Pod] {
			s.placements = append(s.placements, pl)
		}
	}
	var left []packer.Unschedulable
	for _, u := range r.Unschedulable {
		if isMoving[u.Pod] {
			left = append(left, u)
		}
	}
	if len(left) == 0 {
		return s
	}
	var pools []packer.NodePool
	switch mode {
	case launchOneCheaper:
		pools = c.launchPools(maxPrice, requestsOf(left))
	case launchAny:
		pools = c.launchPools(math.Inf(1), scheduling.Resources{})
	}
	if len(pools) == 0 {
		s.failed = unschedulableText(left)
		return s
	}
	// The rest go on new nodes, beside the remaining nodes as the first
	// pass left them (their pods count for topology).
	byName := make(map[string]int, len(nodes))
	for i, n := range nodes {
		byName[n.Name] = i
	}
	after := slices.Clone(nodes)
	place(after, byName, r.Placements)
	rest := make([]*corev1.Pod, len(left))
	for i, u := range left {
		rest[i] = u.Pod
	}
	r2, err := packer.Pack(packer.Input{Pods: rest, DaemonSetPods: c.in.DaemonSetPods, NodePools: pools, Nodes: after})
	if err != nil {
		s.failed = err.Error()
		return s
	}
	for _, pl := range r2.Placements {
		s.placements = append(s.placements, pl)
	}
	s.newNodes = r2.NewNodes
	if len(r2.Unschedulable) > 0 {
		s.failed = unschedulableText(r2.Unschedulable)
	}
	return s
}

func unschedulableText(us []packer.Unschedulable) string {
	more := ""
	if len(us) > 1 {
		more = fmt.Sprintf(" (and %d other pod(s))", len(us)-1)
	}
	return fmt.Sprintf("pod %s cannot be rescheduled: %s%s", podKey(us[0].Pod), us[0].Reason, more)
}

func requestsOf(us []packer.Unschedulable) scheduling.Resources {
	var sum scheduling.Resources
	for _, u := range us {
		req, _ := scheduling.EffectiveRequests(u.Pod)
		sum = sum.Add(req)
	}
	return sum
}

// smallestRequest is the least cpu and memory any of pods requests.
func smallestRequest(pods []*corev1.Pod) scheduling.Resources {
	var least scheduling.Resources
	least[scheduling.IndexCPU], least[scheduling.IndexMemory] = math.MaxInt64, math.MaxInt64
	for _, pod := range pods {
		req, _ := scheduling.EffectiveRequests(pod)
		least[scheduling.IndexCPU] = min(least[scheduling.IndexCPU], req[scheduling.IndexCPU])
		least[scheduling.IndexMemory] = min(least[scheduling.IndexMemory], req[scheduling.IndexMemory])
	}
	return least
}

func roomFor(avail, least scheduling.Resources) bool {
	return avail[scheduling.IndexPods] >= 1 && avail[scheduling.IndexCPU] >= least[scheduling.IndexCPU] &&
		avail[scheduling.IndexMemory] >= least[scheduling.IndexMemory]
}

// commit records cmd's effect on the capacity and the ledgers: its
// candidates leave, its pods placed on remaining nodes take their room
// (replacements add no room: a later command must not rely on a launch that
// may fail), and its pools spend budget.
func (c *computation) commit(cmd Command, cands []*nodeInfo, placements []packer.Placement) {
	idx := len(c.commands)
	c.commands = append(c.commands, cmd)
	disrupted, removed := map[*poolInfo]int{}, map[*poolInfo]int{}
	for _, ni := range cands {
		ni.command = idx
		if i, ok := c.capacity.byName[ni.node.Name]; ok {
			c.capacity.excluded[i] = true
		}
		disrupted[ni.pool]++
		removed[ni.pool]++
	}
	for _, plan := range cmd.Replacements {
		if pl := c.pools[plan.NodePool]; pl != nil {
			removed[pl]--
		}
	}
	place(c.capacity.nodes, c.capacity.byName, placements)
	for pl := range removed {
		if pl != nil {
			pl.spend(cmd.Reason, disrupted[pl], removed[pl])
		}
	}
}

// launchPools are the launchable pools' packer views for a simulation.
// With a finite maxPrice (a consolidation replace) each pool may launch one
// node, of an instance type with an available offering cheaper than
// maxPrice whose allocatable holds all of need: with every type able to
// take all the pods, the packer picks the cheapest.
func (c *computation) launchPools(maxPrice float64, need scheduling.Resources) []packer.NodePool {
	one := !math.IsInf(maxPrice, 1)
	var out []packer.NodePool
	for i := range c.in.NodePools {
		np := &c.in.NodePools[i]
		if !np.Launchable || np.Pool == nil {
			continue
		}
		lp := np.Launch
		if lp.Name == "" {
			lp.Name = np.Pool.Name
		}
		if one {
			lp.InstanceTypes = cheaperTypes(lp.InstanceTypes, maxPrice, need)
			lp.Limits = maps.Clone(lp.Limits)
			if lp.Limits == nil {
				lp.Limits = corev1.ResourceList{}
			}
			lp.Used = maps.Clone(lp.Used)
			if lp.Used == nil {
				lp.Used = corev1.ResourceList{}
			}
			lp.Limits[scheduling.ResourceNodes] = resource.MustParse("1")
			lp.Used[scheduling.ResourceNodes] = resource.MustParse("0")
		}
		if len(lp.InstanceTypes) > 0 {
			out = append(out, lp)
		}
	}
	return out
}

func cheaperTypes(types []*catalog.InstanceType, maxPrice float64, need scheduling.Resources) []*catalog.InstanceType {
	var out []*catalog.InstanceType
	for _, it := range types {
		if !need.Fits(it.Allocatable) {
			continue
		}
		for _, o := range it.Offerings {
			if o.Available && o.Price < maxPrice {
				out = append(out, it)
				break
			}
		}
	}
	return out
}

// describeTypes names instance types with counts, "2 × m5.large, c5.xlarge".
func describeTypes(types []string) string {
	counts := map[string]int{}
	var order []string
	for _, t := range types {
		if counts[t] == 0 {
			order = append(order, t)
		}
		counts[t]++
	}
	sort.Strings(order)
	parts := make([]string, len(order))
	for i, t := range order {
		if counts[t] > 1 {
			parts[i] = fmt.Sprintf("%d × %s", counts[t], t)
		} else {
			parts[i] = t
		}
	}
	return strings.Join(parts, ", ")
}
