package packer_test

import (
	"math"
	"testing"

	"github.com/millwright/millwright/model/packer"
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
