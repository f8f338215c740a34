package kube

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/local/cluster/clustertesting"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// budget builds a Budget: nodes, then optional reasons.
func budget(nodes string, reasons ...apisv1.DisruptionReason) apisv1.Budget {
	return apisv1.Budget{Nodes: nodes, Reasons: reasons}
}

// scheduled opens b for duration at each hit of the cron schedule.
func scheduled(b apisv1.Budget, schedule string, duration apisv1.Duration) apisv1.Budget {
	b.Schedule = &schedule
	b.Duration = &duration
	return b
}

// createNodePool creates a valid NodePool named name with the given budgets
// and minNodes through the real API (so the CRD's schema and defaults
// apply), and deletes it after the test.
func createNodePool(t *testing.T, name string, budgets []apisv1.Budget, minNodes *int32) {
	t.Helper()
	pool := apisv1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: apisv1.GroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apisv1.NodePoolSpec{
			Template: apisv1.NodeClaimTemplate{Spec: apisv1.NodeClaimTemplateSpec{
				Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
					{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}},
				},
				NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.Group, Kind: "EC2NodeClass", Name: "default"},
			}},
			Disruption: apisv1.Disruption{Budgets: budgets},
			MinNodes:   minNodes,
		},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pool)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testDynamic.Resource(nodePoolResource).Create(t.Context(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create NodePool %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = testDynamic.Resource(nodePoolResource).Delete(t.Context(), name, metav1.DeleteOptions{})
	})
}

// nodeState is how a pool's Node looks to AllowDisruption.
type nodeState int

const (
	live nodeState = iota
	tainted
	deleting
)

// createPoolNodes creates one Node of pool per state and returns their names.
func createPoolNodes(t *testing.T, pool string, states ...nodeState) []string {
	t.Helper()
	names := make([]string, 0, len(states))
	for _, state := range states {
		builder := newNode(pool).withoutKwok().label(NodePoolLabel, pool)
		switch state {
		case tainted:
			builder.taint(activities.DisruptedTaintKey, corev1.TaintEffectNoSchedule)
		case deleting:
			builder.finalizer("millwright.dev/test-hold")
		}
		node := createNode(t, builder.build())
		if state == deleting {
			if err := testClientset.CoreV1().Nodes().Delete(t.Context(), node.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		names = append(names, node.Name)
	}
	return names
}

func TestAllowDisruptionAppliesBudgetsAndMinNodesToLiveNodes(t *testing.T) {
	// 09:30 UTC on a Monday: inside a 09:00+1h window, outside a 12:00 one.
	now := time.Date(2026, 11, 30, 9, 30, 0, 0, time.UTC)
	tests := []struct {
		name     string
		budgets  []apisv1.Budget
		minNodes *int32
		nodes    []nodeState
		asking   int // index into nodes
		reason   string

		wantAllowed    bool
		wantWhy        string
		wantRetryAfter time.Duration
	}{
		{name: "default 10% of 3 rounds up to 1, none disrupted", nodes: []nodeState{live, live, live},
			reason: "Empty", wantAllowed: true},
		{name: "default 10% of 3 rounds up to 1, one tainted", nodes: []nodeState{tainted, live, live}, asking: 1,
			reason: "Empty", wantWhy: "allows 1 of 3"},
		{name: "a deleting node counts as disrupted", budgets: []apisv1.Budget{budget("1")},
			nodes: []nodeState{deleting, live}, asking: 1, reason: "Empty", wantWhy: "1 already are"},
		{name: "50% of 3 is 2", budgets: []apisv1.Budget{budget("50%")},
			nodes: []nodeState{tainted, live, live}, asking: 1, reason: "Empty", wantAllowed: true},
		{name: "the most restrictive budget wins", budgets: []apisv1.Budget{budget("50%"), budget("1")},
			nodes: []nodeState{tainted, live, live}, asking: 1, reason: "Empty", wantWhy: "budgets[1]"},
		{name: "a budget for another reason does not apply", budgets: []apisv1.Budget{budget("0", apisv1.DisruptionReasonDrifted)},
			nodes: []nodeState{live, live}, reason: "Empty", wantAllowed: true},
		{name: "a budget for this reason applies", budgets: []apisv1.Budget{budget("0", apisv1.DisruptionReasonDrifted)},
			nodes: []nodeState{live, live}, reason: "Drifted", wantWhy: "allows 0 of 2"},
		{name: "inside a scheduled window the budget applies until it closes",
			budgets: []apisv1.Budget{scheduled(budget("0"), "0 9 * * *", "1h")},
			nodes:   []nodeState{live, live}, reason: "Empty", wantWhy: "allows 0", wantRetryAfter: 30 * time.Minute},
		{name: "outside its window a scheduled budget does not apply",
			budgets: []apisv1.Budget{scheduled(budget("0"), "0 12 * * *", "1h")},
			nodes:   []nodeState{live, live}, reason: "Empty", wantAllowed: true},
		{name: "minNodes keeps the pool's floor", budgets: []apisv1.Budget{budget("100%")}, minNodes: ptr.To[int32](2),
			nodes: []nodeState{live, live}, reason: "Empty", wantWhy: "minNodes 2"},
		{name: "minNodes does not count nodes already leaving", budgets: []apisv1.Budget{budget("100%")}, minNodes: ptr.To[int32](2),
			nodes: []nodeState{tainted, live, live}, asking: 1, reason: "Empty", wantWhy: "would leave 1"},
		{name: "a node already disrupted is allowed again", budgets: []apisv1.Budget{budget("0")},
			nodes: []nodeState{tainted, live}, asking: 0, reason: "Empty", wantAllowed: true},
	}
	h := newHarness(t, withClock(clocktesting.NewFakeClock(now)))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := clustertesting.UniqueName("pool")
			createNodePool(t, pool, tt.budgets, tt.minNodes)
			nodes := createPoolNodes(t, pool, tt.nodes...)

			resp, err := execute[activities.AllowDisruptionResponse](h, nil, h.activities.AllowDisruption,
				activities.AllowDisruptionRequest{NodePool: pool, NodeName: nodes[tt.asking], Reason: tt.reason})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Allowed != tt.wantAllowed {
				t.Fatalf("Allowed = %v (why %q), want %v", resp.Allowed, resp.Why, tt.wantAllowed)
			}
			if !strings.Contains(resp.Why, tt.wantWhy) {
				t.Errorf("Why = %q, want it to contain %q", resp.Why, tt.wantWhy)
			}
			if resp.RetryAfter != tt.wantRetryAfter {
				t.Errorf("RetryAfter = %s, want %s", resp.RetryAfter, tt.wantRetryAfter)
			}
		})
	}
}

func TestAllowDisruptionOfAPoolThatIsGone(t *testing.T) {
	h := newHarness(t)
	resp, err := execute[activities.AllowDisruptionResponse](h, nil, h.activities.AllowDisruption,
		activities.AllowDisruptionRequest{NodePool: clustertesting.UniqueName("gone"), NodeName: "n", Reason: "Empty"})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Allowed {
		t.Errorf("Allowed = false (%s), want true: no pool, no budget", resp.Why)
	}
}

func TestBudgetWindow(t *testing.T) {
	at := func(hour, minute int) time.Time { return time.Date(2026, 11, 30, hour, minute, 0, 0, time.UTC) }
	tests := []struct {
		name       string
		budget     apisv1.Budget
		now        time.Time
		wantActive bool
		wantLeft   time.Duration
		wantErr    bool
	}{
		{name: "no schedule is always active", budget: budget("1"), now: at(3, 0), wantActive: true},
		{name: "at the opening minute", budget: scheduled(budget("1"), "0 9 * * *", "1h"), now: at(9, 0), wantActive: true, wantLeft: time.Hour},
		{name: "inside", budget: scheduled(budget("1"), "0 9 * * *", "1h30m"), now: at(10, 0), wantActive: true, wantLeft: 30 * time.Minute},
		{name: "at the closing minute", budget: scheduled(budget("1"), "0 9 * * *", "1h"), now: at(10, 0), wantActive: false},
		{name: "before", budget: scheduled(budget("1"), "0 9 * * *", "1h"), now: at(8, 59), wantActive: false},
		{name: "a window across midnight", budget: scheduled(budget("1"), "0 23 * * *", "2h"), now: at(0, 30), wantActive: true, wantLeft: 30 * time.Minute},
		{name: "a macro", budget: scheduled(budget("1"), "@daily", "10m"), now: at(0, 5), wantActive: true, wantLeft: 5 * time.Minute},
		{name: "a schedule that does not parse", budget: scheduled(budget("1"), "61 * * * *", "1h"), now: at(9, 0), wantErr: true},
		{name: "a schedule without duration", budget: apisv1.Budget{Nodes: "1", Schedule: ptr.To("@daily")}, now: at(9, 0), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			active, left, err := budgetWindow(tt.budget, tt.now)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if active != tt.wantActive || left != tt.wantLeft {
				t.Errorf("budgetWindow = (%v, %s), want (%v, %s)", active, left, tt.wantActive, tt.wantLeft)
			}
		})
	}
}

func TestAllowDisruptionReservesTheNodeUntilItsDrainTaintsIt(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 9, 30, 0, 0, time.UTC))
	h := newHarness(t, withClock(clock))
	pool := clustertesting.UniqueName("reserve")
	createNodePool(t, pool, []apisv1.Budget{budget("1")}, nil)
	nodes := createPoolNodes(t, pool, live, live)
	ask := func(node string) activities.AllowDisruptionResponse {
		t.Helper()
		resp, err := execute[activities.AllowDisruptionResponse](h, nil, h.activities.AllowDisruption,
			activities.AllowDisruptionRequest{NodePool: pool, NodeName: node, Reason: "Empty"})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	if resp := ask(nodes[0]); !resp.Allowed {
		t.Fatalf("first node refused (%s), want allowed", resp.Why)
	}
	if got := getNode(t, nodes[0]).Annotations[ReservedForDisruptionAnnotation]; got != "2026-11-30T09:30:00Z" {
		t.Errorf("reservation annotation = %q, want the decision's time", got)
	}
	if resp := ask(nodes[1]); resp.Allowed || !strings.Contains(resp.Why, "1 already are") {
		t.Errorf("second node: Allowed=%v (%s), want refused: the first holds the only unit of the budget", resp.Allowed, resp.Why)
	}
	if resp := ask(nodes[0]); !resp.Allowed {
		t.Errorf("asking again for the reserved node: refused (%s), want allowed", resp.Why)
	}

	// The first node was never drained (a pod arrived, say): its
	// reservation lapses and the budget is free again.
	clock.Step(disruptionReservationTTL + time.Second)
	if resp := ask(nodes[1]); !resp.Allowed {
		t.Errorf("after the reservation lapsed: refused (%s), want allowed", resp.Why)
	}
}

// TestConcurrentDisruptionDecisionsRespectTheBudget: many nodes of one pool
// ask at the same instant; the pool's Lease makes them take turns, so the
// budget of one is spent exactly once.
func TestConcurrentDisruptionDecisionsRespectTheBudget(t *testing.T) {
	h := newHarness(t)
	pool := clustertesting.UniqueName("race")
	createNodePool(t, pool, []apisv1.Budget{budget("1")}, nil)
	nodes := createPoolNodes(t, pool, live, live, live, live, live)

	type answer struct {
		resp activities.AllowDisruptionResponse
		err  error
	}
	answers := make(chan answer, len(nodes))
	start := make(chan struct{})
	for _, node := range nodes {
		go func() {
			<-start
			resp, err := execute[activities.AllowDisruptionResponse](h, nil, h.activities.AllowDisruption,
				activities.AllowDisruptionRequest{NodePool: pool, NodeName: node, Reason: "Empty"})
			answers <- answer{resp, err}
		}()
	}
	close(start)
	allowed := 0
	for range nodes {
		a := <-answers
		if a.err != nil {
			t.Fatal(a.err)
		}
		if a.resp.Allowed {
			allowed++
		}
	}
	if allowed != 1 {
		t.Errorf("%d of %d simultaneous requests allowed, want exactly 1 (budget nodes: 1)", allowed, len(nodes))
	}
	lease, err := testClientset.CoordinationV1().Leases(DefaultLeaseNamespace).Get(t.Context(), disruptionLeaseName(pool), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the pool's disruption Lease: %v", err)
	}
	if lease.Spec.HolderIdentity != nil {
		t.Errorf("Lease still held by %s after every decision returned", *lease.Spec.HolderIdentity)
	}
}

func TestDisruptionLeaseNameFitsLongPoolNames(t *testing.T) {
	long := strings.Repeat("p", 253)
	if name := disruptionLeaseName(long); len(name) > 253 || name == disruptionLeaseName(long[:252]) {
		t.Errorf("lease name %q (%d chars) for a 253-char pool", name, len(name))
	}
	if got := disruptionLeaseName("default"); got != "millwright-disruption-default" {
		t.Errorf("lease name = %q", got)
	}
}

func TestAllowDisruptionRefusesANodeAnnotatedDoNotDisrupt(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	pool := &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	pool.SetDefaults()
	tests := []struct {
		name        string
		annotations map[string]string
		created     time.Time
		allowed     bool
	}{
		{name: "not annotated", allowed: true},
		{name: "millwright key", annotations: map[string]string{apisv1.AnnotationDoNotDisrupt: "true"}},
		{name: "karpenter key", annotations: map[string]string{apisv1.AnnotationKarpenterDoNotDisrupt: "true"}},
		{name: "false protects nothing", annotations: map[string]string{apisv1.AnnotationKarpenterDoNotDisrupt: "false"}, allowed: true},
		{name: "a duration not yet over", annotations: map[string]string{apisv1.AnnotationKarpenterDoNotDisrupt: "1h"}, created: now.Add(-30 * time.Minute)},
		{name: "a duration over", annotations: map[string]string{apisv1.AnnotationKarpenterDoNotDisrupt: "1h"}, created: now.Add(-2 * time.Hour), allowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: tt.annotations, CreationTimestamp: metav1.NewTime(tt.created)}}
			answer := decideDisruption(pool, []corev1.Node{node}, activities.AllowDisruptionRequest{NodePool: "default", NodeName: "n1", Reason: "Empty"}, now)
			if answer.Allowed != tt.allowed {
				t.Fatalf("allowed = %v (%s), want %v", answer.Allowed, answer.Why, tt.allowed)
			}
			if !tt.allowed && !strings.Contains(answer.Why, "do-not-disrupt") {
				t.Errorf("why = %q, want it to name the annotation", answer.Why)
			}
		})
	}
}
