package catalog

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/model/scheduling"
)

func i32(n int32) *int32 { return &n }

// Karpenter's formulas (karpenter-provider-aws instancetype/types.go) on
// m5.large: 2 vCPU, 8192Mi (615Mi VM overhead), 29 ENI-limited pods; by
// default 8192 - 615 - (11*29+255) - 100 = 6903Mi of memory.
func TestWithKubelet(t *testing.T) {
	m5, ok := MustDefault().Get("m5.large")
	if !ok {
		t.Fatal("m5.large missing")
	}
	tests := []struct {
		name     string
		k        *KubeletSettings
		capacity []string // resource pairs checked on capacity
		want     []string // resource pairs checked on WithKubelet's allocatable
		kubelet  []string // ... and on KubeletAllocatable's
	}{
		{name: "defaults", k: &KubeletSettings{}, want: []string{"cpu", "1930m", "memory", "6903Mi", "pods", "29", "ephemeral-storage", "17Gi"}},
		{name: "maxPods", k: &KubeletSettings{MaxPods: i32(10)}, capacity: []string{"pods", "10"},
			want: []string{"pods", "10", "memory", "7112Mi"}}, // kubeReserved memory 11*10+255 = 365Mi
		{name: "podsPerCore caps pods", k: &KubeletSettings{PodsPerCore: i32(4)}, capacity: []string{"pods", "8"}, want: []string{"pods", "8"}},
		{name: "podsPerCore never above maxPods", k: &KubeletSettings{MaxPods: i32(6), PodsPerCore: i32(4)}, want: []string{"pods", "6"}},
		{name: "kubeReserved overrides key by key", k: &KubeletSettings{KubeReserved: map[string]string{"cpu": "500m"}},
			want: []string{"cpu", "1500m", "memory", "6903Mi"}},
		{name: "systemReserved adds", k: &KubeletSettings{SystemReserved: map[string]string{"memory": "1Gi", "cpu": "100m"}},
			want: []string{"cpu", "1830m", "memory", "5879Mi"}},
		{name: "evictionHard replaces the default", k: &KubeletSettings{EvictionHard: map[string]string{"memory.available": "500Mi", "nodefs.available": "20%"}},
			want: []string{"memory", "6503Mi", "ephemeral-storage", "15Gi"}},
		{name: "evictionSoft above hard counts for the packer, not the kubelet",
			k:    &KubeletSettings{EvictionHard: map[string]string{"memory.available": "500Mi"}, EvictionSoft: map[string]string{"memory.available": "1Gi"}},
			want: []string{"memory", "5979Mi"}, kubelet: []string{"memory", "6503Mi"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			capacity, alloc, err := m5.WithKubelet(tc.k)
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, got scheduling.Resources, pairs []string) {
				want, err := scheduling.ParseResources(pairs...)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < len(pairs); i += 2 {
					idx, _ := scheduling.LookupResourceIndex(corev1.ResourceName(pairs[i]))
					if got[idx] != want[idx] {
						t.Errorf("%s %s = %d, want %s", what, pairs[i], got[idx], pairs[i+1])
					}
				}
			}
			check("capacity", capacity, tc.capacity)
			check("allocatable", alloc, tc.want)
			if tc.kubelet != nil {
				_, kalloc, err := m5.KubeletAllocatable(tc.k)
				if err != nil {
					t.Fatal(err)
				}
				check("kubelet allocatable", kalloc, tc.kubelet)
			}
		})
	}
	if _, alloc, _ := m5.WithKubelet(nil); alloc != m5.Allocatable() {
		t.Errorf("nil settings: %s, want %s", alloc, m5.Allocatable())
	}
	if _, _, err := m5.WithKubelet(&KubeletSettings{EvictionHard: map[string]string{"memory.available": "lots"}}); err == nil {
		t.Error("a malformed threshold must fail")
	}
}
