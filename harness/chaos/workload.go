package chaos

import (
	"context"
	"fmt"
	"math/rand"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/planning"
	"github.com/millwright/millwright/harness/driver"
	"github.com/millwright/millwright/local/stack/stacktest"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// The suite's pool and namespace.
const (
	poolName  = "chaos"
	namespace = "chaos"
	// budgetPercent is the pool's disruption budget; the checker holds
	// the pool to it.
	budgetPercent = 50
	// podCPU makes one pod fill an m5.large (2 vCPU, ~1.9 allocatable), so
	// every pod is a node and every node a lifecycle.
	podCPU = "1200m"
)

// Deployments of the workload. churnDeployments are scaled up and down;
// the others keep their size and carry the PDBs and do-not-disrupt pods.
var churnDeployments = []string{"churn-a", "churn-b", "churn-c"}

const (
	pdbZeroDeployment   = "pdb-zero"   // PDB maxUnavailable 0
	pdbMinusDeployment  = "pdb-minus1" // PDB minAvailable n-1
	doNotDisruptDeploy  = "do-not-disrupt"
	pdbZeroReplicas     = 2
	pdbMinusReplicas    = 3
	doNotDisruptReplica = 1
)

// nodePool is the suite's NodePool: one-pod m5.large nodes, spot or
// on-demand in three zones, empty nodes removed after 5 s, at most half the
// pool disrupted at once.
func nodePool() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "millwright.dev/v1",
		"kind":       "NodePool",
		"metadata":   map[string]any{"name": poolName},
		"spec": map[string]any{
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"chaos": "true"}},
				"spec": map[string]any{
					"nodeClassRef": map[string]any{"group": "millwright.dev", "kind": "EC2NodeClass", "name": "default"},
					"requirements": []any{
						map[string]any{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": []any{"m5.large"}},
						map[string]any{"key": "topology.kubernetes.io/zone", "operator": "In", "values": []any{"us-east-1a", "us-east-1b", "us-east-1c"}},
						map[string]any{"key": apisv1.LabelCapacityType, "operator": "In", "values": []any{"spot", "on-demand"}},
					},
				},
			},
			"disruption": map[string]any{
				"consolidationPolicy": "WhenEmpty",
				"consolidateAfter":    "5s",
				"budgets":             []any{map[string]any{"nodes": fmt.Sprintf("%d%%", budgetPercent)}},
			},
			"limits": map[string]any{"cpu": "400"},
		},
	}}
}

// podSpec is a pause pod on the suite's pool.
func podSpec() corev1.PodSpec {
	spec := stacktest.PausePodSpec(podCPU)
	spec.NodeSelector = map[string]string{apisv1.LabelNodePool: poolName}
	return spec
}

// setUpWorkload creates the pool, the namespace, the deployments (churn ones
// at 0) and the PDBs.
func setUpWorkload(ctx context.Context, s *driver.Stack) error {
	if err := stacktest.ApplyObject(ctx, s.Dynamic, planning.NodePoolResource, nodePool()); err != nil {
		return err
	}
	kube := s.Kube
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	deployments := []*appsv1.Deployment{
		stacktest.Deployment(namespace, pdbZeroDeployment, pdbZeroReplicas, podSpec()),
		stacktest.Deployment(namespace, pdbMinusDeployment, pdbMinusReplicas, podSpec()),
		stacktest.Deployment(namespace, doNotDisruptDeploy, doNotDisruptReplica, podSpec()),
	}
	deployments[2].Spec.Template.Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: "true"}
	for _, name := range churnDeployments {
		deployments = append(deployments, stacktest.Deployment(namespace, name, 0, podSpec()))
	}
	for _, d := range deployments {
		if _, err := kube.AppsV1().Deployments(namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating deployment %s: %w", d.Name, err)
		}
	}
	pdbs := []*policyv1.PodDisruptionBudget{
		pdb(pdbZeroDeployment, policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0))}),
		pdb(pdbMinusDeployment, policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(pdbMinusReplicas - 1))}),
	}
	for _, p := range pdbs {
		if _, err := kube.PolicyV1().PodDisruptionBudgets(namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating PDB %s: %w", p.Name, err)
		}
	}
	return nil
}

func pdb(app string, spec policyv1.PodDisruptionBudgetSpec) *policyv1.PodDisruptionBudget {
	spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: namespace}, Spec: spec}
}

// scale sets a deployment's replicas.
func scale(ctx context.Context, kube kubernetes.Interface, name string, replicas int32) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := kube.AppsV1().Deployments(namespace).GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = replicas
		_, err = kube.AppsV1().Deployments(namespace).UpdateScale(ctx, name, s, metav1.UpdateOptions{})
		return err
	})
}

// churner makes node lifecycles: it scales the churn deployments, deletes
// nodes and asks for drains, from a seeded generator.
type churner struct {
	s       *driver.Stack
	rng     *rand.Rand
	history *History
	// maxReplicas bounds each churn deployment.
	maxReplicas int
}

// step does one random workload change.
func (c *churner) step(ctx context.Context) {
	switch r := c.rng.Float64(); {
	case r < 0.45:
		name := churnDeployments[c.rng.Intn(len(churnDeployments))]
		replicas := int32(c.rng.Intn(c.maxReplicas + 1))
		err := scale(ctx, c.s.Kube, name, replicas)
		c.history.Record(KindChurn, "scale", "deployment", name, "replicas", replicas, "error", err)
	case r < 0.8:
		node, ok := c.churnNode(ctx)
		if !ok {
			return
		}
		err := c.s.Kube.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
		c.history.Record(KindChurn, "delete-node", "node", node, "error", err)
	default:
		node, ok := c.churnNode(ctx)
		if !ok {
			return
		}
		err := drain(ctx, c.s, node)
		c.history.Record(KindChurn, "drain", "node", node, "error", err)
	}
}

// churnNode picks a registered node of the pool (Millwright's finalizer on
// it, the unregistered taint gone) that runs no maxUnavailable-0 or
// do-not-disrupt pod (its drain would wait forever, as it should).
//
// The node must also run a pod that may go: a node fits one pod, so no
// blocking pod can be bound to it between this list and the deletion. An
// empty node could take a pending do-not-disrupt pod in that moment (a node
// just launched for it, say), and its drain would then rightly wait forever.
// Empty nodes still end, by consolidation.
func (c *churner) churnNode(ctx context.Context) (string, bool) {
	nodes, err := c.s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: apisv1.LabelNodePool + "=" + poolName})
	if err != nil {
		return "", false
	}
	pods, err := c.s.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", false
	}
	blocked, occupied := map[string]bool{}, map[string]bool{}
	for _, p := range pods.Items {
		switch app := p.Labels["app"]; {
		case app == pdbZeroDeployment || app == doNotDisruptDeploy:
			blocked[p.Spec.NodeName] = true
		case p.DeletionTimestamp == nil && p.Spec.NodeName != "":
			occupied[p.Spec.NodeName] = true
		}
	}
	var candidates []string
	for _, n := range nodes.Items {
		registered := slices.Contains(n.Finalizers, activities.TerminationFinalizer) && !stacktest.HasTaint(&n, activities.UnregisteredTaintKey)
		if registered && n.DeletionTimestamp == nil && !n.Spec.Unschedulable && !blocked[n.Name] && occupied[n.Name] {
			candidates = append(candidates, n.Name)
		}
	}
	if len(candidates) == 0 {
		return "", false
	}
	return candidates[c.rng.Intn(len(candidates))], true
}
