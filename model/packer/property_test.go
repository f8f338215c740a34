package packer_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// TestRandomWorkloadsVerify packs seeded random workloads over the real
// catalog (GPU pools with taints, arch- and zone-restricted pools, limits,
// DaemonSets, every pod constraint the packer honours) and checks every
// plan with Verify.
func TestRandomWorkloadsVerify(t *testing.T) {
	w := exampleWorkload(t, "diverse-1000.json")
	base, err := w.PackerInput()
	if err != nil {
		t.Fatal(err)
	}
	types := base.NodePools[0].InstanceTypes
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			in := randomWorkload(rand.New(rand.NewPCG(seed, 42)), base, types)
			r, err := packer.Pack(in)
			if err != nil {
				t.Fatal(err)
			}
			if err := packer.Verify(in, r); err != nil {
				t.Fatalf("plan fails verification:\n%v", err)
			}
			reasons := map[string]int{}
			for _, u := range r.Unschedulable {
				reasons[u.Reason]++
			}
			t.Logf("%d pods: %d nodes, $%.3f/h, %d unschedulable %v", len(in.Pods), len(r.NewNodes), r.TotalPrice(), len(r.Unschedulable), reasons)
		})
	}
}

func randomWorkload(rng *rand.Rand, base packer.Input, types []*catalog.InstanceType) packer.Input {
	in := packer.Input{}
	in.NodePools = []packer.NodePool{
		nodePool("default", types, withPoolRequirement("kubernetes.io/arch", "In", "amd64", "arm64"),
			withPoolRequirement("karpenter.k8s.aws/instance-gpu-count", "DoesNotExist")),
		nodePool("gpu", types, withWeight(10), withTaint("nvidia.com/gpu", "true"),
			withPoolRequirement("karpenter.k8s.aws/instance-gpu-manufacturer", "In", "nvidia"), withLimit("nvidia.com/gpu", "16")),
		nodePool("arm-od", types, withWeight(5), withCapacityTypes("on-demand"), withPoolRequirement("kubernetes.io/arch", "In", "arm64"),
			withPoolRequirement("karpenter.k8s.aws/instance-generation", "Gt", "6"), withLimit("cpu", "64")),
	}
	if rng.IntN(2) == 0 {
		in.NodePools[0].MinValues = map[string]int{scheduling.LabelInstanceType: 5}
	}
	if rng.IntN(2) == 0 {
		in.DaemonSetPods = []*corev1.Pod{pod("ds-agent", "100m", "128Mi", withToleration("nvidia.com/gpu")), pod("ds-arm", "200m", "256Mi", withNodeSelector("kubernetes.io/arch", "arm64"))}
	}
	cpus := []string{"100m", "250m", "500m", "1", "1500m", "2", "4"}
	mems := []string{"128Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi", "8Gi"}
	n := 0
	add := func(count int, opts ...podOption) {
		cpu, mem := cpus[rng.IntN(len(cpus))], mems[rng.IntN(len(mems))]
		for i := 0; i < count; i++ {
			in.Pods = append(in.Pods, pod(fmt.Sprintf("p-%04d", n), cpu, mem, opts...))
			n++
		}
	}
	letters := []string{"a", "b", "c", "d"}
	for g := 0; g < 24; g++ {
		count := 1 + rng.IntN(20)
		label := withLabel("grp", letters[rng.IntN(len(letters))])
		switch rng.IntN(15) {
		case 0:
			add(count, label)
		case 1:
			add(count, label, withNodeSelector("kubernetes.io/arch", []string{"amd64", "arm64"}[rng.IntN(2)]))
		case 2:
			add(count, label, withNodeSelector(scheduling.LabelZone, []string{"us-east-1a", "us-east-1b", "us-east-1c"}[rng.IntN(3)]))
		case 3:
			add(min(count, 6), label, withToleration("nvidia.com/gpu"), withRequest("nvidia.com/gpu", "1"))
		case 4:
			add(count, label, withSpread(scheduling.LabelZone, 1, corev1.DoNotSchedule, map[string]string{"grp": letters[rng.IntN(len(letters))]}))
		case 5:
			add(count, label, withSpread(scheduling.LabelHostname, 1, corev1.DoNotSchedule, map[string]string{"grp": letters[rng.IntN(len(letters))]}))
		case 6:
			key := fmt.Sprintf("anti-%d", g)
			add(count, withLabel("anti", key), withAntiAffinity(scheduling.LabelHostname, map[string]string{"anti": key}))
		case 7:
			key := fmt.Sprintf("aff-%d", g)
			add(count, withLabel("aff", key), withAffinity(scheduling.LabelZone, map[string]string{"aff": key}))
		case 8:
			add(count, label, withNodeSelector("karpenter.sh/capacity-type", "on-demand"))
		case 9:
			add(count, label, withSpread(scheduling.LabelZone, 2, corev1.ScheduleAnyway, map[string]string{"grp": letters[rng.IntN(len(letters))]}))
		case 10:
			add(count, label, withPreferredNodeAffinity(10, inZones([]string{"us-east-1a", "us-east-1b", "us-east-1f"}[rng.IntN(3)])))
		case 11:
			key := fmt.Sprintf("pref-anti-%d", g)
			add(count, withLabel("anti", key), withPreferredAntiAffinity(5, scheduling.LabelHostname, map[string]string{"anti": key}))
		case 12:
			add(min(count, 8), label, withHostPort(int32(9000+rng.IntN(3))))
		case 13:
			add(count, label, withSpread(scheduling.LabelZone, 1, corev1.DoNotSchedule, map[string]string{"grp": letters[rng.IntN(len(letters))]}),
				withNodeAffinity([]corev1.NodeSelectorRequirement{inZones("us-east-1a", "us-east-1b")}))
		default:
			add(count, label, withNodeAffinity([]corev1.NodeSelectorRequirement{{Key: "karpenter.k8s.aws/instance-category", Operator: "In", Values: []string{"c", "m"}}}))
		}
	}
	return in
}
