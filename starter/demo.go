package main

// The walkthrough `starter dev --demo` (and `make demo`) plays on the local
// stack once it and the worker are up: the seeds' Karpenter walkthrough, with
// the real kubectl a user would type, and the worker's log in between.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/deploy/examples"
	"github.com/millwright/millwright/local/stack"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/worker/connect"
)

// What the demo deploys and how long it waits for each outcome. The waits
// are generous because a 2-core machine running the whole stack is slow;
// on a quiet machine pods run ~15 s after the scale and nodes are gone ~45 s
// after the delete (the pool's consolidateAfter is 30 s).
const (
	demoNamespace           = metav1.NamespaceDefault
	demoDeployment          = "inflate"
	demoImage               = "public.ecr.aws/eks-distro/kubernetes/pause:3.2"
	demoReplicas            = 10
	demoPool                = "default"
	defaultDemoPodsTimeout  = 4 * time.Minute
	defaultDemoNodesTimeout = 4 * time.Minute
	demoPollInterval        = 500 * time.Millisecond
	// demoDumpTimeout bounds collecting state for a failure report.
	demoDumpTimeout = 30 * time.Second
)

// DemoStepError says which step of the walkthrough failed.
type DemoStepError struct {
	Step string
	Err  error
}

func (e *DemoStepError) Error() string { return fmt.Sprintf("demo step %q: %v", e.Step, e.Err) }
func (e *DemoStepError) Unwrap() error { return e.Err }

// IsDemoStepError reports whether err is (or wraps) a failed demo step.
func IsDemoStepError(err error) bool {
	var stepErr *DemoStepError
	return errors.As(err, &stepErr)
}

// demoTimeouts bound the demo's waits; zero means the default.
type demoTimeouts struct {
	// pods is how long step 3 waits for every replica to run.
	pods time.Duration
	// nodes is how long step 4 waits for the nodes and instances to go.
	nodes time.Duration
}

func (t demoTimeouts) withDefaults() demoTimeouts {
	if t.pods <= 0 {
		t.pods = defaultDemoPodsTimeout
	}
	if t.nodes <= 0 {
		t.nodes = defaultDemoNodesTimeout
	}
	return t
}

// demo plays the walkthrough against one running stack.
type demo struct {
	stack    *stack.Stack
	kube     kubernetes.Interface
	temporal client.Client
	// examplesDir holds nodeclass.yaml and nodepool.yaml as kubectl reads
	// them (the checkout's deploy/examples when run from the repo).
	examplesDir string
	out         io.Writer
	clock       clock.PassiveClock
	timeouts    demoTimeouts

	// nodesBefore are the Nodes that existed before the demo scaled up;
	// every other Node it sees is one it caused.
	nodesBefore map[string]bool
	demoNodes   map[string]bool
}

// runDemo plays the walkthrough. On failure it reports the step, dumps the
// state that explains it and returns a *DemoStepError.
func runDemo(ctx context.Context, s *stack.Stack, temporalClient client.Client, stateDir string, timeouts demoTimeouts, out io.Writer) error {
	d := &demo{stack: s, kube: s.Clientset(), temporal: temporalClient, out: out, clock: clock.RealClock{}, timeouts: timeouts.withDefaults()}
	started := d.clock.Now()
	err := d.play(ctx, stateDir)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(out, "\nDemo interrupted.")
			return nil
		}
		fmt.Fprintf(out, "\nDEMO FAILED: %v\n", err)
		d.dumpState(context.WithoutCancel(ctx))
		return err
	}
	fmt.Fprintf(out, "\nDemo finished in %s.\n", d.clock.Since(started).Round(100*time.Millisecond))
	return nil
}

func (d *demo) play(ctx context.Context, stateDir string) error {
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"1. Apply the example EC2NodeClass and NodePool", func(ctx context.Context) error { return d.applyExamples(ctx, stateDir) }},
		{"2. Create the inflate deployment (1 CPU per pod) and scale it to 10", d.createDeployment},
		{"3. Wait until all 10 pods are Running", d.waitForPods},
		{"4. Delete the deployment; empty nodes go after consolidateAfter (30s)", d.deleteDeployment},
		{"5. Where to look", d.showWorkflows},
	}
	for _, step := range steps {
		fmt.Fprintf(d.out, "\n=== %s ===\n", step.name)
		if err := step.run(ctx); err != nil {
			return &DemoStepError{Step: step.name, Err: err}
		}
	}
	return nil
}

func (d *demo) applyExamples(ctx context.Context, stateDir string) error {
	dir, err := examplesDir(stateDir)
	if err != nil {
		return err
	}
	d.examplesDir = dir
	return d.kubectl(ctx, "apply", "-f", filepath.Join(dir, "nodeclass.yaml"), "-f", filepath.Join(dir, "nodepool.yaml"))
}

// examplesDir is the checkout's deploy/examples when the command runs from
// the repository root (as `make demo` does) and holds what this binary
// embeds, so the printed command is one the user can type. Otherwise the
// embedded manifests are written under the state dir.
func examplesDir(stateDir string) (string, error) {
	manifests := map[string][]byte{"nodeclass.yaml": examples.NodeClass, "nodepool.yaml": examples.NodePool}
	repoDir := filepath.Join("deploy", "examples")
	same := true
	for name, want := range manifests {
		got, err := os.ReadFile(filepath.Join(repoDir, name))
		if err != nil || !bytes.Equal(got, want) {
			same = false
			break
		}
	}
	if same {
		return repoDir, nil
	}
	dir := filepath.Join(stateDir, "examples")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("writing the example manifests: %w", err)
	}
	for name, data := range manifests {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return "", fmt.Errorf("writing the example manifests: %w", err)
		}
	}
	return dir, nil
}

func (d *demo) createDeployment(ctx context.Context) error {
	nodes, err := d.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	d.nodesBefore = map[string]bool{}
	for _, node := range nodes.Items {
		d.nodesBefore[node.Name] = true
	}
	d.demoNodes = map[string]bool{}
	// Created with no replicas, as the seeds' walkthrough does, so that no
	// request-less pod triggers a launch before the CPU request is set.
	for _, args := range [][]string{
		{"create", "deployment", demoDeployment, "--image=" + demoImage, "--replicas=0"},
		{"set", "resources", "deployment", demoDeployment, "--requests=cpu=1"},
		{"scale", "deployment", demoDeployment, "--replicas", fmt.Sprint(demoReplicas)},
	} {
		if err := d.kubectl(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

// waitForPods polls until every replica is Running, printing progress when
// it changes, then shows the nodes and pods as kubectl sees them.
func (d *demo) waitForPods(ctx context.Context) error {
	last := ""
	err := wait.PollUntilContextTimeout(ctx, demoPollInterval, d.timeouts.pods, true, func(ctx context.Context) (bool, error) {
		pods, err := d.inflatePods(ctx)
		if err != nil {
			return false, nil // the API server may be briefly busy; the deadline bounds it
		}
		running, nodes := 0, map[string]bool{}
		for _, pod := range pods {
			if pod.Status.Phase == corev1.PodRunning {
				running++
			}
			if pod.Spec.NodeName != "" {
				nodes[pod.Spec.NodeName] = true
				if !d.nodesBefore[pod.Spec.NodeName] {
					d.demoNodes[pod.Spec.NodeName] = true
				}
			}
		}
		progress := fmt.Sprintf("%d/%d pods Running, %d bound, on %d node(s)", running, demoReplicas, countBound(pods), len(nodes))
		if progress != last {
			fmt.Fprintf(d.out, "  ... %s\n", progress)
			last = progress
		}
		return running == demoReplicas && len(pods) == demoReplicas, nil
	})
	if err != nil {
		return fmt.Errorf("waiting %s for %d Running pods (last: %s): %w", d.timeouts.pods, demoReplicas, last, err)
	}
	fmt.Fprintf(d.out, "All %d pods Running on %d new node(s): %s\n", demoReplicas, len(d.demoNodes), strings.Join(sortedNames(d.demoNodes), ", "))
	if err := d.kubectl(ctx, "get", "nodes", "-L", "node.kubernetes.io/instance-type,topology.kubernetes.io/zone,"+apisv1.LabelCapacityType); err != nil {
		return err
	}
	// Each node's claim, as Karpenter users know it (the node workflow
	// writes it; it may be a moment behind the Node's readiness).
	if err := d.kubectl(ctx, "get", "nodeclaims"); err != nil {
		return err
	}
	return d.kubectl(ctx, "get", "pods", "-o", "wide")
}

func countBound(pods []corev1.Pod) int {
	bound := 0
	for _, pod := range pods {
		if pod.Spec.NodeName != "" {
			bound++
		}
	}
	return bound
}

func (d *demo) inflatePods(ctx context.Context) ([]corev1.Pod, error) {
	list, err := d.kube.CoreV1().Pods(demoNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + demoDeployment})
	if err != nil {
		return nil, err
	}
	// Pods of a deleted ReplicaSet linger while terminating; they are not
	// the deployment's replicas.
	return slices.DeleteFunc(list.Items, func(pod corev1.Pod) bool { return pod.DeletionTimestamp != nil }), nil
}

// deleteDeployment deletes inflate and waits until every node the demo
// caused is deleted and the emulator has no instance left.
func (d *demo) deleteDeployment(ctx context.Context) error {
	if err := d.kubectl(ctx, "delete", "deployment", demoDeployment); err != nil {
		return err
	}
	fmt.Fprintln(d.out, "Waiting for the empty nodes' TTL (consolidateAfter: 30s), the drain, the instance's termination and the Node's deletion...")
	last := ""
	var remaining []string
	var live int
	err := wait.PollUntilContextTimeout(ctx, demoPollInterval, d.timeouts.nodes, true, func(ctx context.Context) (bool, error) {
		remaining = remaining[:0]
		for _, name := range sortedNames(d.demoNodes) {
			_, err := d.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err == nil || !apierrors.IsNotFound(err) {
				remaining = append(remaining, name)
			}
		}
		live = len(d.stack.Emulator.State().LiveInstances())
		progress := fmt.Sprintf("%d node(s) left, %d instance(s) not terminated", len(remaining), live)
		if progress != last {
			fmt.Fprintf(d.out, "  ... %s\n", progress)
			last = progress
		}
		return len(remaining) == 0 && live == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting %s for the demo's nodes to go (left: %v) and every instance to terminate (%d not terminated): %w",
			d.timeouts.nodes, remaining, live, err)
	}
	fmt.Fprintf(d.out, "All %d node(s) deleted; no instance left running in the emulator.\n", len(d.demoNodes))
	return d.kubectl(ctx, "get", "nodes")
}

// showWorkflows prints where the node workflows can be seen: the Temporal
// UI, a ready-made search, and `starter nodes` (whose answer it prints).
func (d *demo) showWorkflows(ctx context.Context) error {
	query, err := nodesQuery("", demoPool, "", true)
	if err != nil {
		return err
	}
	ui := d.stack.Temporal.UIURL()
	namespace := d.stack.Temporal.Namespace()
	if ui != "" {
		fmt.Fprintf(d.out, "Temporal UI: %s\n", ui)
		fmt.Fprintf(d.out, "Node workflows in the Temporal UI: %s/namespaces/%s/workflows?query=%s\n",
			ui, url.PathEscape(namespace), url.QueryEscape(query))
	}
	fmt.Fprintf(d.out, "Visibility query: %s\n", query)
	fmt.Fprintf(d.out, "\n$ starter nodes --all --pool %s   # with the stack's env.sh sourced\n", demoPool)
	if d.temporal == nil {
		return nil
	}
	listCtx, cancel := context.WithTimeout(ctx, defaultOperateTimeout)
	defer cancel()
	// Visibility is eventually consistent: the last workflows may take a
	// moment to show as closed.
	var rows []nodeRow
	err = wait.PollUntilContextCancel(listCtx, demoPollInterval, true, func(ctx context.Context) (bool, error) {
		rows, err = listNodeWorkflows(ctx, d.temporal, query, connect.Temporal{Namespace: namespace})
		if err != nil {
			return false, nil
		}
		return len(rows) >= len(d.demoNodes) && !slices.ContainsFunc(rows, nodeRow.running), nil
	})
	if err != nil && len(rows) == 0 {
		return fmt.Errorf("listing the node workflows: %w", err)
	}
	// One write, so worker log lines cannot land inside the table.
	var table bytes.Buffer
	if err := writeNodesTable(&table, rows, d.clock.Now()); err != nil {
		return err
	}
	_, err = d.out.Write(table.Bytes())
	return err
}

// kubectl runs the stack's real kubectl with its kubeconfig, printing the
// command as a user would type it and then its output.
func (d *demo) kubectl(ctx context.Context, args ...string) error {
	fmt.Fprintf(d.out, "$ kubectl %s\n", shellJoin(args))
	cmd := exec.CommandContext(ctx, d.stack.Cluster.KubectlPath(), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.stack.Cluster.KubeconfigPath())
	output, err := cmd.CombinedOutput()
	if _, writeErr := d.out.Write(output); writeErr != nil && err == nil {
		err = writeErr
	}
	if err != nil {
		return fmt.Errorf("kubectl %s: %w", shellJoin(args), err)
	}
	return nil
}

// shellJoin quotes the arguments that a shell would split or expand.
func shellJoin(args []string) string {
	quoted := make([]string, len(args))
	for i, arg := range args {
		if arg == "" || strings.ContainsAny(arg, " \t\n'\"\\$`*?[]{}();&|<>~#!") {
			arg = "'" + strings.ReplaceAll(arg, "'", `'\''`) + "'"
		}
		quoted[i] = arg
	}
	return strings.Join(quoted, " ")
}

// dumpState prints what explains a failed step: the pods that are not
// Running with their events, the nodes, the node workflows and the
// emulator's live instances. Every part is best effort.
func (d *demo) dumpState(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, demoDumpTimeout)
	defer cancel()
	fmt.Fprintln(d.out, "\n--- state at the failure ---")
	pods, err := d.inflatePods(ctx)
	if err != nil {
		fmt.Fprintf(d.out, "listing pods: %v\n", err)
	}
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodRunning {
			continue
		}
		fmt.Fprintf(d.out, "pod %s: phase %s, node %q\n", pod.Name, pod.Status.Phase, pod.Spec.NodeName)
		events, err := d.kube.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.AndSelectors(
				fields.OneTermEqualSelector("involvedObject.kind", "Pod"),
				fields.OneTermEqualSelector("involvedObject.name", pod.Name),
			).String(),
		})
		if err != nil {
			fmt.Fprintf(d.out, "  events: %v\n", err)
			continue
		}
		for _, event := range events.Items {
			fmt.Fprintf(d.out, "  %s %s (x%d): %s\n", event.Type, event.Reason, max(event.Count, 1), event.Message)
		}
	}
	_ = d.kubectl(ctx, "get", "nodes", "-L", "node.kubernetes.io/instance-type,topology.kubernetes.io/zone,"+apisv1.LabelCapacityType)
	_ = d.kubectl(ctx, "get", "nodepools,ec2nodeclasses,nodeclaims")
	if d.temporal != nil {
		query, _ := nodesQuery("", "", "", true)
		fmt.Fprintf(d.out, "node workflows (%s):\n", query)
		rows, err := listNodeWorkflows(ctx, d.temporal, query, connect.Temporal{Namespace: d.stack.Temporal.Namespace()})
		if err != nil {
			fmt.Fprintf(d.out, "  %v\n", err)
		} else {
			_ = writeNodesTable(d.out, rows, d.clock.Now())
		}
	}
	for _, instance := range d.stack.Emulator.State().LiveInstances() {
		fmt.Fprintf(d.out, "live instance %s: %s %s %s in %s since %s\n", instance.ID, instance.State, instance.CapacityType,
			instance.InstanceType, instance.Zone, instance.StateSince.Format(time.RFC3339))
	}
	fmt.Fprintln(d.out, "--- end of state ---")
}

func sortedNames(set map[string]bool) []string {
	names := make([]string, 0, len(set))
	for name := range set {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// lockedWriter serialises writes from the demo, kubectl's output and the
// loggers, so that lines from different goroutines never interleave
// mid-line.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Sync lets zap flush through the writer.
func (l *lockedWriter) Sync() error { return nil }
