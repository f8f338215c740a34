package kube

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/local/cluster/clustertesting"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// The Node becomes Ready through kwok, but stays uninitialized until the
// startup taint's owner removes it.
func TestWaitForInitializationWaitsForStartupTaintRemoval(t *testing.T) {
	h := newHarness(t)
	agent := corev1.Taint{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}
	node := createNode(t, newNode("init").taint(agent.Key, agent.Effect).build())
	namespace := clustertesting.CreateNamespace(t, testClientset, "init")
	createPod(t, newPod(namespace, "workload", node.Name).build())

	type result struct {
		resp activities.WaitForInitializationResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := execute[activities.WaitForInitializationResponse](h, nil, h.activities.WaitForInitialization,
			activities.WaitForInitializationRequest{NodeName: node.Name, StartupTaints: []corev1.Taint{agent}, Deadline: time.Now().Add(3 * time.Minute)})
		done <- result{resp, err}
	}()

	// Wait until the Node is Ready and only the startup taint holds the
	// activity back, then play the agent.
	h.heartbeats.waitFor(t, 2*time.Minute, "naming only the startup taint", func(detail any) bool {
		text, _ := detail.(string)
		return strings.Contains(text, "startup taint "+agent.Key) && !strings.Contains(text, "Ready")
	})
	select {
	case r := <-done:
		t.Fatalf("returned before the startup taint was removed: %+v, %v", r.resp, r.err)
	default:
	}
	if got, ok := getNode(t, node.Name).Labels[apisv1.LabelNodeInitialized]; ok {
		t.Errorf("label %s = %q before initialization, want none", apisv1.LabelNodeInitialized, got)
	}
	// Other writers (the node controller, kwok) may update the Node
	// meanwhile: retry on a conflict as the agent would.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current := getNode(t, node.Name)
		current.Spec.Taints = removeTaintKey(current.Spec.Taints, agent.Key)
		_, err := testClientset.CoreV1().Nodes().Update(t.Context(), current, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.resp.NonDaemonSetPods != 1 {
			t.Errorf("NonDaemonSetPods = %d, want 1", r.resp.NonDaemonSetPods)
		}
		if got := getNode(t, node.Name).Labels[apisv1.LabelNodeInitialized]; got != "true" {
			t.Errorf("label %s = %q after initialization, want \"true\"", apisv1.LabelNodeInitialized, got)
		}
	case <-time.After(time.Minute):
		t.Fatal("WaitForInitialization did not return within a minute of the taint's removal")
	}
}

func TestWaitForInitializationTimesOutNamingTheMissingResource(t *testing.T) {
	h := newHarness(t)
	node := createNode(t, newNode("gpu").build())
	waitNodeReady(t, node.Name)

	_, err := execute[activities.WaitForInitializationResponse](h, nil, h.activities.WaitForInitialization,
		activities.WaitForInitializationRequest{
			NodeName:          node.Name,
			ExtendedResources: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
			Deadline:          time.Now().Add(time.Second),
		})
	if !activities.IsInitializationTimeout(err) {
		t.Fatalf("err = %v, want InitializationTimeout", err)
	}
	if !strings.Contains(err.Error(), "nvidia.com/gpu") {
		t.Errorf("error %q does not name the missing resource", err)
	}
}

func TestInitializationGaps(t *testing.T) {
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
	startup := corev1.Taint{Key: "example.com/agent", Effect: corev1.TaintEffectNoSchedule}
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}
	node := func(conditions []corev1.NodeCondition, taints []corev1.Taint, allocatable corev1.ResourceList) *corev1.Node {
		return &corev1.Node{Spec: corev1.NodeSpec{Taints: taints},
			Status: corev1.NodeStatus{Conditions: conditions, Allocatable: allocatable}}
	}
	tests := []struct {
		name        string
		node        *corev1.Node
		wantMissing []string
	}{
		{"initialized", node([]corev1.NodeCondition{ready}, nil, gpu), nil},
		{"no node", nil, []string{"node not found"}},
		{"not ready", node(nil, nil, gpu), []string{"Ready condition is Unknown"}},
		{"startup taint present", node([]corev1.NodeCondition{ready}, []corev1.Taint{startup}, gpu), []string{"startup taint example.com/agent:NoSchedule"}},
		{"same key, other effect is not the startup taint", node([]corev1.NodeCondition{ready},
			[]corev1.Taint{{Key: startup.Key, Effect: corev1.TaintEffectNoExecute}}, gpu), nil},
		{"fewer GPUs than requested", node([]corev1.NodeCondition{ready}, nil,
			corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}), []string{"nvidia.com/gpu allocatable 1, want at least 2"}},
		{"no GPUs", node([]corev1.NodeCondition{ready}, nil, nil), []string{"nvidia.com/gpu allocatable 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			missing := initializationGaps(tt.node, []corev1.Taint{startup}, gpu)
			if len(missing) != len(tt.wantMissing) {
				t.Fatalf("missing = %q, want %d item(s) like %q", missing, len(tt.wantMissing), tt.wantMissing)
			}
			for i, want := range tt.wantMissing {
				if !strings.Contains(missing[i], want) {
					t.Errorf("missing[%d] = %q, want it to contain %q", i, missing[i], want)
				}
			}
		})
	}
}
