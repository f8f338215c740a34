package planning

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/millwright/millwright/activities"
)

// Which PodDisruptionBudgets keep a pod's node from being a candidate,
// after Karpenter's pdb.Limits: a budget allowing no disruption blocks the
// pods it selects; two budgets on one pod block it whatever they allow
// (the Eviction API refuses); AlwaysAllow lets a pod that is not Ready go;
// a pod the drain never evicts (static, or tolerating the disrupted
// taint) is blocked by nothing.
func TestPDBIndex(t *testing.T) {
	budget := func(name string, allowed int32, policy *policyv1.UnhealthyPodEvictionPolicyType) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				UnhealthyPodEvictionPolicy: policy},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}}
	}
	always, ifHealthy := policyv1.AlwaysAllow, policyv1.IfHealthyBudget
	web := func(opts ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{"app": "web"}}}
		for _, o := range opts {
			o(p)
		}
		return p
	}
	notReady := func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	}
	ready := func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	mirror := func(p *corev1.Pod) {
		p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "Node", Name: "n1", APIVersion: "v1"}}
	}
	toleratesAll := func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} }
	toleratesDisrupted := func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: activities.DisruptedTaintKey, Operator: corev1.TolerationOpExists}}
	}
	otherNamespace := func(p *corev1.Pod) { p.Namespace = "other" }
	spec := func(pdb *policyv1.PodDisruptionBudget, minAvailable, maxUnavailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
		pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable = minAvailable, maxUnavailable
		return pdb
	}

	cases := []struct {
		name string
		// source names the Karpenter test the case follows.
		source string
		pdbs   []*policyv1.PodDisruptionBudget
		pod    *corev1.Pod
		want   []string
		// always: the budgets never allow the eviction (Karpenter's
		// fully blocking PDBs).
		always bool
	}{
		{name: "a budget allowing no disruption blocks", source: "suite_test.go: should not consider candidates that have fully blocking PDBs",
			pdbs: []*policyv1.PodDisruptionBudget{budget("web", 0, nil)}, pod: web(ready), want: []string{"default/web"}},
		{name: "a budget allowing one does not", pdbs: []*policyv1.PodDisruptionBudget{budget("web", 1, nil)}, pod: web(ready)},
		{name: "two budgets block whatever they allow", source: "suite_test.go: should not consider candidates that have multiple PDBs on the same pod",
			pdbs: []*policyv1.PodDisruptionBudget{budget("a", 1, nil), budget("b", 1, nil)}, pod: web(ready), want: []string{"default/a", "default/b"}, always: true},
		{name: "maxUnavailable 0 never allows one", source: "pdb.go isFullyBlocking: maxUnavailable 0",
			pdbs: []*policyv1.PodDisruptionBudget{spec(budget("web", 0, nil), nil, new(intstr.FromInt32(0)))}, pod: web(ready), want: []string{"default/web"}, always: true},
		{name: `maxUnavailable "0%" never allows one`, source: `pdb.go isFullyBlocking: maxUnavailable "0%"`,
			pdbs: []*policyv1.PodDisruptionBudget{spec(budget("web", 0, nil), nil, new(intstr.FromString("0%")))}, pod: web(ready), want: []string{"default/web"}, always: true},
		{name: `minAvailable "100%" never allows one`, source: `pdb.go isFullyBlocking: minAvailable "100%"`,
			pdbs: []*policyv1.PodDisruptionBudget{spec(budget("web", 0, nil), new(intstr.FromString("100%")), nil)}, pod: web(ready), want: []string{"default/web"}, always: true},
		{name: "minAvailable 1 blocks now, not always", source: "pdb.go isFullyBlocking: other budgets allow evictions once pods recover",
			pdbs: []*policyv1.PodDisruptionBudget{spec(budget("web", 0, nil), new(intstr.FromInt32(1)), nil)}, pod: web(ready), want: []string{"default/web"}},
		{name: "a budget of another namespace does not", pdbs: []*policyv1.PodDisruptionBudget{budget("web", 0, nil)}, pod: web(otherNamespace)},
		{name: "AlwaysAllow lets a pod that is not Ready go", source: "consolidation_test.go: can replace nodes, considers PDB policy",
			pdbs: []*policyv1.PodDisruptionBudget{budget("web", 0, &always)}, pod: web(notReady)},
		{name: "AlwaysAllow still holds a Ready pod", source: "consolidation_test.go: can replace nodes, considers PDB policy",
			pdbs: []*policyv1.PodDisruptionBudget{budget("web", 0, &always)}, pod: web(ready), want: []string{"default/web"}},
		{name: "IfHealthyBudget holds a pod that is not Ready", source: "consolidation_test.go: can replace nodes, considers PDB policy",
			pdbs: []*policyv1.PodDisruptionBudget{budget("web", 0, &ifHealthy)}, pod: web(notReady), want: []string{"default/web"}},
		{name: "a static pod's budget does not block", source: "suite_test.go: should consider candidates that have fully blocking PDBs on mirror pods",
			pdbs: []*policyv1.PodDisruptionBudget{budget("web", 0, nil)}, pod: web(mirror)},
		{name: "a pod tolerating every taint is not evicted, its budget does not block", source: "pdb.go isEvictable: a pod tolerating the disrupted taint is not evicted",
			pdbs: []*policyv1.PodDisruptionBudget{budget("web", 0, nil)}, pod: web(toleratesAll)},
		{name: "nor one tolerating the disrupted taint", pdbs: []*policyv1.PodDisruptionBudget{budget("web", 0, nil)}, pod: web(toleratesDisrupted)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got, always := pdbIndex(tc.pdbs)(tc.pod); !slices.Equal(got, tc.want) || always != tc.always {
				t.Errorf("blocking %v (always %t), want %v (always %t) (%s)", got, always, tc.want, tc.always, tc.source)
			}
		})
	}
}
