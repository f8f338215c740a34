package packer

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/millwright/millwright/model/scheduling"
)

type groupKind uint8

const (
	kindSpread groupKind = iota
	kindAffinity
	kindAnti
)

const unlimited = math.MaxInt32

// topoKey is a topology key and the domains (label values) seen for it.
type topoKey struct {
	name     string
	hostname bool
	intern   map[string]int32
	values   []string
	slotDoms []int32 // zone and capacity-type keys: the domain of each slot
}

func (k *topoKey) id(value string) int32 {
	if id, ok := k.intern[value]; ok {
		return id
	}
	id := int32(len(k.values))
	k.intern[value] = id
	k.values = append(k.values, value)
	return id
}

// group counts pods matching one selector per domain of one topology key:
// a topology spread constraint, a required pod affinity term or a required
// pod anti-affinity term, shared by every pod that carries the same one.
type group struct {
	kind       groupKind
	keyIdx     int
	hostname   bool
	namespaces map[string]bool // nil: all namespaces
	selector   labels.Selector
	maxSkew    int32
	minDomains int32
	soft       bool // ScheduleAnyway
	desc       string

	inDomain []bool  // spread on non-hostname keys: the eligible domains
	domains  []int32 // same, as a list
	counts   []int32 // matching pods per domain
	owners   []int32 // anti-affinity and spread: pods carrying the term, per domain
	total    int32   // matching pods anywhere
}

func (g *group) count(dom int32) int32 {
	if int(dom) < len(g.counts) {
		return g.counts[dom]
	}
	return 0
}

func (g *group) ownerCount(dom int32) int32 {
	if int(dom) < len(g.owners) {
		return g.owners[dom]
	}
	return 0
}

func (g *group) eligible(dom int32) bool { return int(dom) < len(g.inDomain) && g.inDomain[dom] }

func addAt(s []int32, dom int32, k int32) []int32 {
	for int(dom) >= len(s) {
		s = append(s, 0)
	}
	s[dom] += k
	return s
}

func (g *group) selects(pod *corev1.Pod) bool {
	if g.namespaces != nil && !g.namespaces[namespaceOf(pod)] {
		return false
	}
	return g.selector.Matches(labels.Set(pod.Labels))
}

// rule ties a class to a group: as owner (it carries the constraint), as
// matcher (the group counts it), or both.
type rule struct {
	g       int32
	owner   bool
	matcher bool
	// pinned: the class only counts for a spread constraint and cannot
	// reach all of its domains (a zone nodeSelector, say), so it cannot
	// help balance it; it goes where it must, first, and owners balance
	// around it.
	pinned bool
}

func (p *packer) keyIndex(name string) int {
	name = scheduling.CanonicalLabelKey(name)
	for i, k := range p.keys {
		if k.name == name {
			return i
		}
	}
	k := &topoKey{name: name, hostname: name == scheduling.LabelHostname, intern: map[string]int32{}}
	if name == scheduling.LabelZone || name == scheduling.LabelCapacityType {
		k.slotDoms = make([]int32, p.nSlots)
		for s := range k.slotDoms {
			if name == scheduling.LabelZone {
				k.slotDoms[s] = k.id(p.slotZone(s))
			} else {
				k.slotDoms[s] = k.id(p.slotCT(s))
			}
		}
	}
	p.keys = append(p.keys, k)
	return len(p.keys) - 1
}

// termSelector builds the selector of a pod (anti-)affinity term, folding
// matchLabelKeys / mismatchLabelKeys in with the pod's own label values.
func termSelector(pod *corev1.Pod, sel *metav1.LabelSelector, match, mismatch []string) (labels.Selector, error) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, err
	}
	if sel == nil {
		return labels.Nothing(), nil
	}
	for _, k := range match {
		if v, ok := pod.Labels[k]; ok {
			r, err := labels.NewRequirement(k, selection.In, []string{v})
			if err != nil {
				return nil, err
			}
			s = s.Add(*r)
		}
	}
	for _, k := range mismatch {
		if v, ok := pod.Labels[k]; ok {
			r, err := labels.NewRequirement(k, selection.NotIn, []string{v})
			if err != nil {
				return nil, err
			}
			s = s.Add(*r)
		}
	}
	return s, nil
}

func termNamespaces(pod *corev1.Pod, term *corev1.PodAffinityTerm) (map[string]bool, string) {
	if term.NamespaceSelector != nil {
		// Namespace labels are not part of the input; a namespace selector
		// is taken to select every namespace (strict for anti-affinity).
		return nil, "*"
	}
	ns := map[string]bool{}
	if len(term.Namespaces) == 0 {
		ns[namespaceOf(pod)] = true
	}
	for _, n := range term.Namespaces {
		ns[n] = true
	}
	names := sortedKeys(ns)
	return ns, strings.Join(names, ",")
}

type groupBuilder struct {
	p     *packer
	index map[string]int32
}

func (b *groupBuilder) add(key string, make func() *group) int32 {
	if i, ok := b.index[key]; ok {
		return i
	}
	g := make()
	i := int32(len(b.p.groups))
	b.p.groups = append(b.p.groups, g)
	b.index[key] = i
	return i
}

// podGroups returns the groups a pod owns (spread constraints, required
// affinity and anti-affinity terms); onlyAnti limits it to anti-affinity
// (what existing pods impose on newcomers).
func (b *groupBuilder) podGroups(pod *corev1.Pod, onlyAnti bool) ([]int32, error) {
	var out []int32
	if !onlyAnti {
		for i, tsc := range pod.Spec.TopologySpreadConstraints {
			sel, err := termSelector(pod, tsc.LabelSelector, tsc.MatchLabelKeys, nil)
			if err != nil {
				return nil, fmt.Errorf("spec.topologySpreadConstraints[%d].labelSelector: %w", i, err)
			}
			minDomains := int32(0)
			if tsc.MinDomains != nil {
				minDomains = *tsc.MinDomains
			}
			maxSkew := tsc.MaxSkew
			if maxSkew < 1 {
				maxSkew = 1
			}
			soft := tsc.WhenUnsatisfiable == corev1.ScheduleAnyway
			ns := namespaceOf(pod)
			key := fmt.Sprintf("spread|%s|%s|%s|%d|%d|%v", scheduling.CanonicalLabelKey(tsc.TopologyKey), ns, sel.String(), maxSkew, minDomains, soft)
			out = append(out, b.add(key, func() *group {
				ki := b.p.keyIndex(tsc.TopologyKey)
				return &group{kind: kindSpread, keyIdx: ki, hostname: b.p.keys[ki].hostname,
					namespaces: map[string]bool{ns: true}, selector: sel, maxSkew: maxSkew, minDomains: minDomains, soft: soft,
					desc: fmt.Sprintf("topology spread (%s, maxSkew %d, selector %q)", b.p.keys[ki].name, maxSkew, sel.String())}
			}))
		}
	}
	aff := pod.Spec.Affinity
	if aff == nil {
		return out, nil
	}
	type termSet struct {
		kind  groupKind
		terms []corev1.PodAffinityTerm
		field string
	}
	var sets []termSet
	if aff.PodAffinity != nil && !onlyAnti {
		sets = append(sets, termSet{kindAffinity, aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, "podAffinity"})
	}
	if aff.PodAntiAffinity != nil {
		sets = append(sets, termSet{kindAnti, aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, "podAntiAffinity"})
	}
	for _, set := range sets {
		for i := range set.terms {
			term := &set.terms[i]
			sel, err := termSelector(pod, term.LabelSelector, term.MatchLabelKeys, term.MismatchLabelKeys)
			if err != nil {
				return nil, fmt.Errorf("spec.affinity.%s.requiredDuringSchedulingIgnoredDuringExecution[%d].labelSelector: %w", set.field, i, err)
			}
			if term.TopologyKey == "" {
				return nil, fmt.Errorf("spec.affinity.%s.requiredDuringSchedulingIgnoredDuringExecution[%d].topologyKey: empty", set.field, i)
			}
			namespaces, nsKey := termNamespaces(pod, term)
			kind := set.kind
			key := fmt.Sprintf("%d|%s|%s|%s", kind, scheduling.CanonicalLabelKey(term.TopologyKey), nsKey, sel.String())
			out = append(out, b.add(key, func() *group {
				ki := b.p.keyIndex(term.TopologyKey)
				name := "pod affinity"
				if kind == kindAnti {
					name = "pod anti-affinity"
				}
				return &group{kind: kind, keyIdx: ki, hostname: b.p.keys[ki].hostname, namespaces: namespaces, selector: sel,
					desc: fmt.Sprintf("%s (%s, selector %q)", name, b.p.keys[ki].name, sel.String())}
			}))
		}
	}
	return out, nil
}

// buildTopology creates the groups, ties classes to them, gives every
// existing node its domains and counts the pods already there.
func (p *packer) buildTopology() {
	b := &groupBuilder{p: p, index: map[string]int32{}}
	owned := make([][]int32, len(p.classes))
	for _, c := range p.classes {
		if c.err != nil {
			continue
		}
		gs, err := b.podGroups(c.rep, false)
		if err != nil {
			c.err = err
			continue
		}
		owned[c.idx] = gs
	}
	type existingPod struct {
		node  int
		pod   *corev1.Pod
		owned []int32
	}
	var existing []existingPod
	for i := 0; i < p.nExisting; i++ {
		for _, pod := range p.in.Nodes[i].Pods {
			gs, err := b.podGroups(pod, true)
			if err != nil {
				gs = nil // a malformed bound pod constrains nothing
			}
			existing = append(existing, existingPod{node: i, pod: pod, owned: gs})
		}
	}

	// Ties between classes and groups.
	for _, c := range p.classes {
		if c.err != nil {
			continue
		}
		roles := map[int32]*rule{}
		for _, g := range owned[c.idx] {
			roles[g] = &rule{g: g, owner: true}
		}
		for gi, g := range p.groups {
			if g.selects(c.rep) {
				if r, ok := roles[int32(gi)]; ok {
					r.matcher = true
				} else {
					roles[int32(gi)] = &rule{g: int32(gi), matcher: true}
				}
			}
		}
		for _, r := range roles {
			c.rules = append(c.rules, *r)
		}
		sort.Slice(c.rules, func(i, j int) bool { return c.rules[i].g < c.rules[j].g })
		for _, r := range c.rules {
			g := p.groups[r.g]
			if r.matcher {
				c.matchGroups = append(c.matchGroups, r.g)
			}
			if r.owner && (g.kind == kindAnti || g.kind == kindSpread) {
				c.ownerCounted = append(c.ownerCounted, r.g)
			}
			if r.owner && r.matcher && g.kind == kindAnti && g.hostname {
				c.exclusive = true
			}
			if g.kind == kindSpread && g.hostname && !g.soft {
				c.hostSpread = true
			}
		}
	}

	// Domains of existing nodes, and what is already there.
	for i := 0; i < p.nExisting; i++ {
		n := p.nodes[i]
		n.doms = make([]int32, len(p.keys))
		for ki, k := range p.keys {
			if k.hostname {
				n.doms[ki] = int32(n.idx)
				continue
			}
			if v, ok := n.labels[k.name]; ok {
				n.doms[ki] = k.id(v)
			} else {
				n.doms[ki] = -1
			}
		}
	}
	for _, ep := range existing {
		n := p.nodes[ep.node]
		for gi, g := range p.groups {
			dom := n.doms[g.keyIdx]
			if dom < 0 {
				continue
			}
			if g.selects(ep.pod) {
				g.counts = addAt(g.counts, dom, 1)
				g.total++
			}
			_ = gi
		}
		for _, gi := range ep.owned {
			g := p.groups[gi]
			if dom := n.doms[g.keyIdx]; dom >= 0 {
				g.owners = addAt(g.owners, dom, 1)
			}
		}
	}

	// Eligible domains of spread constraints on keys other than hostname:
	// every domain an owner could be placed in, through a pool's offering
	// or an existing node.
	reach := map[*podClass]uint64{} // slots some launch suiting the class can host it in
	reachOf := func(c *podClass) uint64 {
		if m, ok := reach[c]; ok {
			return m
		}
		var m uint64
		for _, pt := range p.pts {
			if !c.tol[pt.pool] {
				continue
			}
			for rest := c.mask[pt.idx] &^ m; rest != 0; rest &= rest - 1 {
				s := bits.TrailingZeros64(rest)
				if c.req.Fits(pt.alloc[s]) {
					m |= 1 << s
				}
			}
		}
		reach[c] = m
		return m
	}
	for gi, g := range p.groups {
		if g.kind != kindSpread || g.hostname {
			continue
		}
		key := p.keys[g.keyIdx].name
		for _, c := range p.classes {
			if c.err != nil || !c.owns(int32(gi)) {
				continue
			}
			if key == scheduling.LabelZone || key == scheduling.LabelCapacityType {
				for m := reachOf(c); m != 0; m &= m - 1 {
					s := bits.TrailingZeros64(m)
					g.inDomain = setAt(g.inDomain, p.domainOf(g.keyIdx, nil, s))
				}
			} else {
				for _, pt := range p.pts {
					if !c.tol[pt.pool] {
						continue
					}
					for m := c.mask[pt.idx]; m != 0; m &= m - 1 {
						s := bits.TrailingZeros64(m)
						if !c.req.Fits(pt.alloc[s]) {
							continue
						}
						if dom := p.domainOf(g.keyIdx, pt, s); dom >= 0 {
							g.inDomain = setAt(g.inDomain, dom)
						}
					}
				}
			}
			for i := 0; i < p.nExisting; i++ {
				if c.existing[i] && p.nodes[i].doms[g.keyIdx] >= 0 {
					g.inDomain = setAt(g.inDomain, p.nodes[i].doms[g.keyIdx])
				}
			}
		}
		for d, ok := range g.inDomain {
			if ok {
				g.domains = append(g.domains, int32(d))
			}
		}
	}
	for _, c := range p.classes {
		if c.err != nil {
			continue
		}
		for i := range c.rules {
			r := &c.rules[i]
			g := p.groups[r.g]
			if r.owner || !r.matcher || g.kind != kindSpread || g.hostname || len(g.domains) == 0 {
				continue
			}
			reachable := map[int32]bool{}
			key := p.keys[g.keyIdx].name
			if key == scheduling.LabelZone || key == scheduling.LabelCapacityType {
				for m := reachOf(c); m != 0; m &= m - 1 {
					reachable[p.domainOf(g.keyIdx, nil, bits.TrailingZeros64(m))] = true
				}
			} else {
				for _, pt := range p.pts {
					if !c.tol[pt.pool] {
						continue
					}
					for m := c.mask[pt.idx]; m != 0; m &= m - 1 {
						if dom := p.domainOf(g.keyIdx, pt, bits.TrailingZeros64(m)); dom >= 0 {
							reachable[dom] = true
						}
					}
				}
			}
			for i := 0; i < p.nExisting; i++ {
				if c.existing[i] && p.nodes[i].doms[g.keyIdx] >= 0 {
					reachable[p.nodes[i].doms[g.keyIdx]] = true
				}
			}
			for _, d := range g.domains {
				if !reachable[d] {
					r.pinned, c.pinned = true, true
					break
				}
			}
		}
	}
	p.local = make([]int32, len(p.groups))
	p.localOwners = make([]int32, len(p.groups))
}

func (c *podClass) owns(g int32) bool {
	for _, r := range c.rules {
		if r.g == g {
			return r.owner
		}
	}
	return false
}

func setAt(s []bool, dom int32) []bool {
	for int(dom) >= len(s) {
		s = append(s, false)
	}
	s[dom] = true
	return s
}

// domainOf is the domain of key ki on a node of pool type pt in slot s
// (hostname excluded: every new node is its own domain).
func (p *packer) domainOf(ki int, pt *poolType, s int) int32 {
	k := p.keys[ki]
	if k.slotDoms != nil {
		return k.slotDoms[s]
	}
	if v, ok := pt.labels[k.name]; ok {
		return k.id(v)
	}
	return -1
}

// domainsFor fills doms with the domains of a node of pt in slot s whose
// hostname domain is host.
func (p *packer) domainsFor(pt *poolType, s int, host int32, doms []int32) []int32 {
	doms = doms[:0]
	for ki, k := range p.keys {
		if k.hostname {
			doms = append(doms, host)
		} else {
			doms = append(doms, p.domainOf(ki, pt, s))
		}
	}
	return doms
}

// active reports whether a rule constrains placement at the current
// relaxation level. Level 0 enforces spread on every pod the constraint
// counts (so the final plan is within maxSkew, not only each step) and
// treats zone-level ScheduleAnyway as DoNotSchedule; level 1 enforces
// spread only on the pods that carry a DoNotSchedule constraint.
func (p *packer) active(r rule, g *group) bool {
	switch g.kind {
	case kindSpread:
		if r.pinned || (g.soft && (g.hostname || p.level >= 1)) {
			return false
		}
		return true
	case kindAffinity:
		return r.owner
	default:
		return true
	}
}

// ruleCap is how many more pods of a class one node (with domains doms and
// the uncommitted additions in p.local) can take under rule r.
func (p *packer) ruleCap(r rule, doms []int32) int {
	g := p.groups[r.g]
	dom := doms[g.keyIdx]
	switch g.kind {
	case kindSpread:
		if dom < 0 {
			if r.owner {
				return 0
			}
			return unlimited
		}
		if !r.owner && p.level >= 1 && g.ownerCount(dom)+p.localOwners[r.g] == 0 {
			// Relaxed: a pod that only counts for the constraint may go
			// where no pod carrying it is, so it never skews an owner's domain.
			return unlimited
		}
		c := g.count(dom) + p.local[r.g]
		if g.hostname {
			// A new node is always an empty domain, so the minimum is 0.
			if r.matcher {
				return int(max(0, g.maxSkew-c))
			}
			if c > g.maxSkew {
				return 0
			}
			return unlimited
		}
		if !g.eligible(dom) {
			if r.owner {
				return 0
			}
			return unlimited
		}
		minOther := int32(unlimited)
		for _, d := range g.domains {
			if d != dom {
				minOther = min(minOther, g.count(d))
			}
		}
		if g.minDomains > 0 && int32(len(g.domains)) < g.minDomains {
			minOther = 0
		}
		if minOther == unlimited {
			return unlimited
		}
		if r.matcher {
			return int(max(0, minOther+g.maxSkew-c))
		}
		if c-min(minOther, c) > g.maxSkew {
			return 0
		}
		return unlimited
	case kindAnti:
		if dom < 0 {
			return unlimited
		}
		if r.owner && g.count(dom)+p.local[r.g] > 0 {
			return 0
		}
		if r.matcher && g.ownerCount(dom)+p.localOwners[r.g] > 0 {
			return 0
		}
		if r.owner && r.matcher {
			return 1
		}
		return unlimited
	default: // affinity
		if !r.owner {
			return unlimited
		}
		if dom < 0 {
			return 0
		}
		if g.count(dom)+p.local[r.g] > 0 {
			return unlimited
		}
		if r.matcher && g.total+p.local[r.g] == 0 {
			return unlimited // the first of a self-affine set picks the domain
		}
		return 0
	}
}

// topologyCap is how many pods of c the node can take under all active rules.
func (p *packer) topologyCap(c *podClass, doms []int32, limit int) int {
	k := limit
	for _, r := range c.rules {
		if !p.active(r, p.groups[r.g]) {
			continue
		}
		if cp := p.ruleCap(r, doms); cp < k {
			k = cp
			if k == 0 {
				return 0
			}
		}
	}
	return k
}

// blockingRule names the first active rule that stops c on a node.
func (p *packer) blockingRule(c *podClass, doms []int32) (*group, bool) {
	for _, r := range c.rules {
		g := p.groups[r.g]
		if p.active(r, g) && p.ruleCap(r, doms) == 0 {
			return g, true
		}
	}
	return nil, false
}

// record counts k pods of c on a node with domains doms, globally
// (commit) or in p.local (simulation).
func (p *packer) record(c *podClass, doms []int32, k int32, commit bool) {
	for _, gi := range c.matchGroups {
		g := p.groups[gi]
		dom := doms[g.keyIdx]
		if dom < 0 {
			continue
		}
		if commit {
			g.counts = addAt(g.counts, dom, k)
			g.total += k
		} else {
			if p.local[gi] == 0 && p.localOwners[gi] == 0 {
				p.touched = append(p.touched, gi)
			}
			p.local[gi] += k
		}
	}
	for _, gi := range c.ownerCounted {
		g := p.groups[gi]
		dom := doms[g.keyIdx]
		if dom < 0 {
			continue
		}
		if commit {
			g.owners = addAt(g.owners, dom, k)
		} else {
			if p.local[gi] == 0 && p.localOwners[gi] == 0 {
				p.touched = append(p.touched, gi)
			}
			p.localOwners[gi] += k
		}
	}
}

func (p *packer) resetLocal() {
	for _, gi := range p.touched {
		p.local[gi], p.localOwners[gi] = 0, 0
	}
	p.touched = p.touched[:0]
}
