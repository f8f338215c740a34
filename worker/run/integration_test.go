package run_test

// Integration tests of Millwright's core loop on the real local stack: the
// embedded Temporal server, a real control plane (etcd, kube-apiserver,
// controller-manager, scheduler, kwok playing the kubelets) and the EC2/SQS
// emulator registering Nodes, with one whole worker (run.Run) in between.
// One stack and one worker serve the package; every test has its own
// namespace and NodePool (pods select the pool by its label), so tests do
// not see each other's nodes.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/cloud"
	"github.com/millwright/millwright/activities/millwright"
	"github.com/millwright/millwright/deploy/examples"
	"github.com/millwright/millwright/local/awsemu"
	"github.com/millwright/millwright/local/stack"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/worker/metrics"
	"github.com/millwright/millwright/worker/run"
	workerwatch "github.com/millwright/millwright/worker/watch"
	"github.com/millwright/millwright/workflows"
)

const testRegion = "us-east-1"

// What the package's tests share; nil under -short, where every test skips.
var (
	testStack    *stack.Stack
	testTemporal client.Client
	testKube     kubernetes.Interface
	testDynamic  dynamic.Interface
	// testWorkerConfig is the configuration the worker runs with, so tests
	// that call activities directly build them the same way.
	testWorkerConfig run.Config
	// testMetrics is the registry the worker records on.
	testMetrics *prometheus.Registry
)

var (
	nodePoolResource  = schema.GroupVersionResource{Group: "millwright.dev", Version: "v1", Resource: "nodepools"}
	nodeClassResource = schema.GroupVersionResource{Group: "millwright.dev", Version: "v1", Resource: "ec2nodeclasses"}
)

// TestMain starts the stack and one worker, runs the tests, then checks that
// no instance is left running and stops everything. Building the control
// plane binaries on a cold cache happens in stack.Start, before m.Run.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(runWithStack(m))
}

func runWithStack(m *testing.M) (code int) {
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "integration tests: %s: %v\n", what, err)
		return 1
	}
	stateDir, err := os.MkdirTemp("", "millwright-integration-")
	if err != nil {
		return fail("state dir", err)
	}
	// The logs are kept when something failed, for the post-mortem.
	defer func() {
		if code == 0 {
			_ = os.RemoveAll(stateDir)
		} else {
			fmt.Fprintf(os.Stderr, "integration tests: logs kept in %s (worker.log, cluster/)\n", stateDir)
		}
	}()
	logger, err := fileLogger(filepath.Join(stateDir, "worker.log"))
	if err != nil {
		return fail("logger", err)
	}
	defer logger.Sync() //nolint:errcheck // best effort

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := time.Now()
	s, err := stack.Start(ctx, stack.Options{
		StateDir:     stateDir,
		Ephemeral:    true,
		TemporalAddr: "127.0.0.1:0",
		DisableUI:    true,
		EmulatorAddr: "127.0.0.1:0",
		Emulator: awsemu.Options{
			BootDelay: time.Second, ShutdownDelay: time.Second, NodeDeletionDelay: time.Second,
			NodeRegistrationRetry: time.Second,
		},
		Logger: logger.Named("stack"),
	})
	if err != nil {
		return fail("starting the local stack", err)
	}
	defer func() {
		if err := s.Stop(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "integration tests: stopping the stack:", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "integration tests: stack up in %s\n", time.Since(started).Round(time.Millisecond))
	testStack = s
	testKube = s.Clientset()
	if testDynamic, err = dynamic.NewForConfig(s.Cluster.RESTConfig()); err != nil {
		return fail("dynamic client", err)
	}
	if testTemporal, err = s.Temporal.NewClient(ctx); err != nil {
		return fail("Temporal client", err)
	}
	defer testTemporal.Close()
	if err := applyManifest(ctx, nodeClassResource, examples.NodeClass, nil); err != nil {
		return fail("applying the example EC2NodeClass", err)
	}

	testMetrics = metrics.NewRegistry()
	workerMetrics, err := metrics.New(testMetrics)
	if err != nil {
		return fail("metrics", err)
	}
	testWorkerConfig = run.Config{
		Temporal:          testTemporal,
		Namespace:         s.Temporal.Namespace(),
		ClusterName:       s.ClusterName(),
		Kubernetes:        s.Cluster.RESTConfig(),
		AWSRegion:         testRegion,
		AWSEndpoint:       s.EmulatorURL(),
		AWSCredentials:    run.StaticCredentials("local", "local"),
		InterruptionQueue: s.InterruptionQueueName(),
		// Served on a free port: the server starts and stops with Run.
		MetricsAddress: "127.0.0.1:0",
		Metrics:        workerMetrics,
		Logger:         logger.Named("worker"),
	}
	workerCtx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan error, 1)
	go func() { workerDone <- run.Run(workerCtx, testWorkerConfig) }()
	defer func() {
		stopWorker()
		if err := <-workerDone; err != nil {
			fmt.Fprintln(os.Stderr, "integration tests: worker:", err)
			code = 1
		}
	}()

	code = m.Run()
	if err := checkNoLeakedInstance(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "integration tests: leak check:", err)
		code = 1
	}
	fmt.Fprintf(os.Stderr, "integration tests: %s in all\n", time.Since(started).Round(time.Millisecond))
	return code
}

// checkNoLeakedInstance waits until every instance the tests caused is
// terminated: the tests' namespaces are gone, their nodes empty, and each
// pool's short consolidateAfter terminates them.
func checkNoLeakedInstance(ctx context.Context) error {
	var live []awsemu.InstanceState
	err := wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(context.Context) (bool, error) {
		live = testStack.Emulator.State().LiveInstances()
		return len(live) == 0, nil
	})
	if err != nil {
		ids := make([]string, 0, len(live))
		for _, i := range live {
			ids = append(ids, fmt.Sprintf("%s (%s, pool %s)", i.ID, i.State, i.Tags[apisv1.TagNodePool]))
		}
		return fmt.Errorf("instances still live after the tests: %s", strings.Join(ids, ", "))
	}
	return nil
}

func fileLogger(path string) (*zap.Logger, error) {
	cfg := zap.NewDevelopmentConfig()
	cfg.OutputPaths = []string{path}
	cfg.ErrorOutputPaths = []string{path}
	cfg.DisableStacktrace = true
	cfg.Development = false
	return cfg.Build()
}

// TestPendingPodsLaunchANode: a Deployment's pending pods get one node,
// launched and registered by a node workflow, and run there.
func TestPendingPodsLaunchANode(t *testing.T) {
	env := newTestEnv(t, "it-launch", "5s")
	start := time.Now()
	env.createDeployment(t, "inflate", 3, "500m")
	pods := env.waitPodsRunning(t, "inflate", 3, 4*time.Minute)
	t.Logf("pending pods → Running: %s", time.Since(start).Round(time.Millisecond))

	wf := env.onlyNodeWorkflow(t)
	// Pods run as soon as the Node is Ready and untainted; the workflow
	// reaches Ready when its initialization check next looks, a moment later.
	var state workflows.NodeStateView
	poll(t, time.Minute, "node workflow "+wf+" Ready", func(context.Context) (bool, error) {
		var err error
		state, err = tryQueryState(wf)
		return err == nil && state.Phase == workflows.PhaseReady, err
	})
	if state.Instance == nil || state.NodeName == "" {
		t.Fatalf("node workflow state has no instance or node: %+v", state)
	}
	for _, pod := range pods {
		if pod.Spec.NodeName != state.NodeName {
			t.Errorf("pod %s runs on %s, want the launched node %s", pod.Name, pod.Spec.NodeName, state.NodeName)
		}
	}

	instance, ok := testStack.Emulator.State().Instance(state.Instance.InstanceID)
	if !ok {
		t.Fatalf("instance %s is not in the emulator", state.Instance.InstanceID)
	}
	wantTags := map[string]string{
		cloud.TagCluster:    testStack.ClusterName(),
		cloud.TagWorkflowID: wf,
		apisv1.TagNodePool:  env.pool,
	}
	for key, want := range wantTags {
		if got := instance.Tags[key]; got != want {
			t.Errorf("instance tag %s = %q, want %q (tags %v)", key, got, want, instance.Tags)
		}
	}
	if instance.State != "running" {
		t.Errorf("instance state %s, want running", instance.State)
	}

	node, err := testKube.CoreV1().Nodes().Get(context.Background(), state.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(node.Finalizers, activities.TerminationFinalizer) {
		t.Errorf("node finalizers %v lack %s", node.Finalizers, activities.TerminationFinalizer)
	}
	if hasTaint(node, activities.UnregisteredTaintKey) {
		t.Errorf("node still has the %s taint", activities.UnregisteredTaintKey)
	}
	if node.Labels[apisv1.LabelNodePool] != env.pool {
		t.Errorf("node label %s = %q, want %q", apisv1.LabelNodePool, node.Labels[apisv1.LabelNodePool], env.pool)
	}
	if want := "aws:///" + instance.Zone + "/" + instance.ID; node.Spec.ProviderID != want {
		t.Errorf("node providerID %q, want %q", node.Spec.ProviderID, want)
	}

	// In-flight capacity counted: the pods were pending for several batches
	// while the instance booted, yet one node was launched for them.
	if n := len(env.poolInstances()); n != 1 {
		t.Errorf("%d instances launched for the pool, want 1", n)
	}
	if n := len(env.nodeWorkflows(t)); n != 1 {
		t.Errorf("%d node workflows for the pool, want 1", n)
	}
	launched := metricValue(t, "millwright_nodes_launched_total", map[string]string{
		"nodepool": env.pool, "instance_type": instance.InstanceType, "zone": instance.Zone, "capacity_type": instance.CapacityType,
	})
	if launched != 1 {
		t.Errorf("millwright_nodes_launched_total for the pool's instance = %v, want 1", launched)
	}
}

// metricValue is the value of the counter series name{labels} on the
// worker's registry, 0 when there is none.
func metricValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := testMetrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, family := range families {
		if family.GetName() != name {
			continue
		}
		for _, metric := range family.GetMetric() {
			got := map[string]string{}
			for _, label := range metric.GetLabel() {
				got[label.GetName()] = label.GetValue()
			}
			if maps.Equal(got, labels) {
				return metric.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestDeletedNodeIsDrainedAndTerminated: `kubectl delete node` leaves the
// Node behind the finalizer; its workflow cordons, taints and drains it,
// terminates the instance and lets the Node go.
func TestDeletedNodeIsDrainedAndTerminated(t *testing.T) {
	env := newTestEnv(t, "it-delete", "5s")
	env.createDeployment(t, "app", 2, "500m")
	env.waitPodsRunning(t, "app", 2, 4*time.Minute)
	wf := env.onlyNodeWorkflow(t)
	state := queryState(t, wf)
	ctx := context.Background()

	node, err := testKube.CoreV1().Nodes().Get(ctx, state.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := watchNode(t, node)
	if err := testKube.CoreV1().Nodes().Delete(ctx, state.NodeName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	result := waitWorkflowResult(t, wf, 4*time.Minute)
	if result.Termination.Reason != workflows.ReasonDeleted {
		t.Errorf("termination reason %s (%s), want %s", result.Termination.Reason, result.Termination.Detail, workflows.ReasonDeleted)
	}
	waitNodeGone(t, state.NodeName)
	observed := seen()
	if !observed.cordoned || !observed.disruptedTaint {
		t.Errorf("while draining, the node was cordoned: %v, tainted %s: %v", observed.cordoned, activities.DisruptedTaintKey, observed.disruptedTaint)
	}
	env.waitInstanceTerminated(t, state.Instance.InstanceID)
	assertTerminationRecorded(t, wf, workflows.ReasonDeleted)
	// Labelled from the node workflow's search attributes, read back from
	// the real Temporal server by the TerminateInstance decorator.
	terminated := metricValue(t, "millwright_nodes_terminated_total", map[string]string{"nodepool": env.pool, "reason": string(workflows.ReasonDeleted)})
	if terminated != 1 {
		t.Errorf("millwright_nodes_terminated_total{nodepool=%s,reason=Deleted} = %v, want 1", env.pool, terminated)
	}
}

// TestPodDisruptionBudgetPacesTheDrain: a PDB allowing one disruption keeps
// the drain to one pod at a time; the drain waits until the evicted pod's
// replacement runs (on a node launched for it) and then completes.
func TestPodDisruptionBudgetPacesTheDrain(t *testing.T) {
	env := newTestEnv(t, "it-pdb", "5s")
	const replicas = 3
	env.createDeployment(t, "guarded", replicas, "500m")
	env.waitPodsRunning(t, "guarded", replicas, 4*time.Minute)
	ctx := context.Background()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: env.namespace},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}},
		},
	}
	if _, err := testKube.PolicyV1().PodDisruptionBudgets(env.namespace).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The disruption controller must have computed the budget, or every
	// eviction is refused and the test proves nothing about pacing.
	poll(t, time.Minute, "the PDB allows one disruption", func(ctx context.Context) (bool, error) {
		got, err := testKube.PolicyV1().PodDisruptionBudgets(env.namespace).Get(ctx, "guarded", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.DisruptionsAllowed == 1 && got.Status.CurrentHealthy == replicas, nil
	})

	wf := env.onlyNodeWorkflow(t)
	state := queryState(t, wf)
	unavailable := watchUnavailable(t, env.namespace, "app=guarded", replicas)
	drainNode(t, wf, "pdb pacing test")
	result := waitWorkflowResult(t, wf, 6*time.Minute)
	if result.Termination.Reason != workflows.ReasonDrained {
		t.Errorf("termination reason %s (%s), want %s", result.Termination.Reason, result.Termination.Detail, workflows.ReasonDrained)
	}
	pods := env.waitPodsRunning(t, "guarded", replicas, 2*time.Minute)
	maxUnavailable, evictions := unavailable()
	if maxUnavailable > 1 {
		t.Errorf("%d pods of the PDB were unavailable at once during the drain, want at most 1", maxUnavailable)
	}
	if evictions < replicas {
		t.Errorf("%d of the node's pods were removed, want all %d", evictions, replicas)
	}
	for _, pod := range pods {
		if pod.Spec.NodeName == state.NodeName {
			t.Errorf("pod %s still on the drained node %s", pod.Name, state.NodeName)
		}
	}
	env.waitInstanceTerminated(t, state.Instance.InstanceID)
}

// TestClientTokenPreventsDuplicateInstance: a Launch retried after its
// CreateFleet succeeded (the activity's answer was lost) gets the same
// instance back instead of a second one.
func TestClientTokenPreventsDuplicateInstance(t *testing.T) {
	if testStack == nil {
		t.Skip("needs the local stack (not with -short)")
	}
	ctx := context.Background()
	ec2Client, err := cloud.NewEC2Client(ctx, cloud.Config{
		Region: testRegion, Endpoint: testStack.EmulatorURL(), Credentials: testWorkerConfig.AWSCredentials,
	})
	if err != nil {
		t.Fatal(err)
	}
	restConfig := testStack.Cluster.RESTConfig()
	// The kubeconfig names its CA by file, as the worker reads it.
	ca, err := os.ReadFile(restConfig.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	provider, err := cloud.New(cloud.Options{
		EC2: ec2Client, Region: testRegion,
		Cluster:     cloud.ClusterInfo{Name: testStack.ClusterName(), Endpoint: restConfig.Host, CertificateAuthority: ca, ServiceCIDR: "10.96.0.0/12"},
		NodeClasses: millwright.NewNodeClassReader(testDynamic),
	})
	if err != nil {
		t.Fatal(err)
	}
	const pool = "it-token"
	workflowID := workflows.NodeWorkflowID(testStack.ClusterName(), pool+"-retried")
	options := []activities.InstanceTypeOption{{
		Name:      "m5.large",
		Offerings: []activities.Offering{{Zone: "us-east-1a", CapacityType: activities.CapacityTypeOnDemand, PricePerHour: 0.096}},
	}}
	req := activities.LaunchRequest{
		Cluster: testStack.ClusterName(), NodeClaimName: pool + "-retried", NodePool: pool, NodeClassName: "default",
		WorkflowID: workflowID, ClientToken: activities.LaunchClientToken(workflowID, options), Options: options,
	}
	first, err := provider.Launch(ctx, req)
	if err != nil {
		t.Fatalf("first launch: %v", err)
	}
	t.Cleanup(func() {
		if _, err := provider.TerminateInstance(context.Background(), activities.TerminateInstanceRequest{InstanceID: first.InstanceID}); err != nil {
			t.Errorf("terminating %s: %v", first.InstanceID, err)
		}
	})
	retried, err := provider.Launch(ctx, req)
	if err != nil {
		t.Fatalf("retried launch: %v", err)
	}
	if retried.InstanceID != first.InstanceID {
		t.Errorf("retried launch returned %s, the first %s: a duplicate instance", retried.InstanceID, first.InstanceID)
	}
	var withToken []string
	for _, instance := range testStack.Emulator.State().Instances {
		if instance.ClientToken == req.ClientToken || instance.Tags[cloud.TagWorkflowID] == workflowID {
			withToken = append(withToken, instance.ID)
		}
	}
	if len(withToken) != 1 {
		t.Errorf("instances for the launch: %v, want exactly one", withToken)
	}
}

// TestEmptyNodeIsTerminated: once its pods leave, a node empty for the
// pool's consolidateAfter is terminated with reason Empty.
func TestEmptyNodeIsTerminated(t *testing.T) {
	env := newTestEnv(t, "it-empty", "5s")
	env.createDeployment(t, "short-lived", 1, "500m")
	env.waitPodsRunning(t, "short-lived", 1, 4*time.Minute)
	wf := env.onlyNodeWorkflow(t)
	state := queryState(t, wf)

	emptied := time.Now()
	if err := testKube.AppsV1().Deployments(env.namespace).Delete(context.Background(), "short-lived", metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationForeground),
	}); err != nil {
		t.Fatal(err)
	}
	result := waitWorkflowResult(t, wf, 3*time.Minute)
	t.Logf("pods deleted → empty node terminated: %s", time.Since(emptied).Round(time.Millisecond))
	if result.Termination.Reason != workflows.ReasonEmpty {
		t.Errorf("termination reason %s (%s), want %s", result.Termination.Reason, result.Termination.Detail, workflows.ReasonEmpty)
	}
	if elapsed := time.Since(emptied); elapsed < 5*time.Second {
		t.Errorf("terminated %s after the pods left, before consolidateAfter (5s)", elapsed)
	}
	env.waitInstanceTerminated(t, state.Instance.InstanceID)
	waitNodeGone(t, state.NodeName)
	if live := env.liveInstances(); len(live) != 0 {
		t.Errorf("instances of the pool still live: %v", live)
	}
	assertTerminationRecorded(t, wf, workflows.ReasonEmpty)
}

// TestDrainUpdate: the drain update is accepted once, answered, and the node
// terminated; a second drain is rejected by the validator.
func TestDrainUpdate(t *testing.T) {
	env := newTestEnv(t, "it-drain", "5s")
	env.createDeployment(t, "drained", 1, "500m")
	env.waitPodsRunning(t, "drained", 1, 4*time.Minute)
	wf := env.onlyNodeWorkflow(t)
	state := queryState(t, wf)

	result := drainNode(t, wf, "integration test")
	if !result.Accepted {
		t.Fatalf("drain update answered %+v, want accepted", result)
	}
	_, err := updateDrain(wf, "second drain")
	if err == nil {
		t.Error("a second drain update was accepted; want it rejected")
	} else {
		t.Logf("second drain rejected: %v", err)
	}
	final := waitWorkflowResult(t, wf, 4*time.Minute)
	if final.Termination.Reason != workflows.ReasonDrained || final.Termination.Requester != "integration-test" {
		t.Errorf("termination %+v, want reason %s by integration-test", final.Termination, workflows.ReasonDrained)
	}
	env.waitInstanceTerminated(t, state.Instance.InstanceID)
	assertTerminationRecorded(t, wf, workflows.ReasonDrained)
}

// testEnv is one test's namespace and NodePool.
type testEnv struct {
	namespace string
	pool      string
}

// newTestEnv creates a namespace and a NodePool (the example one, renamed,
// with consolidateAfter). Deleting the namespace at the end empties the
// pool's nodes, which consolidateAfter then terminates; the pool itself
// stays so its node workflows can finish.
func newTestEnv(t *testing.T, name, consolidateAfter string) *testEnv {
	t.Helper()
	if testStack == nil {
		t.Skip("needs the local stack (not with -short)")
	}
	ctx := context.Background()
	env := &testEnv{namespace: name, pool: name}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := testKube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := testKube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
	err := applyManifest(ctx, nodePoolResource, examples.NodePool, func(pool *unstructured.Unstructured) error {
		pool.SetName(name)
		return unstructured.SetNestedField(pool.Object, consolidateAfter, "spec", "disruption", "consolidateAfter")
	})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// applyManifest creates (or replaces) the object of a YAML manifest, after
// edit.
func applyManifest(ctx context.Context, resource schema.GroupVersionResource, manifest []byte, edit func(*unstructured.Unstructured) error) error {
	var obj map[string]any
	if err := yaml.Unmarshal(manifest, &obj); err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	if edit != nil {
		if err := edit(u); err != nil {
			return err
		}
	}
	api := testDynamic.Resource(resource)
	existing, err := api.Get(ctx, u.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(ctx, u, metav1.CreateOptions{})
	case err == nil:
		u.SetResourceVersion(existing.GetResourceVersion())
		_, err = api.Update(ctx, u, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("applying %s %s: %w", resource.Resource, u.GetName(), err)
	}
	return nil
}

// createDeployment creates pods that only the env's pool can host.
func (env *testEnv) createDeployment(t *testing.T, name string, replicas int32, cpu string) {
	t.Helper()
	labels := map[string]string{"app": name}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: env.namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{apisv1.LabelNodePool: env.pool},
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{
						Name:  "pause",
						Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.2",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:    resource.MustParse(cpu),
							corev1.ResourceMemory: resource.MustParse("128Mi"),
						}},
					}},
				},
			},
		},
	}
	if _, err := testKube.AppsV1().Deployments(env.namespace).Create(context.Background(), deployment, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitPodsRunning waits until the Deployment has exactly n pods, all
// Running and Ready, none terminating.
func (env *testEnv) waitPodsRunning(t *testing.T, app string, n int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := testKube.CoreV1().Pods(env.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, nil
		}
		pods = list.Items
		running := 0
		var phases []string
		for i := range pods {
			phases = append(phases, fmt.Sprintf("%s:%s@%s", pods[i].Name, pods[i].Status.Phase, pods[i].Spec.NodeName))
			if podAvailable(&pods[i]) {
				running++
			}
		}
		last = strings.Join(phases, " ")
		return running == n && len(pods) == n, nil
	})
	if err != nil {
		t.Fatalf("pods of %s/%s not all Running within %s: %s\n%s", env.namespace, app, timeout, last, env.diagnose(t))
	}
	return pods
}

func podAvailable(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeWorkflows lists the pool's node workflows through the visibility
// store, by the MillwrightNodePool search attribute.
func (env *testEnv) nodeWorkflows(t *testing.T) []string {
	t.Helper()
	resp, err := testTemporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: testStack.Temporal.Namespace(),
		Query:     fmt.Sprintf("%s = '%s'", workflows.NodePoolAttribute.GetName(), env.pool),
	})
	if err != nil {
		t.Fatalf("listing node workflows of pool %s: %v", env.pool, err)
	}
	var ids []string
	for _, execution := range resp.Executions {
		ids = append(ids, execution.Execution.WorkflowId)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// onlyNodeWorkflow waits until the pool's node workflow is visible and
// returns its id; more than one is a failure.
func (env *testEnv) onlyNodeWorkflow(t *testing.T) string {
	t.Helper()
	var ids []string
	poll(t, 30*time.Second, "the pool's node workflow is visible", func(context.Context) (bool, error) {
		ids = env.nodeWorkflows(t)
		return len(ids) > 0, nil
	})
	if len(ids) != 1 {
		t.Fatalf("node workflows of pool %s: %v, want one", env.pool, ids)
	}
	return ids[0]
}

// poolInstances are the emulator's instances launched for the env's pool,
// in any state.
func (env *testEnv) poolInstances() []awsemu.InstanceState {
	var out []awsemu.InstanceState
	for _, i := range testStack.Emulator.State().Instances {
		if i.Tags[apisv1.TagNodePool] == env.pool {
			out = append(out, i)
		}
	}
	return out
}

func (env *testEnv) liveInstances() []string {
	var out []string
	for _, i := range env.poolInstances() {
		if i.State != "terminated" {
			out = append(out, i.ID+" "+i.State)
		}
	}
	return out
}

func (env *testEnv) waitInstanceTerminated(t *testing.T, id string) {
	t.Helper()
	poll(t, time.Minute, "instance "+id+" terminated in the emulator", func(context.Context) (bool, error) {
		i, ok := testStack.Emulator.State().Instance(id)
		return ok && i.State == "terminated", nil
	})
}

// diagnose describes the pool's workflows, instances and the cluster's
// nodes, for a failure message.
func (env *testEnv) diagnose(t *testing.T) string {
	var b strings.Builder
	for _, wf := range env.nodeWorkflows(t) {
		fmt.Fprintf(&b, "workflow %s: ", wf)
		if state, err := tryQueryState(wf); err == nil {
			fmt.Fprintf(&b, "phase %s node %s\n", state.Phase, state.NodeName)
		} else {
			fmt.Fprintf(&b, "query: %v\n", err)
		}
		var history workflows.NodeHistoryView
		if v, err := testTemporal.QueryWorkflow(context.Background(), wf, "", workflows.QueryHistory); err == nil && v.Get(&history) == nil {
			for _, d := range history.Decisions {
				fmt.Fprintf(&b, "  %s %s: %s\n", d.At.Format(time.TimeOnly), d.Phase, d.Message)
			}
		}
	}
	for _, i := range env.poolInstances() {
		fmt.Fprintf(&b, "instance %s %s node %q registered %v %s\n", i.ID, i.State, i.NodeName, i.NodeRegistered, i.NodeRegistrationError)
	}
	if nodes, err := testKube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); err == nil {
		for _, n := range nodes.Items {
			fmt.Fprintf(&b, "node %s pool %q taints %v unschedulable %v\n", n.Name, n.Labels[apisv1.LabelNodePool], n.Spec.Taints, n.Spec.Unschedulable)
		}
	}
	return b.String()
}

func tryQueryState(workflowID string) (workflows.NodeStateView, error) {
	var state workflows.NodeStateView
	value, err := testTemporal.QueryWorkflow(context.Background(), workflowID, "", workflows.QueryState)
	if err != nil {
		return state, err
	}
	return state, value.Get(&state)
}

func queryState(t *testing.T, workflowID string) workflows.NodeStateView {
	t.Helper()
	state, err := tryQueryState(workflowID)
	if err != nil {
		t.Fatalf("querying %s: %v", workflowID, err)
	}
	return state
}

// updateDrain sends the drain update and waits for its answer.
func updateDrain(workflowID, reason string) (workflows.DrainResult, error) {
	var result workflows.DrainResult
	handle, err := testTemporal.UpdateWorkflow(context.Background(), client.UpdateWorkflowOptions{
		WorkflowID:   workflowID,
		UpdateName:   workflows.UpdateDrain,
		Args:         []any{workflows.DrainRequest{Reason: reason, Requester: "integration-test"}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return result, err
	}
	return result, handle.Get(context.Background(), &result)
}

func drainNode(t *testing.T, workflowID, reason string) workflows.DrainResult {
	t.Helper()
	result, err := updateDrain(workflowID, reason)
	if err != nil {
		t.Fatalf("drain update of %s: %v", workflowID, err)
	}
	return result
}

func waitWorkflowResult(t *testing.T, workflowID string, timeout time.Duration) workflows.NodeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var result workflows.NodeResult
	if err := testTemporal.GetWorkflow(ctx, workflowID, "").Get(ctx, &result); err != nil {
		state, _ := tryQueryState(workflowID)
		t.Fatalf("node workflow %s did not complete: %v (phase %s)", workflowID, err, state.Phase)
	}
	return result
}

// assertTerminationRecorded checks the termination reason in the history
// query and the MillwrightTerminationReason search attribute.
func assertTerminationRecorded(t *testing.T, workflowID string, want workflows.TerminationReason) {
	t.Helper()
	var history workflows.NodeHistoryView
	value, err := testTemporal.QueryWorkflow(context.Background(), workflowID, "", workflows.QueryHistory)
	if err == nil {
		err = value.Get(&history)
	}
	switch {
	case err != nil:
		t.Errorf("history query of %s: %v", workflowID, err)
	case history.Termination == nil || history.Termination.Reason != want:
		t.Errorf("history termination %+v, want reason %s", history.Termination, want)
	case history.Launch.Chosen == nil || len(history.Decisions) == 0:
		t.Errorf("history lacks the launch choice or decisions: %+v", history)
	}
	query := fmt.Sprintf("WorkflowId = '%s' AND %s = '%s'", workflowID, workflows.TerminationReasonAttribute.GetName(), want)
	poll(t, 30*time.Second, "search attribute "+query, func(ctx context.Context) (bool, error) {
		resp, err := testTemporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: testStack.Temporal.Namespace(), Query: query})
		if err != nil {
			return false, err
		}
		return len(resp.Executions) == 1, nil
	})
}

func waitNodeGone(t *testing.T, name string) {
	t.Helper()
	poll(t, time.Minute, "node "+name+" deleted", func(ctx context.Context) (bool, error) {
		_, err := testKube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func hasTaint(node *corev1.Node, key string) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// nodeObservations is what a watch saw happen to a Node.
type nodeObservations struct {
	cordoned       bool
	disruptedTaint bool
}

// watchNode records every change of the Node from its current version on
// (a watch sees each update, however short-lived); the returned function
// stops the watch and reports.
func watchNode(t *testing.T, node *corev1.Node) func() nodeObservations {
	t.Helper()
	w, err := testKube.CoreV1().Nodes().Watch(context.Background(), metav1.ListOptions{
		FieldSelector: "metadata.name=" + node.Name, ResourceVersion: node.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen nodeObservations
	done := make(chan struct{})
	go func() {
		defer close(done)
		for event := range w.ResultChan() {
			n, ok := event.Object.(*corev1.Node)
			if !ok {
				continue
			}
			mu.Lock()
			seen.cordoned = seen.cordoned || n.Spec.Unschedulable
			seen.disruptedTaint = seen.disruptedTaint || hasTaint(n, activities.DisruptedTaintKey)
			mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return func() nodeObservations {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// watchUnavailable watches the pods selected by selector and records the
// most that were unavailable at once (fewer than want Running, Ready and not
// terminating) and how many pods started terminating. It starts from the
// current list, where all want pods are available.
func watchUnavailable(t *testing.T, namespace, selector string, want int) func() (maxUnavailable, removed int) {
	t.Helper()
	ctx := context.Background()
	list, err := testKube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	available := map[string]bool{}
	for i := range list.Items {
		available[list.Items[i].Name] = podAvailable(&list.Items[i])
	}
	w, err := testKube.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	worst, terminating := 0, map[string]bool{}
	count := func() {
		n := 0
		for _, ok := range available {
			if ok {
				n++
			}
		}
		worst = max(worst, want-n)
	}
	count()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for event := range w.ResultChan() {
			pod, ok := event.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			mu.Lock()
			if event.Type == watch.Deleted {
				delete(available, pod.Name)
			} else {
				available[pod.Name] = podAvailable(pod)
			}
			if pod.DeletionTimestamp != nil || event.Type == watch.Deleted {
				terminating[pod.Name] = true
			}
			count()
			mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return func() (int, int) {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return worst, len(terminating)
	}
}

// poll waits for a condition on real processes, with a deadline.
func poll(t *testing.T, timeout time.Duration, what string, condition func(context.Context) (bool, error)) {
	t.Helper()
	var lastErr error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := condition(ctx)
		if err != nil {
			lastErr = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting %s for %s: %v", timeout, what, errors.Join(err, lastErr))
	}
}

// TestInvalidNodePoolIsReportedAndOthersKeepWorking: a NodePool the API
// server accepts but Millwright cannot use (its budget's cron schedule does
// not parse; the CRD cannot check cron syntax) gets a Warning event naming the
// field, and a valid pool keeps provisioning.
func TestInvalidNodePoolIsReportedAndOthersKeepWorking(t *testing.T) {
	env := newTestEnv(t, "beside-invalid", "5s")
	ctx := context.Background()
	const broken = "broken-schedule"
	err := applyManifest(ctx, nodePoolResource, examples.NodePool, func(pool *unstructured.Unstructured) error {
		pool.SetName(broken)
		return unstructured.SetNestedSlice(pool.Object, []any{
			map[string]any{"nodes": "1", "schedule": "61 * * * *", "duration": "1h"},
		}, "spec", "disruption", "budgets")
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := testDynamic.Resource(nodePoolResource).Delete(context.Background(), broken, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting NodePool %s: %v", broken, err)
		}
	})

	poll(t, time.Minute, "a Warning event on the invalid NodePool naming the field", func(ctx context.Context) (bool, error) {
		events, err := testKube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + broken,
		})
		if err != nil {
			return false, err
		}
		for _, event := range events.Items {
			if event.Type == corev1.EventTypeWarning && event.Reason == workerwatch.ReasonInvalidNodePool &&
				strings.Contains(event.Message, "spec.disruption.budgets[0].schedule") {
				return true, nil
			}
		}
		return false, nil
	})

	env.createDeployment(t, "still-works", 1, "500m")
	env.waitPodsRunning(t, "still-works", 1, 2*time.Minute)
	for _, instance := range testStack.Emulator.State().LiveInstances() {
		if instance.Tags["millwright.dev/nodepool"] == broken {
			t.Fatalf("instance %s was launched for the invalid pool", instance.ID)
		}
	}
}
