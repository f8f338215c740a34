package run_test

import (
	"context"
	"fmt"
	"slices"
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

// After a node's count is signalled, changes that neither empty it nor
// end its emptiness wait for the refresh interval (the last count goes
// then); reaching zero or leaving it goes after the gathering delay.
func TestPodCountsThatCrossNoZeroWaitForTheRefresh(t *testing.T) {
	if testKube == nil {
		t.Skip("needs the local stack (not with -short)")
	}
	ctx := t.Context()
	nodeClaim := clustertesting.UniqueName("refreshed")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeClaim, Labels: map[string]string{activities.NodeClaimLabel: nodeClaim}}}
	if _, err := testKube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testKube.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	namespace := clustertesting.CreateNamespace(t, testKube, "refreshed")

	clock := clocktesting.NewFakeClock(time.Now())
	signaler := &recordingSignaler{}
	factory := informers.NewSharedInformerFactory(testKube, 0)
	watcher, err := watch.NewPodWatcher(factory, watch.Provisioner{Signaler: signaler, Cluster: "refreshed", TaskQueue: "unused"}, clock, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go watcher.Run(ctx)

	podLister := factory.Core().V1().Pods().Lister().Pods(namespace)
	next := 0
	create := func(n int) {
		t.Helper()
		for range n {
			spec := stacktest.PausePodSpec("10m")
			spec.NodeName = node.Name
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%02d", next), Namespace: namespace}, Spec: spec}
			next++
			if _, err := testKube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	deleteAll := func() {
		t.Helper()
		if err := testKube.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	seen := func(n int) {
		t.Helper()
		clustertesting.Eventually(t, time.Minute, fmt.Sprintf("the watcher sees %d pods", n), func(context.Context) (bool, error) {
			pods, err := podLister.List(labels.Everything())
			return len(pods) == n, err
		})
	}
	workflowID := workflows.NodeWorkflowID("refreshed", nodeClaim)
	counts := func() []int {
		var out []int
		for _, s := range signaler.sent(workflowID, workflows.SignalPodsChanged) {
			out = append(out, s.arg.(workflows.PodsChanged).NonDaemonSetPods)
		}
		return out
	}
	signalled := func(what string, want ...int) {
		t.Helper()
		clustertesting.Eventually(t, time.Minute, what, func(context.Context) (bool, error) {
			return len(counts()) >= len(want), nil
		})
		if got := counts(); !slices.Equal(got, want) {
			t.Fatalf("%s: counts signalled %v, want %v", what, got, want)
		}
	}

	create(3)
	seen(3)
	clock.Step(time.Second)
	signalled("leaving zero goes after the gathering delay", 3)

	create(2)
	seen(5)
	clock.Step(time.Second)
	// Held: had 5 gone now, it would come before 6 below.
	create(1)
	seen(6)
	clock.Step(time.Second)
	clock.Step(30 * time.Second)
	signalled("the last count after the refresh", 3, 6)

	create(1)
	seen(7)
	clock.Step(time.Second)
	deleteAll()
	seen(0)
	clock.Step(time.Second)
	signalled("reaching zero goes after the gathering delay, the held 7 never", 3, 6, 0)
}
