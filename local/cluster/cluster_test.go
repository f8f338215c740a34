package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// testCluster is the one control plane shared by this package's tests; nil under
// -short, where the tests that need it skip.
var testCluster *Cluster

// TestMain starts one cluster for the package. Building the binaries on a cold
// cache happens here, before go test's -timeout clock starts in m.Run.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(runWithCluster(m))
}

func runWithCluster(m *testing.M) int {
	workDir, err := os.MkdirTemp("", "millwright-cluster-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster tests:", err)
		return 1
	}
	defer os.RemoveAll(workDir)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	toolsStarted := time.Now()
	if _, err := EnsureTools(ctx, ToolsOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, "cluster tests: building the control-plane binaries:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "cluster tests: binaries ready in %s\n", time.Since(toolsStarted).Round(time.Millisecond))

	logger, _ := zap.NewDevelopment()
	started := time.Now()
	c, err := Start(ctx, Options{Name: "smoke", WorkDir: workDir, Logger: logger})
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster tests: starting the control plane:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "cluster tests: control plane ready in %s (kubeconfig %s)\n",
		time.Since(started).Round(time.Millisecond), c.KubeconfigPath())
	testCluster = c

	code := m.Run()

	stopped := time.Now()
	if err := c.Stop(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "cluster tests: stopping the control plane:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "cluster tests: control plane stopped in %s, no process or port left\n",
		time.Since(stopped).Round(time.Millisecond))
	return code
}

func requireCluster(t *testing.T) *Cluster {
	t.Helper()
	if testCluster == nil {
		t.Skip("needs the real control plane; not started under -short")
	}
	return testCluster
}

// eventually polls condition until it holds or the deadline passes. The control
// plane is real processes, so the only synchronisation available is observing it.
func eventually(t *testing.T, timeout time.Duration, what string, condition func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := condition(ctx)
		if err != nil {
			lastErr = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s (last error: %v)", what, timeout, lastErr)
	}
}

// fakeNodeBuilder builds Nodes the way the EC2 emulator registers them.
type fakeNodeBuilder struct{ node *corev1.Node }

func newEC2Node(name, zone, instanceID, instanceType string) *fakeNodeBuilder {
	return &fakeNodeBuilder{node: &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/arch":               "amd64",
				"kubernetes.io/os":                 "linux",
				"kubernetes.io/hostname":           name,
				"topology.kubernetes.io/zone":      zone,
				"node.kubernetes.io/instance-type": instanceType,
			},
			Annotations: map[string]string{FakeNodeAnnotation: FakeNodeAnnotationValue},
		},
		Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("aws:///%s/%s", zone, instanceID)},
	}}
}

func (b *fakeNodeBuilder) resources(capacity, allocatable corev1.ResourceList) *fakeNodeBuilder {
	b.node.Status.Capacity = capacity
	b.node.Status.Allocatable = allocatable
	return b
}

func (b *fakeNodeBuilder) withoutKwok() *fakeNodeBuilder {
	delete(b.node.Annotations, FakeNodeAnnotation)
	return b
}

func (b *fakeNodeBuilder) taint(key string) *fakeNodeBuilder {
	b.node.Spec.Taints = append(b.node.Spec.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
	return b
}

func (b *fakeNodeBuilder) build() *corev1.Node { return b.node.DeepCopy() }

func resources(cpu, memory, pods string) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods:   resource.MustParse(pods),
	}
}

func inflateDeployment(namespace string, replicas int32, cpu string) *appsv1.Deployment {
	labels := map[string]string{"app": "inflate"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "inflate", Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "pause",
					Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.2",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
					},
				}}},
			},
		},
	}
}

// createNamespace makes a namespace for one test and waits for its default
// ServiceAccount, without which pod admission rejects the Deployment's pods.
func createNamespace(t *testing.T, clientset kubernetes.Interface, prefix string) string {
	t.Helper()
	ns, err := clientset.CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = clientset.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	eventually(t, time.Minute, "default ServiceAccount in "+ns.Name, func(ctx context.Context) (bool, error) {
		_, err := clientset.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
	return ns.Name
}

func createNode(t *testing.T, clientset kubernetes.Interface, node *corev1.Node) {
	t.Helper()
	if _, err := clientset.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = clientset.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{})
	})
}

func podCondition(pod *corev1.Pod, conditionType corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == conditionType {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func onlyPod(ctx context.Context, clientset kubernetes.Interface, namespace string) (*corev1.Pod, error) {
	pods, err := clientset.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=inflate"})
	if err != nil {
		return nil, err
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	if len(live) != 1 {
		return nil, fmt.Errorf("%d live inflate pods, want 1", len(live))
	}
	return &live[0], nil
}

// The control plane smoke test: the real scheduler marks a pod that fits nowhere
// Unschedulable; a Node registered as the EC2 emulator will register one becomes
// Ready through kwok, the scheduler binds the pod there, kwok runs it, and a
// deleted pod goes away gracefully. A Node without the kwok annotation stays
// untouched.
func TestUnschedulablePodRunsOnceAnEC2NodeRegisters(t *testing.T) {
	c := requireCluster(t)
	clientset := c.Clientset()
	namespace := createNamespace(t, clientset, "smoke")

	if _, err := clientset.AppsV1().Deployments(namespace).Create(t.Context(),
		inflateDeployment(namespace, 1, "1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "pod marked Unschedulable by the scheduler", func(ctx context.Context) (bool, error) {
		pod, err := onlyPod(ctx, clientset, namespace)
		if err != nil {
			return false, err
		}
		cond := podCondition(pod, corev1.PodScheduled)
		return cond != nil && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable, nil
	})

	// A Node kwok must ignore, tainted so the scheduler never picks it either.
	unmanaged := newEC2Node("ip-10-0-9-9.ec2.internal", "us-east-1a", "i-0fffffffffffffff0", "m5.large").
		resources(resources("2", "8Gi", "29"), resources("1930m", "7134Mi", "29")).
		withoutKwok().taint("millwright.dev/test-unmanaged").build()
	createNode(t, clientset, unmanaged)

	node := newEC2Node("ip-10-0-1-2.ec2.internal", "us-east-1a", "i-0123456789abcdef0", "m5.large").
		resources(resources("2", "8Gi", "29"), resources("1930m", "7134Mi", "29")).build()
	createNode(t, clientset, node)

	eventually(t, 2*time.Minute, "Node "+node.Name+" Ready", func(ctx context.Context) (bool, error) {
		n, err := clientset.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return nodeReady(n), nil
	})
	readyNode, err := clientset.CoreV1().Nodes().Get(t.Context(), node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := readyNode.Status.Allocatable.Cpu().String(); got != "1930m" {
		t.Errorf("Node allocatable cpu = %s, want the registered 1930m kept by kwok", got)
	}
	if readyNode.Spec.ProviderID != "aws:///us-east-1a/i-0123456789abcdef0" {
		t.Errorf("Node providerID = %q", readyNode.Spec.ProviderID)
	}

	var running *corev1.Pod
	eventually(t, 2*time.Minute, "pod Running on "+node.Name, func(ctx context.Context) (bool, error) {
		pod, err := onlyPod(ctx, clientset, namespace)
		if err != nil {
			return false, err
		}
		running = pod
		return pod.Spec.NodeName == node.Name && pod.Status.Phase == corev1.PodRunning, nil
	})

	// kwok handled the annotated Node after the unmanaged one was created, so by
	// now it has had every chance to touch the unmanaged one too.
	n, err := clientset.CoreV1().Nodes().Get(t.Context(), unmanaged.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if nodeReady(n) {
		t.Errorf("Node %s without %s became Ready: kwok manages nodes it must not", unmanaged.Name, FakeNodeAnnotation)
	}

	// Graceful deletion: the pod is marked for deletion, kwok's pod-delete stage
	// finishes it, and the ReplicaSet replaces it.
	if err := clientset.CoreV1().Pods(namespace).Delete(t.Context(), running.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "deleted pod "+running.Name+" gone", func(ctx context.Context) (bool, error) {
		pod, err := clientset.CoreV1().Pods(namespace).Get(ctx, running.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return pod.UID != running.UID, nil
	})
	eventually(t, 2*time.Minute, "replacement pod Running", func(ctx context.Context) (bool, error) {
		pod, err := onlyPod(ctx, clientset, namespace)
		if err != nil {
			return false, err
		}
		return pod.UID != running.UID && pod.Status.Phase == corev1.PodRunning, nil
	})
}

func TestKubectlVersionReportsPinnedRelease(t *testing.T) {
	c := requireCluster(t)
	cmd := exec.CommandContext(t.Context(), c.KubectlPath(), "version", "--output=json", "--kubeconfig", c.KubeconfigPath())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl version: %v\n%s", err, stderr.String())
	}
	var versions struct {
		ClientVersion struct{ GitVersion, Major, Minor string } `json:"clientVersion"`
		ServerVersion struct{ GitVersion, Major, Minor string } `json:"serverVersion"`
	}
	if err := json.Unmarshal(out, &versions); err != nil {
		t.Fatalf("kubectl version output does not parse: %v\n%s", err, out)
	}
	for side, v := range map[string]struct{ GitVersion, Major, Minor string }{
		"client": versions.ClientVersion, "server": versions.ServerVersion,
	} {
		if v.GitVersion != KubernetesVersion || v.Major != "1" || v.Minor != "37" {
			t.Errorf("%s version = %+v, want %s (1.37)", side, v, KubernetesVersion)
		}
	}
	if strings.Contains(stderr.String(), "WARNING") {
		t.Errorf("kubectl warns about the versions: %s", stderr.String())
	}
}

// The cluster's kwok.yaml, written by kwokctl, is what the kwok controller runs
// with: the default node and pod stages, and the annotation-only node selection.
func TestKwokRunsDefaultStagesForAnnotatedNodesOnly(t *testing.T) {
	c := requireCluster(t)
	raw, err := os.ReadFile(filepath.Join(c.clusterDir(), "kwok.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	stages := map[string]bool{}
	var kwokArgs []string
	componentArgs := map[string]string{}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var obj struct {
			Kind       string            `json:"kind"`
			Metadata   metav1.ObjectMeta `json:"metadata"`
			Components []struct {
				Name string   `json:"name"`
				Args []string `json:"args"`
			} `json:"components"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("kwok.yaml document does not parse: %v", err)
		}
		switch obj.Kind {
		case "Stage":
			stages[obj.Metadata.Name] = true
		case "KwokctlConfiguration":
			for _, comp := range obj.Components {
				componentArgs[comp.Name] = strings.Join(comp.Args, " ")
				if comp.Name == "kwok-controller" {
					kwokArgs = comp.Args
				}
			}
		}
	}
	for _, want := range []string{"node-initialize", "node-heartbeat-with-lease", "pod-ready", "pod-complete", "pod-delete"} {
		if !stages[want] {
			t.Errorf("stage %s missing from kwok.yaml; have %v", want, stages)
		}
	}
	args := strings.Join(kwokArgs, " ")
	for _, want := range []string{"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake"} {
		if !strings.Contains(args, want) {
			t.Errorf("kwok-controller args %q lack %s", args, want)
		}
	}
	if strings.Contains(args, "--manage-all-nodes=true") {
		t.Errorf("kwok-controller still manages all nodes: %q", args)
	}
	// A production control plane's client rates.
	for _, component := range []string{"kube-controller-manager", "kube-scheduler"} {
		for _, want := range []string{"--kube-api-qps=300", "--kube-api-burst=500", "--leader-elect=false"} {
			if !strings.Contains(componentArgs[component], want) {
				t.Errorf("%s args %q lack %s", component, componentArgs[component], want)
			}
		}
	}
}

// The chaos suite restarts the apiserver: it comes back on the same port
// with the same state. (It once failed in the full package run: the
// restarted apiserver never listened again. Its port was in the kernel's
// ephemeral range, where a client redialing it can be given that port as
// its own source and connect to itself; FreeLocalPorts now picks ports
// below that range, and RestartComponent starts again a component that
// exits before it is up.)
func TestRestartComponentRestartsTheAPIServer(t *testing.T) {
	c := requireCluster(t)
	ctx := t.Context()
	name := "restart-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := c.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := c.componentPIDs()
	if err := c.RestartComponent(ctx, ComponentKubeAPIServer); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Clientset().CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("namespace %s after the restart: %v", name, err)
	}
	if after := c.componentPIDs(); slices.Equal(before, after) {
		t.Errorf("component pids unchanged by the restart: %v", after)
	}
	if err := c.RestartComponent(ctx, "no-such-component"); err == nil {
		t.Error("restarting an unknown component succeeded")
	}
}

func TestAttachReusesARunningCluster(t *testing.T) {
	c := requireCluster(t)
	attached, err := Attach(t.Context(), Options{KubeconfigPath: c.KubeconfigPath()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := attached.Clientset().CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	// Stopping an attached cluster must leave the owner's cluster running.
	if err := attached.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Clientset().CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("owner's cluster gone after Stop on an attached handle: %v", err)
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name      string
		opts      Options
		wantField string
	}{
		{name: "no work dir", opts: Options{}, wantField: "WorkDir"},
		{name: "name not a DNS label", opts: Options{Name: "My_Cluster", WorkDir: t.TempDir()}, wantField: "Name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Start(t.Context(), tt.opts)
			var invalid *InvalidOptionError
			if !errors.As(err, &invalid) {
				t.Fatalf("err = %v, want InvalidOptionError", err)
			}
			if invalid.Field != tt.wantField {
				t.Errorf("field = %s, want %s", invalid.Field, tt.wantField)
			}
		})
	}
}

func TestFreeLocalPortsAreOutsideTheEphemeralRange(t *testing.T) {
	ports, err := FreeLocalPorts(6)
	if err != nil {
		t.Fatal(err)
	}
	below := ephemeralPortsStart()
	seen := map[int]bool{}
	for _, port := range ports {
		if seen[port] {
			t.Errorf("port %d handed out twice in %v", port, ports)
		}
		seen[port] = true
		if below-lowestStablePort >= 600 && (port < lowestStablePort || port >= below) {
			t.Errorf("port %d outside [%d, %d): a client's source port could take it while its server restarts", port, lowestStablePort, below)
		}
	}
}

// A component whose process is gone is reported with its log's tail, so a
// start that cannot succeed fails at once with the cause (and Start tries
// once more on new ports) instead of waiting out StartTimeout.
func TestExitedComponentIsReportedWithItsLog(t *testing.T) {
	c := &Cluster{name: "exited", owned: true, kwokWorkDir: t.TempDir()}
	for _, dir := range []string{"pids", "logs"} {
		if err := os.MkdirAll(filepath.Join(c.clusterDir(), dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(c.clusterDir(), path), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pids/etcd.pid", strconv.Itoa(os.Getpid()))
	if got := c.exitedComponent(); got != nil {
		t.Fatalf("live component reported as exited: %v", got)
	}

	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	write("pids/kube-scheduler.pid", strconv.Itoa(ended.Process.Pid))
	write("logs/kube-scheduler.log", "starting\nfailed to listen on 127.0.0.1:20001: bind: address already in use\n")
	got := c.exitedComponent()
	if got == nil {
		t.Fatal("exited component not reported")
	}
	if got.Component != "kube-scheduler" || !strings.Contains(got.Error(), "address already in use") {
		t.Errorf("got %v, want kube-scheduler with its log's last line", got)
	}
	if !IsComponentExited(&NotReadyError{Check: "x", Err: got}) {
		t.Error("IsComponentExited does not see through NotReadyError")
	}

	c.owned = false // attached: someone else's processes
	if got := c.exitedComponent(); got != nil {
		t.Errorf("attached cluster reported %v", got)
	}
}
