package run_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/local/cluster/clustertesting"
	"github.com/millwright/millwright/local/stack/stacktest"
	"github.com/millwright/millwright/worker/watch"
	"github.com/millwright/millwright/workflows"
)

// recordingSignaler keeps the signals the watchers would send.
type recordingSignaler struct {
	mu      sync.Mutex
	signals []sentSignal
}

type sentSignal struct {
	workflowID, name string
	arg              any
}

func (r *recordingSignaler) SignalWorkflow(_ context.Context, workflowID, _, name string, arg any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.signals = append(r.signals, sentSignal{workflowID: workflowID, name: name, arg: arg})
	return nil
}

func (r *recordingSignaler) SignalWithStartWorkflow(context.Context, string, string, any, client.StartWorkflowOptions, any, ...any) (client.WorkflowRun, error) {
	return nil, nil
}

func (r *recordingSignaler) sent(workflowID, name string) []sentSignal {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []sentSignal
	for _, s := range r.signals {
		if s.workflowID == workflowID && s.name == name {
			out = append(out, s)
		}
	}
	return out
}

// The pods bound to a node in one burst reach its workflow as one
// pods-changed signal with the final count, sent a second after the first
// of them (not one signal per pod).
func TestPodsBoundTogetherAreOnePodsChangedSignal(t *testing.T) {
	if testKube == nil {
		t.Skip("needs the local stack (not with -short)")
	}
	ctx := t.Context()
	const pods = 20
	nodeClaim := clustertesting.UniqueName("counted")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeClaim, Labels: map[string]string{activities.NodeClaimLabel: nodeClaim}}}
	if _, err := testKube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testKube.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	namespace := clustertesting.CreateNamespace(t, testKube, "counted")

	clock := clocktesting.NewFakeClock(time.Now())
	signaler := &recordingSignaler{}
	factory := informers.NewSharedInformerFactory(testKube, 0)
	watcher, err := watch.NewPodWatcher(factory, watch.Provisioner{Signaler: signaler, Cluster: "counted", TaskQueue: "unused"}, clock, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go watcher.Run(ctx)

	for i := range pods {
		spec := stacktest.PausePodSpec("10m")
		spec.NodeName = node.Name
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%02d", i), Namespace: namespace}, Spec: spec}
		if _, err := testKube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	podLister := factory.Core().V1().Pods().Lister().Pods(namespace)
	clustertesting.Eventually(t, time.Minute, "the watcher sees every pod", func(context.Context) (bool, error) {
		seen, err := podLister.List(labels.Everything())
		return len(seen) == pods, err
	})
	workflowID := workflows.NodeWorkflowID("counted", nodeClaim)
	if sent := signaler.sent(workflowID, workflows.SignalPodsChanged); len(sent) != 0 {
		t.Fatalf("%d pods-changed signal(s) sent before the gathering delay: %+v", len(sent), sent)
	}

	clock.Step(time.Second)

	clustertesting.Eventually(t, time.Minute, "a pods-changed signal", func(context.Context) (bool, error) {
		return len(signaler.sent(workflowID, workflows.SignalPodsChanged)) > 0, nil
	})
	sent := signaler.sent(workflowID, workflows.SignalPodsChanged)
	if len(sent) != 1 {
		t.Fatalf("%d pods-changed signals, want 1: %+v", len(sent), sent)
	}
	if got := sent[0].arg.(workflows.PodsChanged).NonDaemonSetPods; got != pods {
		t.Errorf("signalled count %d, want %d", got, pods)
	}
}
