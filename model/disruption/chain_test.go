package disruption_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/disruption"
	"github.com/millwright/millwright/model/packer"
)

// TestNoReplaceChains plays Compute against its own results: every command
// is carried out (replacements launched at their most expensive allowed
// option, the worst case for churn; the pods rescheduled first-fit), the
// clock moves past consolidateAfter, and Compute runs again. A node that a
// consolidation launched must never be replaced again by consolidation,
// and the cluster must settle.
func TestNoReplaceChains(t *testing.T) {
	p := pool("default", launchTypes(append(types(), manySpotTypes(20)...)), spotLaunches, consolidateAfter("1m"))
	clusters := map[string][]disruption.Node{
		"mixed": {
			node("od-1", "default", "c.xlarge", running(pods(3, "a", "1", "1Gi")...)),
			node("od-2", "default", "c.xlarge", running(pods(2, "b", "2", "2Gi")...)),
			node("od-3", "default", "c.large", running(pods(3, "c", "500m", "1Gi")...)),
			node("spot-1", "default", "s.19", running(pod("d", "1", "1Gi"))),
			node("spot-2", "default", "s.18", running(pod("e", "2", "1Gi"))),
			node("big", "default", "c.xlarge", running(pods(14, "f", "1", "2Gi")...)),
		},
		"a lone spot node":                       {node("spot-1", "default", "s.19", running(pod("a", "1", "1Gi")))},
		"a lone on-demand node with a small pod": {node("od-1", "default", "c.xlarge", running(pod("a", "500m", "1Gi")))},
		"many small on-demand nodes": {
			node("od-1", "default", "c.medium", running(pod("a", "1", "1Gi"))),
			node("od-2", "default", "c.medium", running(pod("b", "1", "1Gi"))),
			node("od-3", "default", "c.medium", running(pod("c", "1", "1Gi"))),
			node("od-4", "default", "c.large", running(pod("d", "3", "1Gi"))),
		},
	}
	for name, nodes := range clusters {
		t.Run(name, func(t *testing.T) {
			in := input(pools(p), nodes...)
			launched := map[string]bool{} // nodes a consolidation launched
			chains, rounds := 0, 0
			for ; rounds < 10; rounds++ {
				r := disruption.Compute(in)
				if len(r.Commands) == 0 {
					break
				}
				for _, cmd := range r.Commands {
					t.Logf("round %d: %s", rounds, cmd.Message)
					for _, c := range cmd.Candidates {
						if launched[c.NodeName] && cmd.Kind == disruption.KindReplace {
							chains++
							t.Errorf("round %d: %s replaces %s, which consolidation launched", rounds, cmd.Message, c.NodeName)
						}
					}
				}
				in = carryOut(t, in, r, rounds, launched)
				in.Now = in.Now.Add(2 * time.Minute)
			}
			if rounds == 10 {
				t.Errorf("still disrupting after %d rounds", rounds)
			}
			if chains != 0 {
				t.Errorf("%d replace chain(s)", chains)
			}
			t.Logf("settled after %d round(s) with %d node(s)", rounds, len(in.Nodes))
		})
	}
}

// carryOut applies r to in: candidates leave, replacements join with their
// planned pods — launched, as EC2 may, at the most expensive spot option
// (price-capacity-optimized) or the cheapest on-demand one (lowest-price) —
// and every other moved pod is scheduled first-fit.
func carryOut(t *testing.T, in disruption.Input, r disruption.Result, round int, launched map[string]bool) disruption.Input {
	t.Helper()
	nodes, moved := withoutCandidates(in.Nodes, r)
	onReplacement := map[*corev1.Pod]bool{}
	for i, cmd := range r.Commands {
		for j, plan := range cmd.Replacements {
			worst := plan.Options[0]
			if worst.CapacityType == apisv1.CapacityTypeSpot {
				worst = plan.Options[len(plan.Options)-1]
			}
			name := fmt.Sprintf("r%d-%d-%d", round, i, j)
			n := node(name, plan.NodePool, worst.InstanceType, launchedByConsolidation(in.Now), createdAt(in.Now))
			if worst.CapacityType == apisv1.CapacityTypeSpot {
				spot(&n)
			} else {
				n.CapacityType, n.Labels["millwright.dev/capacity-type"] = worst.CapacityType, worst.CapacityType
			}
			n.Price = worst.Price
			n.CreatedAt, n.LastPodEventAt = in.Now, in.Now
			for _, pod := range plan.Pods {
				running(pod.DeepCopy())(&n)
				onReplacement[pod] = true
			}
			launched[name] = true
			nodes = append(nodes, n)
		}
	}
	var rest []*corev1.Pod
	for _, pod := range moved {
		if !onReplacement[pod] {
			rest = append(rest, pod)
		}
	}
	if len(rest) > 0 {
		var capacity []packer.Node
		for _, n := range nodes {
			avail := n.Allocatable
			for _, p := range n.Pods {
				avail = avail.Sub(requests(p.Pod))
			}
			capacity = append(capacity, packer.Node{Name: n.Name, Labels: n.Labels, Available: avail})
		}
		res, err := packer.Pack(packer.Input{Pods: rest, Nodes: capacity})
		if err != nil || len(res.Unschedulable) > 0 {
			t.Fatalf("round %d: moved pods do not fit: %v %v", round, err, res.Unschedulable)
		}
		for _, pl := range res.Placements {
			for i := range nodes {
				if nodes[i].Name == pl.Node {
					running(pl.Pod.DeepCopy())(&nodes[i])
					nodes[i].LastPodEventAt = in.Now
				}
			}
		}
	}
	in.Nodes = nodes
	return in
}

// withoutCandidates is nodes less every candidate of r's commands, and the
// pods those candidates ran.
func withoutCandidates(nodes []disruption.Node, r disruption.Result) ([]disruption.Node, []*corev1.Pod) {
	gone := map[string]bool{}
	for _, cmd := range r.Commands {
		for _, c := range cmd.Candidates {
			gone[c.NodeName] = true
		}
	}
	var kept []disruption.Node
	var moved []*corev1.Pod
	for _, n := range nodes {
		if !gone[n.Name] {
			kept = append(kept, n)
			continue
		}
		for _, p := range n.Pods {
			moved = append(moved, p.Pod)
		}
	}
	return kept, moved
}
