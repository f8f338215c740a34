package watch

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/local/cluster/clustertesting"
	"github.com/millwright/millwright/workflows"
)

var testClientset kubernetes.Interface

func TestMain(m *testing.M) {
	os.Exit(clustertesting.Main(m, clustertesting.Options{Name: "watch"},
		func(_ context.Context, env *clustertesting.Env) (func(), error) {
			testClientset = env.Clientset
			return nil, nil
		}))
}

// recordingSignaler counts the signals the watchers would send to Temporal.
type recordingSignaler struct {
	mu      sync.Mutex
	signals map[string][]string // workflow id → signal names
	// pending are the podsPending signals' keys (SignalWithStart).
	pending [][]string
}

func (r *recordingSignaler) SignalWorkflow(_ context.Context, workflowID, _, signalName string, _ any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.signals[workflowID] = append(r.signals[workflowID], signalName)
	return nil
}

func (r *recordingSignaler) SignalWithStartWorkflow(_ context.Context, _, _ string, arg any, _ client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	if pending, ok := arg.(workflows.PodsPending); ok {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.pending = append(r.pending, pending.PodKeys)
	}
	return nil, nil
}

func (r *recordingSignaler) pendingSent() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.pending)
}

func (r *recordingSignaler) sent(workflowID string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.signals[workflowID])
}

// A deleted Node is tainted by the watcher itself, before any workflow runs
// (the signaller here delivers to no one), and its workflow is told once,
// however often the Node changes afterwards.
func TestDeletedNodeIsTaintedAndSignalledOnce(t *testing.T) {
	if testClientset == nil {
		t.Skip("needs the real control plane; not started under -short")
	}
	signaler := &recordingSignaler{signals: map[string][]string{}}
	factory := informers.NewSharedInformerFactory(testClientset, 0)
	watcher, err := NewNodeWatcher(factory, testClientset, signaler, "test", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go watcher.Run(ctx)

	const finalizer = "millwright.dev/test-hold"
	createHeldNode := func(claim string) *corev1.Node {
		node, err := testClientset.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:       clustertesting.UniqueName("deleted"),
			Labels:     map[string]string{activities.NodeClaimLabel: claim},
			Finalizers: []string{finalizer},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = testClientset.CoreV1().Nodes().Patch(context.Background(), node.Name, types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		})
		if err := testClientset.CoreV1().Nodes().Delete(t.Context(), node.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		return node
	}

	first := createHeldNode("claim-first")
	firstWorkflow := workflows.NodeWorkflowID("test", "claim-first")
	clustertesting.Eventually(t, time.Minute, "the deleted Node tainted and its workflow signalled", func(ctx context.Context) (bool, error) {
		node, err := testClientset.CoreV1().Nodes().Get(ctx, first.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		tainted := slices.ContainsFunc(node.Spec.Taints, func(taint corev1.Taint) bool {
			return taint.Key == activities.DisruptedTaintKey && taint.Effect == corev1.TaintEffectNoSchedule
		})
		return tainted && len(signaler.sent(firstWorkflow)) > 0, nil
	})

	// More changes to the deleted Node, then a second deletion: the queue is
	// one FIFO worker, so once the second Node is signalled the changes to
	// the first have been handled too.
	for _, value := range []string{"a", "b"} {
		if _, err := testClientset.CoreV1().Nodes().Patch(t.Context(), first.Name, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"millwright.dev/test-change":"`+value+`"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	clustertesting.Eventually(t, time.Minute, "the watcher saw the changes", func(context.Context) (bool, error) {
		obj, exists, err := watcher.nodes.GetIndexer().GetByKey(first.Name)
		return exists && obj.(*corev1.Node).Labels["millwright.dev/test-change"] == "b", err
	})
	createHeldNode("claim-second")
	secondWorkflow := workflows.NodeWorkflowID("test", "claim-second")
	clustertesting.Eventually(t, time.Minute, "the second deleted Node signalled", func(context.Context) (bool, error) {
		return len(signaler.sent(secondWorkflow)) > 0, nil
	})
	if got := signaler.sent(firstWorkflow); !slices.Equal(got, []string{workflows.SignalNodeDeleted}) {
		t.Errorf("signals to the first node's workflow = %q, want one %s", got, workflows.SignalNodeDeleted)
	}
}
