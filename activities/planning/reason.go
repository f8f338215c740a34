package planning

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// podsNamedInReason bounds the pod keys a launch reason lists.
const podsNamedInReason = 3

// launchReason explains a plan in one line: which pods need what, what was
// considered, what was chosen and why the other instance types were not.
//
//	2 pod(s) (ns/a, ns/b) need cpu 1500m, memory 3Gi (+ DaemonSets cpu 100m);
//	considered 412 instance types of NodePool default; chose m5.large spot
//	us-east-1a $0.0400/h, 11 fallback option(s), in any of us-east-1a,
//	us-east-1b, us-east-1c; rejected: 300 by pool
//	requirement millwright.dev/instance-category, 50 too small, 51 more expensive
func (w *world) launchReason(ps *poolState, plan *packer.NodePlan) string {
	var podsReq, dsReq scheduling.Resources
	keys := make([]string, 0, len(plan.Pods))
	for _, pod := range plan.Pods {
		podsReq = podsReq.Add(podRequests(pod))
		keys = append(keys, podKey(pod))
	}
	sort.Strings(keys)
	for _, pod := range plan.DaemonSetPods {
		dsReq = dsReq.Add(podRequests(pod))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d pod(s) (%s) need %s", len(keys), nameSome(keys, podsNamedInReason), formatResources(podsReq))
	if len(plan.DaemonSetPods) > 0 {
		fmt.Fprintf(&b, " (+ %d DaemonSet(s) %s)", len(plan.DaemonSetPods), formatResources(dsReq))
	}
	fmt.Fprintf(&b, "; considered %d instance types of NodePool %s", len(ps.types), ps.pool.Name)
	fmt.Fprintf(&b, "; chose %s %s %s $%.4f/h", plan.InstanceType, plan.CapacityType, plan.Zone, plan.Price)
	if n := packer.OptionTypes(plan.Options) - 1; n > 0 {
		fmt.Fprintf(&b, ", %d fallback option(s)", n)
	}
	if len(plan.Zones) > 1 {
		// Its pods do not depend on the zone: CreateFleet may take any.
		fmt.Fprintf(&b, ", in any of %s", strings.Join(plan.Zones, ", "))
	}
	if rejected := w.rejections(ps, plan, podsReq.Add(dsReq)); rejected != "" {
		b.WriteString("; rejected: ")
		b.WriteString(rejected)
	}
	return b.String()
}

// nameSome lists up to n names and how many more there are.
func nameSome(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, +%d more", strings.Join(names[:n], ", "), len(names)-n)
}

// rejections counts why each of the pool's instance types other than the
// plan's options was not chosen, by the first reason that applies, in the
// order a launch is built: the pool's requirements, an available offering
// in the plan's zone, the pods' node selectors and affinity, size, price.
func (w *world) rejections(ps *poolState, plan *packer.NodePlan, need scheduling.Resources) string {
	options := map[string]bool{}
	for _, o := range plan.Options {
		options[o.InstanceType] = true
	}
	podAlternatives := distinctAlternatives(plan.Pods)
	byRequirement := map[string]int{}
	var noOffering, byPods, tooSmall, pricier int
	ctReq, hasCT := ps.reqs.Get(scheduling.LabelCapacityType)
	for _, it := range ps.types {
		if options[it.Name] {
			continue
		}
		labels := ps.nodeLabels(it, plan.Labels)
		if key, bad := poolMismatch(ps.reqs, labels); bad {
			byRequirement[key]++
			continue
		}
		if !hasOffering(it.Offerings, plan.Zone, func(ct string) bool { return !hasCT || ctReq.Has(ct) }) {
			noOffering++
			continue
		}
		labels[scheduling.LabelZone] = plan.Zone
		labels[scheduling.LabelCapacityType] = plan.CapacityType
		if !suitsAll(podAlternatives, labels) {
			byPods++
			continue
		}
		if !need.Fits(it.Allocatable) {
			tooSmall++
			continue
		}
		pricier++
	}

	var parts []string
	keys := make([]string, 0, len(byRequirement))
	for k := range byRequirement {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if byRequirement[keys[i]] != byRequirement[keys[j]] {
			return byRequirement[keys[i]] > byRequirement[keys[j]]
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d by pool requirement %s", byRequirement[k], k))
	}
	if noOffering > 0 {
		parts = append(parts, fmt.Sprintf("%d without an available offering in %s", noOffering, plan.Zone))
	}
	if byPods > 0 {
		parts = append(parts, fmt.Sprintf("%d by the pods' node selectors or affinity", byPods))
	}
	if tooSmall > 0 {
		parts = append(parts, fmt.Sprintf("%d too small", tooSmall))
	}
	if pricier > 0 {
		parts = append(parts, fmt.Sprintf("%d more expensive", pricier))
	}
	return strings.Join(parts, ", ")
}

// nodeLabels are the canonical labels a node of this pool and type would
// carry (zone and capacity type aside): the pool's labels, the plan's
// custom labels and the type's labels.
func (ps *poolState) nodeLabels(it *catalog.InstanceType, planLabels map[string]string) map[string]string {
	labels := make(map[string]string, len(ps.labels)+len(it.Labels)+len(planLabels))
	for k, v := range planLabels {
		if scheduling.CanonicalLabelKey(k) == k && !isLaunchLabel(k) {
			labels[k] = v
		}
	}
	for k, v := range ps.labels {
		labels[k] = v
	}
	for k, v := range scheduling.CanonicalLabels(it.Labels) {
		labels[k] = v
	}
	labels[scheduling.LabelInstanceType] = it.Name
	return labels
}

// poolMismatch returns the key of the first pool requirement a node with
// labels fails, ignoring zone and capacity type (decided per offering) and
// custom keys the labels leave undefined (the pool's own open choices).
func poolMismatch(reqs scheduling.Requirements, labels map[string]string) (string, bool) {
	for _, r := range reqs.Items() {
		switch r.Key() {
		case scheduling.LabelZone, scheduling.LabelCapacityType, scheduling.LabelHostname:
			continue
		}
		v, ok := labels[r.Key()]
		if !ok && !isLaunchLabel(r.Key()) {
			continue
		}
		if !r.Matches(v, ok) {
			return r.Key(), true
		}
	}
	return "", false
}

func hasOffering(offerings catalog.Offerings, zone string, allowed func(capacityType string) bool) bool {
	for _, o := range offerings {
		if o.Available && (zone == "" || o.Zone == zone) && allowed(o.CapacityType) {
			return true
		}
	}
	return false
}

// distinctAlternatives returns each pod's node requirements (alternatives,
// ORed), once per distinct set.
func distinctAlternatives(pods []*corev1.Pod) [][]scheduling.Requirements {
	seen := map[string]bool{}
	var out [][]scheduling.Requirements
	for _, pod := range pods {
		alts, err := scheduling.PodRequirements(pod)
		if err != nil {
			continue // the packer placed it, so it could read it
		}
		var key strings.Builder
		for _, alt := range alts {
			key.WriteString(alt.String())
			key.WriteByte('|')
		}
		if seen[key.String()] {
			continue
		}
		seen[key.String()] = true
		out = append(out, alts)
	}
	return out
}

// suitsAll reports whether a new node with labels meets one alternative of
// every pod. A new node's hostname is unknown; it meets any hostname
// requirement but In.
func suitsAll(pods [][]scheduling.Requirements, labels map[string]string) bool {
	for _, alts := range pods {
		ok := false
		for _, alt := range alts {
			if suitsNewNode(alt, labels) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func suitsNewNode(alt scheduling.Requirements, labels map[string]string) bool {
	for _, r := range alt.Items() {
		if r.Key() == scheduling.LabelHostname {
			if !r.Matches("\x00new-node", true) {
				return false
			}
			continue
		}
		v, ok := labels[r.Key()]
		if !r.Matches(v, ok) {
			return false
		}
	}
	return true
}
