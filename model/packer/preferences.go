package packer

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/model/scheduling"
)

// Preferences are treated as requirements and relaxed one at a time, only
// for the pods that cannot be placed with them, as Karpenter's scheduler
// does (pkg/controllers/provisioning/scheduling/preferences.go). A class
// starts at the strictest variant of its pod and steps down its ladder
// while pods are left over:
//
//  1. preferred pod affinity terms, lightest first (the heaviest is kept longest);
//  2. preferred pod anti-affinity terms, lightest first;
//  3. preferred node affinity: the heaviest term is required, then the next
//     heaviest instead, until none is;
//  4. ScheduleAnyway topology spread constraints, last listed first;
//  5. PreferNoSchedule taints: avoided until here, then tolerated.
//
// Karpenter removes the heaviest pod (anti-)affinity term first; Millwright
// keeps it longest, so the preference the user weighs most is given up last.
// Required node-affinity terms are alternatives the packer weighs together,
// so they need no relaxation step.

// variant is one rung of a class's ladder: the pod as the packer reads it
// (preferred terms still in force left in the Preferred lists, at most one
// preferred node-affinity term, ScheduleAnyway constraints still in force)
// and whether PreferNoSchedule taints are still avoided.
type variant struct {
	pod         *corev1.Pod
	avoidPrefer bool
}

// preferenceState is what of a pod's preferences is still in force.
type preferenceState struct {
	podAffinity, podAnti []corev1.WeightedPodAffinityTerm // heaviest first
	nodePreferred        []corev1.PreferredSchedulingTerm // heaviest first; [0] in force
	soft                 []corev1.TopologySpreadConstraint
	hard                 []corev1.TopologySpreadConstraint
	avoidPrefer          bool
}

// preferenceLadder lists the variants of pod, strictest first; the last
// one carries no preference. avoidPrefer says whether some NodePool or node
// has a PreferNoSchedule taint the pod does not tolerate.
func preferenceLadder(pod *corev1.Pod, avoidPrefer bool) []variant {
	st := preferenceState{avoidPrefer: avoidPrefer}
	if aff := pod.Spec.Affinity; aff != nil {
		if aff.PodAffinity != nil {
			st.podAffinity = byWeight(aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if aff.PodAntiAffinity != nil {
			st.podAnti = byWeight(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if aff.NodeAffinity != nil {
			st.nodePreferred = append([]corev1.PreferredSchedulingTerm(nil), aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution...)
			sort.SliceStable(st.nodePreferred, func(i, j int) bool { return st.nodePreferred[i].Weight > st.nodePreferred[j].Weight })
		}
	}
	for _, tsc := range pod.Spec.TopologySpreadConstraints {
		if tsc.WhenUnsatisfiable == corev1.ScheduleAnyway {
			st.soft = append(st.soft, tsc)
		} else {
			st.hard = append(st.hard, tsc)
		}
	}
	if len(st.podAffinity)+len(st.podAnti)+len(st.nodePreferred)+len(st.soft) == 0 && !avoidPrefer {
		return []variant{{pod: pod}}
	}
	ladder := []variant{st.materialize(pod)}
	for st.relax() {
		ladder = append(ladder, st.materialize(pod))
	}
	return ladder
}

func byWeight(terms []corev1.WeightedPodAffinityTerm) []corev1.WeightedPodAffinityTerm {
	out := append([]corev1.WeightedPodAffinityTerm(nil), terms...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Weight > out[j].Weight })
	return out
}

// relax gives up the next preference; false when none is left.
func (st *preferenceState) relax() bool {
	switch {
	case len(st.podAffinity) > 0:
		st.podAffinity = st.podAffinity[:len(st.podAffinity)-1]
	case len(st.podAnti) > 0:
		st.podAnti = st.podAnti[:len(st.podAnti)-1]
	case len(st.nodePreferred) > 0:
		st.nodePreferred = st.nodePreferred[1:]
	case len(st.soft) > 0:
		st.soft = st.soft[:len(st.soft)-1]
	case st.avoidPrefer:
		st.avoidPrefer = false
	default:
		return false
	}
	return true
}

// materialize is the pod with only the preferences still in force.
func (st *preferenceState) materialize(pod *corev1.Pod) variant {
	out := &corev1.Pod{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}
	out.Spec.TopologySpreadConstraints = append(append([]corev1.TopologySpreadConstraint(nil), st.hard...), st.soft...)
	if aff := pod.Spec.Affinity; aff != nil {
		a := &corev1.Affinity{}
		if aff.PodAffinity != nil || len(st.podAffinity) > 0 {
			a.PodAffinity = &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: st.podAffinity}
			if aff.PodAffinity != nil {
				a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			}
		}
		if aff.PodAntiAffinity != nil {
			a.PodAntiAffinity = &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution:  aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
				PreferredDuringSchedulingIgnoredDuringExecution: st.podAnti,
			}
		}
		if aff.NodeAffinity != nil {
			a.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution}
			if len(st.nodePreferred) > 0 {
				a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = st.nodePreferred[:1]
			}
		}
		out.Spec.Affinity = a
	}
	return variant{pod: out, avoidPrefer: st.avoidPrefer}
}

// variantRequirements are the node requirements of a variant: the pod's
// required alternatives, each ANDed with the preferred node-affinity term
// in force. A preferred term no alternative can meet together with it
// leaves no alternative (the ladder then drops it).
func variantRequirements(pod *corev1.Pod) ([]scheduling.Requirements, error) {
	alts, err := scheduling.PodRequirements(pod)
	if err != nil {
		return nil, err
	}
	aff := pod.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || len(aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		return alts, nil
	}
	term := aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].Preference
	pref, err := scheduling.RequirementsFromNodeSelector(term.MatchExpressions)
	if err != nil {
		return nil, err
	}
	var out []scheduling.Requirements
	for _, alt := range alts {
		both := alt.Intersect(pref)
		if both.Satisfiable() == nil {
			out = append(out, both)
		}
	}
	return out, nil
}

// avoidsPreferNoSchedule reports whether taints hold a PreferNoSchedule
// taint the tolerations do not tolerate.
func avoidsPreferNoSchedule(tolerations []corev1.Toleration, taints []corev1.Taint) bool {
	for i := range taints {
		if taints[i].Effect != corev1.TaintEffectPreferNoSchedule {
			continue
		}
		hard := taints[i]
		hard.Effect = corev1.TaintEffectNoSchedule
		tol := make([]corev1.Toleration, 0, len(tolerations))
		for _, t := range tolerations {
			if t.Effect == corev1.TaintEffectPreferNoSchedule {
				t.Effect = corev1.TaintEffectNoSchedule
			}
			tol = append(tol, t)
		}
		if scheduling.Tolerates(tol, []corev1.Taint{hard}) != nil {
			return true
		}
	}
	return false
}
