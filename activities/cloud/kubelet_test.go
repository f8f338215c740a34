package cloud

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/millwright/millwright/activities"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/scheduling"
)

// Each kubelet setting of an EC2NodeClass reaches the node twice: the
// instance types the packer plans with (Karpenter's allocatable formula)
// and the nodeadm userData, which the emulator's kubelet reads to register
// the Node. The registered allocatable is the kubelet's; the packer's never
// exceeds it (equal unless a soft eviction threshold, which the packer
// also holds back, is above the hard one).
func TestKubeletSettingsReachPlanAndRegisteredNode(t *testing.T) {
	i32 := func(n int32) *int32 { return &n }
	tests := []struct {
		name    string
		kubelet apisv1.KubeletConfiguration
		want    map[corev1.ResourceName]string // registered Node allocatable
		plan    map[corev1.ResourceName]string // the planning type's allocatable, when it differs
	}{
		{name: "maxPods", kubelet: apisv1.KubeletConfiguration{MaxPods: i32(12)},
			want: map[corev1.ResourceName]string{"pods": "12", "memory": "7090Mi"}}, // 8192-615-(11*12+255)-100
		{name: "podsPerCore", kubelet: apisv1.KubeletConfiguration{PodsPerCore: i32(5)},
			want: map[corev1.ResourceName]string{"pods": "10", "memory": "7112Mi"}},
		{name: "kubeReserved", kubelet: apisv1.KubeletConfiguration{KubeReserved: map[string]string{"cpu": "300m", "memory": "1Gi"}},
			want: map[corev1.ResourceName]string{"cpu": "1700m", "memory": "6453Mi"}},
		{name: "systemReserved", kubelet: apisv1.KubeletConfiguration{SystemReserved: map[string]string{"cpu": "200m", "memory": "512Mi", "ephemeral-storage": "2Gi"}},
			want: map[corev1.ResourceName]string{"cpu": "1730m", "memory": "6391Mi", "ephemeral-storage": "15Gi"}},
		{name: "evictionHard", kubelet: apisv1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "300Mi", "nodefs.available": "15%"}},
			want: map[corev1.ResourceName]string{"memory": "6703Mi", "ephemeral-storage": "16Gi"}},
		{name: "evictionSoft", kubelet: apisv1.KubeletConfiguration{
			EvictionSoft: map[string]string{"memory.available": "500Mi"}, EvictionSoftGracePeriod: map[string]apisv1.Duration{"memory.available": "1m"}},
			want: map[corev1.ResourceName]string{"memory": "6903Mi"}, plan: map[corev1.ResourceName]string{"memory": "6503Mi"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			kubelet := tc.kubelet
			f.nodeClasses["default"] = testNodeClass(func(nc *apisv1.EC2NodeClass) { nc.Spec.Kubelet = &kubelet })
			types, err := f.provider.InstanceTypesForNodeClass(context.Background(), f.nodeClasses["default"])
			if err != nil {
				t.Fatal(err)
			}
			var planned scheduling.Resources
			for _, it := range types {
				if it.Name == "m5.large" {
					planned = it.Allocatable
				}
			}
			resp, err := f.provider.Launch(context.Background(), launchRequest("kubelet-"+tc.name, f.option("m5.large", activities.CapacityTypeOnDemand)))
			if err != nil {
				t.Fatal(err)
			}
			f.emuClock.Step(time.Minute)
			f.emu.Reconcile(context.Background())
			node, ok := f.nodes.byProviderID(resp.ProviderID)
			if !ok {
				inst, _ := f.emu.State().Instance(resp.InstanceID)
				t.Fatalf("no Node registered (registration error %q)", inst.NodeRegistrationError)
			}
			registered := scheduling.MustResources(node.Status.Allocatable)
			for name, want := range tc.want {
				if got := node.Status.Allocatable[name]; got.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("registered allocatable %s = %s, want %s", name, got.String(), want)
				}
			}
			wantPlan := registered
			for name, q := range tc.plan {
				idx, _ := scheduling.LookupResourceIndex(name)
				v := resource.MustParse(q)
				wantPlan[idx] = v.Value()
			}
			if planned != wantPlan {
				t.Errorf("planned allocatable %s, want %s", planned, wantPlan)
			}
			if !planned.Fits(registered) {
				t.Errorf("the packer plans with %s, more than the node offers (%s)", planned, registered)
			}
		})
	}
}
