package v1

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/model/scheduling"
)

// Labels Millwright puts on the nodes it launches. Requirements may use them;
// the ones Millwright owns (everything under millwright.dev/ except the
// well-known keys below) are reserved.
const (
	// LabelNodePool names the NodePool that launched a node. Millwright sets
	// it; a NodePool may neither set it in template labels nor require it.
	LabelNodePool = Group + "/nodepool"
	// LabelNodeInitialized is "true" once the node's workflow saw it
	// initialized (Ready, startup taints gone, extended resources
	// allocatable), and stays so whatever the node's condition later
	// (Karpenter's karpenter.sh/initialized): a node that goes NotReady
	// is still one to repair, not one still starting.
	LabelNodeInitialized = Group + "/initialized"
	// LabelNodeClass names the EC2NodeClass a node was launched from.
	LabelNodeClass = Group + "/ec2nodeclass"
	// LabelCapacityType is "spot" or "on-demand".
	LabelCapacityType = Group + "/capacity-type"

	LabelInstanceCategory                     = Group + "/instance-category"
	LabelInstanceFamily                       = Group + "/instance-family"
	LabelInstanceGeneration                   = Group + "/instance-generation"
	LabelInstanceSize                         = Group + "/instance-size"
	LabelInstanceCPU                          = Group + "/instance-cpu"
	LabelInstanceCPUManufacturer              = Group + "/instance-cpu-manufacturer"
	LabelInstanceMemory                       = Group + "/instance-memory"
	LabelInstanceHypervisor                   = Group + "/instance-hypervisor"
	LabelInstanceEncryptionInTransitSupported = Group + "/instance-encryption-in-transit-supported"
	LabelInstanceCapabilityFlex               = Group + "/instance-capability-flex"
	LabelInstanceCPUSustainedClockSpeedMhz    = Group + "/instance-cpu-sustained-clock-speed-mhz"
	LabelInstanceLocalNVME                    = Group + "/instance-local-nvme"
	LabelInstanceNetworkBandwidth             = Group + "/instance-network-bandwidth"
	LabelInstanceEBSBandwidth                 = Group + "/instance-ebs-bandwidth"
	LabelInstanceGPUName                      = Group + "/instance-gpu-name"
	LabelInstanceGPUManufacturer              = Group + "/instance-gpu-manufacturer"
	LabelInstanceGPUCount                     = Group + "/instance-gpu-count"
	LabelInstanceGPUMemory                    = Group + "/instance-gpu-memory"
	LabelInstanceAcceleratorName              = Group + "/instance-accelerator-name"
	LabelInstanceAcceleratorManufacturer      = Group + "/instance-accelerator-manufacturer"
	LabelInstanceAcceleratorCount             = Group + "/instance-accelerator-count"
)

// Values of LabelCapacityType.
const (
	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
)

// Annotations Millwright reads.
const (
	// AnnotationDoNotDisrupt on a pod or node blocks voluntary disruption.
	AnnotationDoNotDisrupt = Group + "/do-not-disrupt"
	// AnnotationKarpenterDoNotDisrupt is Karpenter's spelling of the same,
	// read too so manifests written for Karpenter keep their protection.
	// Both take "true" or a duration ("1h": protected for that long from
	// the pod's start, or the node's creation).
	AnnotationKarpenterDoNotDisrupt = "karpenter.sh/do-not-disrupt"
)

// DoNotDisruptAnnotations are the keys DoNotDisrupt reads, in order.
var DoNotDisruptAnnotations = []string{AnnotationKarpenterDoNotDisrupt, AnnotationDoNotDisrupt}

// DoNotDisrupt reads the do-not-disrupt annotations of a pod or node,
// relative to start (the pod's start, the node's creation): "true" protects
// for ever, a positive duration until start + duration; any other value
// ("false", "", a value that is no duration) not at all, as Karpenter
// treats an annotation it cannot parse as absent (users copy its
// manifests, and its tests pin that a malformed value does not block).
// It returns the key that protects, and until when (zero: for ever).
func DoNotDisrupt(annotations map[string]string, start, now time.Time) (key string, until time.Time, protected bool) {
	for _, key := range DoNotDisruptAnnotations {
		value, set := annotations[key]
		if !set {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(value)) {
		case "true":
			return key, time.Time{}, true
		case "false", "":
			continue
		}
		d, err := time.ParseDuration(strings.TrimSpace(value))
		if err != nil || d <= 0 {
			continue
		}
		if end := start.Add(d); now.Before(end) {
			return key, end, true
		}
	}
	return "", time.Time{}, false
}

// Drift stamps Millwright puts on a Node at launch (model/disruption
// computes the hashes): a node whose stamp differs from its NodePool's or
// EC2NodeClass's current hash, at the same hash version, is drifted.
const (
	AnnotationNodePoolHash         = Group + "/nodepool-hash"
	AnnotationNodePoolHashVersion  = Group + "/nodepool-hash-version"
	AnnotationNodeClassHash        = Group + "/ec2nodeclass-hash"
	AnnotationNodeClassHashVersion = Group + "/ec2nodeclass-hash-version"
	// AnnotationImageID, AnnotationSubnetID and AnnotationSecurityGroupIDs
	// (comma-separated) record what the instance was launched with, for
	// AMI, subnet and security-group drift.
	AnnotationImageID          = Group + "/image-id"
	AnnotationSubnetID         = Group + "/subnet-id"
	AnnotationSecurityGroupIDs = Group + "/security-group-ids"
	// AnnotationLaunchedByConsolidation is the time (RFC 3339) a node was
	// launched as a consolidation replacement: it is not consolidated again
	// before its own consolidateAfter has passed from then.
	AnnotationLaunchedByConsolidation = Group + "/launched-by-consolidation"
)

// Tags Millwright puts on the EC2 resources it creates. An EC2NodeClass may
// not set them (see RestrictedTagKeys).
const (
	TagNodePool  = LabelNodePool
	TagNodeClaim = Group + "/nodeclaim"
	TagNodeClass = LabelNodeClass
	// TagEKSClusterName is set by EKS; overriding it breaks node registration.
	TagEKSClusterName = "eks:eks-cluster-name"
	// TagClusterPrefix starts the kubernetes.io/cluster/<name> ownership tag
	// the cloud provider integrations rely on.
	TagClusterPrefix = "kubernetes.io/cluster/"
)

// WellKnownMillwrightLabels are the keys under millwright.dev/ that users may
// set in template labels and use in requirements. Every other millwright.dev
// key is Millwright's own. The CRD's CEL rules list the same keys; a test
// keeps the two in step.
var WellKnownMillwrightLabels = []string{
	LabelCapacityType,
	LabelNodeClass,
	LabelInstanceCategory,
	LabelInstanceFamily,
	LabelInstanceGeneration,
	LabelInstanceSize,
	LabelInstanceCPU,
	LabelInstanceCPUManufacturer,
	LabelInstanceMemory,
	LabelInstanceHypervisor,
	LabelInstanceEncryptionInTransitSupported,
	LabelInstanceCapabilityFlex,
	LabelInstanceCPUSustainedClockSpeedMhz,
	LabelInstanceLocalNVME,
	LabelInstanceNetworkBandwidth,
	LabelInstanceEBSBandwidth,
	LabelInstanceGPUName,
	LabelInstanceGPUManufacturer,
	LabelInstanceGPUCount,
	LabelInstanceGPUMemory,
	LabelInstanceAcceleratorName,
	LabelInstanceAcceleratorManufacturer,
	LabelInstanceAcceleratorCount,
}

// WellKnownLabels are every label key Millwright understands as a property
// of an instance type or offering: the Kubernetes well-known node labels plus
// WellKnownMillwrightLabels and LabelNodePool.
var WellKnownLabels = append([]string{
	LabelNodePool,
	corev1.LabelTopologyZone,
	corev1.LabelTopologyRegion,
	corev1.LabelInstanceTypeStable,
	corev1.LabelArchStable,
	corev1.LabelOSStable,
	corev1.LabelWindowsBuild,
}, WellKnownMillwrightLabels...)

// WellKnownCapacityTypes are the values of LabelCapacityType Millwright can
// launch.
var WellKnownCapacityTypes = []string{CapacityTypeSpot, CapacityTypeOnDemand}

// restrictedLabelDomainRE matches a key whose prefix is millwright.dev or a
// subdomain of it. The CEL rule uses the same expression (with [.] for the
// dot, so neither Go nor the marker needs backslash escapes).
const restrictedLabelDomainPattern = `^([^/]*[.])?millwright[.]dev/`

var restrictedLabelDomainRE = regexp.MustCompile(restrictedLabelDomainPattern)

// RestrictedLabelReason says why a NodePool may not set or require the label
// key, or returns "" when it may. It is the Go twin of the CEL rules on
// template labels and requirement keys.
func RestrictedLabelReason(key string) string {
	switch {
	case key == LabelNodePool:
		return fmt.Sprintf("label '%s' is restricted: Millwright sets it to the NodePool's name", LabelNodePool)
	case key == corev1.LabelHostname:
		return fmt.Sprintf("label '%s' is restricted: it is unique per node", corev1.LabelHostname)
	case restrictedLabelDomainRE.MatchString(key) && !slices.Contains(WellKnownMillwrightLabels, key):
		return fmt.Sprintf("label domain '%s' is restricted: use a well-known %s/ label or a label outside the domain", Group, Group)
	}
	return ""
}

// RestrictedLabelDomains are label domains (and their subdomains) no
// provider sets on its own: a requirement on a key in them that is not a
// well-known label (under its own key or an accepted alias) could never be
// met, as in Karpenter's RestrictedLabelDomains.
var RestrictedLabelDomains = []string{"kubernetes.io", "k8s.io", "karpenter.sh", "karpenter.k8s.aws"}

// LabelDomainExceptions are subdomains of restricted domains users may set
// labels in (Karpenter's LabelDomainExceptions).
var LabelDomainExceptions = []string{"kops.k8s.io", corev1.LabelNamespaceSuffixNode, corev1.LabelNamespaceNodeRestriction}

// RestrictedRequirementReason says why a NodePool may not require the key,
// or returns "": the reasons of RestrictedLabelReason, and a key in a
// restricted domain that is not well known (no instance type or launch
// carries it, so the requirement would match nothing).
func RestrictedRequirementReason(key string) string {
	if reason := RestrictedLabelReason(key); reason != "" {
		return reason
	}
	if canonical := scheduling.CanonicalLabelKey(key); canonical == LabelNodePool {
		return RestrictedLabelReason(canonical)
	} else if slices.Contains(WellKnownLabels, canonical) {
		return ""
	}
	domain, _, found := strings.Cut(key, "/")
	if !found {
		return ""
	}
	for _, d := range LabelDomainExceptions {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return ""
		}
	}
	for _, d := range RestrictedLabelDomains {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return fmt.Sprintf("label %q is restricted: no instance type or launch sets it; use a well-known label or a custom label outside the restricted domains %v", key, RestrictedLabelDomains)
		}
	}
	return ""
}
