package planning

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/scheduling"
)

// These specify the planner's classification rules on plain objects; the
// tests against the control plane show them at work on live state.

func TestIsProvisionable(t *testing.T) {
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}
	controller := true
	cases := []struct {
		name string
		pod  func(*corev1.Pod)
		want bool
	}{
		{name: "the scheduler found no node", want: true},
		{name: "not looked at by a scheduler yet", pod: func(p *corev1.Pod) { p.Status.Conditions = nil }},
		{name: "waiting on a scheduling gate", pod: func(p *corev1.Pod) { p.Status.Conditions[0].Reason = corev1.PodReasonSchedulingGated }},
		{name: "scheduled", pod: func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionTrue }},
		{name: "bound, condition not updated yet", pod: func(p *corev1.Pod) { p.Spec.NodeName = "node-1" }},
		{name: "owned by a DaemonSet", pod: func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent", Controller: &controller}}
		}},
		{name: "owned by a ReplicaSet", want: true, pod: func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web", Controller: &controller}}
		}},
		{name: "a mirror pod", pod: func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }},
		{name: "terminating", pod: func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }},
		{name: "finished", pod: func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
				Status:     corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{unschedulable}},
			}
			if tc.pod != nil {
				tc.pod(pod)
			}
			if got := IsProvisionable(pod); got != tc.want {
				t.Fatalf("IsProvisionable = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPreferSpotAcrossInstanceTypes(t *testing.T) {
	small, large := &catalog.InstanceType{Name: "small"}, &catalog.InstanceType{Name: "large"}
	offer := func(it *catalog.InstanceType, capacityType string, price float64) typeOffer {
		return typeOffer{it: it, offering: catalog.Offering{Zone: "z", CapacityType: capacityType, Price: price, Available: true}}
	}
	cases := []struct {
		name   string
		offers []typeOffer
		want   []string // type/capacity type kept, in order
	}{
		{name: "spot below on-demand wins",
			offers: []typeOffer{offer(small, "on-demand", 1), offer(small, "spot", 0.3), offer(large, "spot", 0.6)},
			want:   []string{"small/spot", "large/spot"}},
		{name: "spot above the cheapest on-demand is dropped",
			offers: []typeOffer{offer(small, "on-demand", 1), offer(small, "spot", 0.3), offer(large, "spot", 1.2)},
			want:   []string{"small/spot"}},
		{name: "no spot left: on-demand",
			offers: []typeOffer{offer(small, "on-demand", 1), offer(large, "on-demand", 2), offer(large, "spot", 1.5)},
			want:   []string{"small/on-demand", "large/on-demand"}},
		{name: "spot only", offers: []typeOffer{offer(large, "spot", 3)}, want: []string{"large/spot"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, o := range preferSpot(tc.offers) {
				got = append(got, o.it.Name+"/"+o.offering.CapacityType)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("kept %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("kept %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestSpecLabelsLeaveLaunchLabelsToTheLaunch(t *testing.T) {
	ps := &poolState{labels: map[string]string{"team": "a", scheduling.LabelNodePool: "default"}}
	planLabels := scheduling.WithAliases(map[string]string{
		"team": "b", "tier": "gold",
		scheduling.LabelInstanceType: "m5.large", scheduling.LabelZone: "us-east-1a",
		scheduling.LabelCapacityType: "spot", scheduling.LabelArch: "amd64",
		scheduling.LabelInstanceFamily: "m5", scheduling.LabelNodePool: "default",
	})
	got := specLabels(ps, planLabels)
	want := map[string]string{"team": "a", "tier": "gold", scheduling.LabelNodePool: "default"}
	if len(got) != len(want) {
		t.Fatalf("labels %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("labels %v, want %v", got, want)
		}
	}
}

func TestFormatResources(t *testing.T) {
	cases := []struct {
		pairs []string
		want  string
	}{
		{pairs: []string{"cpu", "1500m", "memory", "3Gi"}, want: "cpu 1500m, memory 3Gi"},
		{pairs: []string{"memory", "1536Mi", "cpu", "2"}, want: "cpu 2, memory 1.5Gi"},
		{pairs: []string{"cpu", "250m", "memory", "100Mi", "nvidia.com/gpu", "1"}, want: "cpu 250m, memory 100Mi, nvidia.com/gpu 1"},
		{pairs: []string{"pods", "3"}, want: "nothing"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			r, err := scheduling.ParseResources(tc.pairs...)
			if err != nil {
				t.Fatal(err)
			}
			if got := formatResources(r); got != tc.want {
				t.Fatalf("formatResources = %q, want %q", got, tc.want)
			}
		})
	}
}
