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
	// why says what makes it bad, when its volumes do (a claim that does
	// not exist).
	why string
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
	if f.alts, err = scheduling.PodRequirements(pod); err == nil {
		if f.alts, err = c.volumes.Constrain(pod, f.alts); err != nil {
			f.why = err.Error()
		}
	}
	if err != nil || len(f.alts) == 0 {
		f.bad = true
	}
	c.facts[pod] = f
	return f
}

func (c *computation) requests(pod *corev1.Pod) scheduling.Resources { return c.factsOf(pod).req }

// quickFit places pods (largest first) onto the capacity nodes usable
// lists, each on the node it leaves with the largest free share
// (kube-scheduler's default LeastAllocated score), honouring requests, node
// selectors and affinity, and taints. The evicted pods are placed by
// kube-scheduler, so planning them where it would put them keeps the plan
// and the cluster alike: with first fit the plan filled the nodes that come
// first while kube-scheduler spread the pods over the emptiest, which were
// often the next candidates.
//
// simulate uses it when no pod in the cluster has topology spread or pod
// (anti-)affinity: then nothing but a node's own room and labels decides
// whether a pod fits it, and the nodes need no re-preparation per
// simulation (with topology the packer places them, first fit). The pods
// barred names go on no node closed names. It returns the placements, the
// pods left over and the room the placements took on each node.
func (c *computation) quickFit(pods []*corev1.Pod, usable []int, barred map[*corev1.Pod]bool, closed closedTo) ([]packer.Placement, []*corev1.Pod, map[int]scheduling.Resources) {
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
		keepOff := barred[pod]
		best, bestScore := -1, -1.0
		for _, i := range usable {
			if f.bad {
				break
			}
			if keepOff && closed.node(i) {
				continue
			}
			avail := cp.nodes[i].Available.Sub(used[i])
			if !f.req.Fits(avail) || !c.suits(pod, f, i) {
				continue
			}
			if score := leastAllocatedScore(avail.Sub(f.req), cp.allocatable[i]); score > bestScore {
				best, bestScore = i, score
			}
		}
		if best < 0 {
			left = append(left, pod)
			continue
		}
		used[best] = used[best].Add(f.req)
		placements = append(placements, packer.Placement{Pod: pod, Node: cp.nodes[best].Name})
	}
	return placements, left, used
}

// leastAllocatedScore is kube-scheduler's NodeResourcesFit LeastAllocated
// score of a node left with free of allocatable: the mean free share of CPU
// and memory.
func leastAllocatedScore(free, allocatable scheduling.Resources) float64 {
	share := func(i int) float64 {
		if allocatable[i] <= 0 {
			return 0
		}
		return float64(free[i]) / float64(allocatable[i])
	}
	return (share(scheduling.IndexCPU) + share(scheduling.IndexMemory)) / 2
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
