package userdata

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// Bootstrap is what every AMI family's userData tells one node, whatever
// its format: the cluster, the node's labels and taints, its kubelet
// settings, whether to RAID0 its instance-store disks, and the
// EC2NodeClass's own userData to merge in.
type Bootstrap struct {
	Cluster Cluster
	// Labels become --node-labels (keys the kubelet may not set on its
	// own Node are left out; RegisterNode applies them).
	Labels map[string]string
	// Taints become --register-with-taints, in order, duplicates dropped.
	Taints []corev1.Taint
	// MaxPods, when positive, is the kubelet's maxPods.
	MaxPods int32
	// ClusterDNS, when set, is the kubelet's clusterDNS (the first address
	// is the one the bootstrap scripts take).
	ClusterDNS []string
	// Kubelet are the EC2NodeClass's other kubelet settings (maxPods and
	// clusterDNS are read from the fields above).
	Kubelet *apisv1.KubeletConfiguration
	// RAID0 stripes the instance-store disks for the kubelet and the
	// container runtime (instanceStorePolicy: RAID0).
	RAID0 bool
	// Custom is the EC2NodeClass's spec.userData, in the family's format.
	Custom string
}

// kubeletExtraArgs are the kubelet flags AL2's bootstrap.sh and the
// Windows bootstrap pass through (--kubelet-extra-args): labels, taints,
// max pods and the class's kubelet settings, in a fixed order, each value
// double-quoted as Karpenter writes them.
func (b Bootstrap) kubeletExtraArgs() []string {
	var args []string
	if labels := NodeLabelsFlag(b.Labels); labels != "" {
		args = append(args, fmt.Sprintf("--node-labels=%q", labels))
	}
	if taints := RegisterWithTaintsFlag(b.Taints); taints != "" {
		args = append(args, fmt.Sprintf("--register-with-taints=%q", taints))
	}
	if b.MaxPods > 0 {
		args = append(args, fmt.Sprintf("--max-pods=%d", b.MaxPods))
	}
	k := b.Kubelet
	if k == nil {
		return args
	}
	if k.PodsPerCore != nil {
		args = append(args, fmt.Sprintf("--pods-per-core=%d", *k.PodsPerCore))
	}
	args = appendMapArg(args, "--system-reserved", k.SystemReserved, "=")
	args = appendMapArg(args, "--kube-reserved", k.KubeReserved, "=")
	args = appendMapArg(args, "--eviction-hard", k.EvictionHard, "<")
	args = appendMapArg(args, "--eviction-soft", k.EvictionSoft, "<")
	grace := map[string]string{}
	for signal, d := range k.EvictionSoftGracePeriod {
		grace[signal] = string(d)
	}
	args = appendMapArg(args, "--eviction-soft-grace-period", grace, "=")
	if k.EvictionMaxPodGracePeriod != nil {
		args = append(args, fmt.Sprintf("--eviction-max-pod-grace-period=%d", *k.EvictionMaxPodGracePeriod))
	}
	if k.ImageGCHighThresholdPercent != nil {
		args = append(args, fmt.Sprintf("--image-gc-high-threshold=%d", *k.ImageGCHighThresholdPercent))
	}
	if k.ImageGCLowThresholdPercent != nil {
		args = append(args, fmt.Sprintf("--image-gc-low-threshold=%d", *k.ImageGCLowThresholdPercent))
	}
	if k.CPUCFSQuota != nil {
		args = append(args, fmt.Sprintf("--cpu-cfs-quota=%t", *k.CPUCFSQuota))
	}
	return args
}

// appendMapArg adds name="k1<sep>v1,k2<sep>v2" (keys sorted) when m is not
// empty.
func appendMapArg(args []string, name string, m map[string]string, sep string) []string {
	if len(m) == 0 {
		return args
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + sep + m[k]
	}
	return append(args, fmt.Sprintf("%s=%q", name, strings.Join(pairs, ",")))
}

// singleQuoted quotes s for a POSIX shell or PowerShell single-quoted
// string: a quote inside is closed, escaped and reopened ('\”) for the
// shell, doubled (”) for PowerShell.
func singleQuoted(s string, powershell bool) string {
	if powershell {
		return "'" + strings.ReplaceAll(s, "'", "''") + "'"
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
