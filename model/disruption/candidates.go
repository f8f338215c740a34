package disruption

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// nodeInfo is a managed node with what Compute learned about it.
type nodeInfo struct {
	idx  int
	node *Node
	pool *poolInfo

	// blocked is why the node is no candidate for any reason ("" when it
	// is one); podBlocked why its pods block a graceful disruption (which
	// drift under a terminationGracePeriod overrides).
	blocked    string
	podBlocked string
	// notConsolidatable is why consolidation skips a candidate (policy,
	// consolidateAfter, anti-churn); "" when it may be consolidated.
	notConsolidatable string
	// moving are the pods a disruption must reschedule: active pods not
	// owned by a DaemonSet or the node itself.
	moving []*corev1.Pod
	// cost is Karpenter's disruption cost: the pods' eviction costs times
	// the node's lifetime remaining.
	cost float64

	driftKind DriftKind
	drifted   string
	unhealthy string

	command int    // index of the command taking it, -1 when none
	refused string // why consolidation found nothing for it
	// keptAlone: single-node consolidation simulated the node in this
	// pass and found nothing (repack.go pairs such nodes).
	keptAlone bool
	// receiving: a command of this Compute placed pods on the node, so it
	// is no candidate for a later one (those pods would not move with it).
	receiving bool
	// bystander: Input.Only names other nodes (an admission checks
	// another command), so no decision is made for this one.
	bystander bool
	// outlier: consolidation means to take the node before Karpenter's
	// order, so it takes no moved pods meanwhile (waste.go); waste is the
	// hourly price of the share of it its pods leave unused.
	outlier bool
	waste   float64
}

// judge runs candidate filtering on ni, as Karpenter's NewCandidate does.
func (c *computation) judge(ni *nodeInfo) {
	n, now := ni.node, c.in.Now
	for i := range n.Pods {
		if pod := n.Pods[i].Pod; pod != nil && reschedulable(pod) {
			ni.moving = append(ni.moving, pod)
		}
	}
	ni.cost = c.disruptionCost(ni)
	switch {
	case ni.pool == nil:
		ni.blocked = fmt.Sprintf("NodePool not found (NodePool=%s)", n.NodePool)
	case !n.Initialized:
		ni.blocked = "node isn't initialized"
	case n.Deleting || n.Disrupting:
		ni.blocked = "node is deleting or marked for deletion"
	case n.ReplacementFor != "":
		ni.blocked = fmt.Sprintf("node is a replacement of running disruption command %s", n.ReplacementFor)
	case n.NominatedUntil.After(now):
		ni.blocked = "node is nominated for a pending pod"
	}
	if ni.blocked == "" {
		if key, until, ok := doNotDisrupt(n.Annotations, n.CreatedAt, now); ok {
			ni.blocked = fmt.Sprintf("disruption is blocked through the %q annotation%s", key, untilText(until))
		}
	}
	ni.podBlocked = podsBlock(n.Pods, now)
	if ni.pool != nil {
		// Drift is judged only on an initialized node: until RegisterNode
		// the Node lacks its stamps and its instance type's labels, and a
		// missing label would read as RequirementsDrifted (Karpenter
		// judges the NodeClaim, whose labels are complete from launch).
		if n.Initialized {
			ni.driftKind, ni.drifted = c.driftOf(ni)
		}
		ni.unhealthy = c.unhealthyOf(ni)
		ni.notConsolidatable = c.consolidatable(ni)
	}
}

// withoutStuckPods is ni with only the pods that can leave now moving: a
// pod with an active do-not-disrupt annotation, or whose budgets never
// allow its eviction (Pod.PDBAlwaysBlocks), stays until the node's
// terminationGracePeriod ends, so a drift plans no room for it (Karpenter's
// IsCurrentlyReschedulable: room launched for it would wait that long).
// Only a node whose pods block a graceful disruption has such pods.
func (ni *nodeInfo) withoutStuckPods(now time.Time) *nodeInfo {
	if ni.podBlocked == "" {
		return ni
	}
	stuck := map[*corev1.Pod]bool{}
	for _, p := range ni.node.Pods {
		pod := p.Pod
		if pod == nil {
			continue
		}
		if _, _, ok := doNotDisrupt(pod.Annotations, podStart(pod), now); ok || p.PDBAlwaysBlocks {
			stuck[pod] = true
		}
	}
	if len(stuck) == 0 {
		return ni
	}
	out := *ni
	out.moving = slices.DeleteFunc(slices.Clone(ni.moving), func(pod *corev1.Pod) bool { return stuck[pod] })
	return &out
}

// candidate reports whether ni may be disrupted gracefully now.
func (ni *nodeInfo) candidate() bool {
	return ni.candidateInAPass() && !ni.bystander
}

// candidateInAPass is candidate, an admission's bystanders included.
func (ni *nodeInfo) candidateInAPass() bool {
	return ni.blocked == "" && ni.podBlocked == "" && ni.command < 0 && !ni.receiving
}

// consolidatable says why consolidation may not take ni ("" when it may):
// consolidation off, consolidateAfter not yet passed since the node's last
// pod event, or the node is a consolidation replacement still within its
// own consolidateAfter.
func (c *computation) consolidatable(ni *nodeInfo) string {
	np := ni.pool.spec.Pool
	after, never := np.ConsolidateAfterDuration()
	if never {
		return fmt.Sprintf("NodePool %q has consolidation disabled", np.Name)
	}
	n, now := ni.node, c.in.Now
	last := n.lastPodEvent()
	if since := now.Sub(last); since < after {
		c.recheckAt(ni, last.Add(after))
		return fmt.Sprintf("consolidateAfter %s has not passed since the last pod event (%s ago)", after, since.Round(time.Second))
	}
	if !n.LaunchedByConsolidationAt.IsZero() {
		if since := now.Sub(n.LaunchedByConsolidationAt); since < after {
			c.recheckAt(ni, n.LaunchedByConsolidationAt.Add(after))
			return fmt.Sprintf("launched by consolidation %s ago, within consolidateAfter %s", since.Round(time.Second), after)
		}
	}
	return ""
}

// lastPodEvent is when a pod last came to or left the node, or its
// creation when none did: consolidateAfter counts from it, and an empty
// node has been empty since.
func (n *Node) lastPodEvent() time.Time {
	if n.LastPodEventAt.IsZero() {
		return n.CreatedAt
	}
	return n.LastPodEventAt
}

// recheckAt notes when a node held back only by consolidateAfter may be
// consolidated, so the caller can look again then rather than at its next
// poll (Result.RecheckAt).
func (c *computation) recheckAt(ni *nodeInfo, at time.Time) {
	if ni.blocked != "" || ni.podBlocked != "" {
		return
	}
	if c.recheck.IsZero() || at.Before(c.recheck) {
		c.recheck = at
	}
}

// doNotDisrupt reads the do-not-disrupt annotations (Millwright's and
// Karpenter's) relative to start, as apisv1.DoNotDisrupt does for the drain
// and the budget check.
func doNotDisrupt(annotations map[string]string, start, now time.Time) (key string, until time.Time, ok bool) {
	return apisv1.DoNotDisrupt(annotations, start, now)
}

func untilText(until time.Time) string {
	if until.IsZero() {
		return ""
	}
	return " until " + until.UTC().Format(time.RFC3339)
}

// podsBlock says which pod blocks a graceful disruption: a do-not-disrupt
// annotation or a PodDisruptionBudget allowing no eviction.
func podsBlock(pods []Pod, now time.Time) string {
	for _, p := range pods {
		pod := p.Pod
		if pod == nil || !active(pod) {
			continue
		}
		if key, until, ok := doNotDisrupt(pod.Annotations, podStart(pod), now); ok {
			return fmt.Sprintf("pod %s has %q annotation%s", podKey(pod), key, untilText(until))
		}
	}
	for _, p := range pods {
		if p.Pod == nil || !active(p.Pod) || len(p.PDBBlocked) == 0 {
			continue
		}
		if len(p.PDBBlocked) > 1 {
			return fmt.Sprintf("eviction does not support multiple PDBs (PodDisruptionBudget(s)=%s, Pod=%s)", strings.Join(p.PDBBlocked, ","), podKey(p.Pod))
		}
		return fmt.Sprintf("pdb %s prevents pod evictions (Pod=%s)", p.PDBBlocked[0], podKey(p.Pod))
	}
	return ""
}

// podStart is when a do-not-disrupt duration on pod starts counting: its
// start, or its creation before it started.
func podStart(pod *corev1.Pod) time.Time {
	if pod.Status.StartTime != nil {
		return pod.Status.StartTime.Time
	}
	return pod.CreationTimestamp.Time
}

// active: not terminal and not being deleted.
func active(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// reschedulable: a pod a disruption must find room for elsewhere (active,
// or a StatefulSet's terminating pod; not a DaemonSet's, not a static pod),
// as Karpenter's IsReschedulable. A StatefulSet recreates a pod only once
// the old one is gone, under the same name, so the terminating one stands
// for the pod that still needs its room.
func reschedulable(pod *corev1.Pod) bool {
	if !active(pod) && !terminatingStatefulSetPod(pod) {
		return false
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "DaemonSet" || ref.Kind == "Node" {
			return false
		}
	}
	return true
}

func terminatingStatefulSetPod(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp == nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "StatefulSet" {
			return true
		}
	}
	return false
}

// evictionCost is Karpenter's cost of evicting one pod: 1, plus its
// deletion cost / 2^27 and its priority / 2^25, clamped to [-10, 10].
func evictionCost(pod *corev1.Pod) float64 {
	cost := 1.0
	if v, ok := pod.Annotations[corev1.PodDeletionCost]; ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			cost += f / math.Pow(2, 27)
		}
	}
	if pod.Spec.Priority != nil {
		cost += float64(*pod.Spec.Priority) / math.Pow(2, 25)
	}
	return min(max(cost, -10), 10)
}

// disruptionCost is the summed eviction cost of the node's pods scaled by
// the share of its lifetime (expireAfter) remaining: a node about to
// expire is cheap to disrupt.
func (c *computation) disruptionCost(ni *nodeInfo) float64 {
	cost := 0.0
	for _, p := range ni.node.Pods {
		if p.Pod != nil && active(p.Pod) {
			cost += evictionCost(p.Pod)
		}
	}
	return cost * c.lifetimeRemaining(ni)
}

func (c *computation) lifetimeRemaining(ni *nodeInfo) float64 {
	if ni.pool == nil || ni.node.CreatedAt.IsZero() {
		return 1
	}
	expire, never := ni.pool.spec.Pool.ExpireAfterDuration()
	if never || expire <= 0 {
		return 1
	}
	left := expire - c.in.Now.Sub(ni.node.CreatedAt)
	return min(max(left.Seconds()/expire.Seconds(), 0), 1)
}

// rescheduleCost is Balanced's disruption of a node: 1 for the node plus
// the positive eviction costs of the pods that move.
func (ni *nodeInfo) rescheduleCost() float64 {
	cost := 1.0
	for _, pod := range ni.moving {
		cost += max(0, evictionCost(pod))
	}
	return cost
}

// empty: nothing on the node needs to move.
func (ni *nodeInfo) empty() bool { return len(ni.moving) == 0 }

func (ni *nodeInfo) verdict() Verdict {
	v := Verdict{ClaimName: ni.node.ClaimName, NodeName: ni.node.Name, NodePool: ni.node.NodePool,
		Candidate: ni.blocked == "" && ni.podBlocked == "", Command: ni.command,
		Drifted: ni.drifted, DriftKind: ni.driftKind, Unhealthy: ni.unhealthy, Outlier: ni.outlier}
	switch {
	case ni.command >= 0:
	case ni.blocked != "":
		v.Event, v.Message = EventDisruptionBlocked, ni.blocked
	case ni.podBlocked != "":
		v.Event, v.Message = EventDisruptionBlocked, ni.podBlocked
	case ni.refused != "":
		v.Event, v.Message = EventUnconsolidatable, ni.refused
	case ni.notConsolidatable != "":
		v.Message = ni.notConsolidatable
	}
	return v
}

func (ni *nodeInfo) podKeys() []string {
	keys := make([]string, len(ni.moving))
	for i, pod := range ni.moving {
		keys[i] = podKey(pod)
	}
	slices.Sort(keys)
	return keys
}

func podKey(pod *corev1.Pod) string {
	ns := pod.Namespace
	if ns == "" {
		ns = "default"
	}
	return ns + "/" + pod.Name
}
