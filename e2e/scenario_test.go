package e2e

// The scenario harness: each scenario gets its own namespace and NodePool,
// builders for its workloads, waits with deadlines, accessors for the
// emulator's instances and the node workflows, the real kubectl and starter
// binaries, a timing line and a diagnosis dump when it fails.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/millwright/millwright/activities/planning"
	"github.com/millwright/millwright/deploy/examples"
	"github.com/millwright/millwright/local/awsemu"
	"github.com/millwright/millwright/local/cluster/clustertesting"
	"github.com/millwright/millwright/local/stack/stacktest"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/workflows"
)

// Defaults of the scenarios.
const (
	// ScenarioTaintKey is the NoSchedule taint on every scenario pool's
	// nodes (value: the scenario's name); only that scenario's pods
	// tolerate it, so scenarios never share nodes.
	scenarioTaintKey = "e2e.millwright.dev/scenario"
	// scenarioConsolidateAfter is the scenario pools' consolidateAfter: short,
	// so the nodes a scenario leaves empty are gone soon after it ends.
	scenarioConsolidateAfter = 5 * time.Second
	// Timeouts of common waits on this 2-core machine (a node boots in
	// about a second in the emulator, but a loaded machine stretches every
	// step).
	launchTimeout    = 3 * time.Minute
	terminateTimeout = 3 * time.Minute
)

// scenario is one test's namespace and NodePool.
type scenario struct {
	t    *testing.T
	name string
	// namespace is created for the scenario and deleted at its end (which
	// empties its nodes; consolidateAfter then removes them).
	namespace string
	// pool is the scenario's NodePool name.
	pool string
	// taint is the pool's scenario taint; nil for the shipped example pool,
	// which is untainted.
	taint   *corev1.Taint
	started time.Time
}

// scenarioOption customises newScenario.
type scenarioOption func(*scenarioConfig)

type scenarioConfig struct {
	poolEdits   []func(*apisv1.NodePool)
	examplePool bool
}

// withPool edits the scenario's NodePool before it is applied (a shorter
// expireAfter, other instance types, limits...).
func withPool(edit func(*apisv1.NodePool)) scenarioOption {
	return func(c *scenarioConfig) { c.poolEdits = append(c.poolEdits, edit) }
}

// withExampleNodePool makes the scenario use the shipped example NodePool
// ("default", untainted) instead of a pool of its own. The scenario applies
// it itself (e.g. with kubectlApply(t, examples.NodePool)); at the end the
// harness waits until the pool has no node, instance or running workflow
// left and deletes it, so later scenarios never see it. Only one scenario at
// a time may use it.
func withExampleNodePool() scenarioOption {
	return func(c *scenarioConfig) { c.examplePool = true }
}

// newScenario creates the scenario's namespace and NodePool and registers
// its end: a timing line, a diagnosis dump if it failed, then the namespace
// deletion. By default the pool is the shipped example with the name of the
// scenario, consolidateAfter 5s and the NoSchedule taint
// e2e.millwright.dev/scenario=<name>; the pods the builders make select the
// pool (by its millwright.dev/nodepool label) and tolerate the taint. name
// must be a DNS label and unique in the package. Scenarios run one at a
// time (no t.Parallel): some kill the worker every other scenario needs.
func newScenario(t *testing.T, name string, options ...scenarioOption) *scenario {
	t.Helper()
	if suite == nil {
		t.Skip(errNoStack)
	}
	var config scenarioConfig
	for _, option := range options {
		option(&config)
	}
	s := &scenario{t: t, name: name, namespace: name, pool: name, started: time.Now()}
	ctx := context.Background()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"e2e.millwright.dev/scenario": name}}}
	if _, err := suite.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	// Cleanups run last-registered first: the namespace goes after the
	// dump (which reads its pods and events) and the timing line.
	t.Cleanup(func() {
		err := suite.kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
		if config.examplePool {
			s.removeExamplePool()
		}
	})
	t.Cleanup(func() {
		// A scenario that killed the worker and failed before restarting it
		// must not leave the next ones without one.
		if !suite.worker.running() {
			t.Log("the worker is not running at the end of the scenario; restarting it")
			suite.worker.start(t)
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("diagnosis of scenario %s:\n%s", name, s.diagnose())
		}
		t.Logf("scenario %s took %s", name, time.Since(s.started).Round(time.Millisecond))
	})

	if config.examplePool {
		s.pool = "default"
		return s
	}
	pool, err := decodeNodePool(examples.NodePool)
	if err != nil {
		t.Fatal(err)
	}
	pool.Name = name
	pool.Spec.Disruption.ConsolidateAfter = apisv1.DurationOrNeverOf(scenarioConsolidateAfter)
	s.taint = &corev1.Taint{Key: scenarioTaintKey, Value: name, Effect: corev1.TaintEffectNoSchedule}
	pool.Spec.Template.Spec.Taints = append(pool.Spec.Template.Spec.Taints, *s.taint)
	for _, edit := range config.poolEdits {
		edit(pool)
	}
	if err := applyNodePool(ctx, pool); err != nil {
		t.Fatal(err)
	}
	return s
}

// removeExamplePool waits until the example pool holds nothing and deletes
// it.
func (s *scenario) removeExamplePool() {
	t := s.t
	ok := s.tryPoll(terminateTimeout, func(ctx context.Context) bool {
		return len(s.liveInstances()) == 0 && len(s.nodesNoFail(ctx)) == 0 && len(s.runningWorkflowsNoFail(ctx)) == 0
	})
	if !ok {
		t.Errorf("the example NodePool still holds nodes, instances or running workflows after %s; deleting it anyway:\n%s", terminateTimeout, s.diagnose())
	}
	err := suite.dynamic.Resource(planning.NodePoolResource).Delete(context.Background(), s.pool, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting NodePool %s: %v", s.pool, err)
	}
}

// decodeNodePool parses a NodePool manifest.
func decodeNodePool(manifest []byte) (*apisv1.NodePool, error) {
	var pool apisv1.NodePool
	if err := yaml.UnmarshalStrict(manifest, &pool); err != nil {
		return nil, fmt.Errorf("decoding a NodePool manifest: %w", err)
	}
	return &pool, nil
}

// nodePoolManifest is the example NodePool renamed and edited, as YAML for
// kubectl (it carries no scenario taint: it is not the scenario's pool).
func nodePoolManifest(t *testing.T, name string, edit func(*apisv1.NodePool)) []byte {
	t.Helper()
	pool, err := decodeNodePool(examples.NodePool)
	if err != nil {
		t.Fatal(err)
	}
	pool.Name = name
	if edit != nil {
		edit(pool)
	}
	pool.APIVersion, pool.Kind = "millwright.dev/v1", "NodePool"
	object, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pool)
	if err != nil {
		t.Fatal(err)
	}
	delete(object, "status")
	unstructured.RemoveNestedField(object, "metadata", "creationTimestamp")
	manifest, err := yaml.Marshal(object)
	if err != nil {
		t.Fatal(err)
	}
	return manifest
}

// applyNodePool creates or replaces a NodePool through the API.
func applyNodePool(ctx context.Context, pool *apisv1.NodePool) error {
	pool = pool.DeepCopy()
	pool.APIVersion, pool.Kind = "millwright.dev/v1", "NodePool"
	object, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pool)
	if err != nil {
		return fmt.Errorf("NodePool %s: %w", pool.Name, err)
	}
	delete(object, "status")
	return stacktest.ApplyObject(ctx, suite.dynamic, planning.NodePoolResource, &unstructured.Unstructured{Object: object})
}

// ---- Workload builders ----

// podOption changes a pod spec the builders make.
type podOption func(*corev1.PodSpec)

// withRequest adds a request of any resource to the pod's container; for
// extended resources (nvidia.com/gpu) it sets the limit too, as Kubernetes
// requires.
func withRequest(name corev1.ResourceName, quantity string) podOption {
	return func(spec *corev1.PodSpec) {
		c := &spec.Containers[0]
		q := resource.MustParse(quantity)
		c.Resources.Requests[name] = q
		if strings.Contains(string(name), "/") {
			if c.Resources.Limits == nil {
				c.Resources.Limits = corev1.ResourceList{}
			}
			c.Resources.Limits[name] = q
		}
	}
}

// withNodeSelector adds a node selector term (e.g. kubernetes.io/arch=arm64).
func withNodeSelector(key, value string) podOption {
	return func(spec *corev1.PodSpec) {
		if spec.NodeSelector == nil {
			spec.NodeSelector = map[string]string{}
		}
		spec.NodeSelector[key] = value
	}
}

// withToleration adds a toleration.
func withToleration(toleration corev1.Toleration) podOption {
	return func(spec *corev1.PodSpec) { spec.Tolerations = append(spec.Tolerations, toleration) }
}

// podSpec is a pause container requesting cpu and 128Mi, with no grace
// period; on a scenario pool it selects the pool and tolerates its taint.
func (s *scenario) podSpec(cpu string, options ...podOption) corev1.PodSpec {
	spec := stacktest.PausePodSpec(cpu)
	if s.taint != nil {
		spec.NodeSelector = map[string]string{apisv1.LabelNodePool: s.pool}
		spec.Tolerations = []corev1.Toleration{{
			Key: s.taint.Key, Operator: corev1.TolerationOpEqual, Value: s.taint.Value, Effect: s.taint.Effect,
		}}
	}
	for _, option := range options {
		option(&spec)
	}
	return spec
}

// deployment builds (does not create) a Deployment of replicas pods
// labelled app=name.
func (s *scenario) deployment(name string, replicas int32, cpu string, options ...podOption) *appsv1.Deployment {
	return stacktest.Deployment(s.namespace, name, replicas, s.podSpec(cpu, options...))
}

// createDeployment creates s.deployment(name, replicas, cpu, options...).
func (s *scenario) createDeployment(t *testing.T, name string, replicas int32, cpu string, options ...podOption) *appsv1.Deployment {
	t.Helper()
	created, err := suite.kube.AppsV1().Deployments(s.namespace).Create(context.Background(), s.deployment(name, replicas, cpu, options...), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Deployment %s/%s: %v", s.namespace, name, err)
	}
	return created
}

// createPod creates a bare pod labelled app=name (no controller recreates
// it: for do-not-disrupt or eviction tests).
func (s *scenario) createPod(t *testing.T, name, cpu string, options ...podOption) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.namespace, Labels: map[string]string{"app": name}},
		Spec:       s.podSpec(cpu, options...),
	}
	created, err := suite.kube.CoreV1().Pods(s.namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Pod %s/%s: %v", s.namespace, name, err)
	}
	return created
}

// ---- Waits ----

// poll waits for a condition on real processes until timeout and fails
// the test naming what it waited for, with the condition's last error: it
// is clustertesting.Eventually, under the short name the scenarios (and
// the UI tests) use.
func poll(t testing.TB, timeout time.Duration, what string, condition func(context.Context) (bool, error)) {
	t.Helper()
	clustertesting.Eventually(t, timeout, what, condition)
}

// tryPoll is poll without failing: it reports whether condition held in
// time.
func (s *scenario) tryPoll(timeout time.Duration, condition func(context.Context) bool) bool {
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return condition(ctx), nil
	})
	return err == nil
}

// waitPodsRunning waits until exactly n pods match selector in the
// scenario's namespace, all Running and Ready and none terminating, and
// returns them.
func (s *scenario) waitPodsRunning(t *testing.T, selector string, n int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	pods, err := stacktest.WaitPodsAvailable(context.Background(), suite.kube, s.namespace, selector, n, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// waitNodeWorkflows waits until at least n node workflows of the pool are
// visible and returns them all.
func (s *scenario) waitNodeWorkflows(t *testing.T, n int, timeout time.Duration) []nodeWorkflow {
	t.Helper()
	var found []nodeWorkflow
	poll(t, timeout, fmt.Sprintf("%d node workflows of pool %s visible", n, s.pool), func(ctx context.Context) (bool, error) {
		var err error
		found, err = suite.listWorkflows(ctx, s.poolQuery())
		return len(found) >= n, err
	})
	return found
}

// waitWorkflowResult waits for a node workflow's result (following
// continue-as-new to the last run).
func waitWorkflowResult(t *testing.T, workflowID string, timeout time.Duration) workflows.NodeResult {
	t.Helper()
	return stacktest.WaitNodeWorkflowResult(t, suite.temporal, workflowID, timeout)
}

// ---- The emulator's instances ----

// instances are the emulator's instances launched for the scenario's pool,
// in any state, oldest first.
func (s *scenario) instances() []awsemu.InstanceState {
	return stacktest.PoolInstances(suite.stack.Emulator, s.pool)
}

// liveInstances are the pool's instances not yet terminated.
func (s *scenario) liveInstances() []awsemu.InstanceState {
	return slices.DeleteFunc(s.instances(), func(i awsemu.InstanceState) bool { return i.State == "terminated" })
}

// instance is one instance of the emulator, by id.
func instance(t *testing.T, id string) awsemu.InstanceState {
	t.Helper()
	i, ok := suite.stack.Emulator.State().Instance(id)
	if !ok {
		t.Fatalf("instance %s is not in the emulator", id)
	}
	return i
}

// ---- Kubernetes objects ----

// nodes are the Nodes of the scenario's pool (by the millwright.dev/nodepool
// label), by name.
func (s *scenario) nodes(t *testing.T) []corev1.Node {
	t.Helper()
	list, err := suite.kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: apisv1.LabelNodePool + "=" + s.pool})
	if err != nil {
		t.Fatalf("listing Nodes of pool %s: %v", s.pool, err)
	}
	return list.Items
}

func (s *scenario) nodesNoFail(ctx context.Context) []corev1.Node {
	list, err := suite.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: apisv1.LabelNodePool + "=" + s.pool})
	if err != nil {
		return []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "(list failed: " + err.Error() + ")"}}}
	}
	return list.Items
}

// ---- Node workflows ----

// nodeWorkflow is a node workflow's latest run as visibility lists it.
type nodeWorkflow = stacktest.NodeWorkflow

// poolQuery is the visibility query of the pool's node workflows.
func (s *scenario) poolQuery() string {
	return stacktest.PoolQuery(s.pool)
}

// nodeWorkflows lists the pool's node workflows (latest run of each).
func (s *scenario) nodeWorkflows(t *testing.T) []nodeWorkflow {
	t.Helper()
	return nodeWorkflowsWhere(t, s.poolQuery())
}

// nodeWorkflowsWhere lists node workflows by any visibility query, e.g.
// "MillwrightNodePool = 'x' AND MillwrightPhase = 'Ready'".
func nodeWorkflowsWhere(t *testing.T, query string) []nodeWorkflow {
	t.Helper()
	found, err := suite.listWorkflows(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func (s *scenario) runningWorkflowsNoFail(ctx context.Context) []nodeWorkflow {
	found, err := suite.listWorkflows(ctx, s.poolQuery()+" AND ExecutionStatus = 'Running'")
	if err != nil {
		return []nodeWorkflow{{ID: "(list failed: " + err.Error() + ")"}}
	}
	return found
}

// workflowOfNode is the node workflow whose MillwrightNodeName is node.
func (s *scenario) workflowOfNode(t *testing.T, node string) nodeWorkflow {
	t.Helper()
	var found []nodeWorkflow
	query := fmt.Sprintf("%s = '%s'", workflows.NodeNameAttribute.GetName(), node)
	poll(t, 30*time.Second, "the node workflow of Node "+node, func(ctx context.Context) (bool, error) {
		var err error
		found, err = suite.listWorkflows(ctx, query)
		return len(found) > 0, err
	})
	if len(found) != 1 {
		t.Fatalf("node workflows of Node %s: %+v, want one", node, found)
	}
	return found[0]
}

// tryQueryState asks a node workflow for its state, bounded by
// stacktest.QueryTimeout (its worker may be dead).
func tryQueryState(workflowID string) (workflows.NodeStateView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), stacktest.QueryTimeout)
	defer cancel()
	return stacktest.QueryState(ctx, suite.temporal, workflowID)
}

// queryState asks a node workflow for its state (the "state" query).
func queryState(t *testing.T, workflowID string) workflows.NodeStateView {
	t.Helper()
	return stacktest.StateOf(t, suite.temporal, workflowID)
}

// waitReadyState waits until the node workflow reports phase Ready and
// returns that state. Pods run as soon as their Node is Ready and untainted;
// the workflow reaches Ready when its initialization check next looks, a
// moment later, so asserting Ready the instant the pods run would race.
func waitReadyState(t *testing.T, workflowID string) workflows.NodeStateView {
	t.Helper()
	var state workflows.NodeStateView
	poll(t, time.Minute, "node workflow "+workflowID+" Ready", func(ctx context.Context) (bool, error) {
		queryCtx, cancel := context.WithTimeout(ctx, stacktest.QueryTimeout)
		defer cancel()
		var err error
		state, err = stacktest.QueryState(queryCtx, suite.temporal, workflowID)
		return err == nil && state.Phase == workflows.PhaseReady, err
	})
	return state
}

// readyWorkflowOf is the running node workflow of nodeName once it reports
// Ready with an instance, and that state.
func (s *scenario) readyWorkflowOf(t *testing.T, nodeName string) (nodeWorkflow, workflows.NodeStateView) {
	t.Helper()
	wf := s.workflowOfNode(t, nodeName)
	state := waitReadyState(t, wf.ID)
	if state.Instance == nil {
		t.Fatalf("node workflow %s: Ready without an instance: %+v", wf.ID, state)
	}
	return wf, state
}

func tryQueryHistory(workflowID string) (workflows.NodeHistoryView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), stacktest.QueryTimeout)
	defer cancel()
	return stacktest.QueryHistory(ctx, suite.temporal, workflowID)
}

// assertTerminated checks what a finished node workflow left: its result's
// reason, the MillwrightTerminationReason search attribute on its last run
// (status Completed), the instance terminated and the Node gone.
func assertTerminated(t *testing.T, workflowID string, result workflows.NodeResult, want workflows.TerminationReason) {
	t.Helper()
	if result.Termination.Reason != want {
		t.Errorf("node workflow %s ended with reason %s (%s), want %s", workflowID, result.Termination.Reason, result.Termination.Detail, want)
	}
	query := fmt.Sprintf("WorkflowId = '%s'", workflowID)
	poll(t, 30*time.Second, "the completed run of "+workflowID+" in visibility with its termination reason", func(ctx context.Context) (bool, error) {
		found, err := suite.listWorkflows(ctx, query)
		return len(found) == 1 && found[0].Status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED &&
			found[0].TerminationReason == string(want) && found[0].Phase == string(workflows.PhaseTerminated), err
	})
	if result.Instance != nil {
		stacktest.WaitInstanceState(t, suite.stack.Emulator, result.Instance.InstanceID, "terminated", time.Minute)
	}
	if result.NodeName != "" {
		stacktest.WaitNodeGone(t, suite.kube, result.NodeName, time.Minute)
	}
}

// ---- The shipped binaries ----

// kubectl runs the real kubectl against the stack's cluster and returns its
// standard output; a failure fails the test with kubectl's standard error.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := runKubectl(nil, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// kubectlApply pipes a manifest to `kubectl apply -f -`.
func kubectlApply(t *testing.T, manifest []byte) string {
	t.Helper()
	out, errOut, err := runKubectl(manifest, "apply", "-f", "-")
	if err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, errOut)
	}
	return out
}

// runKubectl runs kubectl with stdin and returns its output and error, for
// commands expected to fail.
func runKubectl(stdin []byte, args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(suite.stack.Cluster.KubectlPath(), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+suite.stack.Cluster.KubeconfigPath())
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// runStarter runs the built starter binary (e.g. "drain", node, "--reason",
// "...") pointed at the stack by the environment a user's shell would have
// (starter dev's dev.env), and returns its combined output.
func runStarter(args ...string) (string, error) {
	s := suite.stack
	cmd := exec.Command(suite.starterBinary, args...)
	cmd.Env = append(os.Environ(),
		"TEMPORAL_ADDRESS="+s.Temporal.FrontendAddr(),
		"TEMPORAL_NAMESPACE="+s.Temporal.Namespace(),
		"MILLWRIGHT_CLUSTER_NAME="+s.ClusterName(),
		"KUBECONFIG="+s.Cluster.KubeconfigPath(),
		"AWS_ENDPOINT_URL="+s.EmulatorURL(),
		"AWS_REGION="+awsRegion,
		"AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local",
	)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ---- Diagnosis ----

// eventTime is when an event last happened, whichever API wrote it (events
// from the events/v1 API carry eventTime and a series, core/v1 ones
// lastTimestamp).
func eventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// diagnose describes the scenario's world for a failure: its pods and their
// events, the pool's node workflows (state and decisions), its instances,
// every Node, and the tail of the worker log.
func (s *scenario) diagnose() string {
	ctx := context.Background()
	var b strings.Builder
	fmt.Fprintf(&b, "--- pods in %s\n", s.namespace)
	if pods, err := suite.kube.CoreV1().Pods(s.namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "pod %s %s node %q deleting %v\n", p.Name, p.Status.Phase, p.Spec.NodeName, p.DeletionTimestamp != nil)
		}
	}
	if events, err := suite.kube.CoreV1().Events(s.namespace).List(ctx, metav1.ListOptions{}); err == nil {
		sort.SliceStable(events.Items, func(i, j int) bool { return eventTime(&events.Items[i]).Before(eventTime(&events.Items[j])) })
		for _, e := range events.Items {
			fmt.Fprintf(&b, "event %s %s %s/%s %s: %s\n", eventTime(&e).Format(time.TimeOnly), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	fmt.Fprintf(&b, "--- node workflows of pool %s\n", s.pool)
	found, err := suite.listWorkflows(ctx, s.poolQuery())
	if err != nil {
		fmt.Fprintf(&b, "listing: %v\n", err)
	}
	for _, wf := range found {
		fmt.Fprintf(&b, "workflow %s %s phase %s node %s instance %s %s reason %q\n", wf.ID, wf.Status, wf.Phase, wf.NodeName, wf.InstanceID, wf.InstanceType, wf.TerminationReason)
		if wf.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			continue
		}
		// A query needs a worker: with none running it would wait for the
		// query's own timeout.
		if !suite.worker.running() {
			continue
		}
		if history, err := tryQueryHistory(wf.ID); err == nil {
			for _, d := range history.Decisions {
				fmt.Fprintf(&b, "  %s %s: %s\n", d.At.Format(time.TimeOnly), d.Phase, d.Message)
			}
		} else {
			fmt.Fprintf(&b, "  history query: %v\n", err)
		}
	}
	fmt.Fprintf(&b, "--- instances of pool %s\n", s.pool)
	for _, i := range s.instances() {
		fmt.Fprintf(&b, "instance %s %s %s %s %s node %q registered %v %s\n", i.ID, i.State, i.InstanceType, i.Zone, i.CapacityType, i.NodeName, i.NodeRegistered, i.NodeRegistrationError)
	}
	fmt.Fprintln(&b, "--- nodes")
	if nodes, err := suite.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		for _, n := range nodes.Items {
			fmt.Fprintf(&b, "node %s pool %q unschedulable %v deleting %v taints %v\n", n.Name, n.Labels[apisv1.LabelNodePool], n.Spec.Unschedulable, n.DeletionTimestamp != nil, n.Spec.Taints)
		}
	}
	if suite.worker.running() {
		// What the disruption workflow would do now, and why not for
		// each node (the same verdicts as its events).
		plan, err := runStarter("disruption", "plan")
		fmt.Fprintf(&b, "--- starter disruption plan (error %v)\n%s\n", err, plan)
	}
	fmt.Fprintf(&b, "--- worker (running %v), last lines of %s\n%s\n", suite.worker.running(), suite.worker.logPath, suite.worker.logTail(60))
	fmt.Fprintf(&b, "--- cluster logs in %s\n", filepath.Join(suite.stateDir, "cluster"))
	return b.String()
}

// assertReplaced: after are new pods (not before's) on a node other than
// before's, owned by a running node workflow other than old.
func (s *scenario) assertReplaced(t *testing.T, before, after []corev1.Pod, old nodeWorkflow) {
	t.Helper()
	oldPods := map[string]bool{}
	oldNodes := map[string]bool{}
	for _, p := range before {
		oldPods[p.Name] = true
		oldNodes[p.Spec.NodeName] = true
	}
	for _, p := range after {
		if oldNodes[p.Spec.NodeName] || oldPods[p.Name] {
			t.Errorf("pod %s on %s: want a new pod on a replacement node", p.Name, p.Spec.NodeName)
		}
	}
	replacement := s.workflowOfNode(t, after[0].Spec.NodeName)
	if replacement.ID == old.ID || replacement.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Errorf("replacement node %s: workflow %s %s, want a new running workflow", after[0].Spec.NodeName, replacement.ID, replacement.Status)
	}
}

// createPDB creates a PodDisruptionBudget named app over the pods labelled
// app=<app> and waits until the disruption controller has computed it:
// healthy pods counted and allowed disruptions as expected (before that,
// every eviction is refused and a test would prove nothing).
func (s *scenario) createPDB(t *testing.T, app string, spec policyv1.PodDisruptionBudgetSpec, healthy, allowed int32) {
	t.Helper()
	spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: s.namespace}, Spec: spec}
	budgets := suite.kube.PolicyV1().PodDisruptionBudgets(s.namespace)
	if _, err := budgets.Create(t.Context(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, time.Minute, fmt.Sprintf("PodDisruptionBudget %s to count %d pods healthy and allow %d disruption(s)", app, healthy, allowed),
		func(ctx context.Context) (bool, error) {
			got, err := budgets.Get(ctx, app, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return got.Status.ObservedGeneration == got.Generation && got.Status.CurrentHealthy == healthy && got.Status.DisruptionsAllowed == allowed, nil
		})
}
