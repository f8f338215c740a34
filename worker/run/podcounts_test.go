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
	corelisters "k8s.io/client-go/listers/core/v1"
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

// countedNode is a Node with a node claim label, a namespace for its pods
// and a pod watcher on a fake clock that records its signals.
type countedNode struct {
	node       *corev1.Node
	namespace  string
	workflowID string
	clock      *clocktesting.FakeClock
	signaler   *recordingSignaler
	pods       corelisters.PodNamespaceLister
	created    int
}

func newCountedNode(t *testing.T, prefix string) *countedNode {
	t.Helper()
	if testKube == nil {
		t.Skip("needs the local stack (not with -short)")
	}
	ctx := t.Context()
	nodeClaim := clustertesting.UniqueName(prefix)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeClaim, Labels: map[string]string{activities.NodeClaimLabel: nodeClaim}}}
	if _, err := testKube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testKube.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	namespace := clustertesting.CreateNamespace(t, testKube, prefix)

	c := &countedNode{node: node, namespace: namespace, workflowID: workflows.NodeWorkflowID(prefix, nodeClaim),
		clock: clocktesting.NewFakeClock(time.Now()), signaler: &recordingSignaler{}}
	factory := informers.NewSharedInformerFactory(testKube, 0)
	watcher, err := watch.NewPodWatcher(factory, watch.Provisioner{Signaler: c.signaler, Cluster: prefix, TaskQueue: "unused"}, c.clock, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	c.pods = factory.Core().V1().Pods().Lister().Pods(namespace)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go watcher.Run(ctx)
	return c
}

// create binds n new pods to the node.
func (c *countedNode) create(t *testing.T, n int) {
	t.Helper()
	for range n {
		spec := stacktest.PausePodSpec("10m")
		spec.NodeName = c.node.Name
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%02d", c.created), Namespace: c.namespace}, Spec: spec}
		c.created++
		if _, err := testKube.CoreV1().Pods(c.namespace).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// seen waits until the watcher's cache holds n pods.
func (c *countedNode) seen(t *testing.T, n int) {
	t.Helper()
	clustertesting.Eventually(t, time.Minute, fmt.Sprintf("the watcher sees %d pods", n), func(context.Context) (bool, error) {
		pods, err := c.pods.List(labels.Everything())
		return len(pods) == n, err
	})
}

// counts are the pod counts signalled to the node's workflow, in order.
func (c *countedNode) counts() []int {
	var out []int
	for _, s := range c.signaler.sent(c.workflowID, workflows.SignalPodsChanged) {
		out = append(out, s.arg.(workflows.PodsChanged).NonDaemonSetPods)
	}
	return out
}

// signalled waits for len(want) signals and checks their counts.
func (c *countedNode) signalled(t *testing.T, what string, want ...int) {
	t.Helper()
	clustertesting.Eventually(t, time.Minute, what, func(context.Context) (bool, error) {
		return len(c.counts()) >= len(want), nil
	})
	if got := c.counts(); !slices.Equal(got, want) {
		t.Fatalf("%s: counts signalled %v, want %v", what, got, want)
	}
}

// The pods bound to a node in one burst reach its workflow as one
// pods-changed signal with the final count, sent a second after the first
// of them (not one signal per pod).
func TestPodsBoundTogetherAreOnePodsChangedSignal(t *testing.T) {
	const pods = 20
	c := newCountedNode(t, "counted")
	c.create(t, pods)
	c.seen(t, pods)
	if sent := c.counts(); len(sent) != 0 {
		t.Fatalf("%d pods-changed signal(s) sent before the gathering delay: %v", len(sent), sent)
	}

	c.clock.Step(time.Second)

	c.signalled(t, "one pods-changed signal with the final count", pods)
}

// After a node's count is signalled, changes that neither empty it nor
// end its emptiness wait for the refresh interval (the last count goes
// then); reaching zero or leaving it goes after the gathering delay.
func TestPodCountsThatCrossNoZeroWaitForTheRefresh(t *testing.T) {
	c := newCountedNode(t, "refreshed")
	c.create(t, 3)
	c.seen(t, 3)
	c.clock.Step(time.Second)
	c.signalled(t, "leaving zero goes after the gathering delay", 3)

	c.create(t, 2)
	c.seen(t, 5)
	c.clock.Step(time.Second)
	// Held: had 5 gone now, it would come before 6 below.
	c.create(t, 1)
	c.seen(t, 6)
	c.clock.Step(time.Second)
	c.clock.Step(30 * time.Second)
	c.signalled(t, "the last count after the refresh", 3, 6)

	c.create(t, 1)
	c.seen(t, 7)
	c.clock.Step(time.Second)
	if err := testKube.CoreV1().Pods(c.namespace).DeleteCollection(t.Context(), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	c.seen(t, 0)
	c.clock.Step(time.Second)
	c.signalled(t, "reaching zero goes after the gathering delay, the held 7 never", 3, 6, 0)
}
