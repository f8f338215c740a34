package catalog

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/model/scheduling"
)

// benchmarksDir finds ../shared/benchmarks beside the repository root.
func benchmarksDir(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("MILLWRIGHT_BENCHMARKS"); dir != "" {
		return dir
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "..", "shared", "benchmarks")
		}
		if filepath.Dir(dir) == dir {
			t.Fatalf("no go.mod above %s", wd)
		}
	}
}

func TestAllocatableMatchesBenchmarkFile(t *testing.T) {
	path := filepath.Join(benchmarksDir(t), "diverse-1000.json")
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		t.Skipf("benchmark workload %s is absent (it lives in shared/ beside the repository)", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		InstanceTypes []struct {
			Name        string              `json:"name"`
			Arch        string              `json:"arch"`
			Labels      map[string]string   `json:"labels"`
			Capacity    corev1.ResourceList `json:"capacity"`
			Allocatable corev1.ResourceList `json:"allocatable"`
		} `json:"instanceTypes"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	cat := MustDefault()
	if len(file.InstanceTypes) != len(cat.InstanceTypes) {
		t.Fatalf("%s has %d types, catalog %d", path, len(file.InstanceTypes), len(cat.InstanceTypes))
	}
	for _, want := range file.InstanceTypes {
		spec, ok := cat.Get(want.Name)
		if !ok {
			t.Errorf("%s: not in the catalog", want.Name)
			continue
		}
		wantCapacity := scheduling.MustResources(want.Capacity)
		wantAllocatable := scheduling.MustResources(want.Allocatable)
		if got := spec.Capacity(); got != wantCapacity {
			t.Errorf("%s capacity = %s, want %s", want.Name, got, wantCapacity)
		}
		if got := spec.Allocatable(); got != wantAllocatable {
			t.Errorf("%s allocatable = %s, want %s", want.Name, got, wantAllocatable)
		}
		labels := spec.Labels()
		for k, v := range scheduling.CanonicalLabels(want.Labels) {
			if labels[k] != v {
				t.Errorf("%s label %s = %q, want %q", want.Name, k, labels[k], v)
			}
		}
		if labels[scheduling.LabelArch] != want.Arch || labels[scheduling.LabelInstanceType] != want.Name {
			t.Errorf("%s: arch/instance-type labels = %v", want.Name, labels)
		}
		if len(labels) != len(want.Labels)+3+len(spec.ExtraLabels) { // + arch, os, instance-type and the labels file's
			t.Errorf("%s: %d labels %v, file has %d %v", want.Name, len(labels), labels, len(want.Labels), want.Labels)
		}
	}
}

func TestAllocatableExample(t *testing.T) {
	spec, ok := MustDefault().Get("a1.large")
	if !ok {
		t.Fatal("a1.large missing")
	}
	want, _ := scheduling.ParseResources("cpu", "1930m", "memory", "3114Mi", "pods", "29", "ephemeral-storage", "17Gi")
	if got := spec.Allocatable(); got != want {
		t.Fatalf("a1.large allocatable = %s, want %s", got, want)
	}
}

func TestPreferSpot(t *testing.T) {
	spot := func(zone string, price float64) Offering {
		return Offering{Zone: zone, CapacityType: scheduling.CapacityTypeSpot, Price: price, Available: true}
	}
	od := func(zone string, price float64) Offering {
		return Offering{Zone: zone, CapacityType: scheduling.CapacityTypeOnDemand, Price: price, Available: true}
	}
	tests := []struct {
		name string
		in   Offerings
		want Offerings
	}{
		{"spot cheaper wins", Offerings{od("a", 0.10), spot("a", 0.04)}, Offerings{spot("a", 0.04)}},
		{"spot above on-demand dropped", Offerings{od("a", 0.10), spot("a", 0.04), spot("b", 0.12)}, Offerings{spot("a", 0.04)}},
		{"all spot above on-demand", Offerings{od("a", 0.10), spot("b", 0.12)}, Offerings{od("a", 0.10)}},
		{"equal price keeps spot", Offerings{od("a", 0.10), spot("b", 0.10)}, Offerings{spot("b", 0.10)}},
		{"spot only", Offerings{spot("a", 0.2)}, Offerings{spot("a", 0.2)}},
		{"on-demand only", Offerings{od("a", 0.2)}, Offerings{od("a", 0.2)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.PreferSpot()
			if len(got) != len(tc.want) {
				t.Fatalf("PreferSpot = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("PreferSpot = %v, want %v", got, tc.want)
				}
			}
		})
	}
	all := Offerings{od("a", 0.1), spot("a", 0.05), {Zone: "b", CapacityType: "spot", Price: 0.01}}
	if got := all.Available(); len(got) != 2 {
		t.Errorf("Available = %v", got)
	}
	zoneA := scheduling.NewRequirements(scheduling.MustRequirement(scheduling.LabelZone, corev1.NodeSelectorOpIn, "a"))
	if got := all.Compatible(zoneA); len(got) != 2 {
		t.Errorf("Compatible(zone a) = %v", got)
	}
	if c, _ := all.Available().Cheapest(); c != spot("a", 0.05) {
		t.Errorf("Cheapest = %v", c)
	}
}

// Karpenter's AWS label set is on every type the reference lists; a type
// without instance store has no local-nvme label at all.
func TestLabelsIncludeKarpenterAWSLabels(t *testing.T) {
	c := MustDefault()
	for _, tc := range []struct {
		name   string
		want   map[string]string
		absent []string
	}{
		{name: "m5d.large", want: map[string]string{
			scheduling.LabelInstanceLocalNVME:                    "75",
			scheduling.LabelInstanceCPUManufacturer:              "intel",
			scheduling.LabelInstanceEncryptionInTransitSupported: "false",
			scheduling.LabelInstanceNetworkBandwidth:             "750",
			scheduling.LabelInstanceEBSBandwidth:                 "4750",
		}},
		{name: "c6a.large", want: map[string]string{scheduling.LabelInstanceCPUManufacturer: "amd"}, absent: []string{scheduling.LabelInstanceLocalNVME}},
		{name: "g5.xlarge", want: map[string]string{scheduling.LabelInstanceGPUMemory: "22888", scheduling.LabelInstanceLocalNVME: "250"}},
	} {
		spec, ok := c.Get(tc.name)
		if !ok {
			t.Fatalf("%s missing", tc.name)
		}
		labels := spec.Labels()
		for k, v := range tc.want {
			if labels[k] != v {
				t.Errorf("%s: %s = %q, want %q", tc.name, k, labels[k], v)
			}
		}
		for _, k := range tc.absent {
			if v, ok := labels[k]; ok {
				t.Errorf("%s: %s = %q, want absent", tc.name, k, v)
			}
		}
	}
}
