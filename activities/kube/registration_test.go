package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/local/cluster/clustertesting"
)

func TestWaitForRegistrationFindsANodeAlreadyThere(t *testing.T) {
	h := newHarness(t)
	node := createNode(t, newNode("registered").withoutKwok().build())

	resp, err := execute[activities.WaitForRegistrationResponse](h, nil, h.activities.WaitForRegistration,
		activities.WaitForRegistrationRequest{InstanceID: "i-1", ProviderID: node.Spec.ProviderID, Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.NodeName != node.Name {
		t.Errorf("NodeName = %q, want %q", resp.NodeName, node.Name)
	}
}

// The Node appears while the activity waits: it must notice (through its
// watch) and return that Node's name.
func TestWaitForRegistrationWaitsForTheNode(t *testing.T) {
	h := newHarness(t)
	node := newNode("late").withoutKwok().build()

	type result struct {
		resp activities.WaitForRegistrationResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := execute[activities.WaitForRegistrationResponse](h, nil, h.activities.WaitForRegistration,
			activities.WaitForRegistrationRequest{InstanceID: "i-2", ProviderID: node.Spec.ProviderID, Deadline: time.Now().Add(2 * time.Minute)})
		done <- result{resp, err}
	}()
	h.heartbeats.waitFor(t, time.Minute, "while waiting", func(any) bool { return true })
	createNode(t, node)

	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.resp.NodeName != node.Name {
			t.Errorf("NodeName = %q, want %q", r.resp.NodeName, node.Name)
		}
	case <-time.After(time.Minute):
		t.Fatal("WaitForRegistration did not return within a minute of the Node's creation")
	}
}

// The Node's arrival wakes the activity at once: its poll clock never
// ticks here, so only the Node cache's event can end the wait.
func TestWaitForRegistrationWakesWhenTheNodeArrives(t *testing.T) {
	frozen := clocktesting.NewFakeClock(time.Now())
	h := newHarness(t, withClock(frozen))
	node := newNode("woken").withoutKwok().build()

	done := make(chan error, 1)
	go func() {
		resp, err := execute[activities.WaitForRegistrationResponse](h, nil, h.activities.WaitForRegistration,
			activities.WaitForRegistrationRequest{InstanceID: "i-3", ProviderID: node.Spec.ProviderID, Deadline: frozen.Now().Add(time.Hour)})
		if err == nil && resp.NodeName != node.Name {
			err = fmt.Errorf("NodeName = %q, want %q", resp.NodeName, node.Name)
		}
		done <- err
	}()
	// Its first look has found nothing (the cache had synced).
	h.heartbeats.waitFor(t, time.Minute, "after the first look", func(detail any) bool {
		text, ok := detail.(string)
		return ok && strings.HasPrefix(text, "waiting for Node with providerID")
	})
	createNode(t, node)

	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("WaitForRegistration did not wake within a minute of the Node's creation (its poll clock is frozen)")
	}
}

func TestWaitForRegistrationTimesOutAtTheDeadline(t *testing.T) {
	h := newHarness(t)
	deadline := time.Now().Add(1500 * time.Millisecond)

	_, err := execute[activities.WaitForRegistrationResponse](h, nil, h.activities.WaitForRegistration,
		activities.WaitForRegistrationRequest{InstanceID: "i-never", ProviderID: "aws:///us-east-1a/i-never", Deadline: deadline})
	if !activities.IsRegistrationTimeout(err) {
		t.Fatalf("err = %v, want RegistrationTimeout", err)
	}
	if now := time.Now(); now.Before(deadline) {
		t.Errorf("gave up %s before the deadline", deadline.Sub(now))
	}
	if len(h.heartbeats.all()) == 0 {
		t.Error("no heartbeat while waiting")
	}
}

func TestRegisterNodeAdoptsTheNodeOnceAndIsIdempotent(t *testing.T) {
	requireCluster(t)
	writes := &writeCounter{}
	h := newHarness(t, withWriteCounter(writes))
	node := createNode(t, newNode("adopt").withoutKwok().
		taint(activities.UnregisteredTaintKey, corev1.TaintEffectNoExecute).
		label("existing", "kept").build())
	dedicated := corev1.Taint{Key: "example.com/dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}
	agent := corev1.Taint{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoExecute}
	req := activities.RegisterNodeRequest{
		NodeName: node.Name, NodeClaimName: "default-abcde", NodePool: "default",
		Labels:        map[string]string{"team": "ml"},
		Annotations:   map[string]string{"example.com/owner": "ml-team"},
		Taints:        []corev1.Taint{dedicated},
		StartupTaints: []corev1.Taint{agent},
	}

	if _, err := execute[activities.RegisterNodeResponse](h, nil, h.activities.RegisterNode, req); err != nil {
		t.Fatal(err)
	}
	adopted := getNode(t, node.Name)
	if !slices.Contains(adopted.Finalizers, activities.TerminationFinalizer) {
		t.Errorf("finalizers = %v, want %s", adopted.Finalizers, activities.TerminationFinalizer)
	}
	for key, want := range map[string]string{
		NodePoolLabel: "default", "karpenter.sh/nodepool": "default", activities.NodeClaimLabel: "default-abcde", "team": "ml", "existing": "kept",
	} {
		if got := adopted.Labels[key]; got != want {
			t.Errorf("label %s = %q, want %q", key, got, want)
		}
	}
	if adopted.Annotations["example.com/owner"] != "ml-team" || adopted.Annotations[RegisteredAnnotation] == "" {
		t.Errorf("annotations = %v, want example.com/owner and %s", adopted.Annotations, RegisteredAnnotation)
	}
	if hasTaint(adopted.Spec.Taints, corev1.Taint{Key: activities.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}) {
		t.Errorf("unregistered taint still there: %v", adopted.Spec.Taints)
	}
	if !hasTaint(adopted.Spec.Taints, dedicated) || !hasTaint(adopted.Spec.Taints, agent) {
		t.Errorf("taints = %v, want %s and %s", adopted.Spec.Taints, dedicated.ToString(), agent.ToString())
	}
	if !h.logged("Registered node", node.Name) {
		t.Error(`no "Registered node" log line`)
	}

	if got := writes.all(); len(got) != 1 || !strings.HasPrefix(got[0], "PATCH /api/v1/nodes/"+node.Name) {
		t.Errorf("first RegisterNode wrote %q, want one PATCH of the Node", got)
	}

	// A retry changes nothing: not even a no-op write. (Counting accepted
	// writes is the test: the TTL and node lifecycle controllers write this
	// Node too.)
	if _, err := execute[activities.RegisterNodeResponse](h, nil, h.activities.RegisterNode, req); err != nil {
		t.Fatal(err)
	}
	if got := writes.all(); len(got) != 1 {
		t.Errorf("second RegisterNode wrote: %q", got[1:])
	}

	// The agent removes its startup taint; a late retry must not bring it
	// back.
	clustertesting.Eventually(t, 30*time.Second, "startup taint removed", func(ctx context.Context) (bool, error) {
		current, err := testClientset.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		current.Spec.Taints = removeTaintKey(current.Spec.Taints, agent.Key)
		_, err = testClientset.CoreV1().Nodes().Update(ctx, current, metav1.UpdateOptions{})
		return err == nil, err
	})
	if _, err := execute[activities.RegisterNodeResponse](h, nil, h.activities.RegisterNode, req); err != nil {
		t.Fatal(err)
	}
	if hasTaint(getNode(t, node.Name).Spec.Taints, agent) {
		t.Errorf("startup taint %s re-added after its removal", agent.ToString())
	}
	if got := writes.all(); len(got) != 1 {
		t.Errorf("RegisterNode after initialization wrote: %q", got[1:])
	}
}

// The pods a node was launched for are nominated to it at its first
// registration, so kube-scheduler keeps their room; a bound pod, a pod gone,
// and a retry after adoption write nothing.
func TestRegisterNodeNominatesThePodsItWasLaunchedFor(t *testing.T) {
	requireCluster(t)
	writes := &writeCounter{}
	h := newHarness(t, withWriteCounter(writes))
	node := createNode(t, newNode("nominate").withoutKwok().
		taint(activities.UnregisteredTaintKey, corev1.TaintEffectNoExecute).build())
	namespace := clustertesting.CreateNamespace(t, testClientset, "nominate")
	// No scheduler takes "none"'s pods, so nothing clears the nomination
	// under the test.
	pending := newPod(namespace, "pending", "").build()
	pending.Spec.SchedulerName = "none"
	createPod(t, pending)
	bound := createPod(t, newPod(namespace, "bound", "elsewhere").build())
	req := activities.RegisterNodeRequest{
		NodeName: node.Name, NodeClaimName: "default-nmnte", NodePool: "default",
		NominatePods: []string{namespace + "/pending", namespace + "/bound", namespace + "/gone", "malformed"},
	}

	if _, err := execute[activities.RegisterNodeResponse](h, nil, h.activities.RegisterNode, req); err != nil {
		t.Fatal(err)
	}
	got, err := testClientset.CoreV1().Pods(namespace).Get(t.Context(), "pending", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.NominatedNodeName != node.Name {
		t.Errorf("pending pod's nominatedNodeName = %q, want %q", got.Status.NominatedNodeName, node.Name)
	}
	got, err = testClientset.CoreV1().Pods(namespace).Get(t.Context(), "bound", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.NominatedNodeName != "" || got.ResourceVersion != bound.ResourceVersion {
		t.Errorf("bound pod was written: nominatedNodeName %q, resourceVersion %s (was %s)",
			got.Status.NominatedNodeName, got.ResourceVersion, bound.ResourceVersion)
	}
	want := []string{
		"PATCH /api/v1/namespaces/" + namespace + "/pods/pending/status",
		"PATCH /api/v1/nodes/" + node.Name,
	}
	if all := writes.all(); !slices.Equal(all, want) {
		t.Errorf("RegisterNode wrote %q, want %q", all, want)
	}
	if !h.logged("Nominated pods to their node", node.Name) {
		t.Error(`no "Nominated pods to their node" log line`)
	}

	// A retry once the Node is adopted nominates nothing again: the
	// scheduler may have placed the pods elsewhere since.
	if _, err := execute[activities.RegisterNodeResponse](h, nil, h.activities.RegisterNode, req); err != nil {
		t.Fatal(err)
	}
	if all := writes.all(); len(all) != len(want) {
		t.Errorf("second RegisterNode wrote: %q", all[len(want):])
	}
}

func TestRegisterNodeOfAMissingNodeIsNodeGone(t *testing.T) {
	h := newHarness(t)
	_, err := execute[activities.RegisterNodeResponse](h, nil, h.activities.RegisterNode,
		activities.RegisterNodeRequest{NodeName: clustertesting.UniqueName("missing"), NodeClaimName: "c", NodePool: "p"})
	if !activities.IsNodeGone(err) {
		t.Fatalf("RegisterNode of a missing Node = %v, want a NodeGone error (not retried)", err)
	}
}

// Invalid requests fail before any API call, so the clients point nowhere.
func TestRequestsMissingRequiredFieldsAreNotRetried(t *testing.T) {
	h := offlineHarness(t)
	tests := []struct {
		name string
		run  func() error
	}{
		{"WaitForRegistration without providerID", func() error {
			_, err := execute[activities.WaitForRegistrationResponse](h, nil, h.activities.WaitForRegistration, activities.WaitForRegistrationRequest{})
			return err
		}},
		{"RegisterNode without nodePool", func() error {
			_, err := execute[activities.RegisterNodeResponse](h, nil, h.activities.RegisterNode, activities.RegisterNodeRequest{NodeName: "n", NodeClaimName: "c"})
			return err
		}},
		{"Drain without nodeName", func() error {
			_, err := execute[activities.DrainResponse](h, nil, h.activities.Drain, activities.DrainRequest{})
			return err
		}},
		{"DeleteNode without name or providerID", func() error {
			_, err := execute[activities.DeleteNodeResponse](h, nil, h.activities.DeleteNode, activities.DeleteNodeRequest{})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.run(); !IsInvalidRequest(err) {
				t.Errorf("err = %v, want InvalidRequest", err)
			}
		})
	}
}

// The waits heartbeat at every poll, so the poll must fit the heartbeat
// timeout workflows give them.
func TestPollFitsTheHeartbeatTimeout(t *testing.T) {
	if DefaultPollInterval > activities.MaxHeartbeatInterval {
		t.Errorf("DefaultPollInterval %s exceeds activities.MaxHeartbeatInterval %s", DefaultPollInterval, activities.MaxHeartbeatInterval)
	}
}
