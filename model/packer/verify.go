package packer

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/scheduling"
)

// maxViolations caps how many violations Verify reports.
const maxViolations = 20

// Verify checks a plan against the input independently of how Pack built
// it, using kube-scheduler's own matching (component-helpers) where one
// exists. It returns every violation found (up to maxViolations), each
// naming the pod or node:
//
//   - every input pod is placed exactly once or reported with a reason;
//   - each new node's launch exists in its NodePool (type, zone, capacity
//     type, available offering, price) and meets the pool's requirements;
//   - the capacity-type rule: spot unless on-demand is cheaper for the
//     same type and zone;
//   - each node's pods plus the DaemonSets that match it fit its
//     allocatable (existing nodes: their Available), pods count included;
//   - pods' nodeSelector, required node affinity and tolerations hold, and
//     their volumes' topology (bound PV node affinity, WaitForFirstConsumer
//     allowedTopologies);
//   - no two pods on a node (DaemonSet pods included) bind conflicting host ports;
//   - each launch option is an available offering of the pool in the
//     node's zone that holds the node's requests, the first is the chosen
//     one, and the options span the pool's minValues;
//   - NodePool limits hold;
//   - in the final state, every pod carrying a DoNotSchedule topology spread
//     constraint is in a domain at most maxSkew above the least-loaded
//     domain it could use (kube-scheduler's filter, counting every matching
//     pod, including pods that only match the selector; eligible domains
//     per its nodeAffinityPolicy and nodeTaintsPolicy); required pod
//     affinity and anti-affinity hold, namespaceSelector resolved against
//     Input.Namespaces.
func Verify(in Input, r Result) error {
	v := &verifier{in: in, r: r, affinity: map[*corev1.Pod]nodeaffinity.RequiredNodeAffinity{},
		poolSel: map[*NodePool][]*nodeaffinity.NodeSelector{}, requests_: map[*corev1.Pod]scheduling.Resources{}, eligible: map[string][]string{},
		otherZones: map[string]bool{}}
	v.run()
	if len(v.errs) == 0 {
		return nil
	}
	if v.dropped > 0 {
		v.errs = append(v.errs, fmt.Errorf("... and %d more violations", v.dropped))
	}
	return errors.Join(v.errs...)
}

type verifier struct {
	in      Input
	r       Result
	errs    []error
	dropped int

	affinity   map[*corev1.Pod]nodeaffinity.RequiredNodeAffinity
	poolSel    map[*NodePool][]*nodeaffinity.NodeSelector
	requests_  map[*corev1.Pod]scheduling.Resources
	eligible   map[string][]string
	launchList []launch
	storage    *storageIndex
	dsRequests map[string]scheduling.Resources
	otherZones map[string]bool // node|zone pairs checkOtherZone has checked
	zoneTerms  []*vterm        // zoneCountingTerms, once computed
}

// nodeAffinity returns the pod's parsed nodeSelector and required node affinity.
func (v *verifier) nodeAffinity(p *corev1.Pod) nodeaffinity.RequiredNodeAffinity {
	if a, ok := v.affinity[p]; ok {
		return a
	}
	a := nodeaffinity.GetRequiredNodeAffinity(p)
	v.affinity[p] = a
	return a
}

// poolSelectors parses each of the pool's requirements once.
func (v *verifier) poolSelectors(pool *NodePool) []*nodeaffinity.NodeSelector {
	if s, ok := v.poolSel[pool]; ok {
		return s
	}
	var out []*nodeaffinity.NodeSelector
	for _, req := range pool.Requirements {
		sel, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req}}}})
		if err != nil {
			v.fail("nodepool %s: requirement %s %s %v: %v", pool.Name, req.Key, req.Operator, req.Values, err)
			sel = nil
		}
		out = append(out, sel)
	}
	v.poolSel[pool] = out
	return out
}

func (v *verifier) fail(format string, args ...any) {
	if len(v.errs) >= maxViolations {
		v.dropped++
		return
	}
	v.errs = append(v.errs, fmt.Errorf(format, args...))
}

// vnode is a node of the final state.
type vnode struct {
	name   string
	node   *corev1.Node
	taints []corev1.Taint
	pods   []*corev1.Pod // everything on it: bound before and placed now
	placed []*corev1.Pod // placed by the plan
}

func (v *verifier) run() {
	// 1. Every pod once.
	seen := map[*corev1.Pod]int{}
	known := map[*corev1.Pod]bool{}
	for _, p := range v.in.Pods {
		known[p] = true
	}
	count := func(p *corev1.Pod, where string) {
		if !known[p] {
			v.fail("%s: pod %s is not in the input", where, podKey(p))
			return
		}
		seen[p]++
	}
	for _, pl := range v.r.Placements {
		count(pl.Pod, "placement on "+pl.Node)
	}
	for _, n := range v.r.NewNodes {
		for _, p := range n.Pods {
			count(p, "node "+n.Name)
		}
	}
	for _, u := range v.r.Unschedulable {
		count(u.Pod, "unschedulable")
		if strings.TrimSpace(u.Reason) == "" {
			v.fail("unschedulable pod %s has no reason", podKey(u.Pod))
		}
	}
	for _, p := range v.in.Pods {
		if seen[p] != 1 {
			v.fail("pod %s appears %d times in the plan, want exactly once", podKey(p), seen[p])
		}
	}

	var nodes []*vnode
	// 2. Existing nodes.
	existing := map[string]*vnode{}
	for i := range v.in.Nodes {
		n := &v.in.Nodes[i]
		l := scheduling.WithAliases(scheduling.CanonicalLabels(n.Labels))
		for k, val := range n.Labels {
			l[k] = val
		}
		if _, ok := l[scheduling.LabelHostname]; !ok {
			l[scheduling.LabelHostname] = n.Name
		}
		vn := &vnode{name: n.Name, node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: l}}, taints: n.Taints,
			pods: append([]*corev1.Pod(nil), n.Pods...)}
		existing[n.Name] = vn
		nodes = append(nodes, vn)
	}
	used := map[string]scheduling.Resources{}
	for _, pl := range v.r.Placements {
		vn, ok := existing[pl.Node]
		if !ok {
			v.fail("pod %s placed on unknown node %q", podKey(pl.Pod), pl.Node)
			continue
		}
		vn.pods = append(vn.pods, pl.Pod)
		vn.placed = append(vn.placed, pl.Pod)
		used[pl.Node] = used[pl.Node].Add(v.requests(pl.Pod))
	}
	for i := range v.in.Nodes {
		n := &v.in.Nodes[i]
		if u := used[n.Name]; !u.Fits(n.Available) {
			v.fail("node %s: placed pods request %s, more than its available %s (over on %v)", n.Name, u, n.Available, u.Exceeding(n.Available))
		}
		v.checkPodsSuit(existing[n.Name])
		if len(existing[n.Name].placed) > 0 {
			v.checkHostPorts(existing[n.Name], nil)
		}
	}

	// 3. New nodes.
	pools := map[string]*NodePool{}
	for i := range v.in.NodePools {
		pools[v.in.NodePools[i].Name] = &v.in.NodePools[i]
	}
	launched := map[string]scheduling.Resources{}
	launchedNodes := map[string]int64{}
	names := map[string]bool{}
	for i := range v.r.NewNodes {
		plan := &v.r.NewNodes[i]
		if names[plan.Name] || existing[plan.Name] != nil {
			v.fail("node %s: name is not unique", plan.Name)
		}
		names[plan.Name] = true
		pool, ok := pools[plan.NodePool]
		if !ok {
			v.fail("node %s: unknown nodepool %q", plan.Name, plan.NodePool)
			continue
		}
		var it *catalog.InstanceType
		for _, t := range pool.InstanceTypes {
			if t.Name == plan.InstanceType {
				it = t
			}
		}
		if it == nil {
			v.fail("node %s: instance type %q is not offered by nodepool %s", plan.Name, plan.InstanceType, pool.Name)
			continue
		}
		launched[pool.Name] = launched[pool.Name].Add(it.Capacity)
		launchedNodes[pool.Name]++
		vn := v.checkLaunch(plan, pool, it)
		if vn == nil {
			continue
		}
		nodes = append(nodes, vn)
		total := scheduling.Resources{}
		for _, p := range plan.Pods {
			total = total.Add(v.requests(p))
		}
		for _, ds := range v.in.DaemonSetPods {
			if v.suits(ds, vn) == nil {
				total = total.Add(v.requests(ds))
			}
		}
		var ds []*corev1.Pod
		for _, d := range v.in.DaemonSetPods {
			if v.suits(d, vn) == nil {
				ds = append(ds, d)
			}
		}
		v.checkHostPorts(vn, ds)
		if !total.Fits(it.Allocatable) {
			v.fail("node %s (%s): pods and daemonsets request %s, more than allocatable %s (over on %v)",
				plan.Name, it.Name, total, it.Allocatable, total.Exceeding(it.Allocatable))
		}
		podsTotal := scheduling.Resources{}
		for _, p := range plan.Pods {
			podsTotal = podsTotal.Add(v.requests(p))
		}
		v.checkOptions(plan, pool, vn, podsTotal)
		v.checkPodsSuit(vn)
	}

	// 4. Limits.
	for i := range v.in.NodePools {
		pool := &v.in.NodePools[i]
		for name, limit := range pool.Limits {
			usedQ := pool.Used[name]
			if name == scheduling.ResourceNodes {
				if got := usedQ.Value() + launchedNodes[pool.Name]; got > limit.Value() {
					v.fail("nodepool %s: %d nodes exceed its limit of %s", pool.Name, got, limit.String())
				}
				continue
			}
			idx, ok := scheduling.LookupResourceIndex(name)
			if !ok {
				continue
			}
			lim, use := quantityValue(idx, limit), quantityValue(idx, usedQ)
			if got := use + launched[pool.Name][idx]; got > lim {
				v.fail("nodepool %s: %s capacity %d exceeds its limit %s", pool.Name, name, got, limit.String())
			}
		}
	}

	// 5. Topology in the final state.
	v.checkTopology(nodes)
}

func (v *verifier) requests(p *corev1.Pod) scheduling.Resources {
	if r, ok := v.requests_[p]; ok {
		return r
	}
	r, err := scheduling.EffectiveRequests(p)
	if err != nil {
		v.fail("pod %s: %v", podKey(p), err)
	}
	v.requests_[p] = r
	return r
}

// checkLaunch checks a new node's launch against its pool and instance
// type and returns its final-state node.
func (v *verifier) checkLaunch(plan *NodePlan, pool *NodePool, it *catalog.InstanceType) *vnode {
	var offering *catalog.Offering
	for i := range it.Offerings {
		o := &it.Offerings[i]
		if o.Zone == plan.Zone && o.CapacityType == plan.CapacityType && o.Available {
			if offering == nil || o.Price < offering.Price {
				offering = o
			}
		}
	}
	if offering == nil {
		v.fail("node %s: %s has no available %s offering in %s", plan.Name, it.Name, plan.CapacityType, plan.Zone)
		return nil
	}
	if math.Abs(offering.Price-plan.Price) > 1e-9 {
		v.fail("node %s: price %v, but the offering costs %v", plan.Name, plan.Price, offering.Price)
	}
	if len(pool.CapacityTypes) > 0 && !contains(pool.CapacityTypes, plan.CapacityType) {
		v.fail("node %s: capacity type %s not allowed by nodepool %s", plan.Name, plan.CapacityType, pool.Name)
	}
	l := map[string]string{}
	for k, val := range plan.Labels {
		l[k] = val
	}
	l[scheduling.LabelHostname] = plan.Name
	for k, want := range scheduling.WithAliases(it.Labels) {
		if l[k] != want {
			v.fail("node %s: label %s=%q, instance type %s has %q", plan.Name, k, l[k], it.Name, want)
		}
	}
	for k, want := range map[string]string{
		scheduling.LabelZone: plan.Zone, scheduling.LabelCapacityType: plan.CapacityType,
		scheduling.LabelNodePool: pool.Name, scheduling.LabelInstanceType: it.Name,
	} {
		if l[k] != want {
			v.fail("node %s: label %s=%q, want %q", plan.Name, k, l[k], want)
		}
	}
	for k, want := range pool.Labels {
		if l[k] != want {
			v.fail("node %s: label %s=%q, nodepool %s sets %q", plan.Name, k, l[k], pool.Name, want)
		}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: plan.Name, Labels: l}}
	for i, req := range pool.Requirements {
		if _, present := l[req.Key]; !present && !scheduling.IsInstanceTypeLabel(req.Key) && (req.Operator == corev1.NodeSelectorOpExists || req.Operator == corev1.NodeSelectorOpGt || req.Operator == corev1.NodeSelectorOpLt) {
			continue // a custom key the pool leaves open carries no value yet
		}
		if sel := v.poolSelectors(pool)[i]; sel != nil && !sel.Match(node) {
			v.fail("node %s: does not meet nodepool %s requirement %s %s %v", plan.Name, pool.Name, req.Key, req.Operator, req.Values)
		}
	}
	vn := &vnode{name: plan.Name, node: node, taints: pool.Taints, pods: append([]*corev1.Pod(nil), plan.Pods...), placed: plan.Pods}
	// Capacity-type rule, for the same type and zone.
	for _, o := range it.Offerings {
		if !o.Available || o.Zone != plan.Zone || o.CapacityType == plan.CapacityType {
			continue
		}
		if len(pool.CapacityTypes) > 0 && !contains(pool.CapacityTypes, o.CapacityType) {
			continue
		}
		if !v.allowsCapacityType(pool, vn, o.CapacityType) {
			continue
		}
		switch {
		case plan.CapacityType == scheduling.CapacityTypeSpot && o.Price < plan.Price:
			v.fail("node %s: spot at %v although %s on-demand costs %v", plan.Name, plan.Price, it.Name, o.Price)
		case plan.CapacityType != scheduling.CapacityTypeSpot && o.CapacityType == scheduling.CapacityTypeSpot && o.Price <= plan.Price:
			v.fail("node %s: %s at %v although spot costs %v", plan.Name, plan.CapacityType, plan.Price, o.Price)
		}
	}
	return vn
}

// allowsCapacityType reports whether the pool's requirements and every pod
// on the node would accept capacity type ct instead.
func (v *verifier) allowsCapacityType(pool *NodePool, vn *vnode, ct string) bool {
	alt := vn.node.DeepCopy()
	for _, k := range append([]string{scheduling.LabelCapacityType}, scheduling.LabelAliases(scheduling.LabelCapacityType)...) {
		alt.Labels[k] = ct
	}
	for i, req := range pool.Requirements {
		if scheduling.CanonicalLabelKey(req.Key) != scheduling.LabelCapacityType {
			continue
		}
		if sel := v.poolSelectors(pool)[i]; sel != nil && !sel.Match(alt) {
			return false
		}
	}
	for _, p := range vn.pods {
		if ok, _ := v.nodeAffinity(p).Match(alt); !ok {
			return false
		}
	}
	return true
}

// suits checks a pod's node selector, required node affinity and tolerations against a node.
func (v *verifier) suits(p *corev1.Pod, vn *vnode) error {
	ok, err := v.nodeAffinity(p).Match(vn.node)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("its nodeSelector/required node affinity does not match the node's labels")
	}
	return scheduling.Tolerates(p.Spec.Tolerations, vn.taints)
}

func (v *verifier) checkPodsSuit(vn *vnode) {
	for _, p := range vn.placed {
		if err := v.suits(p, vn); err != nil {
			v.fail("pod %s on node %s: %v", podKey(p), vn.name, err)
		}
		v.checkVolumes(p, vn)
	}
}

// checkVolumes fails a pod whose node is outside its volumes' topology.
func (v *verifier) checkVolumes(p *corev1.Pod, vn *vnode) {
	if len(p.Spec.Volumes) == 0 {
		return
	}
	if v.storage == nil {
		v.storage = v.in.storageIndex()
	}
	vts, err := v.storage.podVolumeTopology(p)
	if err != nil {
		v.fail("pod %s on node %s: %v", podKey(p), vn.name, err)
		return
	}
	for _, vt := range vts {
		sel, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: vt.terms})
		if err != nil {
			v.fail("pod %s: %s: %v", podKey(p), vt.source, err)
			continue
		}
		if !sel.Match(vn.node) {
			v.fail("pod %s on node %s: outside the topology of %s", podKey(p), vn.name, vt.source)
		}
	}
}

// checkOptions checks a new node's launch options: each is a type of the
// pool with an available offering in its zone at its price that fits the
// node's requests, the first is the chosen launch, and together they span
// the pool's minValues. An option in another zone than the node's needs
// pods that do not depend on the zone (checkOtherZone).
func (v *verifier) checkOptions(plan *NodePlan, pool *NodePool, vn *vnode, pods scheduling.Resources) {
	if len(plan.Options) == 0 {
		if len(pool.MinValues) > 0 {
			v.fail("node %s: no launch options, but nodepool %s has minValues", plan.Name, pool.Name)
		}
		return
	}
	if o := plan.Options[0]; o.InstanceType != plan.InstanceType || o.CapacityType != plan.CapacityType {
		v.fail("node %s: first option %s/%s is not the chosen launch %s/%s", plan.Name, o.InstanceType, o.CapacityType, plan.InstanceType, plan.CapacityType)
	}
	types := map[string]*catalog.InstanceType{}
	for _, t := range pool.InstanceTypes {
		types[t.Name] = t
	}
	values := map[string]map[string]bool{}
	for _, o := range plan.Options {
		it := types[o.InstanceType]
		if it == nil {
			v.fail("node %s: option %s is not an instance type of nodepool %s", plan.Name, o.InstanceType, pool.Name)
			continue
		}
		zone := plan.ZoneOf(o)
		offered := false
		for _, off := range it.Offerings {
			if off.Available && off.Zone == zone && off.CapacityType == o.CapacityType && math.Abs(off.Price-o.Price) < 1e-9 {
				offered = true
			}
		}
		if !offered {
			v.fail("node %s: option %s has no available %s offering in %s at %v", plan.Name, o.InstanceType, o.CapacityType, zone, o.Price)
		}
		if zone != plan.Zone {
			v.checkOtherZone(plan, pool, vn, zone)
		}
		labels := scheduling.CanonicalLabels(it.Labels)
		labels[scheduling.LabelInstanceType] = it.Name
		if total := pods.Add(v.daemonSetRequests(pool, it, zone, o.CapacityType, vn)); !total.Fits(it.Allocatable) {
			v.fail("node %s: option %s cannot hold the node's requests %s", plan.Name, o.InstanceType, total)
		}
		for k := range pool.MinValues {
			ck := scheduling.CanonicalLabelKey(k)
			if values[ck] == nil {
				values[ck] = map[string]bool{}
			}
			if val, ok := labels[ck]; ok {
				values[ck][val] = true
			}
		}
	}
	for k, min := range pool.MinValues {
		if got := len(values[scheduling.CanonicalLabelKey(k)]); got < min {
			v.fail("node %s: options span %d values of %s, nodepool %s requires minValues %d", plan.Name, got, k, pool.Name, min)
		}
	}
}

// checkOtherZone checks that the pods of a new node may land in zone
// instead of its own: the pool allows it, their node requirements and
// volumes allow it, and none carries or is selected by a topology term
// (spread, required or preferred pod (anti-)affinity) on a key other than
// the hostname, since those count pods per zone (or per a label that may
// differ between launches).
func (v *verifier) checkOtherZone(plan *NodePlan, pool *NodePool, vn *vnode, zone string) {
	key := plan.Name + "|" + zone
	if v.otherZones[key] {
		return
	}
	v.otherZones[key] = true
	l := maps.Clone(vn.node.Labels)
	for k := range l {
		if scheduling.CanonicalLabelKey(k) == scheduling.LabelZone {
			l[k] = zone // the zone label and its aliases
		}
	}
	moved := &vnode{name: vn.name, node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: vn.name, Labels: l}}, taints: vn.taints, placed: vn.placed}
	if !v.matchesPoolRequirements(pool, moved.node) {
		v.fail("node %s: option in %s, outside nodepool %s's requirements", plan.Name, zone, pool.Name)
	}
	for _, p := range vn.placed {
		if err := v.suits(p, moved); err != nil {
			v.fail("pod %s on node %s: option in %s: %v", podKey(p), vn.name, zone, err)
		}
		v.checkVolumes(p, moved)
		if k := nonHostnameTermKey(p); k != "" {
			v.fail("pod %s on node %s: option in %s, but the pod has a topology term on %s", podKey(p), vn.name, zone, k)
		}
		for _, t := range v.zoneCountingTerms() {
			if t.selects(p) {
				v.fail("pod %s on node %s: option in %s, but a topology term on %s counts it", podKey(p), vn.name, zone, t.key)
				break
			}
		}
	}
}

// nonHostnameTermKey is the key of one of p's topology spread constraints
// or pod (anti-)affinity terms, required or preferred, that is not the
// hostname ("" when none).
func nonHostnameTermKey(p *corev1.Pod) string {
	for _, t := range podTopologyTerms(p, true) {
		if t.key != scheduling.LabelHostname {
			return t.key
		}
	}
	return ""
}

type podTerm struct {
	key      string
	selector *metav1.LabelSelector
	match    []string
	mismatch []string
	affinity *corev1.PodAffinityTerm // nil: a spread constraint
}

// podTopologyTerms lists p's topology spread constraints and pod
// (anti-)affinity terms, required and, with preferred, preferred.
func podTopologyTerms(p *corev1.Pod, preferred bool) []podTerm {
	var out []podTerm
	for _, tsc := range p.Spec.TopologySpreadConstraints {
		out = append(out, podTerm{key: tsc.TopologyKey, selector: tsc.LabelSelector, match: tsc.MatchLabelKeys})
	}
	aff := p.Spec.Affinity
	if aff == nil {
		return out
	}
	add := func(required []corev1.PodAffinityTerm, weighted []corev1.WeightedPodAffinityTerm) {
		for i := range required {
			t := &required[i]
			out = append(out, podTerm{key: t.TopologyKey, selector: t.LabelSelector, match: t.MatchLabelKeys, mismatch: t.MismatchLabelKeys, affinity: t})
		}
		for i := range weighted {
			if !preferred {
				break
			}
			t := &weighted[i].PodAffinityTerm
			out = append(out, podTerm{key: t.TopologyKey, selector: t.LabelSelector, match: t.MatchLabelKeys, mismatch: t.MismatchLabelKeys, affinity: t})
		}
	}
	if aff.PodAffinity != nil {
		add(aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if aff.PodAntiAffinity != nil {
		add(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	return out
}

// zoneCountingTerms are the topology terms on keys other than the hostname
// that count other pods: those of every pending pod, and the spread
// constraints and required terms of pods on existing nodes (computed once).
func (v *verifier) zoneCountingTerms() []*vterm {
	if v.zoneTerms != nil {
		return v.zoneTerms
	}
	v.zoneTerms = []*vterm{}
	pending := len(v.in.Pods)
	pods := append([]*corev1.Pod(nil), v.in.Pods...)
	for _, n := range v.in.Nodes {
		pods = append(pods, n.Pods...)
	}
	for i, p := range pods {
		// An existing pod's preferred terms keep no other pod away.
		for _, t := range podTopologyTerms(p, i < pending) {
			if t.key == scheduling.LabelHostname {
				continue
			}
			s, err := termSelector(p, t.selector, t.match, t.mismatch)
			if err != nil {
				continue
			}
			ns := map[string]bool{namespaceOf(p): true}
			if t.affinity != nil {
				if ns, _, err = termNamespaces(p, t.affinity, v.in.Namespaces); err != nil {
					continue
				}
			}
			v.zoneTerms = append(v.zoneTerms, &vterm{key: t.key, namespaces: ns, selector: s})
		}
	}
	return v.zoneTerms
}

// daemonSetRequests is what the DaemonSets that would run on a node of the
// pool, type, zone and capacity type request (cached per launch).
func (v *verifier) daemonSetRequests(pool *NodePool, it *catalog.InstanceType, zone, ct string, vn *vnode) scheduling.Resources {
	if len(v.in.DaemonSetPods) == 0 {
		return scheduling.Resources{}
	}
	key := pool.Name + "|" + it.Name + "|" + zone + "|" + ct
	if r, ok := v.dsRequests[key]; ok {
		return r
	}
	node := &vnode{name: vn.name, node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: vn.name, Labels: launchLabels(pool, it, zone, ct, vn.name)}}, taints: pool.Taints}
	var r scheduling.Resources
	for _, ds := range v.in.DaemonSetPods {
		if v.suits(ds, node) == nil {
			r = r.Add(v.requests(ds))
		}
	}
	if v.dsRequests == nil {
		v.dsRequests = map[string]scheduling.Resources{}
	}
	v.dsRequests[key] = r
	return r
}

// checkHostPorts fails a node where two of its pods (DaemonSet pods
// included) bind conflicting host ports.
func (v *verifier) checkHostPorts(vn *vnode, daemonSets []*corev1.Pod) {
	type bound struct {
		port hostPort
		pod  *corev1.Pod
	}
	var seen []bound
	for _, p := range append(append([]*corev1.Pod(nil), daemonSets...), vn.pods...) {
		for _, hp := range podHostPorts(p) {
			for _, b := range seen {
				if b.port.conflicts(hp) {
					v.fail("node %s: pods %s and %s both bind host port %s", vn.name, podKey(b.pod), podKey(p), hp)
				}
			}
			seen = append(seen, bound{hp, p})
		}
	}
}

// term is a pod (anti-)affinity term or spread selector, with its domain counts.
type vterm struct {
	key        string
	namespaces map[string]bool
	selector   labels.Selector
	counts     map[string]int
}

func (t *vterm) selects(p *corev1.Pod) bool {
	if t.namespaces != nil && !t.namespaces[namespaceOf(p)] {
		return false
	}
	return t.selector.Matches(labels.Set(p.Labels))
}

func domainOfNode(vn *vnode, key string) (string, bool) {
	val, ok := vn.node.Labels[key]
	return val, ok
}

func (v *verifier) checkTopology(nodes []*vnode) {
	where := map[*corev1.Pod]*vnode{}
	var all []*corev1.Pod
	for _, n := range nodes {
		for _, p := range n.pods {
			where[p] = n
			all = append(all, p)
		}
	}
	terms := map[string]*vterm{}
	termFor := func(p *corev1.Pod, key string, sel *metav1.LabelSelector, match, mismatch []string, pat *corev1.PodAffinityTerm) (*vterm, error) {
		s, err := termSelector(p, sel, match, mismatch)
		if err != nil {
			return nil, err
		}
		var ns map[string]bool
		nsKey := namespaceOf(p)
		if pat != nil {
			var err error
			if ns, nsKey, err = termNamespaces(p, pat, v.in.Namespaces); err != nil {
				return nil, err
			}
		} else {
			ns = map[string]bool{namespaceOf(p): true}
		}
		id := key + "|" + nsKey + "|" + s.String()
		if t, ok := terms[id]; ok {
			return t, nil
		}
		t := &vterm{key: key, namespaces: ns, selector: s, counts: map[string]int{}}
		for _, q := range all {
			if t.selects(q) {
				if d, ok := domainOfNode(where[q], key); ok {
					t.counts[d]++
				}
			}
		}
		terms[id] = t
		return t, nil
	}
	totalOf := func(t *vterm) int {
		n := 0
		for _, c := range t.counts {
			n += c
		}
		return n
	}
	type selfAffinity struct {
		t       *vterm
		domains map[string]bool
		desc    string
	}
	selfGroups := map[*vterm]*selfAffinity{}
	preExisting := map[*vterm]int{}
	for _, n := range nodes {
		for _, p := range n.placed {
			aff := p.Spec.Affinity
			if aff != nil && aff.PodAntiAffinity != nil {
				for i := range aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					term := &aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i]
					t, err := termFor(p, term.TopologyKey, term.LabelSelector, term.MatchLabelKeys, term.MismatchLabelKeys, term)
					if err != nil {
						continue
					}
					d, ok := domainOfNode(n, term.TopologyKey)
					if !ok {
						continue
					}
					others := t.counts[d]
					if t.selects(p) {
						others--
					}
					if others > 0 {
						v.fail("pod %s on node %s: anti-affinity (%s, %s) violated by %d other pod(s) in %s", podKey(p), n.name, term.TopologyKey, t.selector, others, d)
					}
				}
			}
			if aff != nil && aff.PodAffinity != nil {
				for i := range aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					term := &aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i]
					t, err := termFor(p, term.TopologyKey, term.LabelSelector, term.MatchLabelKeys, term.MismatchLabelKeys, term)
					if err != nil {
						continue
					}
					d, ok := domainOfNode(n, term.TopologyKey)
					self := t.selects(p)
					others := t.counts[d]
					if self {
						others--
					}
					if !ok {
						v.fail("pod %s on node %s: affinity (%s) needs the node label, which it lacks", podKey(p), n.name, term.TopologyKey)
						continue
					}
					if others > 0 {
						if self {
							g := selfGroups[t]
							if g == nil {
								g = &selfAffinity{t: t, domains: map[string]bool{}, desc: fmt.Sprintf("(%s, %s)", term.TopologyKey, t.selector)}
								selfGroups[t] = g
								for _, en := range nodes {
									for _, q := range en.pods[:len(en.pods)-len(en.placed)] {
										if t.selects(q) {
											preExisting[t]++
										}
									}
								}
							}
							g.domains[d] = true
						}
						continue
					}
					if self && totalOf(t) == 1 {
						continue // the only pod of a self-affine set
					}
					v.fail("pod %s on node %s: affinity (%s, %s) has no matching pod in %s", podKey(p), n.name, term.TopologyKey, t.selector, d)
				}
			}
			for i, tsc := range p.Spec.TopologySpreadConstraints {
				if tsc.WhenUnsatisfiable != corev1.DoNotSchedule {
					continue
				}
				t, err := termFor(p, tsc.TopologyKey, tsc.LabelSelector, tsc.MatchLabelKeys, nil, nil)
				if err != nil {
					continue
				}
				own, ok := domainOfNode(n, tsc.TopologyKey)
				if !ok {
					v.fail("pod %s on node %s: topologySpreadConstraints[%d] needs label %s, which the node lacks", podKey(p), n.name, i, tsc.TopologyKey)
					continue
				}
				ignoreAffinity := tsc.NodeAffinityPolicy != nil && *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyIgnore
				honorTaints := tsc.NodeTaintsPolicy != nil && *tsc.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor
				ek := fmt.Sprintf("%s|%s|%v|%v", v.eligibilityKey(p), tsc.TopologyKey, ignoreAffinity, honorTaints)
				domains, ok := v.eligible[ek]
				if !ok {
					domains = v.eligibleDomains(p, tsc.TopologyKey, nodes, ignoreAffinity, honorTaints)
					v.eligible[ek] = domains
				}
				minC, minD := math.MaxInt, ""
				for _, d := range domains {
					if c := t.counts[d]; c < minC {
						minC, minD = c, d
					}
				}
				if tsc.MinDomains != nil && int32(len(domains)) < *tsc.MinDomains {
					minC, minD = 0, "(fewer domains than minDomains)"
				}
				if minC == math.MaxInt {
					continue
				}
				if int32(t.counts[own]-minC) > tsc.MaxSkew {
					v.fail("pod %s on node %s: topologySpreadConstraints[%d] (%s, maxSkew %d, %s): %d in its domain %s vs %d in %s",
						podKey(p), n.name, i, tsc.TopologyKey, tsc.MaxSkew, t.selector, t.counts[own], own, minC, minD)
				}
			}
		}
	}
	for _, g := range selfGroups {
		if preExisting[g.t] == 0 && len(g.domains) > 1 {
			ds := make([]string, 0, len(g.domains))
			for d := range g.domains {
				ds = append(ds, d)
			}
			sort.Strings(ds)
			v.fail("self-affine pods %s were split across %v", g.desc, ds)
		}
	}
}

func (v *verifier) eligibilityKey(p *corev1.Pod) string {
	var sb strings.Builder
	return classKey(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace}, Spec: corev1.PodSpec{
		NodeSelector: p.Spec.NodeSelector, Affinity: &corev1.Affinity{NodeAffinity: nodeAffinityOf(p)},
		Tolerations: p.Spec.Tolerations, Containers: p.Spec.Containers, InitContainers: p.Spec.InitContainers, Overhead: p.Spec.Overhead,
	}}, &sb)
}

func nodeAffinityOf(p *corev1.Pod) *corev1.NodeAffinity {
	if p.Spec.Affinity == nil {
		return nil
	}
	return p.Spec.Affinity.NodeAffinity
}

// eligibleDomains lists the values of key over every node the pod's
// spread constraint counts (kube-scheduler's nodeAffinityPolicy, default
// Honor, and nodeTaintsPolicy, default Ignore): the plan's nodes, and
// every launch (pool, instance type, available offering), that the pod's
// node requirements allow (unless ignored; launches must also fit it) and
// whose taints it tolerates (if honoured). Hostname domains are the plan's
// nodes only.
func (v *verifier) eligibleDomains(p *corev1.Pod, key string, nodes []*vnode, ignoreAffinity, honorTaints bool) []string {
	set := map[string]bool{}
	counted := func(node *corev1.Node, taints []corev1.Taint) bool {
		if honorTaints && scheduling.Tolerates(p.Spec.Tolerations, taints) != nil {
			return false
		}
		if ignoreAffinity {
			return true
		}
		ok, _ := v.nodeAffinity(p).Match(node)
		return ok
	}
	for _, n := range nodes {
		if counted(n.node, n.taints) {
			if d, ok := domainOfNode(n, key); ok {
				set[d] = true
			}
		}
	}
	if scheduling.CanonicalLabelKey(key) != scheduling.LabelHostname {
		req := v.requests(p)
		for _, l := range v.launches() {
			if !ignoreAffinity && !req.Fits(l.it.Allocatable) {
				continue
			}
			if counted(l.node, l.pool.Taints) {
				if d, ok := l.node.Labels[key]; ok {
					set[d] = true
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for d := range set {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// launchLabels are the labels of a node of pool and it launched in zone at
// capacity type ct, named host (canonical keys and their aliases).
func launchLabels(pool *NodePool, it *catalog.InstanceType, zone, ct, host string) map[string]string {
	l := map[string]string{}
	for k, val := range pool.Labels {
		l[k] = val
	}
	for k, val := range it.Labels {
		l[k] = val
	}
	l = scheduling.CanonicalLabels(l)
	l[scheduling.LabelInstanceType] = it.Name
	l[scheduling.LabelZone] = zone
	l[scheduling.LabelCapacityType] = ct
	l[scheduling.LabelNodePool] = pool.Name
	l[scheduling.LabelHostname] = host
	return scheduling.WithAliases(l)
}

// launch is a node every NodePool could launch: a type at an available offering.
type launch struct {
	pool *NodePool
	it   *catalog.InstanceType
	node *corev1.Node
}

// launches lists every (pool, instance type, available offering) the
// pool's requirements and capacity types allow, as a labelled node.
func (v *verifier) launches() []launch {
	if v.launchList != nil {
		return v.launchList
	}
	v.launchList = []launch{}
	for i := range v.in.NodePools {
		pool := &v.in.NodePools[i]
		for _, it := range pool.InstanceTypes {
			for _, o := range it.Offerings {
				if !o.Available || (len(pool.CapacityTypes) > 0 && !contains(pool.CapacityTypes, o.CapacityType)) {
					continue
				}
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: launchLabels(pool, it, o.Zone, o.CapacityType, hostnamePlaceholder)}}
				if v.matchesPoolRequirements(pool, node) {
					v.launchList = append(v.launchList, launch{pool: pool, it: it, node: node})
				}
			}
		}
	}
	return v.launchList
}

func (v *verifier) matchesPoolRequirements(pool *NodePool, node *corev1.Node) bool {
	for i, req := range pool.Requirements {
		if _, present := node.Labels[req.Key]; !present && !scheduling.IsInstanceTypeLabel(req.Key) {
			continue
		}
		if sel := v.poolSelectors(pool)[i]; sel != nil && !sel.Match(node) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
