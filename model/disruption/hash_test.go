package disruption

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

func hashPool() *apisv1.NodePool {
	np := &apisv1.NodePool{}
	np.Name = "default"
	np.Spec.Template.Labels = map[string]string{"team": "a"}
	np.Spec.Template.Spec.NodeClassRef = &apisv1.NodeClassReference{Kind: "EC2NodeClass", Name: "default", Group: "millwright.dev"}
	np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "a", Effect: corev1.TaintEffectNoSchedule}, {Key: "b", Effect: corev1.TaintEffectNoExecute}}
	np.Spec.Template.Spec.Requirements = []apisv1.NodeSelectorRequirementWithMinValues{{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}
	np.SetDefaults()
	return np
}

// Karpenter: pkg/apis/v1/nodepool_hash_test.go — the template hash changes
// with the template's labels, annotations, taints, startupTaints,
// nodeClassRef, expireAfter and terminationGracePeriod; not with
// requirements, budgets, limits or weight; taints are a set.
func TestNodePoolHash(t *testing.T) {
	base := NodePoolHash(hashPool())
	if base != NodePoolHash(hashPool()) {
		t.Fatal("hash is not stable")
	}
	tgp := apisv1.Duration("1h")
	changes := map[string]func(*apisv1.NodePool){
		"labels":      func(np *apisv1.NodePool) { np.Spec.Template.Labels["team"] = "b" },
		"annotations": func(np *apisv1.NodePool) { np.Spec.Template.Annotations = map[string]string{"x": "y"} },
		"taints":      func(np *apisv1.NodePool) { np.Spec.Template.Spec.Taints[0].Value = "v" },
		"startupTaints": func(np *apisv1.NodePool) {
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "s", Effect: corev1.TaintEffectNoSchedule}}
		},
		"nodeClassRef":           func(np *apisv1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "other" },
		"expireAfter":            func(np *apisv1.NodePool) { np.Spec.Template.Spec.ExpireAfter = "24h" },
		"terminationGracePeriod": func(np *apisv1.NodePool) { np.Spec.Template.Spec.TerminationGracePeriod = &tgp },
	}
	for field, change := range changes {
		np := hashPool()
		change(np)
		if NodePoolHash(np) == base {
			t.Errorf("changing %s kept the hash", field)
		}
	}
	same := map[string]func(*apisv1.NodePool){
		"requirements": func(np *apisv1.NodePool) { np.Spec.Template.Spec.Requirements[0].Values = []string{"arm64"} },
		"budgets":      func(np *apisv1.NodePool) { np.Spec.Disruption.Budgets[0].Nodes = "5" },
		"weight":       func(np *apisv1.NodePool) { np.Spec.Weight = new(int32(10)) },
		"taint order": func(np *apisv1.NodePool) {
			ts := np.Spec.Template.Spec.Taints
			ts[0], ts[1] = ts[1], ts[0]
		},
		"empty annotations": func(np *apisv1.NodePool) { np.Spec.Template.Annotations = map[string]string{} },
	}
	for field, change := range same {
		np := hashPool()
		change(np)
		if NodePoolHash(np) != base {
			t.Errorf("changing %s changed the hash", field)
		}
	}
}

// karpenter-provider-aws: pkg/apis/v1/ec2nodeclass_hash_test.go — the class
// hash covers userData, role, tags, kubelet, block devices, metadata
// options...; not the selector terms (their resolution drifts instead).
func TestNodeClassHash(t *testing.T) {
	mk := func() *apisv1.EC2NodeClass {
		nc := &apisv1.EC2NodeClass{}
		nc.Name = "default"
		nc.Spec.Role = "NodeRole"
		nc.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{Alias: "al2023@latest"}}
		nc.Spec.SubnetSelectorTerms = []apisv1.SubnetSelectorTerm{{Tags: map[string]string{"a": "b"}}}
		nc.Spec.SecurityGroupSelectorTerms = []apisv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"a": "b"}}}
		nc.SetDefaults()
		return nc
	}
	base := NodeClassHash(mk())
	for field, change := range map[string]func(*apisv1.EC2NodeClass){
		"userData": func(nc *apisv1.EC2NodeClass) { nc.Spec.UserData = new("echo hi") },
		"role":     func(nc *apisv1.EC2NodeClass) { nc.Spec.Role = "Other" },
		"tags":     func(nc *apisv1.EC2NodeClass) { nc.Spec.Tags = map[string]string{"k": "v"} },
		"kubelet":  func(nc *apisv1.EC2NodeClass) { nc.Spec.Kubelet = &apisv1.KubeletConfiguration{MaxPods: new(int32(20))} },
		"alias family": func(nc *apisv1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}}
		},
	} {
		nc := mk()
		change(nc)
		if NodeClassHash(nc) == base {
			t.Errorf("changing %s kept the hash", field)
		}
	}
	for field, change := range map[string]func(*apisv1.EC2NodeClass){
		"subnet terms": func(nc *apisv1.EC2NodeClass) { nc.Spec.SubnetSelectorTerms[0].Tags["a"] = "c" },
		"sg terms":     func(nc *apisv1.EC2NodeClass) { nc.Spec.SecurityGroupSelectorTerms[0].Tags["a"] = "c" },
		"alias version": func(nc *apisv1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{Alias: "al2023@v20240807"}}
		},
	} {
		nc := mk()
		change(nc)
		if NodeClassHash(nc) != base {
			t.Errorf("changing %s changed the hash", field)
		}
	}
}
