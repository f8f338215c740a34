package e2e

// Scenarios where a pod's hardware needs pick the instance type: a GPU pod
// gets a GPU type, an arm64-only pod gets a Graviton type, from pools that
// also allow types that would not fit.

import (
	"context"
	"slices"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/scheduling"
	"github.com/millwright/millwright/workflows"
)

// withRequirementReplaced makes the scenario pool's requirement on key be
// "key operator values", replacing the example pool's requirement on that
// key (or adding one).
func withRequirementReplaced(key string, operator corev1.NodeSelectorOperator, values ...string) scenarioOption {
	return withPool(func(pool *apisv1.NodePool) {
		requirements := pool.Spec.Template.Spec.Requirements
		requirements = slices.DeleteFunc(requirements, func(r apisv1.NodeSelectorRequirementWithMinValues) bool { return r.Key == key })
		pool.Spec.Template.Spec.Requirements = append(requirements,
			apisv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: operator, Values: values})
	})
}

// catalogSpec is the catalog row of an instance type (the emulator and the
// worker read the same embedded catalog).
func catalogSpec(t *testing.T, instanceType string) catalog.InstanceTypeSpec {
	t.Helper()
	c, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	spec, ok := c.Get(instanceType)
	if !ok {
		t.Fatalf("instance type %q is not in the catalog", instanceType)
	}
	return spec
}

// hardwareNode is what the hardware scenarios check once their one pod runs:
// the pod's Node, its instance in the emulator and its Ready node workflow.
type hardwareNode struct {
	node     corev1.Node
	instance string
	spec     catalog.InstanceTypeSpec
	workflow nodeWorkflow
}

// runOnePod waits until the scenario's single pod app=name runs and returns
// its node, after checking what every such node must satisfy: one live
// instance for the pool, its type is the Node's instance-type label, and its
// node workflow is Ready naming both.
func (s *scenario) runOnePod(t *testing.T, name string) hardwareNode {
	t.Helper()
	created := time.Now()
	pods := s.waitPodsRunning(t, "app="+name, 1, launchTimeout)
	t.Logf("pod %s created → Running on %s: %s", name, pods[0].Spec.NodeName, time.Since(created).Round(time.Millisecond))
	node, err := suite.kube.CoreV1().Nodes().Get(context.Background(), pods[0].Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the pod's Node %s: %v", pods[0].Spec.NodeName, err)
	}
	if node.Labels[apisv1.LabelNodePool] != s.pool {
		t.Fatalf("the pod runs on Node %s of pool %q, want pool %s", node.Name, node.Labels[apisv1.LabelNodePool], s.pool)
	}
	live := s.liveInstances()
	if len(live) != 1 {
		t.Fatalf("pool %s has %d live instances, want 1: %+v", s.pool, len(live), live)
	}
	instanceType := node.Labels[corev1.LabelInstanceTypeStable]
	if live[0].InstanceType != instanceType || node.Spec.ProviderID != "aws:///"+live[0].Zone+"/"+live[0].ID {
		t.Errorf("Node %s (type %s, provider %s) is not instance %s (%s in %s)",
			node.Name, instanceType, node.Spec.ProviderID, live[0].ID, live[0].InstanceType, live[0].Zone)
	}
	var wf nodeWorkflow
	poll(t, time.Minute, "the Ready node workflow of Node "+node.Name, func(ctx context.Context) (bool, error) {
		found, err := suite.listWorkflows(ctx, s.poolQuery())
		if err != nil || len(found) != 1 {
			return false, err
		}
		wf = found[0]
		return wf.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && wf.Phase == string(workflows.PhaseReady), nil
	})
	if wf.NodeName != node.Name || wf.InstanceID != live[0].ID || wf.InstanceType != instanceType {
		t.Errorf("node workflow %s names node %s, instance %s %s; want %s, %s %s",
			wf.ID, wf.NodeName, wf.InstanceID, wf.InstanceType, node.Name, live[0].ID, instanceType)
	}
	return hardwareNode{node: *node, instance: live[0].ID, spec: catalogSpec(t, instanceType), workflow: wf}
}

// assertTypeLabels checks that the Node carries the instance type's
// well-known labels (the ones the packer matched the pod against), under
// Millwright's keys and Karpenter's aliases.
func assertTypeLabels(t *testing.T, n hardwareNode) {
	t.Helper()
	for key, want := range n.spec.Labels() {
		for _, k := range append([]string{key}, scheduling.LabelAliases(key)...) {
			if got, ok := n.node.Labels[k]; !ok || got != want {
				t.Errorf("Node %s label %s = %q (present %v), want %q (the catalog's %s)", n.node.Name, k, got, ok, want, n.spec.Name)
			}
		}
	}
}

// finishHardwareScenario deletes the pod and checks that its node is
// consolidated away: workflow completed with reason Empty, instance
// terminated, Node gone.
func (s *scenario) finishHardwareScenario(t *testing.T, pod string, n hardwareNode) {
	t.Helper()
	emptied := time.Now()
	if err := suite.kube.CoreV1().Pods(s.namespace).Delete(context.Background(), pod, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting pod %s: %v", pod, err)
	}
	result := waitWorkflowResult(t, n.workflow.ID, terminateTimeout)
	assertTerminated(t, n.workflow.ID, result, workflows.ReasonEmpty)
	t.Logf("pod deleted → node %s terminated (Empty): %s", n.node.Name, time.Since(emptied).Round(time.Millisecond))
	if live := s.liveInstances(); len(live) != 0 {
		t.Errorf("instances of pool %s still live: %+v", s.pool, live)
	}
}

// TestGPUPod: a pool allowing the g4dn and g5 GPU families and the example's
// m5 types; a pod requesting nvidia.com/gpu: 1 gets a GPU instance type (an
// m5 has no GPU). The Node the emulator registers for it has the type's GPUs
// in its capacity and allocatable, carries the type's GPU labels, and the
// pod runs on it.
func TestGPUPod(t *testing.T) {
	s := newScenario(t, "gpu-pod",
		withRequirementReplaced(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn,
			"m5.large", "m5.2xlarge", "g4dn.xlarge", "g4dn.2xlarge", "g5.xlarge", "g5.2xlarge"))
	s.createPod(t, "cuda", "500m", withRequest(scheduling.ResourceNvidiaGPU, "1"))
	n := s.runOnePod(t, "cuda")

	t.Logf("GPU pod placed on %s (%s, %d %s %s)", n.spec.Name, n.node.Name, n.spec.GPU.Count, n.spec.GPU.Manufacturer, n.spec.GPU.Name)
	if n.spec.GPU.Resource != string(scheduling.ResourceNvidiaGPU) || n.spec.GPU.Count < 1 {
		t.Fatalf("the GPU pod got instance type %s, whose catalog GPU is %+v; want an nvidia.com/gpu type", n.spec.Name, n.spec.GPU)
	}
	if family := n.spec.Family; family != "g4dn" && family != "g5" {
		t.Errorf("instance type %s is of family %s, want g4dn or g5", n.spec.Name, family)
	}
	want := int64(n.spec.GPU.Count)
	for what, list := range map[string]corev1.ResourceList{"capacity": n.node.Status.Capacity, "allocatable": n.node.Status.Allocatable} {
		got, ok := list[scheduling.ResourceNvidiaGPU]
		if !ok || got.Value() != want {
			t.Errorf("Node %s %s nvidia.com/gpu = %s (present %v), want %d", n.node.Name, what, got.String(), ok, want)
		}
	}
	gpuLabels := map[string]string{
		apisv1.LabelInstanceGPUCount:        "1",
		apisv1.LabelInstanceGPUManufacturer: n.spec.GPU.Manufacturer,
		apisv1.LabelInstanceGPUName:         n.spec.GPU.Name,
	}
	if n.spec.GPU.Count != 1 {
		gpuLabels[apisv1.LabelInstanceGPUCount] = n.node.Labels[apisv1.LabelInstanceGPUCount]
		t.Errorf("instance type %s has %d GPUs; the packer should pick a 1-GPU type for a 1-GPU pod", n.spec.Name, n.spec.GPU.Count)
	}
	for key, value := range gpuLabels {
		if got := n.node.Labels[key]; got != value {
			t.Errorf("Node %s label %s = %q, want %q", n.node.Name, key, got, value)
		}
	}
	assertTypeLabels(t, n)

	s.finishHardwareScenario(t, "cuda", n)
}

// TestArm64Pod: a pool allowing amd64 (m5) and arm64 (Graviton m6g, m7g)
// types; a pod selecting kubernetes.io/arch=arm64 gets a Graviton type and
// runs on it.
func TestArm64Pod(t *testing.T) {
	s := newScenario(t, "arm64-pod",
		withRequirementReplaced(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn,
			"m5.large", "m5.xlarge", "m6g.large", "m6g.xlarge", "m7g.large", "m7g.xlarge"))
	s.createPod(t, "graviton", "500m", withNodeSelector(corev1.LabelArchStable, "arm64"))
	n := s.runOnePod(t, "graviton")

	t.Logf("arm64 pod placed on %s (%s)", n.spec.Name, n.node.Name)
	if n.spec.Arch != "arm64" {
		t.Fatalf("the arm64 pod got instance type %s, whose catalog arch is %s", n.spec.Name, n.spec.Arch)
	}
	if family := n.spec.Family; family != "m6g" && family != "m7g" {
		t.Errorf("instance type %s is of family %s, want m6g or m7g", n.spec.Name, family)
	}
	if got := n.node.Labels[corev1.LabelArchStable]; got != "arm64" {
		t.Errorf("Node %s label %s = %q, want arm64", n.node.Name, corev1.LabelArchStable, got)
	}
	if got := n.node.Status.NodeInfo.Architecture; got != "arm64" {
		t.Errorf("Node %s reports architecture %q, want arm64", n.node.Name, got)
	}
	assertTypeLabels(t, n)

	s.finishHardwareScenario(t, "graviton", n)
}
