package catalog

import (
	"math"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/model/scheduling"
)

// Node overhead constants (Karpenter's AWS provider defaults, which the
// benchmark files were generated with).
const (
	// VMMemoryOverheadPercent is the share of an instance's memory the
	// hypervisor and firmware keep: EC2 reports more memory than the OS sees.
	VMMemoryOverheadPercent = 0.075
	// EvictionHardMemoryMiB is kubelet's default memory.available eviction threshold.
	EvictionHardMemoryMiB = 100
	// EphemeralStorageGi is the root volume Millwright gives a node by default.
	EphemeralStorageGi = 20
	// KubeReservedEphemeralStorageGi and EvictionEphemeralStoragePercent take
	// the default 20Gi down to 17Gi allocatable (1Gi reserved, 10% eviction).
	KubeReservedEphemeralStorageGi   = 1
	EvictionEphemeralStoragePercent  = 10
	kubeReservedMemoryPerPodMiB      = 11
	kubeReservedMemoryBaseMiB        = 255
	gibibyte                         = int64(1) << 30
	mebibyte                         = int64(1) << 20
	linux                            = "linux"
	neuronResource                   = string(scheduling.ResourceAWSNeuron)
	kubeReservedCPUTopRangeMillicore = int64(1) << 31
)

// Capacity is what the node reports before reservations: vCPUs, the EC2
// memory size, the ENI-limited max pods, the default root volume, and the
// accelerator resource (nvidia.com/gpu, aws.amazon.com/neuron, ...).
func (s InstanceTypeSpec) Capacity() scheduling.Resources {
	var r scheduling.Resources
	r[scheduling.IndexCPU] = int64(s.VCPU) * 1000
	r[scheduling.IndexMemory] = s.MemoryMiB * mebibyte
	r[scheduling.IndexPods] = int64(s.MaxPods)
	r[scheduling.IndexEphemeralStorage] = EphemeralStorageGi * gibibyte
	if s.GPU.Resource != "" && s.GPU.Count > 0 {
		// The accelerator names are pre-registered, so this cannot fail.
		r, _ = r.Set(corev1.ResourceName(s.GPU.Resource), int64(s.GPU.Count))
	}
	return r
}

// Overhead is what a node holds back from pods, by reason.
type Overhead struct {
	// VMMemory is the memory EC2 advertises but the OS never sees.
	VMMemory scheduling.Resources
	// KubeReserved is reserved for the kubelet and container runtime.
	KubeReserved scheduling.Resources
	// SystemReserved is reserved for OS daemons (zero by default, as in Karpenter).
	SystemReserved scheduling.Resources
	// EvictionThreshold is kept free so the kubelet can evict before OOM.
	EvictionThreshold scheduling.Resources
}

// Total is the sum of all overheads.
func (o Overhead) Total() scheduling.Resources {
	return o.VMMemory.Add(o.KubeReserved).Add(o.SystemReserved).Add(o.EvictionThreshold)
}

// Overhead computes the reservations with Karpenter's formula:
//
//   - VM overhead: ceil(7.5% of the EC2 memory in MiB).
//   - kube-reserved CPU: 6% of the first core, 1% of the second, 0.5% of
//     cores three and four, 0.25% of every core above four; each range's
//     share is truncated to whole millicores (a 2-vCPU type keeps 1930m).
//   - kube-reserved memory: 11MiB per pod the node may run, plus 255MiB.
//   - kube-reserved ephemeral storage: 1Gi.
//   - eviction thresholds: 100Mi memory, 10% of ephemeral storage.
//
// For a1.large (2 vCPU, 4096MiB, 29 pods): cpu 2000-60-10 = 1930m; memory
// 4096 - 308 - (11*29+255) - 100 = 3114Mi.
func (s InstanceTypeSpec) Overhead() Overhead {
	var o Overhead
	o.VMMemory[scheduling.IndexMemory] = int64(math.Ceil(float64(s.MemoryMiB)*VMMemoryOverheadPercent)) * mebibyte

	cpu := int64(s.VCPU) * 1000
	var reservedCPU int64
	for _, r := range []struct {
		start, end int64
		share      float64
	}{
		{0, 1000, 0.06},
		{1000, 2000, 0.01},
		{2000, 4000, 0.005},
		{4000, kubeReservedCPUTopRangeMillicore, 0.0025},
	} {
		if cpu < r.start {
			break
		}
		span := min(cpu, r.end) - r.start
		reservedCPU += int64(float64(span) * r.share)
	}
	o.KubeReserved[scheduling.IndexCPU] = reservedCPU
	o.KubeReserved[scheduling.IndexMemory] = (kubeReservedMemoryPerPodMiB*int64(s.MaxPods) + kubeReservedMemoryBaseMiB) * mebibyte
	o.KubeReserved[scheduling.IndexEphemeralStorage] = KubeReservedEphemeralStorageGi * gibibyte

	o.EvictionThreshold[scheduling.IndexMemory] = EvictionHardMemoryMiB * mebibyte
	o.EvictionThreshold[scheduling.IndexEphemeralStorage] = EphemeralStorageGi * gibibyte * EvictionEphemeralStoragePercent / 100
	return o
}

// Allocatable is Capacity minus Overhead: what pods (DaemonSets included) may request.
func (s InstanceTypeSpec) Allocatable() scheduling.Resources {
	return s.Capacity().Sub(s.Overhead().Total())
}

// Labels returns the labels a node of this type carries (canonical keys;
// the zone, capacity type, NodePool and hostname come from the launch, not
// the type), Karpenter's AWS label set among them. A label the type has no
// value for (instance-local-nvme on a type without instance store) is
// absent, so a requirement on it matches only DoesNotExist/NotIn. GPU labels describe graphics/ML accelerators; Neuron devices get
// the accelerator labels instead, as in Karpenter.
func (s InstanceTypeSpec) Labels() map[string]string {
	l := map[string]string{
		scheduling.LabelArch:               s.Arch,
		scheduling.LabelOS:                 linux,
		scheduling.LabelInstanceType:       s.Name,
		scheduling.LabelInstanceFamily:     s.Family,
		scheduling.LabelInstanceCategory:   s.Category,
		scheduling.LabelInstanceGeneration: strconv.Itoa(s.Generation),
		scheduling.LabelInstanceSize:       s.Size,
		scheduling.LabelInstanceCPU:        strconv.Itoa(s.VCPU),
		scheduling.LabelInstanceMemory:     strconv.FormatInt(s.MemoryMiB, 10),
	}
	if s.Hypervisor != "" {
		l[scheduling.LabelInstanceHypervisor] = s.Hypervisor
	}
	for k, v := range s.ExtraLabels {
		l[k] = v
	}
	switch {
	case s.GPU.Resource == neuronResource:
		l[scheduling.LabelInstanceAcceleratorCount] = strconv.Itoa(s.GPU.Count)
		l[scheduling.LabelInstanceAcceleratorManufacturer] = s.GPU.Manufacturer
		l[scheduling.LabelInstanceAcceleratorName] = s.GPU.Name
	case s.GPU.Name != "":
		l[scheduling.LabelInstanceGPUCount] = strconv.Itoa(s.GPU.Count)
		l[scheduling.LabelInstanceGPUManufacturer] = s.GPU.Manufacturer
		l[scheduling.LabelInstanceGPUName] = s.GPU.Name
	}
	return l
}

// InstanceType is a launchable type as the packer and the launcher see it:
// its node labels, capacity, allocatable and offerings.
type InstanceType struct {
	Name string
	// Labels are canonical node labels (arch, os, instance-type, instance-*).
	Labels      map[string]string
	Capacity    scheduling.Resources
	Allocatable scheduling.Resources
	Offerings   Offerings
}

// InstanceType builds the launchable type from the catalog row.
func (s InstanceTypeSpec) InstanceType(offerings Offerings) *InstanceType {
	return &InstanceType{
		Name:        s.Name,
		Labels:      s.Labels(),
		Capacity:    s.Capacity(),
		Allocatable: s.Allocatable(),
		Offerings:   offerings,
	}
}

// OnDemandOfferings lists an available on-demand offering at the catalog
// price in each zone. Spot prices and availability are not catalog facts;
// the EC2 emulator or the live pricing API supplies those.
func (s InstanceTypeSpec) OnDemandOfferings(zones []string) Offerings {
	out := make(Offerings, 0, len(zones))
	for _, z := range zones {
		out = append(out, Offering{Zone: z, CapacityType: scheduling.CapacityTypeOnDemand, Price: s.OnDemandPrice, Available: true})
	}
	return out
}
