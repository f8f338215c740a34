package planning

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// These specify the planner's classification rules on plain objects; the
// tests against the control plane show them at work on live state.

func TestIsProvisionable(t *testing.T) {
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}
	controller := true
	created := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	graceOver := created.Add(SchedulerGrace)
	notLookedAt := func(p *corev1.Pod) { p.Status.Conditions = nil }
	cases := []struct {
		name string
		pod  func(*corev1.Pod)
		now  time.Time // created when zero
		want bool
	}{
		{name: "the scheduler found no node", want: true},
		{name: "not looked at by the scheduler yet, within its grace", pod: notLookedAt, now: graceOver.Add(-time.Millisecond)},
		{name: "not looked at by the scheduler for its grace", pod: notLookedAt, now: graceOver, want: true},
		{name: "not looked at by the default scheduler named", now: graceOver, want: true, pod: func(p *corev1.Pod) {
			notLookedAt(p)
			p.Spec.SchedulerName = corev1.DefaultSchedulerName
		}},
		{name: "not looked at by another scheduler", now: graceOver.Add(time.Hour), pod: func(p *corev1.Pod) {
			notLookedAt(p)
			p.Spec.SchedulerName = "batch-scheduler"
		}},
		{name: "not looked at, nominated to a node", now: graceOver, pod: func(p *corev1.Pod) {
			notLookedAt(p)
			p.Status.NominatedNodeName = "node-1"
		}},
		{name: "not looked at, gated", now: graceOver, pod: func(p *corev1.Pod) {
			notLookedAt(p)
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}}
		}},
		{name: "waiting on a scheduling gate", now: graceOver, pod: func(p *corev1.Pod) { p.Status.Conditions[0].Reason = corev1.PodReasonSchedulingGated }},
		{name: "scheduled", pod: func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionTrue }},
		{name: "bound, condition not updated yet", pod: func(p *corev1.Pod) { p.Spec.NodeName = "node-1" }},
		{name: "bound, never looked at", now: graceOver, pod: func(p *corev1.Pod) {
			notLookedAt(p)
			p.Spec.NodeName = "node-1"
		}},
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
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", CreationTimestamp: metav1.NewTime(created)},
				Status:     corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{unschedulable}},
			}
			if tc.pod != nil {
				tc.pod(pod)
			}
			now := tc.now
			if now.IsZero() {
				now = created
			}
			if got := IsProvisionable(pod, now); got != tc.want {
				t.Fatalf("IsProvisionable = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOverlookedAt(t *testing.T) {
	created := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", CreationTimestamp: metav1.NewTime(created)}}
	if at, ok := OverlookedAt(pod); !ok || !at.Equal(created.Add(SchedulerGrace)) {
		t.Fatalf("OverlookedAt = %v, %v; want %v, true", at, ok, created.Add(SchedulerGrace))
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	if _, ok := OverlookedAt(pod); ok {
		t.Fatal("a pod the scheduler looked at has no overlooked time")
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

// A pass that cannot take every plan fills up with the nodes carrying the
// most pods, the packer's order kept among equals.
func TestLaunchOrderTakesTheFullestNodesFirst(t *testing.T) {
	withPods := func(name string, n int) packer.NodePlan {
		plan := packer.NodePlan{Name: name}
		for range n {
			plan.Pods = append(plan.Pods, &corev1.Pod{})
		}
		return plan
	}
	nodes := []packer.NodePlan{withPods("a", 4), withPods("b", 42), withPods("c", 4), withPods("d", 9), withPods("min-nodes", 0)}
	var got []string
	for _, i := range launchOrder(nodes) {
		got = append(got, nodes[i].Name)
	}
	if want := []string{"b", "d", "a", "c", "min-nodes"}; !slices.Equal(got, want) {
		t.Fatalf("launch order %v, want %v", got, want)
	}
}
