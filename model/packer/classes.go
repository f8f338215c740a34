package packer

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/model/scheduling"
)

// node is an existing, in-flight or planned node.
type node struct {
	idx      int
	existing bool // existing or in-flight (from Input.Nodes)
	name     string
	labels   map[string]string // existing nodes: canonical labels
	taints   []corev1.Taint
	pt       int // planned nodes: pool type; -1 for existing
	slot     int
	free     scheduling.Resources
	podReq   scheduling.Resources // planned nodes: what the placed pods request
	doms     []int32              // domain per topology key (-1: label absent)
	pods     []int                // input pod indices placed here by the plan
	classes  []int32              // distinct classes placed here
	options  []candidate          // planned nodes: launch options, cheapest first
	ports    hostPorts            // host ports bound by the node's pods
	unmet    string               // planned nodes: the pool's minValues the options miss
	sealed   bool                 // shed pods for minValues: takes no more
}

func (n *node) addClass(c int32) {
	for _, x := range n.classes {
		if x == c {
			return
		}
	}
	n.classes = append(n.classes, c)
}

func (p *packer) buildNodes() {
	for i := range p.in.Nodes {
		in := &p.in.Nodes[i]
		labels := scheduling.CanonicalLabels(in.Labels)
		if _, ok := labels[scheduling.LabelHostname]; !ok {
			labels[scheduling.LabelHostname] = in.Name
		}
		n := &node{idx: len(p.nodes), existing: true, name: in.Name, labels: labels,
			taints: in.Taints, pt: -1, slot: -1, free: in.Available}
		for _, pod := range in.Pods {
			n.ports = append(n.ports, podHostPorts(pod)...)
		}
		p.nodes = append(p.nodes, n)
	}
	p.nExisting = len(p.nodes)
}

func namespaceOf(pod *corev1.Pod) string {
	if pod.Namespace == "" {
		return "default"
	}
	return pod.Namespace
}

func (p *packer) buildClasses() {
	index := map[string]int{}
	var sb strings.Builder
	p.storage = p.in.storageIndex()
	volumes := map[int][]volumeTopology{}
	volumeErrs := map[int]error{}
	for i, pod := range p.in.Pods {
		k := classKey(pod, &sb)
		if len(pod.Spec.Volumes) > 0 {
			vts, err := p.storage.podVolumeTopology(pod)
			switch {
			case err != nil:
				volumeErrs[i] = err
				k += "\x00" + err.Error()
			case len(vts) > 0:
				volumes[i] = vts
				k += "\x00" + volumeKey(vts)
			}
		}
		ci, ok := index[k]
		if !ok {
			ci = len(p.classes)
			index[k] = ci
			p.classes = append(p.classes, &podClass{idx: ci, rep: pod, volumes: volumes[i], err: volumeErrs[i]})
		}
		p.classes[ci].pods = append(p.classes[ci].pods, i)
		p.classOf = append(p.classOf, int32(ci))
	}
	p.maskCache = map[string][]uint64{}
	for _, c := range p.classes {
		if c.err != nil {
			continue
		}
		req, err := scheduling.EffectiveRequests(c.rep)
		if err != nil {
			c.err = err
			continue
		}
		c.req = req
		c.ports = podHostPorts(c.rep)
		for i, v := range req {
			if v > 0 {
				c.nz = append(c.nz, i)
			}
		}
		// Spread domains follow required node affinity only (Karpenter's
		// topology_test "should not limit spread options by preferred node affinity").
		if base, err := scheduling.PodRequirements(c.rep); err == nil {
			if base, err = withVolumeTopology(base, c.volumes); err == nil {
				c.baseAlts = base
				c.baseMask = p.masksFor(base)
			}
		}
		c.ladder = preferenceLadder(c.rep, p.avoidsPreferNoSchedule(c.rep))
		c.cur, c.ladder = c.ladder[0], c.ladder[1:]
		p.interpret(c)
	}
}

// avoidsPreferNoSchedule reports whether some pool or existing node has a
// PreferNoSchedule taint pod does not tolerate.
func (p *packer) avoidsPreferNoSchedule(pod *corev1.Pod) bool {
	for _, pl := range p.pools {
		if avoidsPreferNoSchedule(pod.Spec.Tolerations, pl.taints) {
			return true
		}
	}
	for _, n := range p.nodes[:p.nExisting] {
		if avoidsPreferNoSchedule(pod.Spec.Tolerations, n.taints) {
			return true
		}
	}
	return false
}

// masksFor returns the compatibility masks of node requirements, computed
// once per distinct set.
func (p *packer) masksFor(alts []scheduling.Requirements) []uint64 {
	var key strings.Builder
	for _, alt := range alts {
		key.WriteString(alt.String())
		key.WriteByte('|')
	}
	m, ok := p.maskCache[key.String()]
	if !ok {
		m = p.compatMasks(alts, func(pt *poolType) uint64 { return pt.usable })
		p.maskCache[key.String()] = m
	}
	return m
}

// interpret derives the class's node requirements, compatibility masks and
// tolerations from its current variant.
func (p *packer) interpret(c *podClass) {
	pod := c.cur.pod
	var err error
	c.alts, err = variantRequirements(pod)
	if err == nil {
		c.alts, err = withVolumeTopology(c.alts, c.volumes)
	}
	if err != nil {
		c.err = err
		return
	}
	m := p.masksFor(c.alts)
	c.mask = m
	if c.ports != nil {
		c.mask = p.withoutDaemonSetPorts(c, m)
	}
	c.tol = make([]bool, len(p.pools))
	for i, pl := range p.pools {
		c.tol[i] = scheduling.Tolerates(pod.Spec.Tolerations, pl.taints) == nil &&
			(!c.cur.avoidPrefer || !avoidsPreferNoSchedule(pod.Spec.Tolerations, pl.taints))
	}
	c.existing = make([]bool, p.nExisting)
	for i := 0; i < p.nExisting; i++ {
		n := p.nodes[i]
		if scheduling.Tolerates(pod.Spec.Tolerations, n.taints) != nil || (c.cur.avoidPrefer && avoidsPreferNoSchedule(pod.Spec.Tolerations, n.taints)) {
			continue
		}
		if _, bad := n.ports.conflicts(c.ports); bad {
			continue
		}
		for _, alt := range c.alts {
			if alt.Matches(n.labels) {
				c.existing[i] = true
				break
			}
		}
	}
}

// fitsOn reports whether class c's labels/taints suit node n.
func (p *packer) suits(c *podClass, n *node) bool {
	if n.existing {
		return c.existing[n.idx]
	}
	return c.tol[p.pts[n.pt].pool] && c.mask[n.pt]&(1<<n.slot) != 0
}

// resourceFit is how many pods of c fit in free.
func resourceFit(c *podClass, free *scheduling.Resources, limit int) int {
	k := limit
	for _, i := range c.nz {
		if free[i] < c.req[i] {
			return 0
		}
		if q := free[i] / c.req[i]; q < int64(k) {
			k = int(q)
		}
	}
	return k
}
