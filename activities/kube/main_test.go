package kube

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/local/cluster"
	"github.com/millwright/millwright/local/cluster/clustertesting"
)

// The one control plane this package's tests share (nil under -short, where
// the tests that need it skip), and its clients.
var (
	testCluster   *cluster.Cluster
	testClientset kubernetes.Interface
	testDynamic   dynamic.Interface
)

// TestMain starts one real control plane (kube-apiserver, controller-manager,
// scheduler, kwok) for the package with the Millwright CRDs installed.
func TestMain(m *testing.M) {
	os.Exit(clustertesting.Main(m, clustertesting.Options{Name: "kube-activities"},
		func(_ context.Context, env *clustertesting.Env) (func(), error) {
			testCluster, testClientset, testDynamic = env.Cluster, env.Clientset, env.Dynamic
			return nil, nil
		}))
}

func requireCluster(t *testing.T) {
	t.Helper()
	if testCluster == nil {
		t.Skip("needs the real control plane; not started under -short")
	}
}

// harness is the activities under test with their logs and heartbeats.
type harness struct {
	activities *Activities
	logs       *observer.ObservedLogs
	heartbeats *heartbeatRecorder
}

type harnessOption func(*Config)

func withClock(c clock.WithTicker) harnessOption { return func(cfg *Config) { cfg.Clock = c } }

// withWriteCounter gives the activities a clientset whose transport counts
// the writes the API server accepted (other controllers write Nodes too, so
// a resourceVersion cannot tell who wrote; and a write refused with
// Conflict, retried by RetryOnConflict, wrote nothing).
func withWriteCounter(counter *writeCounter) harnessOption {
	return func(cfg *Config) {
		config := testCluster.RESTConfig()
		config.Wrap(func(next http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
				resp, err := next.RoundTrip(req)
				if err == nil && req.Method != http.MethodGet && resp.StatusCode < 300 {
					counter.add(req.Method + " " + req.URL.Path)
				}
				return resp, err
			})
		})
		clientset, err := kubernetes.NewForConfig(config)
		if err != nil {
			panic(err)
		}
		cfg.Clientset = clientset
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// writeCounter records accepted write requests as "METHOD /path".
type writeCounter struct {
	mu     sync.Mutex
	writes []string
}

func (c *writeCounter) add(write string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, write)
}

func (c *writeCounter) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.writes...)
}

func newHarness(t *testing.T, options ...harnessOption) *harness {
	t.Helper()
	requireCluster(t) // before the options: they may use the cluster
	core, logs := observer.New(zapcore.DebugLevel)
	cfg := Config{
		Clientset:            testClientset,
		Dynamic:              testDynamic,
		Logger:               zap.New(core),
		PollInterval:         100 * time.Millisecond,
		EvictionRetryInitial: 200 * time.Millisecond,
		EvictionRetryMax:     2 * time.Second,
	}
	for _, option := range options {
		option(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return &harness{activities: a, logs: logs, heartbeats: newHeartbeatRecorder()}
}

// offlineHarness has real clients for an address nothing listens on: for
// tests of what the activities decide before talking to the API server.
func offlineHarness(t *testing.T) *harness {
	t.Helper()
	unreachable := &rest.Config{Host: "https://127.0.0.1:1"}
	clientset, err := kubernetes.NewForConfig(unreachable)
	if err != nil {
		t.Fatal(err)
	}
	dynamicClient, err := dynamic.NewForConfig(unreachable)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Clientset: clientset, Dynamic: dynamicClient})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return &harness{activities: a, heartbeats: newHeartbeatRecorder()}
}

// environment is a Temporal test activity environment whose heartbeats the
// harness records, optionally resuming from heartbeat details.
func (h *harness) environment(details any) *testsuite.TestActivityEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{h.heartbeats}})
	env.SetTestTimeout(5 * time.Minute)
	if details != nil {
		env.SetHeartbeatDetails(details)
	}
	env.RegisterActivity(h.activities.WaitForRegistration)
	env.RegisterActivity(h.activities.RegisterNode)
	env.RegisterActivity(h.activities.WaitForInitialization)
	env.RegisterActivity(h.activities.AllowDisruption)
	env.RegisterActivity(h.activities.Drain)
	env.RegisterActivity(h.activities.DeleteNode)
	env.RegisterActivity(h.activities.MarkDisruption)
	env.RegisterActivity(h.activities.MarkOutliers)
	return env
}

// execute runs one activity in a fresh environment and decodes its result.
func execute[Resp any](h *harness, details any, activityFn any, req any) (Resp, error) {
	var resp Resp
	value, err := h.environment(details).ExecuteActivity(activityFn, req)
	if err != nil {
		return resp, err
	}
	if err := value.Get(&resp); err != nil {
		return resp, err
	}
	return resp, nil
}

// logged reports whether a line with message and the node field was logged.
func (h *harness) logged(message, node string) bool {
	for _, entry := range h.logs.FilterMessage(message).All() {
		if entry.ContextMap()["node"] == node {
			return true
		}
	}
	return false
}

// heartbeatRecorder sees every RecordHeartbeat call (the test environment's
// listener only sees the throttled ones sent to the server).
type heartbeatRecorder struct {
	interceptor.WorkerInterceptorBase
	mu      sync.Mutex
	details []any
	changed chan struct{}
}

func newHeartbeatRecorder() *heartbeatRecorder {
	return &heartbeatRecorder{changed: make(chan struct{})}
}

func (r *heartbeatRecorder) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	inbound := &recordingInbound{recorder: r}
	inbound.Next = next
	return inbound
}

func (r *heartbeatRecorder) record(details []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(details) > 0 {
		r.details = append(r.details, details[0])
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

// all returns every heartbeat detail so far.
func (r *heartbeatRecorder) all() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]any(nil), r.details...)
}

// waitFor blocks until a heartbeat satisfies match or timeout passes.
func (r *heartbeatRecorder) waitFor(t *testing.T, timeout time.Duration, what string, match func(detail any) bool) any {
	t.Helper()
	detail, ok := r.await(timeout, match)
	if !ok {
		t.Fatalf("no heartbeat %s within %s", what, timeout)
	}
	return detail
}

// await is waitFor for goroutines other than the test's own, which must not
// call t.Fatal: it reports whether a heartbeat satisfied match in time.
func (r *heartbeatRecorder) await(timeout time.Duration, match func(detail any) bool) (any, bool) {
	deadline := time.After(timeout)
	seen := 0
	for {
		r.mu.Lock()
		details, changed := r.details[seen:], r.changed
		seen = len(r.details)
		r.mu.Unlock()
		for _, detail := range details {
			if match(detail) {
				return detail, true
			}
		}
		select {
		case <-changed:
		case <-deadline:
			return nil, false
		}
	}
}

type recordingInbound struct {
	interceptor.ActivityInboundInterceptorBase
	recorder *heartbeatRecorder
}

func (i *recordingInbound) Init(outbound interceptor.ActivityOutboundInterceptor) error {
	recording := &recordingOutbound{recorder: i.recorder}
	recording.Next = outbound
	return i.Next.Init(recording)
}

type recordingOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
	recorder *heartbeatRecorder
}

func (o *recordingOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	o.recorder.record(details)
	o.Next.RecordHeartbeat(ctx, details...)
}

// nodeBuilder builds Nodes the way an EC2 instance registers them.
type nodeBuilder struct{ node *corev1.Node }

// newNode is a Node kwok plays the kubelet for (it becomes Ready), with a
// unique name and providerID.
func newNode(prefix string) *nodeBuilder {
	name := clustertesting.UniqueName(prefix)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &nodeBuilder{node: &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{corev1.LabelHostname: name, "millwright.dev/test-node": name},
			Annotations: map[string]string{cluster.FakeNodeAnnotation: cluster.FakeNodeAnnotationValue},
		},
		Spec:   corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-" + name},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}}
}

// withoutKwok leaves the Node alone by kwok: it never becomes Ready and
// nothing but the test writes it, so its resourceVersion only moves when
// the code under test writes.
func (b *nodeBuilder) withoutKwok() *nodeBuilder {
	delete(b.node.Annotations, cluster.FakeNodeAnnotation)
	return b
}

func (b *nodeBuilder) taint(key string, effect corev1.TaintEffect) *nodeBuilder {
	b.node.Spec.Taints = append(b.node.Spec.Taints, corev1.Taint{Key: key, Effect: effect})
	return b
}

func (b *nodeBuilder) label(key, value string) *nodeBuilder {
	b.node.Labels[key] = value
	return b
}

func (b *nodeBuilder) finalizer(name string) *nodeBuilder {
	b.node.Finalizers = append(b.node.Finalizers, name)
	return b
}

func (b *nodeBuilder) unschedulable() *nodeBuilder {
	b.node.Spec.Unschedulable = true
	return b
}

func (b *nodeBuilder) build() *corev1.Node { return b.node.DeepCopy() }

// createNode creates node and deletes it (finalizers removed) after the test.
func createNode(t *testing.T, node *corev1.Node) *corev1.Node {
	t.Helper()
	created, err := testClientset.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeNode(node.Name) })
	return created
}

// removeNode deletes a test Node whatever finalizers it carries.
func removeNode(name string) {
	ctx := context.Background()
	nodes := testClientset.CoreV1().Nodes()
	if node, err := nodes.Get(ctx, name, metav1.GetOptions{}); err == nil && len(node.Finalizers) > 0 {
		node.Finalizers = nil
		_, _ = nodes.Update(ctx, node, metav1.UpdateOptions{})
	}
	_ = nodes.Delete(ctx, name, metav1.DeleteOptions{})
}

func getNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	node, err := testClientset.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return node
}

func waitNodeReady(t *testing.T, name string) {
	t.Helper()
	clustertesting.Eventually(t, 2*time.Minute, "Node "+name+" Ready", func(ctx context.Context) (bool, error) {
		node, err := testClientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		status, _ := nodeReady(node)
		return status == corev1.ConditionTrue, nil
	})
}

// podBuilder builds pods bound straight to a node (no scheduler involved).
type podBuilder struct{ pod *corev1.Pod }

func newPod(namespace, name, node string) *podBuilder {
	grace := int64(1)
	return &podBuilder{pod: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"test-pod": name}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}},
		},
	}}
}

func (b *podBuilder) priorityClass(name string) *podBuilder {
	b.pod.Spec.PriorityClassName = name
	return b
}

func (b *podBuilder) annotate(key, value string) *podBuilder {
	if b.pod.Annotations == nil {
		b.pod.Annotations = map[string]string{}
	}
	b.pod.Annotations[key] = value
	return b
}

func (b *podBuilder) gracePeriod(seconds int64) *podBuilder {
	b.pod.Spec.TerminationGracePeriodSeconds = &seconds
	return b
}

func (b *podBuilder) requests(cpu, memory string) *podBuilder {
	b.pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	return b
}

func (b *podBuilder) build() *corev1.Pod { return b.pod.DeepCopy() }

func createPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	created, err := testClientset.CoreV1().Pods(pod.Namespace).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// waitPodsRunning waits until every pod of namespace on node is Running.
func waitPodsRunning(t *testing.T, namespace string, want int) {
	t.Helper()
	clustertesting.Eventually(t, 2*time.Minute, fmt.Sprintf("%d pods Running in %s", want, namespace), func(ctx context.Context) (bool, error) {
		pods, err := testClientset.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running := 0
		for _, pod := range pods.Items {
			if pod.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == want, nil
	})
}

// The kube activities plus the cloud activities make up the contract's
// NodeActivities; this fails to compile when a signature drifts.
var _ activities.NodeActivities = struct {
	*Activities
	cloudActivities
}{}

type cloudActivities interface {
	Launch(context.Context, activities.LaunchRequest) (activities.LaunchResponse, error)
	TerminateInstance(context.Context, activities.TerminateInstanceRequest) (activities.TerminateInstanceResponse, error)
	WaitForInstanceTerminated(context.Context, activities.WaitForInstanceTerminatedRequest) (activities.WaitForInstanceTerminatedResponse, error)
}
