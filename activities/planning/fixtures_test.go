package planning

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/cloud"
	"github.com/millwright/millwright/local/cluster"
	"github.com/millwright/millwright/local/cluster/clustertesting"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// testScheduler is the schedulerName of the pending pods tests create: no
// scheduler serves it, so the pods stay exactly as the test leaves them
// (pending, with the PodScheduled condition the test writes) even when a
// Node with room exists.
const testScheduler = "millwright-planning-test"

// testClusterName names the cluster in launch specs.
const testClusterName = "planning-test"

func requireStack(t *testing.T) {
	t.Helper()
	if testCluster == nil {
		t.Skip("needs the control plane and the EC2 emulator; not started under -short")
	}
}

// newProvider is an EC2 provider over the shared emulator with its own
// caches, for a test that marks offerings unavailable; the others use
// testProvider.
func newProvider(t *testing.T) *cloud.Provider {
	t.Helper()
	provider, err := cloud.New(cloud.Options{EC2: testEC2, Region: testRegion, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return provider
}

// newPlanner plans against the live cluster (direct API reads) and provider.
func newPlanner(t *testing.T, provider *cloud.Provider) *Planner {
	t.Helper()
	return newPlannerWith(t, provider, func(*Config) {})
}

// newPlannerWith is newPlanner with its Config changed by change.
func newPlannerWith(t *testing.T, provider *cloud.Provider, change func(*Config)) *Planner {
	t.Helper()
	cfg := Config{
		Cluster:       testClusterName,
		State:         NewAPIState(testClientset, testDynamic),
		InstanceTypes: provider,
		Logger:        zaptest.NewLogger(t),
	}
	change(&cfg)
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func plan(t *testing.T, p *Planner, req activities.PlanRequest) activities.PlanResponse {
	t.Helper()
	resp, err := p.Plan(t.Context(), req)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	return resp
}

// createCustom creates a Millwright custom resource and deletes it after the
// test.
func createCustom(t *testing.T, resource schema.GroupVersionResource, kind string, obj runtime.Object) {
	t.Helper()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetAPIVersion(apisv1.GroupVersion.String())
	u.SetKind(kind)
	client := testDynamic.Resource(resource)
	if _, err := client.Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create %s %s: %v", kind, u.GetName(), err)
	}
	t.Cleanup(func() { _ = client.Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
}

// createNodeClass creates an EC2NodeClass that selects the emulator's
// discovery-tagged subnets and security group and its AL2023 AMIs.
func createNodeClass(t *testing.T) string {
	t.Helper()
	return createNodeClassWithSubnets(t, map[string]string{"millwright.dev/discovery": "millwright"})
}

// createNodeClassWithSubnets is createNodeClass selecting subnets by
// subnetTags.
func createNodeClassWithSubnets(t *testing.T, subnetTags map[string]string) string {
	t.Helper()
	discovery := map[string]string{"millwright.dev/discovery": "millwright"}
	nc := &apisv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: clustertesting.UniqueName("class")},
		Spec: apisv1.EC2NodeClassSpec{
			SubnetSelectorTerms:        []apisv1.SubnetSelectorTerm{{Tags: subnetTags}},
			SecurityGroupSelectorTerms: []apisv1.SecurityGroupSelectorTerm{{Tags: discovery}},
			AMISelectorTerms:           []apisv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			InstanceProfile:            aws.String("MillwrightNodeRole"),
		},
	}
	createCustom(t, EC2NodeClassResource, "EC2NodeClass", nc)
	return nc.Name
}

// poolBuilder builds NodePools. Every pool carries a template label unique
// to it (poolLabel), which its test's pods select, so pools, Nodes and pods
// of other tests never take part.
type poolBuilder struct{ pool *apisv1.NodePool }

const poolLabel = "planning.example.com/pool"

func newPool(nodeClass string) *poolBuilder {
	name := clustertesting.UniqueName("pool")
	return &poolBuilder{pool: &apisv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{
			TemplateMetadata: apisv1.TemplateMetadata{Labels: map[string]string{poolLabel: name}},
			Spec: apisv1.NodeClaimTemplateSpec{
				Requirements: []apisv1.NodeSelectorRequirementWithMinValues{},
				NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.Group, Kind: "EC2NodeClass", Name: nodeClass},
			},
		}},
	}}
}

func (b *poolBuilder) require(key string, op corev1.NodeSelectorOperator, values ...string) *poolBuilder {
	b.pool.Spec.Template.Spec.Requirements = append(b.pool.Spec.Template.Spec.Requirements,
		apisv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values})
	return b
}

// onDemandTypes restricts the pool to on-demand instances of types, whose
// prices are the catalog's (the emulator's spot prices are simulated).
func (b *poolBuilder) onDemandTypes(types ...string) *poolBuilder {
	return b.require(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, types...).
		require(apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, apisv1.CapacityTypeOnDemand)
}

func (b *poolBuilder) weight(w int32) *poolBuilder {
	b.pool.Spec.Weight = &w
	return b
}

func (b *poolBuilder) minNodes(n int32) *poolBuilder {
	b.pool.Spec.MinNodes = &n
	return b
}

func (b *poolBuilder) taint(key string) *poolBuilder {
	b.pool.Spec.Template.Spec.Taints = append(b.pool.Spec.Template.Spec.Taints,
		corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
	return b
}

func (b *poolBuilder) mutate(f func(*apisv1.NodePool)) *poolBuilder {
	f(b.pool)
	return b
}

// create stores the pool and returns its name (also its poolLabel value).
func (b *poolBuilder) create(t *testing.T) string {
	t.Helper()
	createCustom(t, NodePoolResource, "NodePool", b.pool.DeepCopy())
	return b.pool.Name
}

// podBuilder builds pods.
type podBuilder struct{ pod *corev1.Pod }

func newPod(namespace, name, cpu, memory string) *podBuilder {
	return &podBuilder{pod: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			SchedulerName: testScheduler,
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
				}}}},
		},
	}}
}

func (b *podBuilder) selectPool(pool string) *podBuilder { return b.selectLabel(poolLabel, pool) }

func (b *podBuilder) selectLabel(key, value string) *podBuilder {
	if b.pod.Spec.NodeSelector == nil {
		b.pod.Spec.NodeSelector = map[string]string{}
	}
	b.pod.Spec.NodeSelector[key] = value
	return b
}

func (b *podBuilder) tolerate(key string) *podBuilder {
	b.pod.Spec.Tolerations = append(b.pod.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists})
	return b
}

// ownedBy makes owner the pod's controller, as a ReplicaSet is its pods'.
func (b *podBuilder) ownedBy(owner metav1.Object, kind string) *podBuilder {
	controller := true
	b.pod.OwnerReferences = append(b.pod.OwnerReferences, metav1.OwnerReference{
		APIVersion: "v1", Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: &controller})
	return b
}

// bindTo places the pod on a node, as if already scheduled there.
func (b *podBuilder) bindTo(node string) *podBuilder {
	b.pod.Spec.NodeName = node
	return b
}

// defaultScheduler lets the cluster's kube-scheduler handle the pod.
func (b *podBuilder) defaultScheduler() *podBuilder {
	b.pod.Spec.SchedulerName = ""
	return b
}

func (b *podBuilder) create(t *testing.T) *corev1.Pod {
	t.Helper()
	created, err := testClientset.CoreV1().Pods(b.pod.Namespace).Create(t.Context(), b.pod.DeepCopy(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// createPending creates the pod and records what kube-scheduler records
// for a pod no node fits: PodScheduled=False, reason Unschedulable. It
// returns the pod's key.
func (b *podBuilder) createPending(t *testing.T) string {
	t.Helper()
	pod := b.create(t)
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/0 nodes are available", LastTransitionTime: metav1.Now(),
	})
	if _, err := testClientset.CoreV1().Pods(pod.Namespace).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return pod.Namespace + "/" + pod.Name
}

// createPendingPods creates n identical pending pods selecting pool and
// returns their keys, sorted.
func createPendingPods(t *testing.T, namespace, pool string, n int, cpu, memory string) []string {
	t.Helper()
	var keys []string
	for i := range n {
		keys = append(keys, newPod(namespace, clustertesting.UniqueName("pod")+"-"+string(rune('a'+i)), cpu, memory).selectPool(pool).createPending(t))
	}
	return sortedCopy(keys)
}

// nodeBuilder builds Nodes kwok plays the kubelet for (they become Ready).
type nodeBuilder struct{ node *corev1.Node }

func newNode(cpu, memory string) *nodeBuilder {
	name := clustertesting.UniqueName("node")
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods: resource.MustParse("110"),
	}
	return &nodeBuilder{node: &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{corev1.LabelHostname: name},
			Annotations: map[string]string{cluster.FakeNodeAnnotation: cluster.FakeNodeAnnotationValue},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}}
}

func (b *nodeBuilder) label(key, value string) *nodeBuilder {
	b.node.Labels[key] = value
	return b
}

func (b *nodeBuilder) taint(key string, effect corev1.TaintEffect) *nodeBuilder {
	b.node.Spec.Taints = append(b.node.Spec.Taints, corev1.Taint{Key: key, Effect: effect})
	return b
}

func (b *nodeBuilder) unschedulable() *nodeBuilder {
	b.node.Spec.Unschedulable = true
	return b
}

// create stores the Node, deletes it after the test and returns its name.
func (b *nodeBuilder) create(t *testing.T) string {
	t.Helper()
	node, err := testClientset.CoreV1().Nodes().Create(t.Context(), b.node.DeepCopy(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = testClientset.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{})
	})
	return node.Name
}

// createReady is create plus a wait until kwok reports the Node Ready and
// the node lifecycle controller has lifted its not-ready taint: only then
// does a Node Millwright did not launch offer room.
func (b *nodeBuilder) createReady(t *testing.T) string {
	t.Helper()
	name := b.create(t)
	clustertesting.Eventually(t, time.Minute, "Node "+name+" Ready without the not-ready taint", func(ctx context.Context) (bool, error) {
		node, err := testClientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return nodeReady(node) && !hasTaintKey(node.Spec.Taints, corev1.TaintNodeNotReady), nil
	})
	return name
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// optionNames lists a spec's instance type options in order.
func optionNames(spec activities.NodeLaunchSpec) []string {
	var names []string
	for _, o := range spec.InstanceTypeOptions {
		names = append(names, o.Name)
	}
	return names
}

// plansOfPool keeps the plans of one pool: tests share the cluster, so a
// minNodes pool of another test may still be visible.
func plansOfPool(resp activities.PlanResponse, pool string) []activities.NodeLaunchSpec {
	var out []activities.NodeLaunchSpec
	for _, spec := range resp.Plans {
		if spec.NodePool == pool {
			out = append(out, spec)
		}
	}
	return out
}
