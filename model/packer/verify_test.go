package packer_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// planned builds a NodePlan for a launch of it in zone/ct from pool, with
// the labels such a node carries.
func planned(name string, pool packer.NodePool, it *catalog.InstanceType, zone, ct string, price float64, pods ...*corev1.Pod) packer.NodePlan {
	labels := map[string]string{scheduling.LabelZone: zone, scheduling.LabelCapacityType: ct, scheduling.LabelNodePool: pool.Name}
	for k, v := range it.Labels {
		labels[k] = v
	}
	return packer.NodePlan{Name: name, NodePool: pool.Name, InstanceType: it.Name, Zone: zone, CapacityType: ct, Price: price,
		Labels: scheduling.WithAliases(labels), Taints: pool.Taints, Pods: pods}
}

func TestVerifyCatchesViolations(t *testing.T) {
	cat := smallCatalog()
	small, arm := cat[0], cat[2] // m.small (amd64, 2 cpu), a.small (arm64)
	def := nodePool("default", cat)
	tainted := nodePool("tainted", cat, withTaint("dedicated", "x"))
	limited := nodePool("limited", cat, withLimit("cpu", "2"))
	p1, p2, p3 := pod("p1", "1", "1Gi"), pod("p2", "1", "1Gi"), pod("p3", "1", "1Gi")
	armOnly := pod("arm", "1", "1Gi", withNodeSelector("kubernetes.io/arch", "arm64"))
	anti := pods(2, "anti", "100m", "100Mi", withLabel("app", "x"), withAntiAffinity(scheduling.LabelHostname, map[string]string{"app": "x"}))
	spread := pods(3, "spread", "100m", "100Mi", withLabel("app", "s"), withSpread(scheduling.LabelZone, 1, corev1.DoNotSchedule, map[string]string{"app": "s"}))
	tests := []struct {
		name string
		in   packer.Input
		r    packer.Result
		want string
	}{
		{"valid plan", packer.Input{NodePools: []packer.NodePool{def}, Pods: []*corev1.Pod{p1, p2}},
			packer.Result{NewNodes: []packer.NodePlan{planned("n1", def, small, "zone-a", "spot", 0.04, p1, p2)}}, ""},
		{"pod missing", packer.Input{NodePools: []packer.NodePool{def}, Pods: []*corev1.Pod{p1, p2}},
			packer.Result{NewNodes: []packer.NodePlan{planned("n1", def, small, "zone-a", "spot", 0.04, p1)}}, "pod default/p2 appears 0 times"},
		{"pod twice", packer.Input{NodePools: []packer.NodePool{def}, Pods: []*corev1.Pod{p1}},
			packer.Result{NewNodes: []packer.NodePlan{planned("n1", def, small, "zone-a", "spot", 0.04, p1)}, Unschedulable: []packer.Unschedulable{{Pod: p1, Reason: "x"}}}, "appears 2 times"},
		{"unschedulable without reason", packer.Input{NodePools: []packer.NodePool{def}, Pods: []*corev1.Pod{p1}},
			packer.Result{Unschedulable: []packer.Unschedulable{{Pod: p1}}}, "has no reason"},
		{"over allocatable", packer.Input{NodePools: []packer.NodePool{def}, Pods: []*corev1.Pod{p1, p2, p3}},
			packer.Result{NewNodes: []packer.NodePlan{planned("n1", def, small, "zone-a", "spot", 0.04, p1, p2, p3)}}, "more than allocatable"},
		{"daemonset pushes over allocatable", packer.Input{NodePools: []packer.NodePool{def}, Pods: []*corev1.Pod{p1, p2}, DaemonSetPods: []*corev1.Pod{pod("ds", "100m", "10Mi")}},
			packer.Result{NewNodes: []packer.NodePlan{planned("n1", def, small, "zone-a", "spot", 0.04, p1, p2)}}, "pods and daemonsets request"},
		{"wrong price", packer.Input{NodePools: []packer.NodePool{def}, Pods: []*corev1.Pod{p1}},
			packer.Result{NewNodes: []packer.NodePlan{planned("n1", def, small, "zone-a", "spot", 0.01, p1)}}, "price 0.01, but the offering costs 0.04"},
		{"on-demand while spot is cheaper", packer.Input{NodePools: []packer.NodePool{def}, Pods: []*corev1.Pod{p1}},
			packer.Result{NewNodes: []packer.NodePlan{planned("n1", def, small, "zone-a", "on-demand", 0.10, p1)}}, "although spot costs 0.04"},
		{"unknown zone", packer.Input{NodePools: []packer.NodePool{def}, Pods: []*corev1.Pod{p1}},
			packer.Result{NewNodes: []packer.NodePlan{planned("n1", def, small, "zone-x", "spot", 0.04, p1)}}, "has no available spot offering in zone-x"},
		{"nodeSelector not met", packer.Input{NodePools: []packer.NodePool{def}, Pods: []*corev1.Pod{armOnly}},
			packer.Result{NewNodes: []packer.NodePlan{planned("n1", def, small, "zone-a", "spot", 0.04, armOnly)}}, "does not match the node's labels"},
		{"taint not tolerated", packer.Input{NodePools: []packer.NodePool{tainted}, Pods: []*corev1.Pod{p1}},
			packer.Result{NewNodes: []packer.NodePlan{planned("n1", tainted, arm, "zone-a", "spot", 0.03, p1)}}, "untolerated taint dedicated=x:NoSchedule"},
		{"limit exceeded", packer.Input{NodePools: []packer.NodePool{limited}, Pods: []*corev1.Pod{p1, p2}},
			packer.Result{NewNodes: []packer.NodePlan{planned("n1", limited, arm, "zone-a", "spot", 0.03, p1), planned("n2", limited, arm, "zone-b", "spot", 0.03, p2)}}, "cpu capacity 4000 exceeds its limit 2"},
		{"anti-affinity", packer.Input{NodePools: []packer.NodePool{def}, Pods: anti},
			packer.Result{NewNodes: []packer.NodePlan{planned("n1", def, arm, "zone-a", "spot", 0.03, anti...)}}, "anti-affinity (kubernetes.io/hostname, app=x) violated"},
		{"zone spread skew", packer.Input{NodePools: []packer.NodePool{def}, Pods: spread},
			packer.Result{NewNodes: []packer.NodePlan{planned("n1", def, arm, "zone-a", "spot", 0.03, spread[0], spread[1]), planned("n2", def, arm, "zone-b", "spot", 0.03, spread[2])}}, "2 in its domain zone-a vs 0 in zone-c"},
		{"placement on unknown node", packer.Input{NodePools: []packer.NodePool{def}, Pods: []*corev1.Pod{p1}},
			packer.Result{Placements: []packer.Placement{{Pod: p1, Node: "ghost"}}}, `placed on unknown node "ghost"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := packer.Verify(tc.in, tc.r)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected violation: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("violation %q not caught", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}
