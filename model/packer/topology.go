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
	soft       bool // ScheduleAnyway or a preferred term: binds only its owners, until relaxed
	desc       string
	// Spread: nodeAffinityPolicy Ignore (domains of every node, not only
	// those the pod's node requirements allow) and nodeTaintsPolicy Honor
	// (only nodes whose taints the pod tolerates).
	ignoreAffinity, honorTaints bool

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
	// Owned spread on a key other than hostname: the domains the owner's
	// constraint counts (kube-scheduler's eligible domains for the pod).
	inDomain []bool
	domains  []int32
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

// termNamespaces resolves the namespaces of a pod (anti-)affinity term:
// the listed ones plus those whose labels (Input.Namespaces) the namespace
// selector selects; the pod's own namespace when neither is given. An
// empty selector selects every namespace (nil map).
func termNamespaces(pod *corev1.Pod, term *corev1.PodAffinityTerm, nsLabels map[string]map[string]string) (map[string]bool, string, error) {
	ns := map[string]bool{}
	if term.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(term.NamespaceSelector)
		if err != nil {
			return nil, "", err
		}
		if sel.Empty() {
			return nil, "*", nil
		}
		for name, l := range nsLabels {
			if sel.Matches(labels.Set(l)) {
				ns[name] = true
			}
		}
	} else if len(term.Namespaces) == 0 {
		ns[namespaceOf(pod)] = true
	}
	for _, n := range term.Namespaces {
		ns[n] = true
	}
	names := sortedKeys(ns)
	return ns, strings.Join(names, ","), nil
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
// and preferred affinity and anti-affinity terms; preferred ones and
// ScheduleAnyway constraints make soft groups, which bind only the pods
// carrying them); onlyAnti limits it to required anti-affinity (what
// existing pods impose on newcomers).
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
			// kube-scheduler's defaults: node affinity honoured, taints ignored.
			ignoreAffinity := tsc.NodeAffinityPolicy != nil && *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyIgnore
			honorTaints := tsc.NodeTaintsPolicy != nil && *tsc.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor
			ns := namespaceOf(pod)
			key := fmt.Sprintf("spread|%s|%s|%s|%d|%d|%v|%v|%v", scheduling.CanonicalLabelKey(tsc.TopologyKey), ns, sel.String(), maxSkew, minDomains, soft, ignoreAffinity, honorTaints)
			out = append(out, b.add(key, func() *group {
				ki := b.p.keyIndex(tsc.TopologyKey)
				return &group{kind: kindSpread, keyIdx: ki, hostname: b.p.keys[ki].hostname,
					namespaces: map[string]bool{ns: true}, selector: sel, maxSkew: maxSkew, minDomains: minDomains, soft: soft,
					ignoreAffinity: ignoreAffinity, honorTaints: honorTaints,
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
		soft  bool
	}
	var sets []termSet
	if aff.PodAffinity != nil && !onlyAnti {
		sets = append(sets, termSet{kindAffinity, aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, "podAffinity.requiredDuringSchedulingIgnoredDuringExecution", false},
			termSet{kindAffinity, weightedTerms(aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution), "podAffinity.preferredDuringSchedulingIgnoredDuringExecution", true})
	}
	if aff.PodAntiAffinity != nil {
		sets = append(sets, termSet{kindAnti, aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, "podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution", false})
		if !onlyAnti {
			sets = append(sets, termSet{kindAnti, weightedTerms(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution), "podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution", true})
		}
	}
	for _, set := range sets {
		for i := range set.terms {
			term := &set.terms[i]
			sel, err := termSelector(pod, term.LabelSelector, term.MatchLabelKeys, term.MismatchLabelKeys)
			if err != nil {
				return nil, fmt.Errorf("spec.affinity.%s[%d].labelSelector: %w", set.field, i, err)
			}
			if term.TopologyKey == "" {
				return nil, fmt.Errorf("spec.affinity.%s[%d].topologyKey: empty", set.field, i)
			}
			namespaces, nsKey, err := termNamespaces(pod, term, b.p.in.Namespaces)
			if err != nil {
				return nil, fmt.Errorf("spec.affinity.%s[%d].namespaceSelector: %w", set.field, i, err)
			}
			kind, soft := set.kind, set.soft
			key := fmt.Sprintf("%d|%s|%s|%s|%v", kind, scheduling.CanonicalLabelKey(term.TopologyKey), nsKey, sel.String(), soft)
			out = append(out, b.add(key, func() *group {
				ki := b.p.keyIndex(term.TopologyKey)
				name := "pod affinity"
				if kind == kindAnti {
					name = "pod anti-affinity"
				}
				if soft {
					name = "preferred " + name
				}
				return &group{kind: kind, keyIdx: ki, hostname: b.p.keys[ki].hostname, namespaces: namespaces, selector: sel, soft: soft,
					desc: fmt.Sprintf("%s (%s, selector %q)", name, b.p.keys[ki].name, sel.String())}
			}))
		}
	}
	return out, nil
}

func weightedTerms(terms []corev1.WeightedPodAffinityTerm) []corev1.PodAffinityTerm {
	out := make([]corev1.PodAffinityTerm, len(terms))
	for i, t := range terms {
		out[i] = t.PodAffinityTerm
	}
	return out
}

// buildTopology creates the groups, ties classes to them, gives every
// existing node its domains and counts the pods already there.
func (p *packer) buildTopology() {
	b := &groupBuilder{p: p, index: map[string]int32{}}
	p.builder = b
	owned := make([][]int32, len(p.classes))
	for _, c := range p.classes {
		if c.err != nil {
			continue
		}
		gs, err := b.podGroups(c.cur.pod, false)
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

	for _, c := range p.classes {
		if c.err == nil {
			p.tie(c, owned[c.idx])
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
		for _, g := range p.groups {
			dom := n.doms[g.keyIdx]
			if dom < 0 {
				continue
			}
			if g.selects(ep.pod) {
				g.counts = addAt(g.counts, dom, 1)
				g.total++
			}
		}
		for _, gi := range ep.owned {
			g := p.groups[gi]
			if dom := n.doms[g.keyIdx]; dom >= 0 {
				g.owners = addAt(g.owners, dom, 1)
			}
		}
	}

	// Eligible domains of spread constraints on keys other than hostname:
	// per owner, the domains of the nodes its constraint counts (its own
	// node requirements and tolerations, as its policies say); per group,
	// their union.
	for _, c := range p.classes {
		if c.err == nil {
			p.ruleDomains(c)
		}
	}
	for _, g := range p.groups {
		for d, ok := range g.inDomain {
			if ok {
				g.domains = append(g.domains, int32(d))
			}
		}
	}
	for _, c := range p.classes {
		if c.err == nil {
			p.pinRules(c)
		}
	}
	p.local = make([]int32, len(p.groups))
	p.localOwners = make([]int32, len(p.groups))
}

// tie sets the class's rules: the groups it owns (its current variant's
// constraints) and the groups that count it.
func (p *packer) tie(c *podClass, owned []int32) {
	roles := map[int32]*rule{}
	for _, g := range owned {
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
	c.rules, c.matchGroups, c.ownerCounted = c.rules[:0], c.matchGroups[:0], c.ownerCounted[:0]
	c.exclusive, c.hostSpread = false, false
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

// reachable calls visit with every domain of key ki a node suiting c could
// have: launches of the pools c tolerates (all pools with ignoreTaints)
// whose labels meet c's required node requirements (any with
// ignoreAffinity) and, unless ignoring affinity, that fit one pod; and
// existing nodes likewise.
func (p *packer) reachable(c *podClass, ki int, ignoreAffinity, ignoreTaints bool, visit func(int32)) {
	zoneLike := p.keys[ki].slotDoms != nil
	var seen uint64
	for _, pt := range p.pts {
		if !ignoreTaints && !c.tol[pt.pool] {
			continue
		}
		m := pt.usable
		if !ignoreAffinity {
			m = c.baseMask[pt.idx]
		}
		if zoneLike {
			m &^= seen
		}
		for ; m != 0; m &= m - 1 {
			s := bits.TrailingZeros64(m)
			if !ignoreAffinity && !c.req.Fits(pt.alloc[s]) {
				continue
			}
			if zoneLike {
				seen |= 1 << s
			}
			if dom := p.domainOf(ki, pt, s); dom >= 0 {
				visit(dom)
			}
		}
	}
	for i := 0; i < p.nExisting; i++ {
		n := p.nodes[i]
		if n.doms[ki] < 0 {
			continue
		}
		ok := (ignoreTaints || scheduling.Tolerates(c.cur.pod.Spec.Tolerations, n.taints) == nil) &&
			(ignoreAffinity || p.matchesAny(c, n))
		if ok {
			visit(n.doms[ki])
		}
	}
}

func (p *packer) matchesAny(c *podClass, n *node) bool {
	for _, alt := range c.baseAlts {
		if alt.Matches(n.labels) {
			return true
		}
	}
	return false
}

// ruleDomains computes the eligible domains of the class's own spread
// constraints (not on hostname) and adds them to their groups' union.
func (p *packer) ruleDomains(c *podClass) {
	for i := range c.rules {
		r := &c.rules[i]
		g := p.groups[r.g]
		r.inDomain, r.domains = nil, nil
		if g.kind != kindSpread || g.hostname || !r.owner {
			continue
		}
		p.reachable(c, g.keyIdx, g.ignoreAffinity, !g.honorTaints, func(d int32) {
			r.inDomain = setAt(r.inDomain, d)
			g.inDomain = setAt(g.inDomain, d)
		})
		for d, ok := range r.inDomain {
			if ok {
				r.domains = append(r.domains, int32(d))
			}
		}
	}
}

// pinRules marks the class's matcher-only spread rules whose group has a
// domain the class cannot reach (see rule.pinned).
func (p *packer) pinRules(c *podClass) {
	c.pinned = false
	for i := range c.rules {
		r := &c.rules[i]
		r.pinned = false
		g := p.groups[r.g]
		if r.owner || !r.matcher || g.kind != kindSpread || g.hostname || len(g.domains) == 0 {
			continue
		}
		reachable := map[int32]bool{}
		p.reachable(c, g.keyIdx, false, false, func(d int32) { reachable[d] = true })
		for _, d := range g.domains {
			if !reachable[d] {
				r.pinned, c.pinned = true, true
				break
			}
		}
	}
}

// relax moves the class one rung down its preference ladder and derives
// its constraints again.
func (p *packer) relax(c *podClass) {
	c.cur, c.ladder = c.ladder[0], c.ladder[1:]
	p.interpret(c)
	if c.err != nil {
		return
	}
	owned, err := p.builder.podGroups(c.cur.pod, false)
	if err != nil {
		c.err = err
		return
	}
	if len(p.groups) > len(p.local) {
		// A later variant only drops terms, so its groups exist already.
		panic("packer: a relaxed variant created a topology group")
	}
	p.tie(c, owned)
	p.ruleDomains(c)
	p.pinRules(c)
	c.bonus = 0
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
// counts (so the final plan is within maxSkew, not only each step); level
// 1 enforces it only on the pods that carry the constraint. Soft groups
// (ScheduleAnyway, preferred terms) bind only the pods carrying them, as
// long as their variant keeps them (see preferences.go).
func (p *packer) active(r rule, g *group) bool {
	switch g.kind {
	case kindSpread:
		if r.pinned || (g.soft && !r.owner) {
			return false
		}
		return true
	case kindAffinity:
		return r.owner
	default:
		return r.owner || !g.soft
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
		domains := g.domains
		if r.owner {
			if int(dom) >= len(r.inDomain) || !r.inDomain[dom] {
				return 0
			}
			domains = r.domains
		} else if !g.eligible(dom) {
			return unlimited
		}
		minOther := int32(unlimited)
		for _, d := range domains {
			if d != dom {
				minOther = min(minOther, g.count(d))
			}
		}
		if g.minDomains > 0 && int32(len(domains)) < g.minDomains {
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
