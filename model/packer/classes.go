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
		p.nodes = append(p.nodes, &node{idx: len(p.nodes), existing: true, name: in.Name, labels: labels,
			taints: in.Taints, pt: -1, slot: -1, free: in.Available})
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
	for i, pod := range p.in.Pods {
		k := classKey(pod, &sb)
		ci, ok := index[k]
		if !ok {
			ci = len(p.classes)
			index[k] = ci
			p.classes = append(p.classes, &podClass{idx: ci, rep: pod})
		}
		p.classes[ci].pods = append(p.classes[ci].pods, i)
	}
	masks := map[string][]uint64{}
	for _, c := range p.classes {
		req, err := scheduling.EffectiveRequests(c.rep)
		if err != nil {
			c.err = err
			continue
		}
		c.req = req
		for i, v := range req {
			if v > 0 {
				c.nz = append(c.nz, i)
			}
		}
		c.alts, err = scheduling.PodRequirements(c.rep)
		if err != nil {
			c.err = err
			continue
		}
		var key strings.Builder
		for _, alt := range c.alts {
			key.WriteString(alt.String())
			key.WriteByte('|')
		}
		m, ok := masks[key.String()]
		if !ok {
			m = p.compatMasks(c.alts, func(pt *poolType) uint64 { return pt.usable })
			masks[key.String()] = m
		}
		c.mask = m
		c.tol = make([]bool, len(p.pools))
		for i, pl := range p.pools {
			c.tol[i] = scheduling.Tolerates(c.rep.Spec.Tolerations, pl.taints) == nil
		}
		c.existing = make([]bool, p.nExisting)
		for i := 0; i < p.nExisting; i++ {
			n := p.nodes[i]
			if scheduling.Tolerates(c.rep.Spec.Tolerations, n.taints) != nil {
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
