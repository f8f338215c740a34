package planning

import (
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/activities"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/disruption"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// launchSpec turns one packer node plan into what the node workflow
// launches: the packer's options (cheapest first, at most
// packer.MaxInstanceTypeOptions) with their offerings, the pool's template,
// the labels the plan's pods rely on and the reason for the node.
func (w *world) launchSpec(cluster string, ps *poolState, plan *packer.NodePlan, registrationTimeout time.Duration) activities.NodeLaunchSpec {
	spec := baseSpec(cluster, ps, registrationTimeout)
	spec.InstanceTypeOptions = planOptions(plan)
	spec.Labels = specLabels(ps, plan.Labels)
	spec.Requirements = specRequirements(ps, spec.InstanceTypeOptions, spec.Labels)
	spec.ExtendedResources = extendedResources(plan.Requests)
	for _, pod := range plan.Pods {
		spec.PodKeys = append(spec.PodKeys, podKey(pod))
	}
	slices.Sort(spec.PodKeys)
	spec.LaunchReason = w.launchReason(ps, plan)
	return spec
}

// baseSpec is what every node of the pool gets from its template, and the
// drift stamps of the pool and its class (disruption.HashAnnotations).
func baseSpec(cluster string, ps *poolState, registrationTimeout time.Duration) activities.NodeLaunchSpec {
	np := ps.pool
	annotations := maps.Clone(np.Spec.Template.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	maps.Copy(annotations, disruption.HashAnnotations(np, ps.nodeClass))
	spec := activities.NodeLaunchSpec{
		Cluster:             cluster,
		NodePool:            np.Name,
		NodeClassName:       np.NodeClassName(),
		Annotations:         annotations,
		Taints:              np.Spec.Template.Spec.Taints,
		StartupTaints:       np.Spec.Template.Spec.StartupTaints,
		RegistrationTimeout: registrationTimeout,
	}
	if d, never := np.ExpireAfterDuration(); !never {
		spec.ExpireAfter = activities.After(d)
	}
	if d, never := np.ConsolidateAfterDuration(); !never {
		spec.ConsolidateAfter = activities.After(d)
	}
	if d, ok := np.TerminationGracePeriodDuration(); ok {
		spec.TerminationGracePeriod = activities.After(d)
	}
	return spec
}

// planOptions lists the plan's options in the packer's order, one per
// instance type, each with its offerings: in the plan's zone, or in every
// zone the packer found its pods do not depend on.
func planOptions(plan *packer.NodePlan) []activities.InstanceTypeOption {
	var options []activities.InstanceTypeOption
	index := map[string]int{}
	for _, o := range plan.Options {
		offering := activities.Offering{Zone: plan.ZoneOf(o), CapacityType: o.CapacityType, PricePerHour: o.Price}
		if i, ok := index[o.InstanceType]; ok {
			options[i].Offerings = append(options[i].Offerings, offering)
			continue
		}
		index[o.InstanceType] = len(options)
		options = append(options, activities.InstanceTypeOption{Name: o.InstanceType, Offerings: []activities.Offering{offering}})
	}
	return options
}

// isLaunchLabel reports a (canonical) key whose value comes from the
// instance type or the offering chosen at launch, or that Millwright sets
// itself: such labels must not be fixed in a spec whose options differ.
func isLaunchLabel(key string) bool {
	return key == scheduling.LabelHostname || slices.Contains(apisv1.WellKnownLabels, key)
}

// specLabels are the labels every node of a plan carries whichever option
// launches: the pool's template labels and nodepool label, plus the custom
// labels the packer fixed for the plan (pinned by the pool's requirements,
// or chosen among values the requirements leave open), which the plan's
// pods may select. Keys are canonical; the launcher adds the aliases.
func specLabels(ps *poolState, planLabels map[string]string) map[string]string {
	labels := make(map[string]string, len(ps.labels))
	for k, v := range ps.labels {
		labels[k] = v
	}
	for k, v := range planLabels {
		if scheduling.CanonicalLabelKey(k) != k || isLaunchLabel(k) {
			continue
		}
		if _, set := labels[k]; !set {
			labels[k] = v
		}
	}
	return labels
}

// customLabels are labels on keys that are not launch labels which reqs
// pins to one value; with chooseOpen, a key reqs leaves open to a finite set
// of values gets the first of them (an empty node needs some value).
func customLabels(reqs scheduling.Requirements, chooseOpen bool) map[string]string {
	labels := map[string]string{}
	for _, r := range reqs.Items() {
		if isLaunchLabel(r.Key()) {
			continue
		}
		if v, ok := r.SingleValue(); ok {
			labels[r.Key()] = v
			continue
		}
		if chooseOpen && r.IsFinite() && !r.AllowsAbsent() && len(r.Values()) > 0 {
			labels[r.Key()] = r.Values()[0]
		}
	}
	return labels
}

// pinnedCustomLabels are the custom labels every node of the pool carries.
func pinnedCustomLabels(reqs scheduling.Requirements) map[string]string {
	return customLabels(reqs, false)
}

// specRequirements are the pool's requirements narrowed to the plan: its
// instance types, zones and capacity types, its pool and its labels.
func specRequirements(ps *poolState, options []activities.InstanceTypeOption, labels map[string]string) []corev1.NodeSelectorRequirement {
	var names, zones, capacityTypes []string
	for _, option := range options {
		names = appendMissing(names, option.Name)
		for _, o := range option.Offerings {
			zones = appendMissing(zones, o.Zone)
			capacityTypes = appendMissing(capacityTypes, o.CapacityType)
		}
	}
	reqs := ps.reqs.Intersect(scheduling.RequirementsFromLabels(labels))
	reqs.Add(
		scheduling.MustRequirement(scheduling.LabelInstanceType, corev1.NodeSelectorOpIn, names...),
		scheduling.MustRequirement(scheduling.LabelZone, corev1.NodeSelectorOpIn, zones...),
		scheduling.MustRequirement(scheduling.LabelCapacityType, corev1.NodeSelectorOpIn, capacityTypes...),
	)
	return reqs.NodeSelectorRequirements()
}

func appendMissing(list []string, v string) []string {
	if slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

// extendedResources are the resources beyond cpu, memory, pods and
// ephemeral storage in r: the node is initialized only once they are
// allocatable.
func extendedResources(r scheduling.Resources) corev1.ResourceList {
	var list corev1.ResourceList
	for i, v := range r {
		switch i {
		case scheduling.IndexCPU, scheduling.IndexMemory, scheduling.IndexPods, scheduling.IndexEphemeralStorage:
			continue
		}
		if v <= 0 {
			continue
		}
		if list == nil {
			list = corev1.ResourceList{}
		}
		list[scheduling.ResourceNameAt(i)] = *resourceQuantity(v)
	}
	return list
}
