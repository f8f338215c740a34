package run_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/millwright/millwright/activities/planning"
	"github.com/millwright/millwright/deploy/examples"
	"github.com/millwright/millwright/local/stack/stacktest"
	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/scheduling"
)

// TestKubeletSettingsShapeTheRegisteredNode: an EC2NodeClass's kubelet
// settings (maxPods, podsPerCore, kubeReserved, systemReserved,
// evictionHard, evictionSoft) reach the node through its nodeadm userData;
// the Node the emulated kubelet registers on the local stack has the
// allocatable they leave, and the packer planned with no more than that.
func TestKubeletSettingsShapeTheRegisteredNode(t *testing.T) {
	env := newTestEnv(t, "it-kubelet", "5s")
	ctx := context.Background()
	const className = "it-kubelet"
	kubelet := map[string]any{
		"maxPods":                 int64(20),
		"podsPerCore":             int64(8),
		"kubeReserved":            map[string]any{"cpu": "250m", "memory": "600Mi"},
		"systemReserved":          map[string]any{"cpu": "100m", "memory": "200Mi", "ephemeral-storage": "1Gi"},
		"evictionHard":            map[string]any{"memory.available": "200Mi", "nodefs.available": "15%"},
		"evictionSoft":            map[string]any{"memory.available": "300Mi"},
		"evictionSoftGracePeriod": map[string]any{"memory.available": "1m"},
	}
	if err := stacktest.ApplyManifest(ctx, testDynamic, planning.EC2NodeClassResource, examples.NodeClass, func(class *unstructured.Unstructured) error {
		class.SetName(className)
		return unstructured.SetNestedField(class.Object, kubelet, "spec", "kubelet")
	}); err != nil {
		t.Fatal(err)
	}
	// The class stays: the pool's node is consolidated after the test,
	// which needs the pool (and so its class) to be valid.
	err := stacktest.ApplyManifest(ctx, testDynamic, planning.NodePoolResource, examples.NodePool, func(pool *unstructured.Unstructured) error {
		if err := unstructured.SetNestedField(pool.Object, className, "spec", "template", "spec", "nodeClassRef", "name"); err != nil {
			return err
		}
		pool.SetName(env.pool)
		return unstructured.SetNestedField(pool.Object, "5s", "spec", "disruption", "consolidateAfter")
	})
	if err != nil {
		t.Fatal(err)
	}

	env.createDeployment(t, "inflate", 1, "500m")
	pods := env.waitPodsRunning(t, "inflate", 1, 4*time.Minute)
	node, err := testKube.CoreV1().Nodes().Get(ctx, pods[0].Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec, ok := catalog.MustDefault().Get(node.Labels[corev1.LabelInstanceTypeStable])
	if !ok {
		t.Fatalf("instance type %q is not in the catalog", node.Labels[corev1.LabelInstanceTypeStable])
	}
	maxPods, podsPerCore := int32(20), int32(8)
	settings := &catalog.KubeletSettings{MaxPods: &maxPods, PodsPerCore: &podsPerCore,
		KubeReserved:   map[string]string{"cpu": "250m", "memory": "600Mi"},
		SystemReserved: map[string]string{"cpu": "100m", "memory": "200Mi", "ephemeral-storage": "1Gi"},
		EvictionHard:   map[string]string{"memory.available": "200Mi", "nodefs.available": "15%"},
		EvictionSoft:   map[string]string{"memory.available": "300Mi"}}
	_, wantKubelet, err := spec.KubeletAllocatable(settings)
	if err != nil {
		t.Fatal(err)
	}
	_, planned, err := spec.WithKubelet(settings)
	if err != nil {
		t.Fatal(err)
	}
	got := scheduling.MustResources(node.Status.Allocatable)
	if got != wantKubelet {
		t.Errorf("registered allocatable %s, want %s (the kubelet's, from the class's settings)", got, wantKubelet)
	}
	if want := min(int64(20), int64(8)*int64(spec.VCPU)); got.Pods() != want {
		t.Errorf("registered pods %d, want min(maxPods 20, podsPerCore 8 × %d vCPU) = %d", got.Pods(), spec.VCPU, want)
	}
	if !planned.Fits(got) {
		t.Errorf("the packer planned with %s, more than the node offers (%s)", planned, got)
	}
}
