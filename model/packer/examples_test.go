package packer_test

import (
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// Reference prices for the example workloads (README of the issue):
// Karpenter v1.15 plans diverse-1000 at $12.5–13.3/h and generic-5000 at
// $664.90/h; the LP bounds are $2.71/h and $68.72/h, and requests-only plans
// must stay within 2× the bound.
func TestExampleWorkloads(t *testing.T) {
	tests := []struct {
		file     string
		lpBound  float64
		maxPrice float64
	}{
		{"diverse-1000.json", 2.71, 12.5},
		{"generic-5000.json", 68.72, 2 * 68.72},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			w := exampleWorkload(t, tc.file)
			in, err := w.PackerInput()
			if err != nil {
				t.Fatal(err)
			}
			bound, err := packer.LowerBound(in)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(bound-tc.lpBound) > 0.01 {
				t.Errorf("LowerBound = %.4f, want %.2f", bound, tc.lpBound)
			}
			r, err := packer.Pack(in)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Unschedulable) > 0 {
				t.Errorf("%d pods unschedulable, first: %s: %s", len(r.Unschedulable), r.Unschedulable[0].Pod.Name, r.Unschedulable[0].Reason)
			}
			if got := r.TotalPrice(); got > tc.maxPrice {
				t.Errorf("total price $%.4f/h, want at most $%.2f/h", got, tc.maxPrice)
			}
			if err := packer.Verify(in, r); err != nil {
				t.Errorf("plan fails verification:\n%v", err)
			}
			checkStrictSkew(t, in, r)
			t.Logf("%s: %d nodes, $%.4f/h (%.2f× the LP bound $%.2f/h)", tc.file, len(r.NewNodes), r.TotalPrice(), r.TotalPrice()/bound, bound)
		})
	}
}

// TestDeterministic packs the same workload twice and expects the same plan.
func TestDeterministic(t *testing.T) {
	w := exampleWorkload(t, "diverse-1000.json")
	in, err := w.PackerInput()
	if err != nil {
		t.Fatal(err)
	}
	a, err := packer.Pack(in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := packer.Pack(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.NewNodes) != len(b.NewNodes) {
		t.Fatalf("%d vs %d nodes", len(a.NewNodes), len(b.NewNodes))
	}
	for i := range a.NewNodes {
		x, y := a.NewNodes[i], b.NewNodes[i]
		if x.InstanceType != y.InstanceType || x.Zone != y.Zone || x.CapacityType != y.CapacityType || len(x.Pods) != len(y.Pods) {
			t.Fatalf("node %d differs: %s/%s/%s/%d vs %s/%s/%s/%d", i, x.InstanceType, x.Zone, x.CapacityType, len(x.Pods), y.InstanceType, y.Zone, y.CapacityType, len(y.Pods))
		}
		for j := range x.Pods {
			if x.Pods[j] != y.Pods[j] {
				t.Fatalf("node %d pod %d differs: %s vs %s", i, j, x.Pods[j].Name, y.Pods[j].Name)
			}
		}
	}
}

// checkStrictSkew checks the stronger reading of maxSkew on plans of new
// nodes only: for every DoNotSchedule constraint, over every zone any node
// uses (or every node, for hostname), the most and least loaded domains
// differ by at most maxSkew, counting every pod the selector matches.
func checkStrictSkew(t *testing.T, in packer.Input, r packer.Result) {
	t.Helper()
	type placed struct {
		pod        *corev1.Pod
		zone, host string
	}
	var all []placed
	zones := map[string]bool{}
	for _, n := range r.NewNodes {
		zones[n.Zone] = true
		for _, p := range n.Pods {
			all = append(all, placed{p, n.Zone, n.Name})
		}
	}
	checked := map[string]bool{}
	for _, p := range in.Pods {
		for _, tsc := range p.Spec.TopologySpreadConstraints {
			if tsc.WhenUnsatisfiable != corev1.DoNotSchedule {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(tsc.LabelSelector)
			if err != nil {
				t.Fatal(err)
			}
			id := tsc.TopologyKey + "|" + sel.String()
			if checked[id] {
				continue
			}
			checked[id] = true
			counts := map[string]int{}
			domains := map[string]bool{}
			for _, n := range r.NewNodes {
				if tsc.TopologyKey == scheduling.LabelHostname {
					domains[n.Name] = true
				}
			}
			for z := range zones {
				if tsc.TopologyKey == scheduling.LabelZone {
					domains[z] = true
				}
			}
			for _, x := range all {
				if x.pod.Namespace == p.Namespace && sel.Matches(labels.Set(x.pod.Labels)) {
					if tsc.TopologyKey == scheduling.LabelHostname {
						counts[x.host]++
					} else {
						counts[x.zone]++
					}
				}
			}
			lo, hi := math.MaxInt, 0
			for d := range domains {
				lo, hi = min(lo, counts[d]), max(hi, counts[d])
			}
			if hi-lo > int(tsc.MaxSkew) {
				t.Errorf("constraint %s: domains range from %d to %d pods, maxSkew %d", id, lo, hi, tsc.MaxSkew)
			}
		}
	}
}
