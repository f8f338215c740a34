package packer_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

var zones = []string{"zone-a", "zone-b", "zone-c"}

// offer is an available offering.
func offer(zone, ct string, price float64) catalog.Offering {
	return catalog.Offering{Zone: zone, CapacityType: ct, Price: price, Available: true}
}

// everywhere offers spot and on-demand in every zone at the given prices.
func everywhere(spot, onDemand float64) []catalog.Offering {
	var out []catalog.Offering
	for _, z := range zones {
		out = append(out, offer(z, scheduling.CapacityTypeSpot, spot), offer(z, scheduling.CapacityTypeOnDemand, onDemand))
	}
	return out
}

// instanceType builds a type whose allocatable equals its capacity
// (resources as name/quantity pairs), with the given offerings.
func instanceType(name, arch string, offerings []catalog.Offering, resources ...string) *catalog.InstanceType {
	r, err := scheduling.ParseResources(resources...)
	if err != nil {
		panic(err)
	}
	return &catalog.InstanceType{
		Name:        name,
		Labels:      map[string]string{scheduling.LabelArch: arch, scheduling.LabelOS: "linux", scheduling.LabelInstanceType: name, scheduling.LabelInstanceFamily: name[:1]},
		Capacity:    r,
		Allocatable: r,
		Offerings:   offerings,
	}
}

// A small catalog: two amd64 sizes, an arm64 type (cheaper), a GPU type.
func smallCatalog() []*catalog.InstanceType {
	return []*catalog.InstanceType{
		instanceType("m.small", "amd64", everywhere(0.04, 0.10), "cpu", "2", "memory", "8Gi", "pods", "10"),
		instanceType("m.large", "amd64", everywhere(0.16, 0.40), "cpu", "8", "memory", "32Gi", "pods", "40"),
		instanceType("a.small", "arm64", everywhere(0.03, 0.08), "cpu", "2", "memory", "8Gi", "pods", "10"),
		instanceType("g.large", "amd64", everywhere(0.90, 2.00), "cpu", "8", "memory", "32Gi", "pods", "40", "nvidia.com/gpu", "1"),
	}
}

type poolOption func(*packer.NodePool)

func nodePool(name string, types []*catalog.InstanceType, opts ...poolOption) packer.NodePool {
	np := packer.NodePool{Name: name, InstanceTypes: types}
	for _, o := range opts {
		o(&np)
	}
	return np
}

func withWeight(w int32) poolOption { return func(np *packer.NodePool) { np.Weight = w } }
func withTaint(key, value string) poolOption {
	return func(np *packer.NodePool) {
		np.Taints = append(np.Taints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffectNoSchedule})
	}
}
func withPoolRequirement(key string, op corev1.NodeSelectorOperator, values ...string) poolOption {
	return func(np *packer.NodePool) {
		np.Requirements = append(np.Requirements, corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values})
	}
}
func withCapacityTypes(cts ...string) poolOption {
	return func(np *packer.NodePool) { np.CapacityTypes = cts }
}
func withLimit(name, q string) poolOption {
	return func(np *packer.NodePool) {
		if np.Limits == nil {
			np.Limits = corev1.ResourceList{}
		}
		np.Limits[corev1.ResourceName(name)] = resource.MustParse(q)
	}
}

type podOption func(*corev1.Pod)

// pod builds a pending pod requesting cpu and memory.
func pod(name, cpu, memory string, opts ...podOption) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// pods builds n identical pods named prefix-0..n-1.
func pods(n int, prefix, cpu, memory string, opts ...podOption) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = pod(fmt.Sprintf("%s-%d", prefix, i), cpu, memory, opts...)
	}
	return out
}

func withLabel(k, v string) podOption { return func(p *corev1.Pod) { p.Labels[k] = v } }
func withNodeSelector(k, v string) podOption {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		p.Spec.NodeSelector[k] = v
	}
}
func withRequest(name, q string) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceName(name)] = resource.MustParse(q)
	}
}
func withToleration(key string) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists})
	}
}
func withSpread(key string, maxSkew int32, when corev1.UnsatisfiableConstraintAction, selector map[string]string) podOption {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: when, LabelSelector: &metav1.LabelSelector{MatchLabels: selector}})
	}
}
func withAntiAffinity(key string, selector map[string]string) podOption {
	return func(p *corev1.Pod) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		if p.Spec.Affinity.PodAntiAffinity == nil {
			p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
			corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: selector}})
	}
}
func withAffinity(key string, selector map[string]string) podOption {
	return func(p *corev1.Pod) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		if p.Spec.Affinity.PodAffinity == nil {
			p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{}
		}
		p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
			corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: selector}})
	}
}
func withNodeAffinity(terms ...[]corev1.NodeSelectorRequirement) podOption {
	return func(p *corev1.Pod) {
		ns := &corev1.NodeSelector{}
		for _, t := range terms {
			ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
		}
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: ns}
	}
}
func withInitContainer(cpu, memory string) podOption {
	return func(p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "init", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}})
	}
}

func join(groups ...[]*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func resources(pairs ...string) scheduling.Resources {
	r, err := scheduling.ParseResources(pairs...)
	if err != nil {
		panic(err)
	}
	return r
}

func affinityOf(p *corev1.Pod) *corev1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	return p.Spec.Affinity
}

func withPreferredNodeAffinity(weight int32, reqs ...corev1.NodeSelectorRequirement) podOption {
	return func(p *corev1.Pod) {
		a := affinityOf(p)
		if a.NodeAffinity == nil {
			a.NodeAffinity = &corev1.NodeAffinity{}
		}
		a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: weight, Preference: corev1.NodeSelectorTerm{MatchExpressions: reqs}})
	}
}

func withPreferredAffinity(weight int32, key string, selector map[string]string) podOption {
	return withPreferredPodTerm(false, weight, key, selector)
}

func withPreferredAntiAffinity(weight int32, key string, selector map[string]string) podOption {
	return withPreferredPodTerm(true, weight, key, selector)
}

// withPreferredPodTerm adds a preferred pod affinity (or anti-affinity) term.
func withPreferredPodTerm(anti bool, weight int32, key string, selector map[string]string) podOption {
	return func(p *corev1.Pod) {
		a := affinityOf(p)
		term := corev1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: selector}}}
		if anti {
			if a.PodAntiAffinity == nil {
				a.PodAntiAffinity = &corev1.PodAntiAffinity{}
			}
			a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, term)
			return
		}
		if a.PodAffinity == nil {
			a.PodAffinity = &corev1.PodAffinity{}
		}
		a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, term)
	}
}

// withAffinityNamespaceSelector adds a required pod affinity term whose
// namespaces are chosen by namespace labels.
func withAffinityNamespaceSelector(anti bool, key string, selector, nsSelector map[string]string) podOption {
	return func(p *corev1.Pod) {
		a := affinityOf(p)
		term := corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: nsSelector}}
		if anti {
			if a.PodAntiAffinity == nil {
				a.PodAntiAffinity = &corev1.PodAntiAffinity{}
			}
			a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, term)
			return
		}
		if a.PodAffinity == nil {
			a.PodAffinity = &corev1.PodAffinity{}
		}
		a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, term)
	}
}

func withHostPort(port int32) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port})
	}
}

func withNamespace(ns string) podOption { return func(p *corev1.Pod) { p.Namespace = ns } }

// withSpreadPolicies sets the last spread constraint's node inclusion policies.
func withSpreadPolicies(affinity, taints corev1.NodeInclusionPolicy) podOption {
	return func(p *corev1.Pod) {
		tsc := &p.Spec.TopologySpreadConstraints[len(p.Spec.TopologySpreadConstraints)-1]
		if affinity != "" {
			tsc.NodeAffinityPolicy = &affinity
		}
		if taints != "" {
			tsc.NodeTaintsPolicy = &taints
		}
	}
}

func withTaintEffect(key string, effect corev1.TaintEffect) poolOption {
	return func(np *packer.NodePool) {
		np.Taints = append(np.Taints, corev1.Taint{Key: key, Value: "true", Effect: effect})
	}
}

func inZones(zs ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: scheduling.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: zs}
}
