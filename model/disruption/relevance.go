package disruption

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// A simulation with topology runs the packer, which counts every pod of
// every node against every topology group of the pods it places. Most of
// those pods cannot matter: only pods a moving pod's spread constraint or
// pod (anti-)affinity term selects are counted, and only pods with required
// anti-affinity constrain newcomers. The selection below hands the packer
// those pods only (on every node), so a simulation's cost follows the pods
// that matter rather than the cluster's size.

// labelClass is a set of pods with the same namespace and labels.
type labelClass struct {
	namespace string
	labels    labels.Set
	// antiAffinity: some pod of the class has required pod anti-affinity.
	antiAffinity bool
}

// topologyTerm is one selector a moving pod counts pods with.
type topologyTerm struct {
	namespaces map[string]bool // nil: every namespace
	selector   labels.Selector
}

// classOf returns pod's label class index, creating it.
func (c *computation) classOf(pod *corev1.Pod) int {
	if i, ok := c.podClass[pod]; ok {
		return i
	}
	keys := make([]string, 0, len(pod.Labels))
	for k := range pod.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(pod.Namespace)
	for _, k := range keys {
		b.WriteByte(0)
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(pod.Labels[k])
	}
	key := b.String()
	i, ok := c.classIndex[key]
	if !ok {
		i = len(c.classes)
		c.classIndex[key] = i
		c.classes = append(c.classes, labelClass{namespace: namespaceOf(pod), labels: labels.Set(pod.Labels)})
	}
	if a := pod.Spec.Affinity; a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
		c.classes[i].antiAffinity = true
	}
	c.podClass[pod] = i
	return i
}

// termsOf lists the selectors the pods count others with.
func termsOf(pods []*corev1.Pod) []topologyTerm {
	var out []topologyTerm
	for _, pod := range pods {
		own := map[string]bool{namespaceOf(pod): true}
		for _, tsc := range pod.Spec.TopologySpreadConstraints {
			out = appendTerm(out, own, tsc.LabelSelector)
		}
		a := pod.Spec.Affinity
		if a == nil {
			continue
		}
		if a.PodAffinity != nil {
			out = appendAffinityTerms(out, pod, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
		}
		if a.PodAntiAffinity != nil {
			out = appendAffinityTerms(out, pod, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
		}
	}
	return out
}

// antiAffinityTerms are pod's required anti-affinity selectors.
func antiAffinityTerms(pod *corev1.Pod) []topologyTerm {
	return appendAffinityTerms(nil, pod, pod.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
}

func appendAffinityTerms(out []topologyTerm, pod *corev1.Pod, terms []corev1.PodAffinityTerm) []topologyTerm {
	for _, t := range terms {
		ns := map[string]bool{namespaceOf(pod): true}
		switch {
		case t.NamespaceSelector != nil:
			ns = nil
		case len(t.Namespaces) > 0:
			ns = map[string]bool{}
			for _, n := range t.Namespaces {
				ns[n] = true
			}
		}
		out = appendTerm(out, ns, t.LabelSelector)
	}
	return out
}

func appendTerm(out []topologyTerm, ns map[string]bool, ls *metav1.LabelSelector) []topologyTerm {
	if ls == nil {
		return out
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		sel = labels.Everything() // keep every pod rather than miss one
	}
	return append(out, topologyTerm{namespaces: ns, selector: sel})
}

// relevantClasses marks the label classes the packer must see for a
// simulation moving pods.
func (c *computation) relevantClasses(pods []*corev1.Pod) []bool {
	terms := termsOf(pods)
	out := make([]bool, len(c.classes))
	for i, cl := range c.classes {
		if cl.antiAffinity {
			out[i] = true
			continue
		}
		for _, t := range terms {
			if (t.namespaces == nil || t.namespaces[cl.namespace]) && t.selector.Matches(cl.labels) {
				out[i] = true
				break
			}
		}
	}
	return out
}

// relevantPods keeps the pods of n the packer must count.
func (c *computation) relevantPods(pods []*corev1.Pod, relevant []bool) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range pods {
		if i := c.classOf(pod); i < len(relevant) && relevant[i] {
			out = append(out, pod)
		}
	}
	return out
}

func namespaceOf(pod *corev1.Pod) string {
	if pod.Namespace == "" {
		return "default"
	}
	return pod.Namespace
}
