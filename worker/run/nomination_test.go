package run_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"github.com/millwright/millwright/activities/planning"
	"github.com/millwright/millwright/deploy/examples"
	"github.com/millwright/millwright/local/cluster/clustertesting"
	"github.com/millwright/millwright/local/stack/stacktest"
	"github.com/millwright/millwright/workflows"
)

// TestConsolidateAfterZeroKeepsNodesForTheirPods: with Karpenter v1's
// default consolidateAfter (0s, set or left unset), a node launched for
// pending pods initializes before the scheduler binds them; it is nominated
// for them, not empty, so every pod ends up Running on the node launched
// for it and no node is terminated before its pods bound.
func TestConsolidateAfterZeroKeepsNodesForTheirPods(t *testing.T) {
	cases := []struct {
		name             string
		consolidateAfter string // "" leaves the field to the CRD's default
	}{
		{name: "it-nominated-zero", consolidateAfter: "0s"},
		{name: "it-nominated-default"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, tc.name, "0s")
			if tc.consolidateAfter == "" {
				// The status controller writes the fresh pool too: retry on
				// its conflicts.
				err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					return stacktest.ApplyManifest(context.Background(), testDynamic, planning.NodePoolResource, examples.NodePool, func(pool *unstructured.Unstructured) error {
						pool.SetName(tc.name)
						unstructured.RemoveNestedField(pool.Object, "spec", "disruption", "consolidateAfter")
						return nil
					})
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			env.createDeployment(t, "inflate", 6, "1")
			pods := env.waitPodsRunning(t, "inflate", 6, 4*time.Minute)
			ids := env.nodeWorkflows(t)
			nodeOf := map[string]string{}
			for _, wf := range ids {
				// The workflow reaches Ready when its initialization check
				// next looks, a moment after the pods run.
				var state workflows.NodeStateView
				clustertesting.Eventually(t, time.Minute, "node workflow "+wf+" Ready", func(ctx context.Context) (bool, error) {
					var err error
					state, err = stacktest.QueryState(ctx, testTemporal, wf)
					return err == nil && (state.Phase == workflows.PhaseReady || state.Termination != nil), err
				})
				if state.Phase != workflows.PhaseReady || state.Termination != nil {
					t.Errorf("node workflow %s is %s (termination %+v), want Ready and kept\n%s", wf, state.Phase, state.Termination, env.diagnose(t))
				}
				nodeOf[state.NodeName] = wf
			}
			for _, pod := range pods {
				if _, ok := nodeOf[pod.Spec.NodeName]; !ok {
					t.Errorf("pod %s runs on %q, not on a node launched for the pool (%v)", pod.Name, pod.Spec.NodeName, nodeOf)
				}
			}
			for _, wf := range ids {
				history, err := stacktest.QueryHistory(context.Background(), testTemporal, wf)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range history.Decisions {
					if strings.HasPrefix(d.Message, "Termination requested") {
						t.Errorf("node workflow %s decided %q while its pods were binding", wf, d.Message)
					}
				}
			}
			if live := env.liveInstances(); len(live) != len(ids) {
				t.Errorf("live instances %v, want one per node workflow %v", live, ids)
			}
		})
	}
}
