package run_test

import (
	"context"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/activities/kube"
	"github.com/millwright/millwright/activities/planning"
	"github.com/millwright/millwright/local/cluster/clustertesting"
	"github.com/millwright/millwright/local/stack/stacktest"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/worker/status"
)

// TestDeletingANodePoolDrainsItsNodes: a NodePool carries the termination
// finalizer; deleting it drains and terminates its nodes (their NodeClaims
// deleted, their instances terminated, their Nodes and node workflows
// gone), then the pool itself goes. Nothing is left behind.
func TestDeletingANodePoolDrainsItsNodes(t *testing.T) {
	env := newTestEnv(t, "it-pooldelete", "Never")
	ctx := context.Background()
	env.createDeployment(t, "doomed", 2, "500m")
	env.waitPodsRunning(t, "doomed", 2, 4*time.Minute)
	pools := testDynamic.Resource(planning.NodePoolResource)
	clustertesting.Eventually(t, time.Minute, "NodePool carries the termination finalizer", func(ctx context.Context) (bool, error) {
		pool, err := pools.Get(ctx, env.pool, metav1.GetOptions{})
		return err == nil && slices.Contains(pool.GetFinalizers(), status.NodePoolFinalizer), err
	})
	if len(env.liveInstances()) == 0 {
		t.Fatal("no live instance for the pool")
	}

	if err := pools.Delete(ctx, env.pool, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	selector := metav1.ListOptions{LabelSelector: apisv1.LabelNodePool + "=" + env.pool}
	clustertesting.Eventually(t, 4*time.Minute, "deleted NodePool's nodes, NodeClaims, instances and the pool itself gone", func(ctx context.Context) (bool, error) {
		nodes, err := testKube.CoreV1().Nodes().List(ctx, selector)
		if err != nil {
			return false, err
		}
		claims, err := testDynamic.Resource(kube.NodeClaimResource).List(ctx, selector)
		if err != nil {
			return false, err
		}
		_, err = pools.Get(ctx, env.pool, metav1.GetOptions{})
		poolGone := apierrors.IsNotFound(err)
		if err != nil && !poolGone {
			return false, err
		}
		return len(nodes.Items) == 0 && len(claims.Items) == 0 && len(env.liveInstances()) == 0 && poolGone, nil
	})
	running := stacktest.PoolQuery(env.pool) + " AND ExecutionStatus = 'Running'"
	clustertesting.Eventually(t, time.Minute, "no node workflow of the pool running", func(ctx context.Context) (bool, error) {
		found, err := stacktest.ListNodeWorkflows(ctx, testTemporal, testStack.Temporal.Namespace(), running)
		return len(found) == 0, err
	})
}
