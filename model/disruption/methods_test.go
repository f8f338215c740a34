package disruption_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/disruption"
)

func TestEmptinessAndBudgets(t *testing.T) {
	empty := func(names ...string) []disruption.Node {
		var out []disruption.Node
		for _, n := range names {
			out = append(out, node(n, "default", "c.large"))
		}
		return out
	}
	in := func(p disruption.NodePool, nodes ...disruption.Node) disruption.Input {
		return input(pools(p), nodes...)
	}
	daily := "@daily"
	noon := "0 12 * * *"
	hour := apisv1.Duration("1h")
	window := func(nodes, schedule string) apisv1.Budget {
		return apisv1.Budget{Nodes: nodes, Schedule: &schedule, Duration: &hour}
	}
	terminating := func(kind string) podOpt {
		return func(p *corev1.Pod) {
			p.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Second)}
			p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: "db", APIVersion: "apps/v1"}}
		}
	}
	runCases(t, []computeCase{
		{
			name:   "a node whose only pod is a terminating Deployment's is empty",
			source: "emptiness_test.go: will consider a node with terminating Deployment pods as empty",
			in:     in(pool("default"), node("n1", "default", "c.large", running(pod("web", "1", "1Gi", terminating("ReplicaSet"))))),
			want:   []string{"Empty/delete [n1]"},
		},
		{
			// A StatefulSet's pod is recreated only once the old one is
			// gone, with the same name: it still needs its room.
			name:   "a node with a terminating StatefulSet pod is not empty",
			source: "emptiness_test.go: will not consider a node with a terminating StatefulSet pod as empty",
			in: input(pools(pool("default", policy(apisv1.ConsolidationPolicyWhenEmpty))),
				node("n1", "default", "c.large", running(pod("db-0", "1", "1Gi", terminating("StatefulSet"))))),
			verdicts: map[string]string{"n1": "but node is not empty"},
		},
		{
			name:   "all empty nodes of a pool go in one command",
			source: "emptiness_test.go: can delete multiple empty nodes",
			in:     in(pool("default"), empty("n1", "n2", "n3")...),
			want:   []string{"Empty/delete [n1 n2 n3]"},
		},
		{
			name:     "up to the budget",
			source:   "emptiness_test.go: Budgets / should allow 2 nodes to be deleted",
			in:       in(pool("default", budgets(budget("2"))), empty("n1", "n2", "n3")...),
			want:     []string{"Empty/delete [n1 n2]"},
			verdicts: map[string]string{"n3": "No allowed disruptions for disruption reason Empty due to blocking budget"},
		},
		{
			name:   "a percentage rounds up",
			source: "nodepool_budgets_test.go: should round up the allowed disruptions (10% of 5 nodes = 1)",
			in:     in(pool("default", budgets(budget("10%"))), empty("n1", "n2", "n3", "n4", "n5")...),
			want:   []string{"Empty/delete [n1]"},
		},
		{
			name:   "a zero budget blocks",
			source: "emptiness_test.go: Budgets / should not allow any nodes to be deleted with a budget of 0",
			in:     in(pool("default", budgets(budget("0"))), empty("n1", "n2")...),
		},
		{
			name:   "the most restrictive budget wins",
			source: "nodepool_budgets_test.go: should return the minimum of the budgets",
			in:     in(pool("default", budgets(budget("100%"), budget("1"))), empty("n1", "n2")...),
			want:   []string{"Empty/delete [n1]"},
		},
		{
			name:   "a budget for another reason does not apply",
			source: "emptiness_test.go: Budgets / should only consider budgets for the Empty reason",
			in:     in(pool("default", budgets(budget("0", apisv1.DisruptionReasonDrifted), budget("100%"))), empty("n1", "n2")...),
			want:   []string{"Empty/delete [n1 n2]"},
		},
		{
			name:   "a budget for Empty only leaves Underutilized alone",
			source: "consolidation_test.go: Budgets / should allow Underutilized disruptions when Empty is blocked",
			in: in(pool("default", budgets(budget("0", apisv1.DisruptionReasonEmpty), budget("100%"))),
				node("n1", "default", "c.large"),
				node("n2", "default", "c.xlarge", running(pods(2, "a", "1", "1Gi")...))),
			// n1 stays (Empty is blocked) and takes n2's pods.
			want:     []string{"Underutilized/delete [n2]"},
			verdicts: map[string]string{"n1": "No allowed disruptions for disruption reason Empty"},
		},
		{
			name:   "a NotReady node uses up budget",
			source: "suite_test.go: Budgets / should count NotReady nodes as disrupting",
			in: in(pool("default", budgets(budget("1"))),
				append(empty("n1", "n2"), node("n3", "default", "c.large", notReady(corev1.ConditionFalse, now.Add(-time.Minute))))...),
		},
		{
			name:   "a deleting node uses up budget",
			source: "suite_test.go: Budgets / should count deleting nodes as disrupting",
			in:     in(pool("default", budgets(budget("1"))), append(empty("n1", "n2"), node("n3", "default", "c.large", deleting))...),
		},
		{
			name:   "a held node whose budget is accounted elsewhere uses none, and is no candidate",
			source: "Millwright: admission (a pass does not charge admitted commands' candidates)",
			in: in(pool("default", budgets(budget("2"))),
				append(empty("n1", "n2"), node("n3", "default", "c.large", heldUncharged), node("n4", "default", "c.large", heldUncharged))...),
			want: []string{"Empty/delete [n1 n2]"},
		},
		{
			name:   "nodes waiting out a validation use no budget while fewer than the budget wait",
			source: "Millwright: validating-wait (the next decisions wait out their validation while admitted ones drain)",
			// Budget 2 of 5 nodes: n4 drains (charged), n5 validates
			// (waiting): one more node may be decided (2 − 1 disrupting,
			// 2 − 1 waiting).
			in: in(pool("default", budgets(budget("2"))),
				append(empty("n1", "n2", "n3"), node("n4", "default", "c.large", deleting), node("n5", "default", "c.large", validating))...),
			want: []string{"Empty/delete [n1]"},
		},
		{
			name:   "at most one budget's worth of nodes waits out validations",
			source: "Millwright: validating-wait",
			// Budget 2, nothing disrupting, but n4 and n5 already wait:
			// no new decision until one is admitted.
			in: in(pool("default", budgets(budget("2"))),
				append(empty("n1", "n2", "n3"), node("n4", "default", "c.large", validating), node("n5", "default", "c.large", validating))...),
			verdicts: map[string]string{"n1": "No allowed disruptions for disruption reason Empty"},
		},
		{
			name:   "with a lookahead, consolidation decides ahead of the budget",
			source: "Millwright: validation lookahead (the next rounds wait out their validation while earlier ones do)",
			// Budget 2, lookahead 3: n4 drains, n5 validates; 2 of the 6
			// budgeted may still be decided (one budget's worth a pass).
			in: withLookahead(in(pool("default", budgets(budget("2"))),
				append(underutilized("u1", "u2", "u3"), node("n4", "default", "c.large", deleting), node("n5", "default", "c.large", validating))...), 3),
			want: []string{"Underutilized/delete [u1 u2]"},
		},
		{
			name:   "with a lookahead, Empty decisions still stay within the budget",
			source: "Millwright: validation lookahead (an Empty command is admitted by the pass that decides it)",
			// Budget 2: n4 drains, n5 validates; one more node may go now.
			in: withLookahead(in(pool("default", budgets(budget("2"))),
				append(empty("n1", "n2", "n3"), node("n4", "default", "c.large", deleting), node("n5", "default", "c.large", validating))...), 3),
			want: []string{"Empty/delete [n1]"},
		},
		{
			name:   "with a lookahead, waiting and disrupting nodes stop at that many budgets",
			source: "Millwright: validation lookahead",
			// Budget 1, lookahead 3: one node drains and two validate.
			in: withLookahead(in(pool("default", budgets(budget("1"))),
				append(underutilized("u1", "u2"), node("n3", "default", "c.large", deleting),
					node("n4", "default", "c.large", validating), node("n5", "default", "c.large", validating))...), 3),
			verdicts: map[string]string{"u1": "No allowed disruptions for disruption reason Underutilized"},
		},
		{
			name:   "uninitialized nodes are not the budget's base",
			source: "suite_test.go: Budgets / should not count uninitialized nodes towards the total",
			in: in(pool("default", budgets(budget("50%"))),
				append(empty("n1", "n2"), node("n3", "default", "c.large", uninitialized), node("n4", "default", "c.large", uninitialized))...),
			want: []string{"Empty/delete [n1]"},
		},
		{
			name:   "a scheduled budget outside its window does not apply",
			source: "nodepool_budgets_test.go: should ignore budgets whose schedule is not active",
			in:     in(pool("default", budgets(window("0", daily))), empty("n1")...),
			want:   []string{"Empty/delete [n1]"},
		},
		{
			name:   "a scheduled budget inside its window applies",
			source: "nodepool_budgets_test.go: should consider budgets whose schedule is active",
			in:     in(pool("default", budgets(window("0", noon))), empty("n1")...),
		},
		{
			name:   "minNodes holds the pool's floor",
			source: "Millwright: minNodes",
			in:     in(pool("default", minNodes(2)), empty("n1", "n2", "n3")...),
			want:   []string{"Empty/delete [n1]"},
		},
		{
			name:   "budgets are per pool",
			source: "emptiness_test.go: Budgets / should allow all nodes from each nodePool to be deleted",
			in: input(pools(pool("a", budgets(budget("1"))), pool("b")),
				node("a1", "a", "c.large"), node("a2", "a", "c.large"), node("b1", "b", "c.large"), node("b2", "b", "c.large")),
			want: []string{"Empty/delete [a1]", "Empty/delete [b1 b2]"},
		},
		{
			name:   "the budget takes the node empty longest first",
			source: "Millwright: emptied-first (a cheap node emptied early does not wait behind dearer ones emptied later)",
			in: in(pool("default", budgets(budget("1"))),
				node("dear", "default", "c.xlarge", lastPodEvent(now.Add(-2*time.Minute))),
				node("cheap", "default", "c.large", lastPodEvent(now.Add(-10*time.Minute)))),
			want:     []string{"Empty/delete [cheap]"},
			verdicts: map[string]string{"dear": "No allowed disruptions for disruption reason Empty"},
		},
		{
			name:   "empty as long, the dearer node first",
			source: "Millwright: emptied-first, then the savings",
			in: in(pool("default", budgets(budget("1"))),
				node("cheap", "default", "c.large"), node("dear", "default", "c.xlarge")),
			want: []string{"Empty/delete [dear]"},
		},
		{
			name:   "empty and underutilized commands share one budget",
			source: "suite_test.go: Budgets / disrupting nodes count against every reason",
			in: in(pool("default", budgets(budget("1"))),
				node("n1", "default", "c.large"),
				node("n2", "default", "c.xlarge", running(pods(2, "a", "1", "1Gi")...))),
			want: []string{"Empty/delete [n1]"},
		},
	})
}

func TestDrift(t *testing.T) {
	base := pool("default")
	class := disruption.NodeClass{Name: "default", Hash: "class-1", AMIs: []string{"ami-b"}, Subnets: []string{"subnet-1", "subnet-2"}, SecurityGroups: []string{"sg-1"}}
	withClass := pool("default", nodeClass(class))
	current := stamped(base.NodePoolHash, "class-1")
	oldVersion := func(n *disruption.Node) { n.NodePoolHashVersion = "v0" }
	in := func(p disruption.NodePool, nodes ...disruption.Node) disruption.Input {
		return input(pools(p), nodes...)
	}
	busy := running(pods(2, "a", "1", "1Gi")...)
	runCases(t, []computeCase{
		{
			name:     "a changed NodePool template drifts its nodes",
			source:   "staticdrift_test.go: should detect drift when the NodePool hash changes",
			in:       in(base, node("n1", "default", "c.large", busy, stamped("old", ""))),
			want:     []string{"Drifted/replace [n1] → [c.small/on-demand]"},
			verdicts: map[string]string{"n1": ""},
		},
		{
			name:   "another hash version is not drift",
			source: "staticdrift_test.go: should not detect drift when the hash versions differ",
			in:     in(base, node("n1", "default", "c.large", busy, stamped("old", ""), oldVersion, consolidationOff)),
		},
		{
			name:   "an unstamped node is not drifted",
			source: "staticdrift_test.go: should not detect drift when the NodeClaim has no hash",
			in:     in(base, node("n1", "default", "c.large", busy, consolidationOff)),
		},
		{
			name:   "a changed EC2NodeClass drifts",
			source: "karpenter-provider-aws drift_test.go: should return drifted if the EC2NodeClass hash changed",
			in:     in(withClass, node("n1", "default", "c.large", busy, stamped(base.NodePoolHash, "class-0"))),
			want:   []string{"Drifted/replace [n1] → [c.small/on-demand]"},
		},
		{
			name:   "an AMI no longer resolved drifts",
			source: "karpenter-provider-aws drift_test.go: should return drifted if the AMI is not valid",
			in:     in(withClass, node("n1", "default", "c.large", busy, current, launchedWith("ami-a", "subnet-1", "sg-1"))),
			want:   []string{"Drifted/replace [n1] → [c.small/on-demand]"},
		},
		{
			name:   "a subnet no longer selected drifts",
			source: "karpenter-provider-aws drift_test.go: should return drifted if the subnet is not valid",
			in:     in(withClass, node("n1", "default", "c.large", busy, current, launchedWith("ami-b", "subnet-9", "sg-1"))),
			want:   []string{"Drifted/replace [n1] → [c.small/on-demand]"},
		},
		{
			name:   "other security groups drift",
			source: "karpenter-provider-aws drift_test.go: should return drifted if the security groups are not valid",
			in:     in(withClass, node("n1", "default", "c.large", busy, current, launchedWith("ami-b", "subnet-1", "sg-1", "sg-2"))),
			want:   []string{"Drifted/replace [n1] → [c.small/on-demand]"},
		},
		{
			name:   "nothing changed: no drift",
			source: "karpenter-provider-aws drift_test.go: should not return drifted if nothing changed",
			in:     in(withClass, node("n1", "default", "c.large", busy, current, launchedWith("ami-b", "subnet-2", "sg-1"), consolidationOff)),
		},
		{
			name:   "labels that no longer meet the requirements drift",
			source: "nodeclaim/disruption/drift_test.go: should detect drift when the NodePool requirements change",
			in: in(pool("default", requirement(apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, apisv1.CapacityTypeSpot), spotLaunches),
				node("n1", "default", "c.large", busy)),
			want: []string{"Drifted/replace [n1] → [c.small/spot]"},
		},
		{
			name:   "an empty drifted node is deleted",
			source: "drift_test.go: should disrupt empty drifted nodes",
			in:     in(base, node("n1", "default", "c.large", stamped("old", ""), consolidationOff)),
			want:   []string{"Drifted/delete [n1]"},
		},
		{
			name:   "drift stays within the Drifted budget, empty nodes first",
			source: "drift_test.go: Budgets / should only allow 1 node to be disrupted",
			in: in(pool("default", budgets(budget("1", apisv1.DisruptionReasonDrifted), budget("100%")), consolidateAfter("Never")),
				node("n1", "default", "c.large", busy, stamped("old", "")),
				node("n2", "default", "c.large", stamped("old", ""))),
			want: []string{"Drifted/delete [n2]"},
		},
		{
			name:   "drift takes the earliest drifted non-empty node first",
			source: "drift_test.go: should drift one non-empty node at a time, starting with the earliest drift",
			in: in(pool("default", budgets(budget("1", apisv1.DisruptionReasonDrifted), budget("100%")), consolidateAfter("Never")),
				node("n1", "default", "c.large", busy, stamped("old", ""), driftedSince(now.Add(-time.Minute))),
				node("n2", "default", "c.large", running(pods(2, "b", "1", "1Gi")...), stamped("old", ""), driftedSince(now.Add(-time.Hour)))),
			// n2's pods fit on n1; by name n1 would go first.
			want: []string{"Drifted/delete [n2]"},
		},
		{
			name:   "a node found drifted before takes its turn before one found now",
			source: "drift_test.go: should drift one non-empty node at a time, starting with the earliest drift (the other found drifted by this pass)",
			in: in(pool("default", budgets(budget("1", apisv1.DisruptionReasonDrifted), budget("100%")), consolidateAfter("Never")),
				node("n1", "default", "c.large", busy, stamped("old", "")),
				node("n2", "default", "c.large", running(pods(2, "b", "1", "1Gi")...), stamped("old", ""), driftedSince(now.Add(-time.Minute)))),
			want: []string{"Drifted/delete [n2]"},
		},
		{
			name:   "an empty drifted node still goes before an earlier drifted busy one",
			source: "drift_test.go: should drift empty nodes before non-empty nodes",
			in: in(pool("default", budgets(budget("1", apisv1.DisruptionReasonDrifted), budget("100%")), consolidateAfter("Never")),
				node("n1", "default", "c.large", busy, stamped("old", ""), driftedSince(now.Add(-time.Hour))),
				node("n2", "default", "c.large", stamped("old", ""), driftedSince(now.Add(-time.Minute)))),
			want: []string{"Drifted/delete [n2]"},
		},
		{
			name:     "a do-not-disrupt pod holds a drifted node",
			source:   "drift_test.go: should not disrupt nodes with do-not-disrupt pods",
			in:       in(pool("default", consolidateAfter("Never")), node("n1", "default", "c.large", running(pod("a", "1", "1Gi", podAnnotated(apisv1.AnnotationKarpenterDoNotDisrupt, "true"))), stamped("old", ""))),
			verdicts: map[string]string{"n1": "do-not-disrupt"},
		},
		{
			name:   "under a terminationGracePeriod blocking pods do not hold drift, and get no room launched",
			source: "drift_test.go: should not create replacements for drifted nodes that have pods with the karpenter.sh/do-not-disrupt annotation set to true when the NodePool's TerminationGracePeriod is not nil",
			in: in(pool("default", consolidateAfter("Never"), terminationGracePeriod("1h")),
				node("n1", "default", "c.large", running(pod("a", "1", "1Gi", podAnnotated(apisv1.AnnotationKarpenterDoNotDisrupt, "true"))), stamped("old", ""))),
			// The pod leaves only when the grace period ends; room
			// launched for it now would wait that long.
			want: []string{"Drifted/delete [n1]"},
		},
		{
			name:   "the pods that can leave still get their room",
			source: "helpers.go SimulateScheduling: only pods that are not currently reschedulable are left out",
			in: in(pool("default", consolidateAfter("Never"), terminationGracePeriod("1h")),
				node("n1", "default", "c.large", running(pod("a", "1", "1Gi", podAnnotated(apisv1.AnnotationKarpenterDoNotDisrupt, "true")), pod("b", "1", "1Gi")), stamped("old", ""))),
			want: []string{"Drifted/replace [n1] → [c.small/on-demand]"},
		},
		{
			name:   "a budget that never allows an eviction: no room launched",
			source: "drift_test.go: should not create replacements for drifted nodes that have pods with the blocking PDBs when the NodePool's TerminationGracePeriod is not nil",
			in: in(pool("default", consolidateAfter("Never"), terminationGracePeriod("1h")),
				node("n1", "default", "c.large", pdbBlockedAlways(pod("a", "1", "1Gi"), "default/web"), stamped("old", ""))),
			want: []string{"Drifted/delete [n1]"},
		},
		{
			name:   "a budget that allows none now, some later: room launched",
			source: "pdb.go IsCurrentlyReschedulable: only fully blocking PDBs leave a pod out",
			in: in(pool("default", consolidateAfter("Never"), terminationGracePeriod("1h")),
				node("n1", "default", "c.large", pdbBlocked(pod("a", "1", "1Gi"), "default/web"), stamped("old", ""))),
			want: []string{"Drifted/replace [n1] → [c.small/on-demand]"},
		},
	})
	// A Node between its kubelet's registration and RegisterNode lacks the
	// instance type's labels (instance-category, …) that RegisterNode adds:
	// judged then, every new node of a pool requiring one of them looked
	// RequirementsDrifted for a moment (178 drift notices in a scale run
	// where nothing drifted).
	registering := disruption.Compute(in(pool("default", requirement(apisv1.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c", "m")),
		node("n1", "default", "c.large", busy, uninitialized, func(n *disruption.Node) { delete(n.Labels, apisv1.LabelInstanceCategory) })))
	if v := registering.Verdicts[0]; v.Drifted != "" || v.DriftKind != "" {
		t.Errorf("a node not yet registered is drifted %s: %q", v.DriftKind, v.Drifted)
	}
	r := disruption.Compute(in(withClass, node("n1", "default", "c.large", busy, current, launchedWith("ami-a", "subnet-1", "sg-1"))))
	if got, want := r.Commands[0].Message, "Drifted: AMI ami-a → ami-b"; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
	if got := r.Verdicts[0].DriftKind; got != disruption.DriftAMI {
		t.Errorf("drift kind = %q, want %q", got, disruption.DriftAMI)
	}
}

// consolidationOff keeps a node out of consolidation by a recent pod event
// (pools in these tests consolidate after 0s, so give them a window).
func consolidationOff(n *disruption.Node) {
	n.NominatedUntil = time.Time{}
	n.LastPodEventAt = now.Add(time.Hour)
}

func TestRepair(t *testing.T) {
	sick := func(name string, since time.Duration) disruption.Node {
		return node(name, "default", "c.large", running(pod(name+"-a", "1", "1Gi")), notReady(corev1.ConditionUnknown, now.Add(-since)), consolidationOff)
	}
	healthy := func(name string) disruption.Node {
		return node(name, "default", "c.large", running(pods(6, name, "1", "1Gi")...), consolidationOff)
	}
	// faulty is a Ready node whose monitoring agent has reported
	// condition with status since.
	faulty := func(name string, condition corev1.NodeConditionType, status corev1.ConditionStatus, since time.Duration) disruption.Node {
		return node(name, "default", "c.large", running(pod(name+"-a", "1", "1Gi")), consolidationOff, func(n *disruption.Node) {
			n.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
				{Type: condition, Status: status, LastTransitionTime: metav1.NewTime(now.Add(-since))}}
		})
	}
	fleet := func(nodes ...disruption.Node) disruption.Input {
		return input(pools(pool("default")), append(nodes, healthy("n2"), healthy("n3"), healthy("n4"), healthy("n5"))...)
	}
	runCases(t, []computeCase{
		{
			name:   "a monitoring agent's condition past its toleration is repaired",
			source: "node/health/suite_test.go: should delete nodes that are unhealthy by the cloud provider (KernelReady=False, 30m)",
			in:     fleet(faulty("n1", "KernelReady", corev1.ConditionFalse, 31*time.Minute)),
			want:   []string{"Unhealthy/delete [n1]"},
		},
		{
			name:   "accelerated hardware is tolerated 10 minutes",
			source: "karpenter-provider-aws RepairPolicies: AcceleratedHardwareReady=False, 10m",
			in:     fleet(faulty("n1", "AcceleratedHardwareReady", corev1.ConditionFalse, 11*time.Minute)),
			want:   []string{"Unhealthy/delete [n1]"},
		},
		{
			name:   "within its toleration it is left",
			source: "node/health/suite_test.go: should not delete node when health duration is not reached",
			in:     fleet(faulty("n1", "StorageReady", corev1.ConditionFalse, 20*time.Minute)),
		},
		{
			name:   "a status the policy does not name is left",
			source: "node/health/suite_test.go: should not delete node when health status does not match cloud provider passed in value",
			in:     fleet(faulty("n1", "NetworkingReady", corev1.ConditionUnknown, time.Hour)),
		},
		{
			name:   "a condition no policy names is left",
			source: "node/health/suite_test.go: should not delete node when unhealthy type does not match cloud provider passed in value",
			in:     fleet(faulty("n1", "DiskPressure", corev1.ConditionTrue, time.Hour)),
		},
		{
			name:   "NotReady past the toleration is replaced",
			source: "node/health/suite_test.go: should delete nodes that are unhealthy by the cloud provider",
			in:     input(pools(pool("default")), sick("n1", 31*time.Minute), healthy("n2"), healthy("n3"), healthy("n4"), healthy("n5")),
			want:   []string{"Unhealthy/delete [n1]"},
		},
		{
			name:     "NotReady within the toleration is left",
			source:   "node/health/suite_test.go: should not delete node when health duration is not reached",
			in:       input(pools(pool("default")), sick("n1", 29*time.Minute), healthy("n2")),
			verdicts: map[string]string{"n1": ""},
		},
		{
			name:   "a node with nowhere for its pods is replaced",
			source: "node/health/suite_test.go: should delete nodes that are unhealthy by the cloud provider (Ready=Unknown)",
			in:     input(pools(pool("default")), sick("n1", time.Hour), healthy("n2"), healthy("n3"), healthy("n4"), healthy("n5"), healthy("n6"), healthy("n7")),
			want:   []string{"Unhealthy/delete [n1]"},
		},
		{
			name:     "more than 20% of the pool unhealthy: nothing is repaired",
			source:   "node/health/suite_test.go: should ignore unhealthy nodes if more then 20% of the nodes are unhealthy in a nodepool",
			in:       input(pools(pool("default")), sick("n1", time.Hour), sick("n2", time.Hour), healthy("n3"), healthy("n4"), healthy("n5")),
			verdicts: map[string]string{"n1": "more than 20% nodes are unhealthy in the nodepool"},
		},
		{
			name:   "a shorter configured toleration repairs sooner",
			source: "node/health/suite_test.go: should not delete node when health duration is not reached (a configured toleration)",
			in: func() disruption.Input {
				in := input(pools(pool("default")), sick("n1", 6*time.Minute), healthy("n2"), healthy("n3"), healthy("n4"), healthy("n5"))
				in.Options.RepairToleration = 5 * time.Minute
				return in
			}(),
			want: []string{"Unhealthy/delete [n1]"},
		},
		{
			name:   "Ready=False counts like Unknown",
			source: "node/health/suite_test.go: should delete nodes that are unhealthy by the cloud provider (Ready=False)",
			in: input(pools(pool("default")),
				node("n1", "default", "c.large", running(pod("n1-a", "1", "1Gi")), notReady(corev1.ConditionFalse, now.Add(-31*time.Minute)), consolidationOff),
				healthy("n2"), healthy("n3"), healthy("n4"), healthy("n5")),
			want: []string{"Unhealthy/delete [n1]"},
		},
		{
			name:     "a node never initialized is not repaired",
			source:   "Millwright: a node never initialized is the launch's (registration timeout), not repair's",
			in:       input(pools(pool("default")), node("n1", "default", "c.large", notReady(corev1.ConditionUnknown, now.Add(-time.Hour)), func(n *disruption.Node) { n.Initialized = false }), healthy("n2")),
			verdicts: map[string]string{"n1": "node isn't initialized"},
		},
		{
			name:   "do-not-disrupt does not hold a broken node",
			source: "node/health/suite_test.go: should ignore do-not-disrupt on a node",
			in: input(pools(pool("default")),
				node("n1", "default", "c.large", annotated(apisv1.AnnotationKarpenterDoNotDisrupt, "true"), notReady(corev1.ConditionFalse, now.Add(-time.Hour))),
				healthy("n2"), healthy("n3"), healthy("n4"), healthy("n5")),
			want: []string{"Unhealthy/delete [n1]"},
		},
	})
}

func TestDisruptionCostOrder(t *testing.T) {
	// n1 and n2 could each go onto n3; the budget allows one.
	important := pod("a", "1", "1Gi", priority(1_000_000_000))
	cases := []computeCase{
		{
			name:   "a high-priority pod makes its node costlier to disrupt",
			source: "consolidation_test.go: should consider pod priority in disruption cost",
			in: input(pools(pool("default", budgets(budget("1")))),
				node("n1", "default", "c.medium", running(important)),
				node("n2", "default", "c.medium", running(pod("b", "1", "1Gi"))),
				node("n3", "default", "c.large", running(pods(2, "c", "1", "1Gi")...), consolidationOff)),
			want: []string{"Underutilized/delete [n2]"},
		},
		{
			name:   "a pod deletion cost makes its node costlier to disrupt",
			source: "consolidation_test.go: should consider pod deletion cost in disruption cost",
			in: input(pools(pool("default", budgets(budget("1")))),
				node("n1", "default", "c.medium", running(pod("a", "1", "1Gi", podAnnotated(corev1.PodDeletionCost, "1000000000")))),
				node("n2", "default", "c.medium", running(pod("b", "1", "1Gi"))),
				node("n3", "default", "c.large", running(pods(2, "c", "1", "1Gi")...), consolidationOff)),
			want: []string{"Underutilized/delete [n2]"},
		},
		{
			name:   "a node near expiry is cheaper to disrupt",
			source: "consolidation_test.go: should consider node lifetime remaining in disruption cost",
			in: input(pools(pool("default", budgets(budget("1")))),
				node("n1", "default", "c.medium", running(pod("a", "1", "1Gi"))),
				node("n2", "default", "c.medium", running(pod("b", "1", "1Gi")), createdAt(now.Add(-700*time.Hour))),
				node("n3", "default", "c.large", running(pods(2, "c", "1", "1Gi")...), consolidationOff)),
			want: []string{"Underutilized/delete [n2]"},
		},
	}
	runCases(t, cases)
}

func withLookahead(in disruption.Input, budgets int) disruption.Input {
	in.Options.ValidationLookahead = budgets
	return in
}

// underutilized are small nodes of one small pod each, beside a protected
// node with room for all their pods (so each may be deleted).
func underutilized(names ...string) []disruption.Node {
	out := []disruption.Node{node("room", "default", "c.xlarge", annotated(apisv1.AnnotationDoNotDisrupt, "true"))}
	for _, name := range names {
		out = append(out, node(name, "default", "c.small", running(pod(name+"-pod", "250m", "256Mi"))))
	}
	return out
}
