package packer_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// karpenterCase is one behaviour of Karpenter's scheduler, ported from its
// tests (named in each case's comment), checked on the packer's plan after
// Verify accepted it.
type karpenterCase struct {
	name  string
	in    packer.Input
	check func(t *testing.T, v plan)
}

func runKarpenterCases(t *testing.T, cases []karpenterCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := packer.Pack(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if err := packer.Verify(tc.in, r); err != nil {
				t.Fatalf("plan fails verification: %v\nplan: %+v", err, summary(r))
			}
			tc.check(t, view(r))
		})
	}
}

// withTypeLabels returns a copy of it with more labels.
func withTypeLabels(it *catalog.InstanceType, kv ...string) *catalog.InstanceType {
	c := *it
	c.Labels = map[string]string{}
	for k, v := range it.Labels {
		c.Labels[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Labels[kv[i]] = kv[i+1]
	}
	return &c
}

// wantType fails unless pod is on a new node of instance type want.
func wantType(t *testing.T, v plan, pod, want string) {
	t.Helper()
	if n := v.nodeOf[pod]; n == nil || n.InstanceType != want {
		t.Fatalf("%s: want a new %s node, got %+v", pod, want, summary(v.r))
	}
}

// wantUnschedulable fails unless pod is unschedulable with a reason containing want.
func wantUnschedulable(t *testing.T, v plan, pod, want string) {
	t.Helper()
	if r, ok := v.reason[pod]; !ok || !strings.Contains(r, want) {
		t.Fatalf("%s: want unschedulable (%q), got reason %q, plan %+v", pod, want, r, summary(v.r))
	}
}

// Instance-type labels: Karpenter's AWS label set, and a requirement on a
// label a type lacks.
func TestKarpenterInstanceTypeLabels(t *testing.T) {
	plain := instanceType("c.large", "amd64", everywhere(0.02, 0.05), "cpu", "2", "memory", "4Gi", "pods", "10")
	nvme := withTypeLabels(instanceType("d.large", "amd64", everywhere(0.05, 0.12), "cpu", "2", "memory", "8Gi", "pods", "10"),
		scheduling.LabelInstanceLocalNVME, "474", scheduling.LabelInstanceCPUManufacturer, "intel")
	amd := withTypeLabels(instanceType("a.large", "amd64", everywhere(0.03, 0.07), "cpu", "2", "memory", "4Gi", "pods", "10"),
		scheduling.LabelInstanceCPUManufacturer, "amd")
	types := []*catalog.InstanceType{plain, nvme, amd}
	runKarpenterCases(t, []karpenterCase{
		{
			// karpenter-provider-aws docs "instance store" example; Karpenter's
			// suite_test "should not schedule if requirement on undefined label".
			name: "nodepool requirement on instance-local-nvme skips types without instance store",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", types,
				withPoolRequirement("karpenter.k8s.aws/instance-local-nvme", corev1.NodeSelectorOpGt, "300"))},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi")}},
			check: func(t *testing.T, v plan) { wantType(t, v, "p", "d.large") },
		},
		{
			// suite_test "Well Known Labels": a pod's nodeSelector on a Karpenter AWS label.
			name: "pod nodeSelector on instance-cpu-manufacturer",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", types)},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi", withNodeSelector("karpenter.k8s.aws/instance-cpu-manufacturer", "amd"))}},
			check: func(t *testing.T, v plan) { wantType(t, v, "p", "a.large") },
		},
		{
			// suite_test "should schedule pods that have node selectors with DoesNotExist operator".
			name: "DoesNotExist on a type label picks a type without it",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", []*catalog.InstanceType{nvme, amd},
				withPoolRequirement(scheduling.LabelInstanceLocalNVME, corev1.NodeSelectorOpDoesNotExist))},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi")}},
			check: func(t *testing.T, v plan) { wantType(t, v, "p", "a.large") },
		},
		{
			// suite_test "should not schedule pods that have node selectors with undefined key".
			name: "requirement on a type label no type carries matches no type",
			in: packer.Input{NodePools: []packer.NodePool{nodePool("default", []*catalog.InstanceType{plain},
				withPoolRequirement(scheduling.LabelInstanceLocalNVME, corev1.NodeSelectorOpExists))},
				Pods: []*corev1.Pod{pod("p", "1", "1Gi")}},
			check: func(t *testing.T, v plan) { wantUnschedulable(t, v, "p", "") },
		},
	})
}
