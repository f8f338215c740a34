package scheduling

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// NodeNameField is the only field a node-affinity matchFields term may
// select on; Millwright treats it as the node's hostname label.
const NodeNameField = "metadata.name"

// PodRequirements returns the node requirements of a pod as alternatives: a
// node suits the pod when it meets any one of them. Each alternative is the
// pod's nodeSelector ANDed with one required node-affinity term (terms are
// ORed, as in kube-scheduler). A pod with no required affinity has exactly one
// alternative. An empty result means no node can ever suit the pod (every
// term was empty or self-contradictory). Keys are canonicalised.
func PodRequirements(pod *corev1.Pod) ([]Requirements, error) {
	base := nodeSelectorRequirements(pod.Spec.NodeSelector)
	aff := pod.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return []Requirements{base}, nil
	}
	var out []Requirements
	for i, term := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue // an empty term matches no node
		}
		rs, err := RequirementsFromNodeSelector(term.MatchExpressions)
		if err != nil {
			return nil, fmt.Errorf("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[%d].matchExpressions: %w", i, err)
		}
		for j, f := range term.MatchFields {
			if f.Key != NodeNameField {
				return nil, fmt.Errorf("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[%d].matchFields[%d]: field %q is not supported (only %s)", i, j, f.Key, NodeNameField)
			}
			r, err := NewRequirement(LabelHostname, f.Operator, f.Values...)
			if err != nil {
				return nil, fmt.Errorf("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[%d].matchFields[%d]: %w", i, j, err)
			}
			rs.Add(r)
		}
		alt := base.Intersect(rs)
		if alt.Satisfiable() != nil {
			continue
		}
		out = append(out, alt)
	}
	return out, nil
}

func nodeSelectorRequirements(selector map[string]string) Requirements {
	if len(selector) == 0 {
		return Requirements{}
	}
	keys := make([]string, 0, len(selector))
	for k := range selector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var rs Requirements
	for _, k := range keys {
		rs.Add(MustRequirement(k, corev1.NodeSelectorOpIn, selector[k]))
	}
	return rs
}
