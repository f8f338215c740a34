package run_test

// What `kubectl get nodepools,ec2nodeclasses` and `kubectl describe` show,
// on the real control plane with the package's worker writing status
// (worker/status).

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/millwright/millwright/activities/planning"
	"github.com/millwright/millwright/deploy/examples"
	"github.com/millwright/millwright/local/awsemu"
	"github.com/millwright/millwright/local/cluster/clustertesting"
	"github.com/millwright/millwright/local/stack/stacktest"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/worker/status"
)

// TestStatusShowsNodesAndReadiness: the example EC2NodeClass gets the
// subnets, security groups and AMIs it resolves to and Ready=True; a pool
// is Ready with 0 nodes, counts the node launched for its pods (with its
// capacity), and counts 0 again once the node is gone — in status and in
// `kubectl get`'s NODES and READY columns.
func TestStatusShowsNodesAndReadiness(t *testing.T) {
	env := newTestEnv(t, "it-status", "5s")
	ctx := context.Background()

	var class apisv1.EC2NodeClass
	clustertesting.Eventually(t, time.Minute, "EC2NodeClass default Ready with subnets, security groups and AMIs", func(ctx context.Context) (bool, error) {
		if err := getTyped(ctx, planning.EC2NodeClassResource, "default", &class); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(class.Status.Conditions, apisv1.ConditionTypeReady), nil
	})
	st := class.Status
	if len(st.Subnets) == 0 || len(st.SecurityGroups) == 0 || len(st.AMIs) == 0 {
		t.Errorf("EC2NodeClass default status lists %d subnets, %d security groups, %d AMIs; want some of each",
			len(st.Subnets), len(st.SecurityGroups), len(st.AMIs))
	}
	for _, subnet := range st.Subnets {
		if !strings.HasPrefix(subnet.ID, "subnet-") || subnet.Zone == "" {
			t.Errorf("subnet %+v: want an id and a zone", subnet)
		}
	}
	for _, ami := range st.AMIs {
		if !strings.HasPrefix(ami.ID, "ami-") || len(ami.Requirements) == 0 {
			t.Errorf("AMI %+v: want an id and requirements", ami)
		}
	}
	// The example names a role: Millwright manages a profile holding it.
	var managed *awsemu.InstanceProfileState
	for _, p := range testStack.Emulator.InstanceProfiles() {
		if p.Name == st.InstanceProfile {
			managed = &p
		}
	}
	if managed == nil || len(managed.Roles) != 1 || managed.Roles[0] != "MillwrightNodeRole-millwright" || managed.Tags[apisv1.TagNodeClass] != "default" {
		t.Errorf("instance profile %q is %+v, want a managed profile holding MillwrightNodeRole-millwright, tagged for class default", st.InstanceProfile, managed)
	}
	t.Logf("kubectl describe ec2nodeclass default:\n%s", kubectl(t, "describe", "ec2nodeclass", "default"))

	waitPoolStatus(t, env.pool, 0)
	env.createDeployment(t, "counted", 1, "500m")
	env.waitPodsRunning(t, "counted", 1, 4*time.Minute)
	pool := waitPoolStatus(t, env.pool, 1)
	nodes, err := testKube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: apisv1.LabelNodePool + "=" + env.pool})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 {
		t.Fatalf("%d Nodes labelled with pool %s, want 1", len(nodes.Items), env.pool)
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		want := nodes.Items[0].Status.Capacity[name]
		if got := pool.Status.Resources[name]; got.Cmp(want) != 0 {
			t.Errorf("status.resources[%s] = %s, want the node's capacity %s", name, got.String(), want.String())
		}
	}
	if got := pool.Status.Resources[status.ResourceNodes]; got.Value() != 1 {
		t.Errorf("status.resources.nodes = %s, want 1", got.String())
	}
	checkDriftStamps(t, env.pool, &nodes.Items[0])
	kubectlColumns(t, env.pool, "1", "True")

	// The pods go, the node is consolidated away, the count follows.
	if _, err := testKube.AppsV1().Deployments(env.namespace).Patch(ctx, "counted", "application/merge-patch+json",
		[]byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPoolStatus(t, env.pool, 0)
	kubectlColumns(t, env.pool, "0", "True")
}

// checkDriftStamps: the pool and its class carry their hashes, and the
// node launched from them the same hashes plus the AMI, subnet and
// security groups it was launched with, those the class resolves.
func checkDriftStamps(t *testing.T, poolName string, node *corev1.Node) {
	t.Helper()
	var pool apisv1.NodePool
	var class apisv1.EC2NodeClass
	clustertesting.Eventually(t, time.Minute, "NodePool and EC2NodeClass annotated with their hashes", func(ctx context.Context) (bool, error) {
		if err := getTyped(ctx, planning.NodePoolResource, poolName, &pool); err != nil {
			return false, err
		}
		if err := getTyped(ctx, planning.EC2NodeClassResource, pool.NodeClassName(), &class); err != nil {
			return false, err
		}
		return pool.Annotations[apisv1.AnnotationNodePoolHash] != "" && class.Annotations[apisv1.AnnotationNodeClassHash] != "", nil
	})
	a := node.Annotations
	for _, key := range []string{apisv1.AnnotationNodePoolHash, apisv1.AnnotationNodePoolHashVersion} {
		if a[key] != pool.Annotations[key] {
			t.Errorf("Node %s annotation %s = %q, the NodePool's %q", node.Name, key, a[key], pool.Annotations[key])
		}
	}
	for _, key := range []string{apisv1.AnnotationNodeClassHash, apisv1.AnnotationNodeClassHashVersion} {
		if a[key] != class.Annotations[key] {
			t.Errorf("Node %s annotation %s = %q, the EC2NodeClass's %q", node.Name, key, a[key], class.Annotations[key])
		}
	}
	resolved := func(id string, ids []string) bool {
		for _, x := range ids {
			if x == id {
				return true
			}
		}
		return false
	}
	var amis, subnets, groups []string
	for _, x := range class.Status.AMIs {
		amis = append(amis, x.ID)
	}
	for _, x := range class.Status.Subnets {
		subnets = append(subnets, x.ID)
	}
	for _, x := range class.Status.SecurityGroups {
		groups = append(groups, x.ID)
	}
	if !resolved(a[apisv1.AnnotationImageID], amis) || !resolved(a[apisv1.AnnotationSubnetID], subnets) {
		t.Errorf("Node %s: image %q subnet %q, want among the class's %v and %v", node.Name, a[apisv1.AnnotationImageID], a[apisv1.AnnotationSubnetID], amis, subnets)
	}
	for _, g := range strings.Split(a[apisv1.AnnotationSecurityGroupIDs], ",") {
		if !resolved(g, groups) {
			t.Errorf("Node %s: security groups %q, want the class's %v", node.Name, a[apisv1.AnnotationSecurityGroupIDs], groups)
		}
	}
}

// TestNodePoolWithAMissingNodeClassIsNotReady: Ready=False naming the
// missing EC2NodeClass, until the class is created and resolves.
func TestNodePoolWithAMissingNodeClassIsNotReady(t *testing.T) {
	if testStack == nil {
		t.Skip("needs the local stack (not with -short)")
	}
	const poolName, className = "it-no-class", "it-missing-class"
	ctx := context.Background()
	err := stacktest.ApplyManifest(ctx, testDynamic, planning.NodePoolResource, examples.NodePool, func(pool *unstructured.Unstructured) error {
		pool.SetName(poolName)
		return unstructured.SetNestedField(pool.Object, className, "spec", "template", "spec", "nodeClassRef", "name")
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteObject(t, planning.NodePoolResource, poolName) })

	var ready *metav1.Condition
	clustertesting.Eventually(t, time.Minute, "NodePool "+poolName+" Ready=False naming the missing class", func(ctx context.Context) (bool, error) {
		var pool apisv1.NodePool
		if err := getTyped(ctx, planning.NodePoolResource, poolName, &pool); err != nil {
			return false, err
		}
		ready = meta.FindStatusCondition(pool.Status.Conditions, apisv1.ConditionTypeReady)
		return ready != nil && ready.Status == metav1.ConditionFalse, nil
	})
	if ready.Reason != status.ReasonNodeClassNotFound || !strings.Contains(ready.Message, `EC2NodeClass "`+className+`"`) {
		t.Errorf("Ready = False (%s: %q), want %s naming %s", ready.Reason, ready.Message, status.ReasonNodeClassNotFound, className)
	}
	kubectlColumns(t, poolName, "0", "False")

	// The class appears: it resolves, and the pool follows it to Ready.
	if err := stacktest.ApplyManifest(ctx, testDynamic, planning.EC2NodeClassResource, examples.NodeClass, func(class *unstructured.Unstructured) error {
		class.SetName(className)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteObject(t, planning.EC2NodeClassResource, className) })
	clustertesting.Eventually(t, time.Minute, "NodePool "+poolName+" Ready once its class exists", func(ctx context.Context) (bool, error) {
		var pool apisv1.NodePool
		if err := getTyped(ctx, planning.NodePoolResource, poolName, &pool); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(pool.Status.Conditions, apisv1.ConditionTypeReady), nil
	})
}

// TestEC2NodeClassThatMatchesNoSubnetIsNotReady: Ready=False with the
// reason and the field that did not resolve, and no stale lists.
func TestEC2NodeClassThatMatchesNoSubnetIsNotReady(t *testing.T) {
	if testStack == nil {
		t.Skip("needs the local stack (not with -short)")
	}
	const className = "it-no-subnet"
	err := stacktest.ApplyManifest(context.Background(), testDynamic, planning.EC2NodeClassResource, examples.NodeClass, func(class *unstructured.Unstructured) error {
		class.SetName(className)
		return unstructured.SetNestedSlice(class.Object, []any{
			map[string]any{"tags": map[string]any{"millwright.dev/discovery": "no-such-cluster"}},
		}, "spec", "subnetSelectorTerms")
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteObject(t, planning.EC2NodeClassResource, className) })

	var class apisv1.EC2NodeClass
	clustertesting.Eventually(t, time.Minute, "EC2NodeClass "+className+" Ready=False", func(ctx context.Context) (bool, error) {
		if err := getTyped(ctx, planning.EC2NodeClassResource, className, &class); err != nil {
			return false, err
		}
		return meta.IsStatusConditionFalse(class.Status.Conditions, apisv1.ConditionTypeReady), nil
	})
	ready := meta.FindStatusCondition(class.Status.Conditions, apisv1.ConditionTypeReady)
	if ready.Reason != status.ReasonSubnetsNotResolved || !strings.Contains(ready.Message, "spec.subnetSelectorTerms") {
		t.Errorf("Ready = False (%s: %q), want %s naming spec.subnetSelectorTerms", ready.Reason, ready.Message, status.ReasonSubnetsNotResolved)
	}
	if !meta.IsStatusConditionFalse(class.Status.Conditions, apisv1.ConditionTypeSubnetsReady) {
		t.Errorf("SubnetsReady is not False: %+v", class.Status.Conditions)
	}
	if len(class.Status.Subnets) != 0 || len(class.Status.AMIs) != 0 {
		t.Errorf("an unresolved class lists subnets %v and AMIs %v", class.Status.Subnets, class.Status.AMIs)
	}
	t.Logf("kubectl describe ec2nodeclass %s:\n%s", className, kubectl(t, "describe", "ec2nodeclass", className))
}

// waitPoolStatus waits until the pool's status counts nodes and its Ready
// condition is True, and returns the pool.
func waitPoolStatus(t *testing.T, name string, nodes int64) *apisv1.NodePool {
	t.Helper()
	var pool apisv1.NodePool
	clustertesting.Eventually(t, 3*time.Minute, fmt.Sprintf("NodePool %s status: %d nodes, Ready", name, nodes), func(ctx context.Context) (bool, error) {
		u, err := testDynamic.Resource(planning.NodePoolResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		// A count of 0 is written, not left out (the column is not blank).
		got, found, err := unstructured.NestedInt64(u.Object, "status", "nodes")
		if err != nil || !found || got != nodes {
			return false, fmt.Errorf("status.nodes = %d (written: %v, %v)", got, found, err)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pool); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(pool.Status.Conditions, apisv1.ConditionTypeReady), nil
	})
	return &pool
}

// kubectlColumns checks the NODES and READY columns of `kubectl get
// nodepools` for the pool, and logs what `kubectl get
// nodepools,ec2nodeclasses` shows.
func kubectlColumns(t *testing.T, pool, wantNodes, wantReady string) {
	t.Helper()
	t.Logf("kubectl get nodepools,ec2nodeclasses:\n%s", kubectl(t, "get", "nodepools,ec2nodeclasses"))
	// NAME NODECLASS NODES READY AGE
	fields := strings.Fields(kubectl(t, "get", "nodepool", pool, "--no-headers"))
	if len(fields) < 4 || fields[2] != wantNodes || fields[3] != wantReady {
		t.Errorf("kubectl get nodepool %s: %q, want NODES %s and READY %s", pool, fields, wantNodes, wantReady)
	}
}

// kubectl runs the stack's kubectl on its cluster and returns the output.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	args = append(args, "--kubeconfig", testStack.Cluster.KubeconfigPath())
	out, err := exec.CommandContext(t.Context(), testStack.Cluster.KubectlPath(), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func getTyped(ctx context.Context, resource schema.GroupVersionResource, name string, into any) error {
	u, err := testDynamic.Resource(resource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}

func deleteObject(t *testing.T, resource schema.GroupVersionResource, name string) {
	if err := testDynamic.Resource(resource).Delete(context.Background(), name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	}); err != nil {
		t.Errorf("deleting %s %s: %v", resource.Resource, name, err)
	}
}
