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
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/cloud"
	"github.com/millwright/millwright/activities/millwright"
	"github.com/millwright/millwright/activities/planning"
	"github.com/millwright/millwright/deploy/examples"
	"github.com/millwright/millwright/local/awsemu"
	"github.com/millwright/millwright/local/cluster/clustertesting"
	"github.com/millwright/millwright/local/stack"
	"github.com/millwright/millwright/local/stack/stacktest"
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

// TestMain starts the stack and one worker, runs the tests, then checks that
// no instance is left running and stops everything. Building the control
// plane binaries on a cold cache happens in stack.Start, before m.Run.
func TestMain(m *testing.M) {
	os.Exit(stacktest.Main(m, runWithStack))
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
	logger, err := stacktest.FileLogger(filepath.Join(stateDir, "worker.log"))
	if err != nil {
		return fail("logger", err)
	}
	defer logger.Sync() //nolint:errcheck // best effort

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := time.Now()
	options := stacktest.StackOptions(stateDir, logger.Named("stack"))
	options.DisableUI = true
	env, err := stacktest.StartEnv(ctx, options)
	if err != nil {
		return fail("local stack", err)
	}
	defer func() {
		if err := env.Stop(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "integration tests:", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "integration tests: stack up in %s\n", time.Since(started).Round(time.Millisecond))
	s := env.Stack
	testStack, testKube, testDynamic, testTemporal = s, env.Kube, env.Dynamic, env.Temporal

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
		// Short, so TestOrphansAreGarbageCollected is: every other test's
		// instances have a running node workflow until they are gone.
		GarbageCollectionGrace:    20 * time.Second,
		GarbageCollectionInterval: 2 * time.Second,
		// Short, so TestAMIDriftReplacesEveryNode sees a new AMI release
		// within seconds (plus the resolver's 1-minute cache).
		NodeClassResolveInterval: 3 * time.Second,
		Metrics:                  workerMetrics,
		Logger:                   logger.Named("worker"),
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
	clustertesting.Eventually(t, time.Minute, "node workflow "+wf+" Ready", func(ctx context.Context) (bool, error) {
		var err error
		state, err = stacktest.QueryState(ctx, testTemporal, wf)
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
	if stacktest.HasTaint(node, activities.UnregisteredTaintKey) {
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
	state := stacktest.StateOf(t, testTemporal, wf)
	ctx := context.Background()

	node, err := testKube.CoreV1().Nodes().Get(ctx, state.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := stacktest.WatchNode(t, testKube, node)
	if err := testKube.CoreV1().Nodes().Delete(ctx, state.NodeName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	result := stacktest.WaitNodeWorkflowResult(t, testTemporal, wf, 4*time.Minute)
	if result.Termination.Reason != workflows.ReasonDeleted {
		t.Errorf("termination reason %s (%s), want %s", result.Termination.Reason, result.Termination.Detail, workflows.ReasonDeleted)
	}
	stacktest.WaitNodeGone(t, testKube, state.NodeName, time.Minute)
	observed := seen()
	if !observed.Cordoned || !observed.DisruptedTaint {
		t.Errorf("while draining, the node was cordoned: %v, tainted %s: %v", observed.Cordoned, activities.DisruptedTaintKey, observed.DisruptedTaint)
	}
	env.waitInstanceTerminated(t, state.Instance.InstanceID)
	assertTerminationRecorded(t, wf, workflows.ReasonDeleted)
	// Counted once, from the node workflow's Terminated transition
	// (UpsertNodeClaim), with the node's pool, zone and reason.
	terminated := metricValue(t, "millwright_nodes_terminated_total", map[string]string{
		"nodepool": env.pool, "zone": state.Instance.Zone, "reason": string(workflows.ReasonDeleted)})
	if terminated != 1 {
		t.Errorf("millwright_nodes_terminated_total{nodepool=%s,zone=%s,reason=Deleted} = %v, want 1", env.pool, state.Instance.Zone, terminated)
	}
}

// TestOrphansAreGarbageCollected: a node workflow terminated from the
// Temporal client (as the UI's Terminate button does) leaves its instance
// running and its Node behind the termination finalizer, so `kubectl delete
// node` would hang forever. Garbage collection terminates the instance once
// its grace after launch has passed and then releases the Node.
func TestOrphansAreGarbageCollected(t *testing.T) {
	env := newTestEnv(t, "it-gc", "5s")
	env.createDeployment(t, "app", 1, "500m")
	env.waitPodsRunning(t, "app", 1, 4*time.Minute)
	wf := env.onlyNodeWorkflow(t)
	state := stacktest.StateOf(t, testTemporal, wf)
	ctx := context.Background()
	instancesBefore := metricValue(t, "millwright_garbage_collected_total", map[string]string{"resource": "instance"})
	nodesBefore := metricValue(t, "millwright_garbage_collected_total", map[string]string{"resource": "node"})

	if err := testTemporal.TerminateWorkflow(ctx, wf, "", "test: terminated as from the Temporal UI"); err != nil {
		t.Fatal(err)
	}
	if err := testKube.CoreV1().Nodes().Delete(ctx, state.NodeName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// Grace 20s after launch, a pass every 2s.
	stacktest.WaitInstanceState(t, testStack.Emulator, state.Instance.InstanceID, "terminated", 2*time.Minute)
	stacktest.WaitNodeGone(t, testKube, state.NodeName, time.Minute)
	if got := metricValue(t, "millwright_garbage_collected_total", map[string]string{"resource": "instance"}); got < instancesBefore+1 {
		t.Errorf("millwright_garbage_collected_total{resource=instance} = %v, want at least %v", got, instancesBefore+1)
	}
	if got := metricValue(t, "millwright_garbage_collected_total", map[string]string{"resource": "node"}); got < nodesBefore+1 {
		t.Errorf("millwright_garbage_collected_total{resource=node} = %v, want at least %v", got, nodesBefore+1)
	}
	clustertesting.Eventually(t, 30*time.Second, "GarbageCollected events on Node "+state.NodeName, func(ctx context.Context) (bool, error) {
		events, err := testKube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + state.NodeName + ",reason=GarbageCollected",
		})
		return err == nil && len(events.Items) == 2, err
	})
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
	clustertesting.Eventually(t, time.Minute, "the PDB allows one disruption", func(ctx context.Context) (bool, error) {
		got, err := testKube.PolicyV1().PodDisruptionBudgets(env.namespace).Get(ctx, "guarded", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.DisruptionsAllowed == 1 && got.Status.CurrentHealthy == replicas, nil
	})

	wf := env.onlyNodeWorkflow(t)
	state := stacktest.StateOf(t, testTemporal, wf)
	unavailable := watchUnavailable(t, env.namespace, "app=guarded", replicas)
	drainNode(t, wf, "pdb pacing test")
	result := stacktest.WaitNodeWorkflowResult(t, testTemporal, wf, 6*time.Minute)
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
	iamClient, err := cloud.NewIAMClient(ctx, cloud.Config{
		Region: testRegion, Endpoint: testStack.EmulatorURL(), Credentials: testWorkerConfig.AWSCredentials,
	})
	if err != nil {
		t.Fatal(err)
	}
	provider, err := cloud.New(cloud.Options{
		EC2: ec2Client, IAM: iamClient, Region: testRegion,
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
	state := stacktest.StateOf(t, testTemporal, wf)

	emptied := time.Now()
	if err := testKube.AppsV1().Deployments(env.namespace).Delete(context.Background(), "short-lived", metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationForeground),
	}); err != nil {
		t.Fatal(err)
	}
	result := stacktest.WaitNodeWorkflowResult(t, testTemporal, wf, 3*time.Minute)
	t.Logf("pods deleted → empty node terminated: %s", time.Since(emptied).Round(time.Millisecond))
	if result.Termination.Reason != workflows.ReasonEmpty {
		t.Errorf("termination reason %s (%s), want %s", result.Termination.Reason, result.Termination.Detail, workflows.ReasonEmpty)
	}
	// The disruption workflow's Empty command decides, not the node's own
	// timer and a turn on the pool's Lease.
	if !strings.HasPrefix(result.Termination.Requester, "disruption/") {
		t.Errorf("terminated by %q, want a disruption command", result.Termination.Requester)
	}
	if elapsed := time.Since(emptied); elapsed < 5*time.Second {
		t.Errorf("terminated %s after the pods left, before consolidateAfter (5s)", elapsed)
	}
	env.waitInstanceTerminated(t, state.Instance.InstanceID)
	stacktest.WaitNodeGone(t, testKube, state.NodeName, time.Minute)
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
	state := stacktest.StateOf(t, testTemporal, wf)

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
	final := stacktest.WaitNodeWorkflowResult(t, testTemporal, wf, 4*time.Minute)
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
	err := stacktest.ApplyManifest(ctx, testDynamic, planning.NodePoolResource, examples.NodePool, func(pool *unstructured.Unstructured) error {
		pool.SetName(name)
		return unstructured.SetNestedField(pool.Object, consolidateAfter, "spec", "disruption", "consolidateAfter")
	})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// createDeployment creates pods that only the env's pool can host.
func (env *testEnv) createDeployment(t *testing.T, name string, replicas int32, cpu string) {
	t.Helper()
	spec := stacktest.PausePodSpec(cpu)
	spec.NodeSelector = map[string]string{apisv1.LabelNodePool: env.pool}
	deployment := stacktest.Deployment(env.namespace, name, replicas, spec)
	if _, err := testKube.AppsV1().Deployments(env.namespace).Create(context.Background(), deployment, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitPodsRunning waits until the Deployment has exactly n pods, all
// Running and Ready, none terminating.
func (env *testEnv) waitPodsRunning(t *testing.T, app string, n int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	pods, err := stacktest.WaitPodsAvailable(context.Background(), testKube, env.namespace, "app="+app, n, timeout)
	if err != nil {
		t.Fatalf("%v\n%s", err, env.diagnose(t))
	}
	return pods
}

// nodeWorkflows lists the pool's node workflows through the visibility
// store, by the MillwrightNodePool search attribute.
func (env *testEnv) nodeWorkflows(t *testing.T) []string {
	t.Helper()
	found, err := stacktest.ListNodeWorkflows(context.Background(), testTemporal, testStack.Temporal.Namespace(), stacktest.PoolQuery(env.pool))
	if err != nil {
		t.Fatalf("listing node workflows of pool %s: %v", env.pool, err)
	}
	ids := make([]string, 0, len(found))
	for _, wf := range found {
		ids = append(ids, wf.ID)
	}
	slices.Sort(ids)
	return ids
}

// onlyNodeWorkflow waits until the pool's node workflow is visible and
// returns its id; more than one is a failure.
func (env *testEnv) onlyNodeWorkflow(t *testing.T) string {
	t.Helper()
	var ids []string
	clustertesting.Eventually(t, 30*time.Second, "the pool's node workflow is visible", func(context.Context) (bool, error) {
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
	return stacktest.PoolInstances(testStack.Emulator, env.pool)
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
	stacktest.WaitInstanceState(t, testStack.Emulator, id, "terminated", time.Minute)
}

// diagnose describes the pool's workflows, instances and the cluster's
// nodes, for a failure message.
func (env *testEnv) diagnose(t *testing.T) string {
	var b strings.Builder
	for _, wf := range env.nodeWorkflows(t) {
		fmt.Fprintf(&b, "workflow %s: ", wf)
		if state, err := stacktest.QueryState(context.Background(), testTemporal, wf); err == nil {
			fmt.Fprintf(&b, "phase %s node %s\n", state.Phase, state.NodeName)
		} else {
			fmt.Fprintf(&b, "query: %v\n", err)
		}
		if history, err := stacktest.QueryHistory(context.Background(), testTemporal, wf); err == nil {
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

// assertTerminationRecorded checks the termination reason in the history
// query and the MillwrightTerminationReason search attribute.
func assertTerminationRecorded(t *testing.T, workflowID string, want workflows.TerminationReason) {
	t.Helper()
	history, err := stacktest.QueryHistory(context.Background(), testTemporal, workflowID)
	switch {
	case err != nil:
		t.Errorf("history query of %s: %v", workflowID, err)
	case history.Termination == nil || history.Termination.Reason != want:
		t.Errorf("history termination %+v, want reason %s", history.Termination, want)
	case history.Launch.Chosen == nil || len(history.Decisions) == 0:
		t.Errorf("history lacks the launch choice or decisions: %+v", history)
	}
	query := fmt.Sprintf("WorkflowId = '%s' AND %s = '%s'", workflowID, workflows.TerminationReasonAttribute.GetName(), want)
	clustertesting.Eventually(t, 30*time.Second, "search attribute "+query, func(ctx context.Context) (bool, error) {
		resp, err := testTemporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: testStack.Temporal.Namespace(), Query: query})
		if err != nil {
			return false, err
		}
		return len(resp.Executions) == 1, nil
	})
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
		available[list.Items[i].Name] = stacktest.PodAvailable(&list.Items[i])
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
				available[pod.Name] = stacktest.PodAvailable(pod)
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

// TestInvalidNodePoolIsReportedAndOthersKeepWorking: a NodePool the API
// server accepts but Millwright cannot use (its budget's cron schedule does
// not parse; the CRD cannot check cron syntax) gets a Warning event naming the
// field, and a valid pool keeps provisioning.
func TestInvalidNodePoolIsReportedAndOthersKeepWorking(t *testing.T) {
	env := newTestEnv(t, "beside-invalid", "5s")
	ctx := context.Background()
	const broken = "broken-schedule"
	err := stacktest.ApplyManifest(ctx, testDynamic, planning.NodePoolResource, examples.NodePool, func(pool *unstructured.Unstructured) error {
		pool.SetName(broken)
		return unstructured.SetNestedSlice(pool.Object, []any{
			map[string]any{"nodes": "1", "schedule": "61 * * * *", "duration": "1h"},
		}, "spec", "disruption", "budgets")
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := testDynamic.Resource(planning.NodePoolResource).Delete(context.Background(), broken, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting NodePool %s: %v", broken, err)
		}
	})

	clustertesting.Eventually(t, time.Minute, "a Warning event on the invalid NodePool naming the field", func(ctx context.Context) (bool, error) {
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
