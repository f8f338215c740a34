package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func req(key string, op corev1.NodeSelectorOperator, values ...string) Requirement {
	return MustRequirement(key, op, values...)
}

func TestRequirementMatches(t *testing.T) {
	tests := []struct {
		name    string
		r       Requirement
		value   string
		present bool
		want    bool
	}{
		{"In listed", req("k", "In", "a", "b"), "a", true, true},
		{"In unlisted", req("k", "In", "a", "b"), "c", true, false},
		{"In absent", req("k", "In", "a"), "", false, false},
		{"NotIn listed", req("k", "NotIn", "a"), "a", true, false},
		{"NotIn other", req("k", "NotIn", "a"), "b", true, true},
		{"NotIn absent", req("k", "NotIn", "a"), "", false, true},
		{"Exists present", req("k", "Exists"), "x", true, true},
		{"Exists absent", req("k", "Exists"), "", false, false},
		{"DoesNotExist present", req("k", "DoesNotExist"), "x", true, false},
		{"DoesNotExist absent", req("k", "DoesNotExist"), "", false, true},
		{"Gt above", req("k", "Gt", "4"), "8", true, true},
		{"Gt equal", req("k", "Gt", "4"), "4", true, false},
		{"Gt non-numeric", req("k", "Gt", "4"), "x", true, false},
		{"Gt absent", req("k", "Gt", "4"), "", false, false},
		{"Lt below", req("k", "Lt", "4"), "3", true, true},
		{"Lt equal", req("k", "Lt", "4"), "4", true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.Matches(tc.value, tc.present); got != tc.want {
				t.Fatalf("%s Matches(%q,%v) = %v, want %v", tc.r, tc.value, tc.present, got, tc.want)
			}
		})
	}
}

func TestRequirementIntersect(t *testing.T) {
	tests := []struct {
		name        string
		a, b        Requirement
		satisfiable bool
		has         []string
		hasNot      []string
		absentOK    bool
	}{
		{"In∩In overlap", req("k", "In", "a", "b"), req("k", "In", "b", "c"), true, []string{"b"}, []string{"a", "c"}, false},
		{"In∩In disjoint", req("k", "In", "a"), req("k", "In", "b"), false, nil, []string{"a", "b"}, false},
		{"In∩NotIn", req("k", "In", "a", "b"), req("k", "NotIn", "a"), true, []string{"b"}, []string{"a"}, false},
		{"In∩NotIn empty", req("k", "In", "a"), req("k", "NotIn", "a"), false, nil, []string{"a"}, false},
		{"NotIn∩NotIn", req("k", "NotIn", "a"), req("k", "NotIn", "b"), true, []string{"c"}, []string{"a", "b"}, true},
		{"NotIn∩DoesNotExist", req("k", "NotIn", "a"), req("k", "DoesNotExist"), true, nil, []string{"a", "b"}, true},
		{"Exists∩DoesNotExist", req("k", "Exists"), req("k", "DoesNotExist"), false, nil, []string{"a"}, false},
		{"Exists∩In", req("k", "Exists"), req("k", "In", "a"), true, []string{"a"}, []string{"b"}, false},
		{"Gt∩Lt window", req("k", "Gt", "2"), req("k", "Lt", "5"), true, []string{"3", "4"}, []string{"2", "5"}, false},
		{"Gt∩Lt empty", req("k", "Gt", "4"), req("k", "Lt", "5"), false, nil, []string{"4", "5"}, false},
		{"Gt∩Lt excluded by NotIn", req("k", "Gt", "2"), req("k", "Lt", "4").Intersect(req("k", "NotIn", "3")), false, nil, []string{"3"}, false},
		{"In∩Gt filters", req("k", "In", "1", "8", "x"), req("k", "Gt", "4"), true, []string{"8"}, []string{"1", "x"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, got := range []Requirement{tc.a.Intersect(tc.b), tc.b.Intersect(tc.a)} {
				if got.Satisfiable() != tc.satisfiable {
					t.Fatalf("%s: Satisfiable() = %v, want %v", got, got.Satisfiable(), tc.satisfiable)
				}
				for _, v := range tc.has {
					if !got.Has(v) {
						t.Errorf("%s: Has(%q) = false, want true", got, v)
					}
				}
				for _, v := range tc.hasNot {
					if got.Has(v) {
						t.Errorf("%s: Has(%q) = true, want false", got, v)
					}
				}
				if got.AllowsAbsent() != tc.absentOK {
					t.Errorf("%s: AllowsAbsent() = %v, want %v", got, got.AllowsAbsent(), tc.absentOK)
				}
			}
		})
	}
}

func TestNewRequirementErrors(t *testing.T) {
	for _, tc := range []struct {
		op     corev1.NodeSelectorOperator
		values []string
		want   string
	}{
		{"Inn", []string{"a"}, `requirement "k": operator "Inn" is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt`},
		{"Gt", []string{"a"}, `requirement "k": operator Gt needs an integer value, got "a"`},
		{"Lt", nil, `requirement "k": operator Lt needs exactly one integer value, got 0 values`},
	} {
		_, err := NewRequirement("k", tc.op, tc.values...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("NewRequirement(k, %s, %v) error = %v, want %q", tc.op, tc.values, err, tc.want)
		}
	}
}

func TestAliasesCanonicalise(t *testing.T) {
	r := req("karpenter.sh/capacity-type", "In", "spot")
	if r.Key() != LabelCapacityType {
		t.Fatalf("key = %q, want %q", r.Key(), LabelCapacityType)
	}
	rs := NewRequirements(req("karpenter.k8s.aws/instance-family", "In", "m5"))
	if !rs.Has(LabelInstanceFamily) || !rs.Has("karpenter.k8s.aws/instance-family") {
		t.Fatalf("Has should resolve aliases: %s", rs)
	}
	labels := WithAliases(map[string]string{LabelCapacityType: "spot"})
	if labels["karpenter.sh/capacity-type"] != "spot" {
		t.Fatalf("WithAliases did not add the Karpenter key: %v", labels)
	}
	if got := CanonicalLabels(map[string]string{"karpenter.k8s.aws/instance-cpu": "8"}); got[LabelInstanceCPU] != "8" {
		t.Fatalf("CanonicalLabels = %v", got)
	}
}

func TestRequirementsCompatibleAndMatches(t *testing.T) {
	node := NewRequirements(req(LabelArch, "In", "amd64", "arm64"), req(LabelZone, "In", "z1", "z2"))
	tests := []struct {
		name    string
		pod     Requirements
		wantErr bool
	}{
		{"subset", NewRequirements(req(LabelArch, "In", "arm64")), false},
		{"disjoint", NewRequirements(req(LabelArch, "In", "s390x")), true},
		{"undefined key required", NewRequirements(req("team", "In", "a")), true},
		{"undefined key NotIn", NewRequirements(req("team", "NotIn", "a")), false},
		{"undefined key DoesNotExist", NewRequirements(req("team", "DoesNotExist")), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := node.Compatible(tc.pod)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Compatible = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil && !IsUnsatisfiable(err) {
				t.Fatalf("error %v is not IsUnsatisfiable", err)
			}
		})
	}
	rs := NewRequirements(req(LabelArch, "In", "amd64"), req("gpu", "DoesNotExist"))
	if !rs.Matches(map[string]string{LabelArch: "amd64"}) {
		t.Error("should match amd64 without gpu label")
	}
	if bad, ok := rs.FirstMismatch(map[string]string{LabelArch: "amd64", "gpu": "x"}); !ok || bad.Key() != "gpu" {
		t.Errorf("FirstMismatch = %v %v, want gpu", bad, ok)
	}
	if got := NewRequirements(req("a", "In", "1"), req("b", "In", "1", "2")).Labels(); len(got) != 1 || got["a"] != "1" {
		t.Errorf("Labels() = %v", got)
	}
	back, err := RequirementsFromNodeSelector(rs.NodeSelectorRequirements())
	if err != nil || back.String() != rs.String() {
		t.Errorf("round trip: %v %q vs %q", err, back, rs)
	}
}

func TestPodRequirements(t *testing.T) {
	term := func(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: reqs}
	}
	nsr := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	pod := func(selector map[string]string, terms ...corev1.NodeSelectorTerm) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: selector}}
		if terms != nil {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
		}
		return p
	}
	tests := []struct {
		name  string
		pod   *corev1.Pod
		want  []string
		error bool
	}{
		{"none", pod(nil), []string{""}, false},
		{"selector only", pod(map[string]string{"kubernetes.io/arch": "arm64"}), []string{"kubernetes.io/arch In [arm64]"}, false},
		{"ORed terms with selector", pod(map[string]string{"team": "a"},
			term(nsr(LabelZone, "In", "z1")), term(nsr(LabelZone, "In", "z2"))),
			[]string{"team In [a]; topology.kubernetes.io/zone In [z1]", "team In [a]; topology.kubernetes.io/zone In [z2]"}, false},
		{"contradicting term dropped", pod(map[string]string{"kubernetes.io/arch": "arm64"},
			term(nsr("kubernetes.io/arch", "In", "amd64")), term(nsr(LabelZone, "Exists"))),
			[]string{"kubernetes.io/arch In [arm64]; topology.kubernetes.io/zone Exists"}, false},
		{"empty term matches nothing", pod(nil, corev1.NodeSelectorTerm{}), nil, false},
		{"alias key", pod(map[string]string{"karpenter.sh/capacity-type": "spot"}), []string{"millwright.dev/capacity-type In [spot]"}, false},
		{"bad operator", pod(nil, term(nsr("k", "Inn", "a"))), nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PodRequirements(tc.pod)
			if (err != nil) != tc.error {
				t.Fatalf("error = %v, want error %v", err, tc.error)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d alternatives %v, want %v", len(got), got, tc.want)
			}
			for i := range got {
				if got[i].String() != tc.want[i] {
					t.Errorf("alternative %d = %q, want %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}
