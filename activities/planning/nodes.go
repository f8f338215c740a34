package planning

import (
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// initializingFor is how long after registration a Millwright Node may keep
// its pool's startup taints: the node workflow's initialization timeout
// (workflows.DefaultInitializationTimeout), after which it gives up on the
// node anyway.
const initializingFor = 30 * time.Minute

// ephemeralTaintKeys go away on their own while a new Node starts; pods
// that do not tolerate them will still land there.
var ephemeralTaintKeys = []string{
	corev1.TaintNodeNotReady,
	corev1.TaintNodeUnreachable,
	"node.cloudprovider.kubernetes.io/uninitialized",
	activities.UnregisteredTaintKey,
}

// useNodes turns live Nodes into packer nodes with their free capacity, and
// counts every Millwright Node against its pool's limits and minNodes.
// Nodes that are going away (being deleted, disrupted, or named in the
// request) or cordoned offer no capacity; Nodes Millwright does not manage
// offer theirs like any other.
//
// A pending pod nominated to a usable Node (status.nominatedNodeName: set
// by registration for the pods a node was launched for, or by
// kube-scheduler's preemption) takes its room there, as kube-scheduler
// counts it, when it fits: it is not planned again, and other pods are not
// placed in room the scheduler keeps for it. useNodes returns those pods'
// keys. Before, the planner offered that room to other pending pods, which
// kube-scheduler then left pending, batch after batch (at 5,000 pods, 710
// pods were "placed" on existing or in-flight room every batch and never
// planned a node).
func (w *world) useNodes(nodes []*corev1.Node, bound, nominated map[string][]*corev1.Pod, disrupted map[string]bool) map[string]bool {
	held := map[string]bool{}
	sorted := slices.Clone(nodes)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, node := range sorted {
		poolName := node.Labels[scheduling.LabelNodePool]
		ps := w.pools[poolName]
		going := node.DeletionTimestamp != nil || disrupted[node.Name] || hasTaintKey(node.Spec.Taints, activities.DisruptedTaintKey)
		if going {
			w.going[node.Name] = true
		}
		if ps != nil {
			ps.usedNodes++
			ps.used = ps.used.Add(knownResources(node.Status.Capacity))
			if !going {
				ps.liveNodes++
			}
		}
		if going || node.Spec.Unschedulable {
			continue
		}
		available := knownResources(node.Status.Allocatable)
		pods := slices.Clip(bound[node.Name])
		for _, pod := range pods {
			available = available.Sub(podRequests(pod))
		}
		waiting := slices.Clone(nominated[node.Name])
		slices.SortFunc(waiting, func(a, b *corev1.Pod) int { return strings.Compare(podKey(a), podKey(b)) })
		for _, pod := range waiting {
			if requests := podRequests(pod); requests.Fits(available) {
				available = available.Sub(requests)
				pods = append(pods, pod)
				held[podKey(pod)] = true
			}
		}
		w.nodes = append(w.nodes, packer.Node{
			Name:      node.Name,
			NodePool:  poolName,
			Labels:    node.Labels,
			Taints:    w.schedulingTaints(node, ps),
			Available: available,
			Pods:      pods,
		})
	}
	return held
}

// schedulingTaints are the taints that keep pods off node for good. A
// Millwright Node that is starting up sheds its ephemeral and startup
// taints soon, so they are left out: otherwise the pods it was launched for
// would be planned a second node while it boots.
func (w *world) schedulingTaints(node *corev1.Node, ps *poolState) []corev1.Taint {
	if ps == nil || !w.startingUp(node, ps) {
		return node.Spec.Taints
	}
	startup := ps.pool.Spec.Template.Spec.StartupTaints
	var out []corev1.Taint
	for _, t := range node.Spec.Taints {
		if slices.Contains(ephemeralTaintKeys, t.Key) || containsTaint(startup, t) {
			continue
		}
		out = append(out, t)
	}
	return out
}

// startingUp reports a Millwright Node that will soon take pods: one not yet
// adopted (unregistered taint) or not Ready within the registration
// timeout of its creation, or still carrying startup taints within the
// initialization timeout after that. Past them the node workflow gives up
// on the node, so a Node stuck there is broken, not free capacity.
func (w *world) startingUp(node *corev1.Node, ps *poolState) bool {
	age, window := w.now.Sub(node.CreationTimestamp.Time), w.registrationWindow()
	if hasTaintKey(node.Spec.Taints, activities.UnregisteredTaintKey) {
		return age < window
	}
	for _, t := range ps.pool.Spec.Template.Spec.StartupTaints {
		if containsTaint(node.Spec.Taints, t) {
			return age < window+initializingFor
		}
	}
	return !nodeReady(node) && age < window
}

// registrationWindow is the registration timeout the world was observed
// with, or the default.
func (w *world) registrationWindow() time.Duration {
	if w.startingUpFor > 0 {
		return w.startingUpFor
	}
	return activities.DefaultRegistrationTimeout
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// containsTaint reports whether taints has one with t's key and effect.
func containsTaint(taints []corev1.Taint, t corev1.Taint) bool {
	return slices.ContainsFunc(taints, func(other corev1.Taint) bool { return other.MatchTaint(&t) })
}

func hasTaintKey(taints []corev1.Taint, key string) bool {
	return slices.ContainsFunc(taints, func(t corev1.Taint) bool { return t.Key == key })
}

// useInFlight turns the provisioner's in-flight node claims into packer
// nodes and returns the pod keys they own. A claim whose Node exists is
// settled: the Node itself now offers the capacity (its pods, still
// pending, are placed on it like any pending pod that fits).
//
// An in-flight node may become any of its instance type options, so it is
// credited with the smallest allocatable among them (per resource) minus
// its DaemonSets and pods: it never promises room the launched instance may
// lack. Against the pool's limits it counts with the largest capacity. Its
// zone and capacity type are unknown until launch, so pods that need a
// particular zone or capacity type are not placed on it.
func (w *world) useInFlight(entries []activities.InFlightNode, nodes []*corev1.Node, byKey map[string]*corev1.Pod) map[string]bool {
	claims := map[string]bool{}
	for _, node := range nodes {
		if claim := node.Labels[activities.NodeClaimLabel]; claim != "" {
			claims[claim] = true
		}
	}
	sorted := slices.Clone(entries)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].NodeClaimName < sorted[j].NodeClaimName })
	owned := map[string]bool{}
	seen := map[string]bool{}
	for _, entry := range sorted {
		if seen[entry.NodeClaimName] {
			continue
		}
		seen[entry.NodeClaimName] = true
		if claims[entry.NodeClaimName] {
			w.settled = append(w.settled, entry.NodeClaimName)
			continue
		}
		var pods []*corev1.Pod
		for _, key := range entry.PodKeys {
			owned[key] = true
			// Its room is taken by its pods still waiting for it: pending
			// ones, and those of a node going away (a replacement).
			if pod, ok := byKey[key]; ok && (awaitsNode(pod) || w.going[pod.Spec.NodeName] && isReschedulable(pod)) {
				pods = append(pods, pod)
			}
		}
		ps := w.pools[entry.NodePool]
		if ps == nil {
			continue // pool gone or unusable: its pods stay owned, no capacity is modelled
		}
		var types []*catalog.InstanceType
		for _, name := range entry.InstanceTypes {
			if it, ok := ps.typeByName[name]; ok {
				types = append(types, it)
			}
		}
		if len(types) == 0 {
			continue
		}
		smallest, largest := types[0].Allocatable, types[0].Capacity
		for _, it := range types[1:] {
			smallest = minResources(smallest, it.Allocatable)
			largest = largest.Max(it.Capacity)
		}
		ps.inFlight++
		ps.usedNodes++
		ps.used = ps.used.Add(largest)

		labels := inFlightLabels(ps, types)
		taints := ps.pool.Spec.Template.Spec.Taints
		available := smallest
		for _, ds := range w.daemonSetPods {
			if runsOn(ds, labels, taints) {
				available = available.Sub(podRequests(ds))
			}
		}
		for _, pod := range pods {
			available = available.Sub(podRequests(pod))
		}
		w.inFlight = append(w.inFlight, packer.Node{
			Name: entry.NodeClaimName, NodePool: entry.NodePool, InFlight: true,
			Labels: labels, Taints: taints, Available: available, Pods: pods,
		})
	}
	return owned
}

// inFlightLabels are the labels an in-flight node is sure to carry: its
// pool's, the custom labels the pool's requirements pin, and the instance
// type labels every option shares (e.g. the architecture).
func inFlightLabels(ps *poolState, types []*catalog.InstanceType) map[string]string {
	labels := map[string]string{}
	for k, v := range pinnedCustomLabels(ps.reqs) {
		labels[k] = v
	}
	common := scheduling.CanonicalLabels(types[0].Labels)
	for _, it := range types[1:] {
		for k, v := range common {
			if it.Labels[k] != v {
				delete(common, k)
			}
		}
	}
	for k, v := range common {
		labels[k] = v
	}
	for k, v := range ps.labels {
		labels[k] = v
	}
	return labels
}

// runsOn reports whether a DaemonSet pod would run on a node with these
// labels and taints; a requirement on a label the node may or may not get
// counts as met, so overhead is never underestimated.
func runsOn(ds *corev1.Pod, labels map[string]string, taints []corev1.Taint) bool {
	if scheduling.Tolerates(ds.Spec.Tolerations, taints) != nil {
		return false
	}
	alts, err := scheduling.PodRequirements(ds)
	if err != nil {
		return false
	}
	known := scheduling.RequirementsFromLabels(scheduling.CanonicalLabels(labels))
	for _, alt := range alts {
		if known.Intersects(alt) == nil {
			return true
		}
	}
	return false
}

func minResources(a, b scheduling.Resources) scheduling.Resources {
	for i := range a {
		a[i] = min(a[i], b[i])
	}
	return a
}
