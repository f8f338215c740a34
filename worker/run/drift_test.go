package run_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/kube"
	"github.com/millwright/millwright/activities/planning"
	"github.com/millwright/millwright/deploy/examples"
	"github.com/millwright/millwright/local/awsemu"
	"github.com/millwright/millwright/local/cluster/clustertesting"
	"github.com/millwright/millwright/local/stack/stacktest"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// TestAMIDriftReplacesEveryNode: the emulator publishes a newer
// Bottlerocket release; the pool's class (bottlerocket@latest) resolves to
// it, every node launched with the old AMI is found drifted (AMIDrift on
// its workflow) and replaced — replacement initialized first, then the old
// node drained — one at a time (the pool's budget), with the pods' PDB
// never violated. Each old node's NodeClaim shows Drifted (AMIDrift) and
// DisruptionReason (Drifted) while it is replaced.
func TestAMIDriftReplacesEveryNode(t *testing.T) {
	const name, replicas = "it-amidrift", 2
	env := newTestEnv(t, name, "Never")
	ctx := context.Background()
	err := stacktest.ApplyManifest(ctx, testDynamic, planning.EC2NodeClassResource, examples.NodeClass, func(u *unstructured.Unstructured) error {
		u.SetName(name)
		return unstructured.SetNestedSlice(u.Object, []any{map[string]any{"alias": "bottlerocket@latest"}}, "spec", "amiSelectorTerms")
	})
	if err != nil {
		t.Fatal(err)
	}
	// The worker writes the pool's status too: read again on a conflict.
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		pool, err := testDynamic.Resource(planning.NodePoolResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		_ = unstructured.SetNestedField(pool.Object, name, "spec", "template", "spec", "nodeClassRef", "name")
		_ = unstructured.SetNestedSlice(pool.Object, []any{map[string]any{"nodes": "1"}}, "spec", "disruption", "budgets")
		_, err = testDynamic.Resource(planning.NodePoolResource).Update(ctx, pool, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = testDynamic.Resource(planning.NodePoolResource).Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = testDynamic.Resource(planning.EC2NodeClassResource).Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	// One pod per node (hostname anti-affinity), a PDB allowing one down.
	spec := stacktest.PausePodSpec("500m")
	spec.NodeSelector = map[string]string{apisv1.LabelNodePool: name}
	spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "drifting"}},
		}},
	}}
	if _, err := testKube.AppsV1().Deployments(name).Create(ctx, stacktest.Deployment(name, "drifting", replicas, spec), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.waitPodsRunning(t, "drifting", replicas, 4*time.Minute)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "drifting", Namespace: name},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "drifting"}}},
	}
	if _, err := testKube.PolicyV1().PodDisruptionBudgets(name).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	selector := metav1.ListOptions{LabelSelector: apisv1.LabelNodePool + "=" + name}
	nodes, err := testKube.CoreV1().Nodes().List(ctx, selector)
	if err != nil {
		t.Fatal(err)
	}
	original := map[string]string{} // node → AMI
	for _, n := range nodes.Items {
		original[n.Name] = n.Annotations[apisv1.AnnotationImageID]
	}
	if len(original) != replicas {
		t.Fatalf("%d nodes in the pool, want %d", len(original), replicas)
	}

	// Sample: how many of the original nodes leave at once, and what their
	// NodeClaims' Drifted and DisruptionReason conditions said.
	var mu sync.Mutex
	maxLeaving := 0
	claimConditions := map[string]map[string]string{} // node → condition type → reason, when True
	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	go func() {
		for sampleCtx.Err() == nil {
			if claims, err := testDynamic.Resource(kube.NodeClaimResource).List(sampleCtx, selector); err == nil {
				for _, u := range claims.Items {
					var claim apisv1.NodeClaim
					if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &claim) != nil {
						continue
					}
					if _, old := original[claim.Status.NodeName]; !old {
						continue
					}
					for _, c := range claim.Status.Conditions {
						if (c.Type == apisv1.ConditionTypeDrifted || c.Type == apisv1.ConditionTypeDisruptionReason) && c.Status == metav1.ConditionTrue {
							mu.Lock()
							if claimConditions[claim.Status.NodeName] == nil {
								claimConditions[claim.Status.NodeName] = map[string]string{}
							}
							claimConditions[claim.Status.NodeName][c.Type] = c.Reason
							mu.Unlock()
						}
					}
				}
			}
			if list, err := testKube.CoreV1().Nodes().List(sampleCtx, selector); err == nil {
				leaving := 0
				for _, n := range list.Items {
					_, old := original[n.Name]
					if old && (n.DeletionTimestamp != nil || slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == activities.DisruptedTaintKey })) {
						leaving++
					}
				}
				mu.Lock()
				maxLeaving = max(maxLeaving, leaving)
				mu.Unlock()
			}
			time.Sleep(250 * time.Millisecond) // sampling period, not a wait for a condition
		}
	}()
	unavailable := watchUnavailable(t, name, "app=drifting", replicas)

	admin := awsemu.NewAdminClient(testStack.EmulatorURL(), nil)
	release, err := admin.PublishImageRelease(ctx, awsemu.ImageRelease{Family: "bottlerocket", Version: "v1.51.0"})
	if err != nil {
		t.Fatal(err)
	}
	clustertesting.Eventually(t, 8*time.Minute, "every node replaced by one with the new AMI", func(ctx context.Context) (bool, error) {
		list, err := testKube.CoreV1().Nodes().List(ctx, selector)
		if err != nil {
			return false, err
		}
		fresh := 0
		for _, n := range list.Items {
			if _, old := original[n.Name]; old {
				return false, nil
			}
			if slices.Contains(release.ImageIDs, n.Annotations[apisv1.AnnotationImageID]) {
				fresh++
			}
		}
		return fresh == replicas, nil
	})
	env.waitPodsRunning(t, "drifting", replicas, 2*time.Minute)
	stopSampling()
	mu.Lock()
	if maxLeaving > 1 {
		t.Errorf("%d drifted nodes left at once, want at most the budget (1)", maxLeaving)
	}
	for node := range original {
		seen := claimConditions[node]
		if seen[apisv1.ConditionTypeDrifted] != "AMIDrift" || seen[apisv1.ConditionTypeDisruptionReason] != "Drifted" {
			t.Errorf("NodeClaim of %s was seen with %v, want Drifted=True (AMIDrift) and DisruptionReason=True (Drifted)", node, seen)
		}
	}
	mu.Unlock()
	if worst, _ := unavailable(); worst > 1 {
		t.Errorf("%d pods of the PDB were unavailable at once, want at most 1", worst)
	}
	drifted, err := stacktest.ListNodeWorkflows(ctx, testTemporal, testStack.Temporal.Namespace(),
		stacktest.PoolQuery(name)+" AND MillwrightDrifted = 'AMIDrift' AND MillwrightTerminationReason = 'Drifted'")
	if err != nil {
		t.Fatal(err)
	}
	if len(drifted) != replicas {
		var ids []string
		for _, wf := range drifted {
			ids = append(ids, wf.ID)
		}
		t.Errorf("node workflows with MillwrightDrifted=AMIDrift ended Drifted: %v, want the %d original nodes'", strings.Join(ids, ", "), replicas)
	}
}
