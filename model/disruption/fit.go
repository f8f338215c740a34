package disruption

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// podFacts is what fitting needs of a pod, computed once per Compute.
type podFacts struct {
	req  scheduling.Resources
	alts []scheduling.Requirements
	bad  bool // requests or requirements cannot be read: it fits nowhere
}

func (c *computation) factsOf(pod *corev1.Pod) *podFacts {
	if f, ok := c.facts[pod]; ok {
		return f
	}
	f := &podFacts{}
	var err error
	if f.req, err = scheduling.EffectiveRequests(pod); err != nil {
		f.bad = true
	}
	if f.alts, err = scheduling.PodRequirements(pod); err != nil || len(f.alts) == 0 {
		f.bad = true
	}
	c.facts[pod] = f
	return f
}

func (c *computation) requests(pod *corev1.Pod) scheduling.Resources { return c.factsOf(pod).req }

// quickFit places pods first-fit (largest first) onto the capacity nodes
// usable lists, honouring requests, node selectors and affinity, and
// taints. It is the packer's existing-node placement without topology,
// which simulate uses when no pod in the cluster has topology spread or
// pod (anti-)affinity: then nothing but a node's own room and labels
// decides whether a pod fits it, and the nodes need no re-preparation per
// simulation. It returns the placements and the pods left over.
func (c *computation) quickFit(pods []*corev1.Pod, usable []int) ([]packer.Placement, []*corev1.Pod) {
	cp := c.capacity
	order := make([]*corev1.Pod, len(pods))
	copy(order, pods)
	sort.SliceStable(order, func(i, j int) bool {
		a, b := c.requests(order[i]), c.requests(order[j])
		if a[scheduling.IndexCPU] != b[scheduling.IndexCPU] {
			return a[scheduling.IndexCPU] > b[scheduling.IndexCPU]
		}
		return a[scheduling.IndexMemory] > b[scheduling.IndexMemory]
	})
	used := map[int]scheduling.Resources{}
	var placements []packer.Placement
	var left []*corev1.Pod
	for _, pod := range order {
		f := c.factsOf(pod)
		placed := false
		for _, i := range usable {
			if f.bad {
				break
			}
			avail := cp.nodes[i].Available.Sub(used[i])
			if !f.req.Fits(avail) || !c.suits(pod, f, i) {
				continue
			}
			used[i] = used[i].Add(f.req)
			placements = append(placements, packer.Placement{Pod: pod, Node: cp.nodes[i].Name})
			placed = true
			break
		}
		if !placed {
			left = append(left, pod)
		}
	}
	return placements, left
}

// suits reports whether capacity node i's labels and taints admit pod.
func (c *computation) suits(pod *corev1.Pod, f *podFacts, i int) bool {
	n := &c.capacity.nodes[i]
	if _, bad := scheduling.UntoleratedTaint(pod.Spec.Tolerations, n.Taints); bad {
		return false
	}
	labels := c.capacity.labels[i]
	for _, alt := range f.alts {
		if alt.Matches(labels) {
			return true
		}
	}
	return false
}
