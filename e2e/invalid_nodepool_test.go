package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/millwright/millwright/activities/planning"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	workerwatch "github.com/millwright/millwright/worker/watch"
)

// TestInvalidNodePool: `kubectl apply` of a NodePool the CRD's schema
// rejects fails with kubectl naming the field; one the schema accepts but
// Millwright cannot use (a budget schedule that is not cron) gets a Warning
// event from the worker naming the field and launches nothing; meanwhile the
// scenario's valid pool still provisions a pod.
func TestInvalidNodePool(t *testing.T) {
	s := newScenario(t, "invalid-pool")
	ctx := context.Background()

	const rejected = "rejected-by-schema"
	manifest := nodePoolManifest(t, rejected, func(pool *apisv1.NodePool) {
		pool.Spec.Disruption.ConsolidationPolicy = "Sometimes"
	})
	_, stderr, err := runKubectl(manifest, "apply", "-f", "-")
	if err == nil {
		t.Errorf("kubectl apply of NodePool %s with consolidationPolicy Sometimes succeeded; want it rejected", rejected)
	} else if !strings.Contains(stderr, "spec.disruption.consolidationPolicy") {
		t.Errorf("kubectl's error does not name spec.disruption.consolidationPolicy:\n%s", stderr)
	} else {
		t.Logf("kubectl: %s", strings.TrimSpace(stderr))
	}
	if _, err := suite.dynamic.Resource(planning.NodePoolResource).Get(ctx, rejected, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("NodePool %s exists after the rejected apply (get: %v)", rejected, err)
	}

	const unusable = "unusable-schedule"
	const field = "spec.disruption.budgets[0].schedule"
	kubectlApply(t, nodePoolManifest(t, unusable, func(pool *apisv1.NodePool) {
		// Five fields pass the schema's pattern; minute 61 is not cron.
		pool.Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: "1", Schedule: ptr.To("61 * * * *"), Duration: ptr.To(apisv1.DurationOf(time.Hour))}}
	}))
	t.Cleanup(func() { kubectl(t, "delete", "nodepool", unusable, "--ignore-not-found") })
	applied := time.Now()
	poll(t, time.Minute, "a Warning event on NodePool "+unusable+" naming "+field, func(ctx context.Context) (bool, error) {
		events, err := suite.kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + unusable})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == workerwatch.ReasonInvalidNodePool && strings.Contains(e.Message, field) {
				t.Logf("event %s: %s", e.Reason, e.Message)
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("apply → Warning event: %s", time.Since(applied).Round(time.Millisecond))

	s.createDeployment(t, "still-works", 1, "500m")
	s.waitPodsRunning(t, "app=still-works", 1, launchTimeout)
	for _, i := range suite.stack.Emulator.State().Instances {
		if pool := i.Tags[apisv1.TagNodePool]; pool == unusable || pool == rejected {
			t.Errorf("instance %s was launched for the invalid NodePool %s", i.ID, pool)
		}
	}
}
