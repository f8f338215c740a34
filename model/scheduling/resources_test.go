package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func mustParse(t *testing.T, pairs ...string) Resources {
	t.Helper()
	r, err := ParseResources(pairs...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestResourcesArithmetic(t *testing.T) {
	node := mustParse(t, "cpu", "1930m", "memory", "3114Mi", "pods", "29", "nvidia.com/gpu", "1")
	pod := mustParse(t, "cpu", "500m", "memory", "1Gi", "pods", "1", "nvidia.com/gpu", "1")
	if !pod.Fits(node) {
		t.Fatal("pod should fit")
	}
	left := node.Sub(pod)
	if left.CPU() != 1430 || left.Memory() != (3114-1024)<<20 || left.Pods() != 28 || left.Get(ResourceNvidiaGPU) != 0 {
		t.Fatalf("left = %s", left)
	}
	if pod.Fits(left) {
		t.Fatal("second GPU pod must not fit")
	}
	if got := pod.Exceeding(left); len(got) != 1 || got[0] != ResourceNvidiaGPU {
		t.Fatalf("Exceeding = %v", got)
	}
	if left.Add(pod) != node {
		t.Fatal("Add(Sub) should round-trip")
	}
	if got := pod.String(); got != "cpu=500m memory=1Gi pods=1 nvidia.com/gpu=1" {
		t.Fatalf("String = %q", got)
	}
	if rl := pod.ResourceList(); !rl.Cpu().Equal(resource.MustParse("500m")) {
		t.Fatalf("ResourceList cpu = %v", rl.Cpu())
	}
	custom := mustParse(t, "example.com/widget", "3")
	if custom.Get("example.com/widget") != 3 {
		t.Fatalf("extended resource lost: %s", custom)
	}
}

func container(requests ...string) corev1.Container {
	list := corev1.ResourceList{}
	for i := 0; i < len(requests); i += 2 {
		list[corev1.ResourceName(requests[i])] = resource.MustParse(requests[i+1])
	}
	return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: list}}
}

func TestEffectiveRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	sidecar := container("cpu", "100m", "memory", "64Mi")
	sidecar.RestartPolicy = &always
	tests := []struct {
		name string
		spec corev1.PodSpec
		want []string
	}{
		{"sum of containers", corev1.PodSpec{Containers: []corev1.Container{container("cpu", "250m", "memory", "512Mi"), container("cpu", "250m", "memory", "512Mi")}},
			[]string{"cpu", "500m", "memory", "1Gi", "pods", "1"}},
		{"init container dominates", corev1.PodSpec{
			InitContainers: []corev1.Container{container("cpu", "2", "memory", "128Mi")},
			Containers:     []corev1.Container{container("cpu", "500m", "memory", "1Gi")}},
			[]string{"cpu", "2", "memory", "1Gi", "pods", "1"}},
		{"sidecar counts into the sum", corev1.PodSpec{
			InitContainers: []corev1.Container{sidecar},
			Containers:     []corev1.Container{container("cpu", "500m", "memory", "1Gi")}},
			[]string{"cpu", "600m", "memory", "1088Mi", "pods", "1"}},
		{"overhead added", corev1.PodSpec{
			Containers: []corev1.Container{container("cpu", "1", "nvidia.com/gpu", "2")},
			Overhead:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}},
			[]string{"cpu", "1250m", "nvidia.com/gpu", "2", "pods", "1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EffectiveRequests(&corev1.Pod{Spec: tc.spec})
			if err != nil {
				t.Fatal(err)
			}
			if want := mustParse(t, tc.want...); got != want {
				t.Fatalf("EffectiveRequests = %s, want %s", got, want)
			}
		})
	}
}

func TestTolerates(t *testing.T) {
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	soft := corev1.Taint{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}
	tests := []struct {
		name        string
		tolerations []corev1.Toleration
		taints      []corev1.Taint
		wantErr     string
	}{
		{"no taints", nil, nil, ""},
		{"untolerated", nil, []corev1.Taint{gpuTaint}, "untolerated taint nvidia.com/gpu=true:NoSchedule"},
		{"PreferNoSchedule ignored", nil, []corev1.Taint{soft}, ""},
		{"Exists toleration", []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}, []corev1.Taint{gpuTaint}, ""},
		{"Equal wrong value", []corev1.Toleration{{Key: "nvidia.com/gpu", Value: "false"}}, []corev1.Taint{gpuTaint}, "untolerated taint nvidia.com/gpu=true:NoSchedule"},
		{"wildcard", []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, []corev1.Taint{gpuTaint}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Tolerates(tc.tolerations, tc.taints)
			got := ""
			if err != nil {
				got = err.Error()
				if !IsUntoleratedTaint(err) {
					t.Errorf("error is not IsUntoleratedTaint")
				}
			}
			if got != tc.wantErr {
				t.Fatalf("Tolerates = %q, want %q", got, tc.wantErr)
			}
		})
	}
}
