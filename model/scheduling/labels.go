package scheduling

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Well-known node labels. Pods and NodePools may constrain any of them.
const (
	LabelArch         = corev1.LabelArchStable         // kubernetes.io/arch
	LabelOS           = corev1.LabelOSStable           // kubernetes.io/os
	LabelZone         = corev1.LabelTopologyZone       // topology.kubernetes.io/zone
	LabelInstanceType = corev1.LabelInstanceTypeStable // node.kubernetes.io/instance-type
	LabelHostname     = corev1.LabelHostname           // kubernetes.io/hostname
	LabelRegion       = corev1.LabelTopologyRegion     // topology.kubernetes.io/region
	LabelCapacityType = "millwright.dev/capacity-type" // spot | on-demand
	LabelNodePool     = "millwright.dev/nodepool"      // the NodePool that launched the node
	LabelNodeClass    = "millwright.dev/ec2nodeclass"  // the EC2NodeClass the node was launched from

	LabelInstanceFamily     = "millwright.dev/instance-family"     // m5, c7g, u7i-12tb
	LabelInstanceCategory   = "millwright.dev/instance-category"   // m, c, r, g, inf
	LabelInstanceGeneration = "millwright.dev/instance-generation" // 5, 7
	LabelInstanceSize       = "millwright.dev/instance-size"       // large, 2xlarge, metal
	LabelInstanceCPU        = "millwright.dev/instance-cpu"        // vCPUs
	LabelInstanceMemory     = "millwright.dev/instance-memory"     // MiB
	LabelInstanceHypervisor = "millwright.dev/instance-hypervisor" // nitro | xen | "" (bare metal: label absent)

	// Karpenter's further AWS labels, from its instance-type reference
	// (model/catalog/ec2-instance-type-labels-us-east-1.json).
	LabelInstanceCapabilityFlex               = "millwright.dev/instance-capability-flex"                 // true | false
	LabelInstanceCPUManufacturer              = "millwright.dev/instance-cpu-manufacturer"                // intel | amd | aws | apple
	LabelInstanceCPUSustainedClockSpeedMhz    = "millwright.dev/instance-cpu-sustained-clock-speed-mhz"   // 3100
	LabelInstanceEBSBandwidth                 = "millwright.dev/instance-ebs-bandwidth"                   // Mbps
	LabelInstanceEncryptionInTransitSupported = "millwright.dev/instance-encryption-in-transit-supported" // true | false
	LabelInstanceLocalNVME                    = "millwright.dev/instance-local-nvme"                      // GiB of instance-store NVMe (absent: none)
	LabelInstanceNetworkBandwidth             = "millwright.dev/instance-network-bandwidth"               // Mbps
	LabelInstanceGPUMemory                    = "millwright.dev/instance-gpu-memory"                      // MiB per GPU

	LabelInstanceGPUCount        = "millwright.dev/instance-gpu-count"
	LabelInstanceGPUName         = "millwright.dev/instance-gpu-name"
	LabelInstanceGPUManufacturer = "millwright.dev/instance-gpu-manufacturer"

	// Neuron devices (inf*, trn*) are accelerators rather than GPUs, as in Karpenter.
	LabelInstanceAcceleratorCount        = "millwright.dev/instance-accelerator-count"
	LabelInstanceAcceleratorName         = "millwright.dev/instance-accelerator-name"
	LabelInstanceAcceleratorManufacturer = "millwright.dev/instance-accelerator-manufacturer"
)

// instanceTypeLabels are the keys every instance type defines, with a value
// or as absent (instance-local-nvme on a type without instance store): a
// requirement on one of them is about the type, never a custom label the
// NodePool puts on its nodes, and a type without the label fails every
// requirement but NotIn and DoesNotExist.
var instanceTypeLabels = map[string]bool{
	LabelArch: true, LabelOS: true, LabelInstanceType: true,
	LabelInstanceFamily: true, LabelInstanceCategory: true, LabelInstanceGeneration: true, LabelInstanceSize: true,
	LabelInstanceCPU: true, LabelInstanceMemory: true, LabelInstanceHypervisor: true,
	LabelInstanceCapabilityFlex: true, LabelInstanceCPUManufacturer: true, LabelInstanceCPUSustainedClockSpeedMhz: true,
	LabelInstanceEBSBandwidth: true, LabelInstanceEncryptionInTransitSupported: true, LabelInstanceLocalNVME: true,
	LabelInstanceNetworkBandwidth: true, LabelInstanceGPUMemory: true,
	LabelInstanceGPUCount: true, LabelInstanceGPUName: true, LabelInstanceGPUManufacturer: true,
	LabelInstanceAcceleratorCount: true, LabelInstanceAcceleratorName: true, LabelInstanceAcceleratorManufacturer: true,
}

// IsInstanceTypeLabel reports whether a (canonical or alias) key is one
// every instance type defines (see instanceTypeLabels).
func IsInstanceTypeLabel(key string) bool { return instanceTypeLabels[CanonicalLabelKey(key)] }

// Capacity types (values of LabelCapacityType).
const (
	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
)

// aliases maps label keys accepted for migration (Karpenter's, and the
// deprecated beta Kubernetes keys) to Millwright's canonical key. A pod or
// NodePool written for Karpenter keeps working after its apiVersion changes.
var aliases = map[string]string{
	"karpenter.sh/capacity-type":                                 LabelCapacityType,
	"karpenter.sh/nodepool":                                      LabelNodePool,
	"karpenter.k8s.aws/ec2nodeclass":                             LabelNodeClass,
	"karpenter.k8s.aws/instance-family":                          LabelInstanceFamily,
	"karpenter.k8s.aws/instance-category":                        LabelInstanceCategory,
	"karpenter.k8s.aws/instance-generation":                      LabelInstanceGeneration,
	"karpenter.k8s.aws/instance-size":                            LabelInstanceSize,
	"karpenter.k8s.aws/instance-cpu":                             LabelInstanceCPU,
	"karpenter.k8s.aws/instance-memory":                          LabelInstanceMemory,
	"karpenter.k8s.aws/instance-hypervisor":                      LabelInstanceHypervisor,
	"karpenter.k8s.aws/instance-gpu-count":                       LabelInstanceGPUCount,
	"karpenter.k8s.aws/instance-gpu-memory":                      LabelInstanceGPUMemory,
	"karpenter.k8s.aws/instance-capability-flex":                 LabelInstanceCapabilityFlex,
	"karpenter.k8s.aws/instance-cpu-manufacturer":                LabelInstanceCPUManufacturer,
	"karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz":   LabelInstanceCPUSustainedClockSpeedMhz,
	"karpenter.k8s.aws/instance-ebs-bandwidth":                   LabelInstanceEBSBandwidth,
	"karpenter.k8s.aws/instance-encryption-in-transit-supported": LabelInstanceEncryptionInTransitSupported,
	"karpenter.k8s.aws/instance-local-nvme":                      LabelInstanceLocalNVME,
	"karpenter.k8s.aws/instance-network-bandwidth":               LabelInstanceNetworkBandwidth,
	"karpenter.k8s.aws/instance-gpu-name":                        LabelInstanceGPUName,
	"karpenter.k8s.aws/instance-gpu-manufacturer":                LabelInstanceGPUManufacturer,
	"karpenter.k8s.aws/instance-accelerator-count":               LabelInstanceAcceleratorCount,
	"karpenter.k8s.aws/instance-accelerator-name":                LabelInstanceAcceleratorName,
	"karpenter.k8s.aws/instance-accelerator-manufacturer":        LabelInstanceAcceleratorManufacturer,
	"beta.kubernetes.io/arch":                                    LabelArch,
	"beta.kubernetes.io/os":                                      LabelOS,
	corev1.LabelInstanceType:                                     LabelInstanceType, // beta.kubernetes.io/instance-type
	corev1.LabelFailureDomainBetaZone:                            LabelZone,
	corev1.LabelFailureDomainBetaRegion:                          LabelRegion,
	// The EBS CSI driver's zone key, which its PersistentVolumes' node
	// affinity uses.
	"topology.ebs.csi.aws.com/zone": LabelZone,
}

// aliasesOf is the inverse of aliases: canonical key -> alias keys, sorted.
var aliasesOf = func() map[string][]string {
	out := map[string][]string{}
	for alias, canonical := range aliases {
		out[canonical] = append(out[canonical], alias)
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}()

// CanonicalLabelKey returns Millwright's key for a label key, resolving
// Karpenter and beta aliases; other keys are returned unchanged.
func CanonicalLabelKey(key string) string {
	if canonical, ok := aliases[key]; ok {
		return canonical
	}
	return key
}

// LabelAliases returns the alias keys of a canonical key (nil if none).
func LabelAliases(canonical string) []string { return aliasesOf[canonical] }

// WithAliases returns a copy of canonical node labels with every alias key
// added beside its canonical key, so that a real node also satisfies pods
// that still select Karpenter's keys (kube-scheduler does not resolve aliases).
func WithAliases(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels)*2)
	for k, v := range labels {
		out[k] = v
	}
	for k, v := range labels {
		for _, alias := range aliasesOf[k] {
			if _, set := out[alias]; !set {
				out[alias] = v
			}
		}
	}
	return out
}

// CanonicalLabels returns a copy of labels with alias keys rewritten to their
// canonical key (a canonical key present in the input wins over its alias).
func CanonicalLabels(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		if c, ok := aliases[k]; ok {
			if _, set := labels[c]; set {
				continue
			}
			k = c
		}
		out[k] = v
	}
	return out
}
