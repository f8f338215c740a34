package planning

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/millwright/millwright/model/scheduling"
)

// knownResources converts a ResourceList keeping only resource names the
// process already tracks (the core ones, accelerators, and whatever a
// pending pod or instance type requested). A Node's other resources
// (hugepages, attachable volumes...) matter to no planned pod, and
// registering every name seen on every Node would exhaust the packer's
// fixed-size resource vector.
func knownResources(list corev1.ResourceList) scheduling.Resources {
	var r scheduling.Resources
	for name, q := range list {
		i, ok := scheduling.LookupResourceIndex(name)
		if !ok {
			continue
		}
		if i == scheduling.IndexCPU {
			r[i] = q.MilliValue()
		} else {
			r[i] = q.Value()
		}
	}
	return r
}

// podRequests is what a pod occupies on its node (as kube-scheduler counts
// it), in tracked resources only; see knownResources.
func podRequests(pod *corev1.Pod) scheduling.Resources {
	r := knownResources(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	r[scheduling.IndexPods] = 1
	return r
}

func resourceQuantity(n int64) *resource.Quantity {
	return resource.NewQuantity(n, resource.DecimalSI)
}

// formatResources renders the non-zero amounts of r for humans:
// "cpu 1500m, memory 3Gi, nvidia.com/gpu 1" (pods left out).
func formatResources(r scheduling.Resources) string {
	var parts []string
	for i, v := range r {
		if v == 0 || i == scheduling.IndexPods {
			continue
		}
		name := scheduling.ResourceNameAt(i)
		switch i {
		case scheduling.IndexCPU:
			parts = append(parts, "cpu "+resource.NewMilliQuantity(v, resource.DecimalSI).String())
		case scheduling.IndexMemory, scheduling.IndexEphemeralStorage:
			parts = append(parts, fmt.Sprintf("%s %s", name, formatBytes(v)))
		default:
			parts = append(parts, fmt.Sprintf("%s %d", name, v))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	sort.SliceStable(parts, func(i, j int) bool { return resourceOrder(parts[i]) < resourceOrder(parts[j]) })
	return strings.Join(parts, ", ")
}

// resourceOrder lists cpu and memory first, in that order.
func resourceOrder(part string) int {
	switch {
	case strings.HasPrefix(part, "cpu "):
		return 0
	case strings.HasPrefix(part, "memory "):
		return 1
	}
	return 2
}

// formatBytes rounds to one decimal of the largest binary unit that fits.
func formatBytes(v int64) string {
	const (
		mi = int64(1) << 20
		gi = int64(1) << 30
	)
	switch {
	case v >= gi:
		return trimZero(fmt.Sprintf("%.1f", float64(v)/float64(gi))) + "Gi"
	case v >= mi:
		return trimZero(fmt.Sprintf("%.1f", float64(v)/float64(mi))) + "Mi"
	}
	return fmt.Sprintf("%d", v)
}

func trimZero(s string) string { return strings.TrimSuffix(s, ".0") }
