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
	"k8s.io/apimachinery/pkg/labels"

	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// capacity is the room pods can be simulated onto: every node not going
// away (registered and in flight), less the room the commands of this
// Result already gave to the pods they move.
type capacity struct {
	nodes []packer.Node
	// labels are the nodes' canonical labels (hostname included).
	labels []map[string]string
	// byName indexes nodes.
	byName map[string]int
	// excluded marks nodes (by index into nodes) a command removes.
	excluded []bool
	// settling marks nodes (by index into nodes) within their pool's
	// consolidateAfter since their last pod event: consolidation moves no
	// pods onto them (Options.SkipSettlingDestinations).
	settling []bool
	// uninitialized marks the nodes (by index into nodes) not initialized
	// yet: in flight, or registered but not Ready with their startup taints
	// gone. Only the pods that come first may go onto them (see closedTo).
	uninitialized []bool
	// avoided holds the room of the outliers (by index into nodes), which
	// meanwhile have none: no simulation moves pods onto them.
	avoided map[int]scheduling.Resources
	// allocatable are the nodes' allocatable (an in-flight node's is its
	// free room), which kube-scheduler's LeastAllocated scores against.
	allocatable []scheduling.Resources
	// first are the pods that compete for room in every simulation: pending
	// pods and the pods of nodes already being deleted or held (those of
	// Node.DecidedAfter aside). They need not find
	// a place (the provisioner launches for them), but they may take room
	// before a candidate's pods do, as in Karpenter's simulation.
	first []*corev1.Pod
	// leaving are the pods of first that leave their nodes now: those of
	// nodes deleting, or held by a drain or an admitted command (not by a
	// command still waiting out its validation); see nominateLeaving.
	leaving []*corev1.Pod
	// topology is true when some pod in the cluster has topology spread or
	// pod (anti-)affinity; antiAffinity are the required anti-affinity
	// terms of the pods on the nodes (they bar newcomers they select). A
	// simulation whose pods have no terms of their own and that no such
	// term selects needs no topology (see needsTopology).
	topology     bool
	antiAffinity []topologyTerm
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
			if n.DecidedAfter && !n.Deleting {
				// Its pods stay put in this admission: the node is there
				// (its pods count for topology) but takes none.
				cp.add(c.packerNode(n), n.Allocatable)
				cp.nodes[len(cp.nodes)-1].Available = scheduling.Resources{}
				continue
			}
			for _, p := range n.Pods {
				if p.Pod != nil && reschedulable(p.Pod) {
					cp.first = append(cp.first, p.Pod)
					if n.Deleting || !n.Waiting {
						cp.leaving = append(cp.leaving, p.Pod)
					}
				}
			}
			continue
		}
		cp.add(c.packerNode(n), n.Allocatable)
		cp.settling[len(cp.nodes)-1] = c.settling(n)
		cp.uninitialized[len(cp.nodes)-1] = !n.Initialized
	}
	for _, n := range c.in.InFlight {
		n.InFlight = true
		cp.add(n, n.Available)
		cp.uninitialized[len(cp.nodes)-1] = true
	}
	for _, pod := range c.in.PendingPods {
		if hasTopology(pod) {
			cp.topology = true
		}
	}
	cp.first = append(cp.first, c.in.PendingPods...)
	c.capacity = cp
	if cp.topology {
		// Label classes of every pod the packer may have to count, before
		// any simulation sizes its relevance table by them.
		for _, n := range cp.nodes {
			for _, pod := range n.Pods {
				c.classOf(pod)
				if a := pod.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
					cp.antiAffinity = append(cp.antiAffinity, antiAffinityTerms(pod)...)
				}
			}
		}
		for _, pod := range cp.first {
			c.classOf(pod)
		}
	}
}

func (cp *capacity) add(n packer.Node, allocatable scheduling.Resources) {
	cp.byName[n.Name] = len(cp.nodes)
	cp.nodes = append(cp.nodes, n)
	cp.allocatable = append(cp.allocatable, allocatable)
	labels := scheduling.CanonicalLabels(n.Labels)
	if _, ok := labels[scheduling.LabelHostname]; !ok {
		labels[scheduling.LabelHostname] = n.Name
	}
	cp.labels = append(cp.labels, labels)
	cp.excluded = append(cp.excluded, false)
	cp.settling = append(cp.settling, false)
	cp.uninitialized = append(cp.uninitialized, false)
}

// settling reports whether consolidation must not move pods onto the
// registered node n: it is initialized and its pool's consolidateAfter
// (neither 0 nor Never) has not passed since its last pod event, as
// Karpenter's IsUnderConsolidateAfter. In-flight and uninitialized nodes
// never settle.
func (c *computation) settling(n *Node) bool {
	if !c.opts.SkipSettlingDestinations || !n.Initialized {
		return false
	}
	pl := c.pools[n.NodePool]
	if pl == nil {
		return false
	}
	after, never := pl.spec.Pool.ConsolidateAfterDuration()
	return !never && after > 0 && c.in.Now.Sub(n.lastPodEvent()) < after
}

// closedTo says which nodes take none of the pods a simulation moves (the
// pods that come first, pending or from nodes already leaving, may use
// them):
//   - nodes not initialized yet, in every simulation but repair's: Karpenter's
//     SimulateScheduling refuses a consolidation or drift whose moved pods
//     would land on one ("would schedule against uninitialized nodeclaim"),
//     since it may never become Ready and kube-scheduler places nothing on it
//     until it is;
//   - settling nodes, in consolidation's simulations only, when
//     Options.SkipSettlingDestinations is on.
type closedTo struct {
	cp            *capacity
	settling      bool
	uninitialized bool
}

// closedFor is which nodes a simulation in mode must keep moved pods off.
func (cp *capacity) closedFor(mode launchMode) closedTo {
	return closedTo{cp: cp, settling: mode != launchAny && mode != launchRepair, uninitialized: mode != launchRepair}
}

// node reports whether node i is closed to moved pods.
func (k closedTo) node(i int) bool {
	return (k.settling && k.cp.settling[i]) || (k.uninitialized && k.cp.uninitialized[i])
}

// any reports whether a node of usable is closed to moved pods.
func (k closedTo) any(usable []int) bool {
	for _, i := range usable {
		if k.node(i) {
			return true
		}
	}
	return false
}

// countSettling is how many nodes of usable are closed for settling.
func (k closedTo) countSettling(usable []int) int {
	n := 0
	for _, i := range usable {
		if k.settling && k.cp.settling[i] {
			n++
		}
	}
	return n
}

// closedText adds to why pods found no place that settling nodes took
// none of them.
func (k closedTo) closedText(usable []int) string {
	if n := k.countSettling(usable); n > 0 {
		return fmt.Sprintf("; %d node(s) within their consolidateAfter take no moved pods", n)
	}
	return ""
}

// uninitializedHolder is the first node not yet initialized among usable
// that has room (less used) and suits pod: where Karpenter's scheduler,
// which tries existing nodes (initialized ones first) before new ones,
// would have put a moved pod no initialized node holds.
func (c *computation) uninitializedHolder(pod *corev1.Pod, usable []int, used map[int]scheduling.Resources) (*packer.Node, bool) {
	cp := c.capacity
	f := c.factsOf(pod)
	if f.bad {
		return nil, false
	}
	for _, i := range usable {
		if !cp.uninitialized[i] {
			continue
		}
		if f.req.Fits(cp.nodes[i].Available.Sub(used[i])) && c.suits(pod, f, i) {
			return &cp.nodes[i], true
		}
	}
	return nil, false
}

// uninitializedText is why a simulation refuses pods that only a node not
// yet initialized would hold, in Karpenter's words (an in-flight node is
// named by its NodeClaim).
func uninitializedText(pod *corev1.Pod, n *packer.Node) string {
	kind := "node"
	if n.InFlight {
		kind = "nodeclaim"
	}
	return fmt.Sprintf("pod %s would schedule against uninitialized %s/%s", podKey(pod), kind, n.Name)
}

// closedTaint is put on closed nodes in the packer's view of a
// simulation; the pods that come first (pending, or from nodes already
// leaving) tolerate it and the moved pods do not, which is how the packer,
// which knows nothing of consolidation, keeps the moved pods off those
// nodes.
var closedTaint = corev1.Taint{Key: "millwright.dev/simulation-closed", Effect: corev1.TaintEffectNoSchedule}

// tolerating is pod with closedTaint tolerated (a copy, made once per
// Compute).
func (c *computation) tolerating(pod *corev1.Pod) *corev1.Pod {
	if t, ok := c.tolerant[pod]; ok {
		return t
	}
	// A shallow copy: the packer only reads pods.
	t := *pod
	t.Spec.Tolerations = append(slices.Clip(pod.Spec.Tolerations), corev1.Toleration{Key: closedTaint.Key, Operator: corev1.TolerationOpExists})
	if c.tolerant == nil {
		c.tolerant = map[*corev1.Pod]*corev1.Pod{}
	}
	c.tolerant[pod] = &t
	return &t
}

// avoid takes the room of the node named name out of every simulation
// until unavoid gives it back.
func (cp *capacity) avoid(name string) {
	i, ok := cp.byName[name]
	if !ok {
		return
	}
	if _, done := cp.avoided[i]; done {
		return
	}
	if cp.avoided == nil {
		cp.avoided = map[int]scheduling.Resources{}
	}
	cp.avoided[i] = cp.nodes[i].Available
	cp.nodes[i].Available = scheduling.Resources{}
}

// unavoid gives an avoided node its room back (nothing was placed on it
// meanwhile).
func (cp *capacity) unavoid(name string) {
	i, ok := cp.byName[name]
	if !ok {
		return
	}
	if room, held := cp.avoided[i]; held {
		cp.nodes[i].Available = room
		delete(cp.avoided, i)
	}
}

// place puts placed pods on their nodes (in nodes, indexed by byName).
func (c *computation) place(nodes []packer.Node, byName map[string]int, placements []packer.Placement) {
	for _, pl := range placements {
		i, ok := byName[pl.Node]
		if !ok {
			continue
		}
		n := &nodes[i]
		n.Available = n.Available.Sub(c.requests(pl.Pod))
		n.Pods = append(n.Pods[:len(n.Pods):len(n.Pods)], pl.Pod)
	}
}

// packerNode is a registered node as capacity: allocatable minus the
// requests of its active pods.
func (c *computation) packerNode(n *Node) packer.Node {
	avail := n.Allocatable
	var pods []*corev1.Pod
	for _, p := range n.Pods {
		if p.Pod == nil || !active(p.Pod) {
			continue
		}
		avail = avail.Sub(c.requests(p.Pod))
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
	// launchAny: as many nodes as the pods need (drift).
	launchAny
	// launchRepair: as launchAny, for a broken node, whose pods may also go
	// onto nodes not initialized yet (Karpenter's repair simulates nothing:
	// the node goes whatever becomes of its pods).
	launchRepair
	// launchSplit: as many nodes as the pods need, of instance types
	// offered under maxPrice (a split, split.go).
	launchSplit
)

// simulation is the outcome of moving some candidates' pods.
type simulation struct {
	// placements put moved pods on remaining nodes; newNodes hold the rest.
	placements []packer.Placement
	newNodes   []packer.NodePlan
	// failed says why not every pod found a place ("" when all did).
	failed string
	// uninitialized is set when failed is that a moved pod would need a
	// node not initialized yet.
	uninitialized bool
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
	minReq := c.smallestRequest(pods)
	topo := c.needsTopology(pods)
	var usable []int
	for i, n := range cp.nodes {
		if skip[i] || cp.excluded[i] {
			continue
		}
		if !topo && !roomFor(n.Available, minReq) {
			continue
		}
		usable = append(usable, i)
	}
	isMoving := make(map[*corev1.Pod]bool, len(moving))
	for _, pod := range moving {
		isMoving[pod] = true
	}
	// Moved pods go onto no closed node (closedTo).
	closed := cp.closedFor(mode)
	var barred map[*corev1.Pod]bool
	if closed.any(usable) {
		barred = isMoving
	}
	placed, unplaced, used := c.quickFit(pods, usable, barred, closed)
	// uninitialized is why the moved pods left over (left) must not launch:
	// a node not initialized yet would hold one, and Karpenter refuses the
	// decision rather than plan it a new node.
	uninitialized := func(left []*corev1.Pod, used map[int]scheduling.Resources) string {
		if barred == nil || !closed.uninitialized {
			return ""
		}
		for _, pod := range left {
			if node, ok := c.uninitializedHolder(pod, usable, used); ok {
				return uninitializedText(pod, node)
			}
		}
		return ""
	}
	var topoNodes []packer.Node
	if topo {
		// The quick fit ignores topology, so it is only a first sieve: when
		// it leaves moving pods over that no launch this simulation may
		// make could take, the packer would not do better.
		var over []*corev1.Pod
		for _, pod := range unplaced {
			if isMoving[pod] {
				over = append(over, pod)
			}
		}
		if len(over) > 0 && (mode == launchNothing ||
			(mode == launchOneCheaper && len(c.launchPools(maxPrice, c.sumRequests(over), c.altsOf(over))) == 0)) {
			if why := uninitialized(over, used); why != "" {
				return simulation{failed: why, uninitialized: true}
			}
			return simulation{failed: c.unplacedText(over) + closed.closedText(usable)}
		}
		relevant := c.relevantClasses(pods)
		topoNodes = make([]packer.Node, 0, len(usable))
		for _, i := range usable {
			n := cp.nodes[i]
			// Every node stays, full or not: its labels make the domains.
			n.Pods = c.relevantPods(n.Pods, relevant)
			if barred != nil && closed.node(i) {
				n.Taints = append(slices.Clip(n.Taints), closedTaint)
			}
			topoNodes = append(topoNodes, n)
		}
		packed := pods
		if barred != nil {
			packed = make([]*corev1.Pod, 0, len(pods))
			for _, pod := range cp.first {
				packed = append(packed, c.tolerating(pod))
			}
			packed = append(packed, moving...)
		}
		r, err := packer.Pack(packer.Input{Pods: packed, Nodes: topoNodes, Storage: c.in.Storage, Volumes: c.volumes, Namespaces: c.in.Namespaces})
		if err != nil {
			return simulation{failed: err.Error()}
		}
		placed, unplaced = r.Placements, nil
		for _, u := range r.Unschedulable {
			unplaced = append(unplaced, u.Pod)
		}
		used = nil
		if barred != nil && closed.uninitialized {
			// Only the check for uninitialized holders reads it.
			used = map[int]scheduling.Resources{}
			for _, pl := range placed {
				if i, ok := cp.byName[pl.Node]; ok {
					used[i] = used[i].Add(c.requests(pl.Pod))
				}
			}
		}
	}
	var s simulation
	for _, pl := range placed {
		if isMoving[pl.Pod] {
			s.placements = append(s.placements, pl)
		}
	}
	var left []*corev1.Pod
	for _, pod := range unplaced {
		if isMoving[pod] {
			left = append(left, pod)
		}
	}
	if len(left) == 0 {
		return s
	}
	if why := uninitialized(left, used); why != "" {
		return simulation{failed: why, uninitialized: true}
	}
	var pools []packer.NodePool
	switch mode {
	case launchOneCheaper:
		pools = c.launchPools(maxPrice, c.sumRequests(left), c.altsOf(left))
	case launchAny, launchRepair:
		pools = c.launchPools(math.Inf(1), scheduling.Resources{}, nil)
	case launchSplit:
		pools = c.splitPools(maxPrice)
	}
	if len(pools) == 0 {
		s.failed = c.unplacedText(left) + closed.closedText(usable)
		return s
	}
	// The rest go on new nodes; with topology, beside the remaining nodes
	// as the first pass left them (their pods count in the constraints).
	var after []packer.Node
	if topo {
		after = slices.Clone(topoNodes)
		byName := make(map[string]int, len(after))
		for k, n := range after {
			byName[n.Name] = k
		}
		c.place(after, byName, placed)
	}
	r2, err := packer.Pack(packer.Input{Pods: left, DaemonSetPods: c.in.DaemonSetPods, NodePools: pools, Nodes: after,
		Storage: c.in.Storage, Volumes: c.volumes, Namespaces: c.in.Namespaces})
	if err != nil {
		s.failed = err.Error()
		return s
	}
	s.placements = append(s.placements, r2.Placements...)
	s.newNodes = r2.NewNodes
	if len(r2.Unschedulable) > 0 {
		s.failed = unschedulableText(r2.Unschedulable)
	}
	return s
}

// unplacedText says why pods left over by the first pass found no place.
func (c *computation) unplacedText(pods []*corev1.Pod) string {
	more := ""
	if len(pods) > 1 {
		more = fmt.Sprintf(" (and %d other pod(s))", len(pods)-1)
	}
	if why := c.factsOf(pods[0]).why; why != "" {
		return fmt.Sprintf("pod %s cannot be rescheduled: %s%s", podKey(pods[0]), why, more)
	}
	return fmt.Sprintf("pod %s cannot be rescheduled: no remaining node has room for it and no NodePool can launch for it%s", podKey(pods[0]), more)
}

func unschedulableText(us []packer.Unschedulable) string {
	more := ""
	if len(us) > 1 {
		more = fmt.Sprintf(" (and %d other pod(s))", len(us)-1)
	}
	return fmt.Sprintf("pod %s cannot be rescheduled: %s%s", podKey(us[0].Pod), us[0].Reason, more)
}

func (c *computation) sumRequests(pods []*corev1.Pod) scheduling.Resources {
	var sum scheduling.Resources
	for _, pod := range pods {
		sum = sum.Add(c.requests(pod))
	}
	return sum
}

// smallestRequest is the least cpu and memory any of pods requests.
func (c *computation) smallestRequest(pods []*corev1.Pod) scheduling.Resources {
	var least scheduling.Resources
	least[scheduling.IndexCPU], least[scheduling.IndexMemory] = math.MaxInt64, math.MaxInt64
	for _, pod := range pods {
		req := c.requests(pod)
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
	c.place(c.capacity.nodes, c.capacity.byName, placements)
	// A destination is no candidate for the rest of this Compute: deleting
	// it would move its own pods but not those just planned onto it, and
	// those would find no place (with several commands a pass, a node
	// that took one command's pods was deleted by the next).
	for _, pl := range placements {
		if ni := c.managed[pl.Node]; ni != nil && ni.command < 0 && !ni.receiving {
			ni.receiving = true
			if ni.refused == "" {
				ni.refused = "Receives the pods of a disruption decided in this pass"
			}
		}
	}
	for pl := range removed {
		if pl != nil {
			pl.spend(cmd.Reason, disrupted[pl], removed[pl])
		}
	}
}

// maxReplacementTypes bounds the instance types a one-node replacement is
// chosen among (the cheapest that hold the pods): the packer picks the
// cheapest anyway, and lists at most packer.MaxInstanceTypeOptions.
const maxReplacementTypes = 100

// launchPools are the launchable pools' packer views for a simulation.
// With a finite maxPrice (a consolidation replace) each pool may launch one
// node, of one of its cheapest instance types with an available offering
// under maxPrice whose allocatable holds all of need and whose labels suit
// every pod (alts, per pod): with every type able to take all the pods,
// the packer picks the cheapest.
func (c *computation) launchPools(maxPrice float64, need scheduling.Resources, alts [][]scheduling.Requirements) []packer.NodePool {
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
			lp.InstanceTypes = cheaperTypes(lp.InstanceTypes, maxPrice, need.Add(c.daemonSetOverhead(lp.Taints)), alts)
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

// daemonSetOverhead is what the DaemonSet pods that tolerate taints
// request together: a new node of the pool runs them beside the moved pods
// (their node selectors are not checked, so the overhead is an upper bound).
func (c *computation) daemonSetOverhead(taints []corev1.Taint) scheduling.Resources {
	var sum scheduling.Resources
	for _, ds := range c.in.DaemonSetPods {
		if _, bad := scheduling.UntoleratedTaint(ds.Spec.Tolerations, taints); !bad {
			sum = sum.Add(c.requests(ds))
		}
	}
	return sum
}

// cheaperTypes are the types (at most maxReplacementTypes, cheapest first)
// with an available offering under maxPrice that hold need and suit alts.
func cheaperTypes(types []*catalog.InstanceType, maxPrice float64, need scheduling.Resources, alts [][]scheduling.Requirements) []*catalog.InstanceType {
	type priced struct {
		it    *catalog.InstanceType
		price float64
	}
	var keep []priced
	for _, it := range types {
		if !need.Fits(it.Allocatable) || !typeSuits(it, alts) {
			continue
		}
		cheapest := math.Inf(1)
		for _, o := range it.Offerings {
			if o.Available && o.Price < maxPrice {
				cheapest = min(cheapest, o.Price)
			}
		}
		if !math.IsInf(cheapest, 1) {
			keep = append(keep, priced{it, cheapest})
		}
	}
	sort.SliceStable(keep, func(i, j int) bool { return keep[i].price < keep[j].price })
	out := make([]*catalog.InstanceType, 0, min(len(keep), maxReplacementTypes))
	for _, k := range keep[:min(len(keep), maxReplacementTypes)] {
		out = append(out, k.it)
	}
	return out
}

// typeSuits reports whether every pod (its alternatives) admits the type's
// own labels; keys the type does not define (zone, capacity type, custom
// labels) are left to the packer.
func typeSuits(it *catalog.InstanceType, pods [][]scheduling.Requirements) bool {
	for _, alts := range pods {
		ok := false
		for _, alt := range alts {
			if altAdmits(alt, it.Labels) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func altAdmits(alt scheduling.Requirements, labels map[string]string) bool {
	for _, r := range alt.Items() {
		if v, ok := labels[r.Key()]; ok && !r.Matches(v, true) {
			return false
		}
	}
	return true
}

// altsOf lists the distinct requirement alternatives of pods.
func (c *computation) altsOf(pods []*corev1.Pod) [][]scheduling.Requirements {
	seen := map[string]bool{}
	var out [][]scheduling.Requirements
	for _, pod := range pods {
		alts := c.factsOf(pod).alts
		var key strings.Builder
		for _, a := range alts {
			key.WriteString(a.String())
			key.WriteByte('|')
		}
		if !seen[key.String()] {
			seen[key.String()] = true
			out = append(out, alts)
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

// needsTopology reports whether placing pods can depend on other pods:
// one of them has topology spread or pod (anti-)affinity, or a pod on a
// node has required anti-affinity selecting one of them.
func (c *computation) needsTopology(pods []*corev1.Pod) bool {
	cp := c.capacity
	if !cp.topology {
		return false
	}
	for _, pod := range pods {
		if hasTopology(pod) {
			return true
		}
	}
	for _, pod := range pods {
		set := labels.Set(pod.Labels)
		ns := namespaceOf(pod)
		for _, t := range cp.antiAffinity {
			if (t.namespaces == nil || t.namespaces[ns]) && t.selector.Matches(set) {
				return true
			}
		}
	}
	return false
}
