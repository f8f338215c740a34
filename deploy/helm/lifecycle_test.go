package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/millwright/millwright/deploy/examples"
	"github.com/millwright/millwright/local/stack"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/worker/run"
)

// lockedBuffer collects client-go's klog lines (reflector list/watch
// failures, event sink refusals), which do not go through the worker's zap
// logger.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// applyExample creates an example manifest after edit.
func applyExample(ctx context.Context, t *testing.T, dyn dynamic.Interface, resource string, manifest []byte, edit func(*unstructured.Unstructured) error) {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal(manifest, &obj); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if err := edit(u); err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: apisv1.Group, Version: "v1", Resource: resource}
	if _, err := dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("%s %s: %v", resource, u.GetName(), err)
	}
}

// runLifecycleAsServiceAccount runs a whole worker (run.Run) whose only
// Kubernetes credential is the chart's ServiceAccount token, and takes one
// node through its life: pending pods → launch → registration (the worker
// patches the Node) → pods Running → scale to zero → drain → termination →
// Node deleted. Any "forbidden" in the worker's or client-go's logs fails.
func runLifecycleAsServiceAccount(ctx context.Context, t *testing.T, s *stack.Stack, asWorker *rest.Config, workerNamespace string) {
	t.Helper()
	admin := s.Clientset()
	dyn, err := dynamic.NewForConfig(s.Cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	const pool = "chart"
	applyExample(ctx, t, dyn, "ec2nodeclasses", examples.NodeClass, func(u *unstructured.Unstructured) error {
		// The emulator tags its subnets and security groups for its cluster name.
		terms := []any{map[string]any{"tags": map[string]any{"millwright.dev/discovery": s.ClusterName()}}}
		if err := unstructured.SetNestedSlice(u.Object, terms, "spec", "subnetSelectorTerms"); err != nil {
			return err
		}
		return unstructured.SetNestedSlice(u.Object, runtime.DeepCopyJSONValue(terms).([]any), "spec", "securityGroupSelectorTerms")
	})
	applyExample(ctx, t, dyn, "nodepools", examples.NodePool, func(u *unstructured.Unstructured) error {
		u.SetName(pool)
		return unstructured.SetNestedField(u.Object, "5s", "spec", "disruption", "consolidateAfter")
	})

	var klogLines lockedBuffer
	klog.LogToStderr(false)
	klog.SetOutput(&klogLines)
	defer klog.LogToStderr(true)
	core, logs := observer.New(zapcore.InfoLevel)

	temporalClient, err := s.Temporal.NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer temporalClient.Close()
	workerCtx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan error, 1)
	go func() {
		workerDone <- run.Run(workerCtx, run.Config{
			Temporal:          temporalClient,
			Namespace:         s.Temporal.Namespace(),
			ClusterName:       s.ClusterName(),
			Kubernetes:        asWorker,
			AWSRegion:         "us-east-1",
			AWSEndpoint:       s.EmulatorURL(),
			AWSCredentials:    run.StaticCredentials("local", "local"),
			InterruptionQueue: s.InterruptionQueueName(),
			LeaseNamespace:    workerNamespace,
			Logger:            zap.New(core),
		})
	}()
	defer func() {
		stopWorker()
		if err := <-workerDone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker under the chart's ServiceAccount: %v", err)
		}
		for _, source := range []string{klogLines.String(), logsText(logs)} {
			for _, line := range strings.Split(source, "\n") {
				if strings.Contains(strings.ToLower(line), "forbidden") {
					t.Errorf("refused as the chart's ServiceAccount: %s", line)
				}
			}
		}
	}()

	const namespace = "inflate"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "inflate"}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "inflate", Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{apisv1.LabelNodePool: pool},
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{
						Name: "pause", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
						}},
					}},
				},
			},
		},
	}
	if _, err := admin.AppsV1().Deployments(namespace).Create(ctx, deployment, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	poolNodes := metav1.ListOptions{LabelSelector: apisv1.LabelNodePool + "=" + pool}
	started := time.Now()
	var nodeName string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := admin.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running := 0
		for _, pod := range pods.Items {
			if pod.Status.Phase == corev1.PodRunning {
				running++
				nodeName = pod.Spec.NodeName
			}
		}
		return running == 2, nil
	})
	if err != nil {
		for _, entry := range logs.FilterLevelExact(zapcore.WarnLevel).All() {
			t.Logf("worker warning: %s %v", entry.Message, entry.ContextMap())
		}
		for _, entry := range logs.FilterLevelExact(zapcore.ErrorLevel).All() {
			t.Logf("worker error: %s %v", entry.Message, entry.ContextMap())
		}
		t.Fatalf("pods not Running on a launched node: %v", err)
	}
	t.Logf("pending pods → Running on %s in %s", nodeName, time.Since(started).Round(time.Millisecond))
	node, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Labels[apisv1.LabelNodePool] != pool || len(node.Finalizers) == 0 {
		t.Errorf("node %s: labels %v, finalizers %v: the worker did not take it over", node.Name, node.Labels, node.Finalizers)
	}

	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "inflate", Namespace: namespace}, Spec: autoscalingv1.ScaleSpec{Replicas: 0}}
	if _, err := admin.AppsV1().Deployments(namespace).UpdateScale(ctx, "inflate", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	started = time.Now()
	err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := admin.CoreV1().Nodes().List(ctx, poolNodes)
		return err == nil && len(nodes.Items) == 0 && len(s.Emulator.State().LiveInstances()) == 0, err
	})
	if err != nil {
		t.Fatalf("the empty node was not drained and terminated: %v", err)
	}
	t.Logf("scaled to zero → node deleted and instance terminated in %s", time.Since(started).Round(time.Millisecond))
}

func logsText(logs *observer.ObservedLogs) string {
	var b strings.Builder
	for _, entry := range logs.All() {
		b.WriteString(entry.Message)
		for key, value := range entry.ContextMap() {
			b.WriteString(" " + key + "=")
			b.WriteString(strings.ReplaceAll(strings.TrimSpace(fmt.Sprint(value)), "\n", " "))
		}
		b.WriteString("\n")
	}
	return b.String()
}
