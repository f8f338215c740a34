package kube

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/events"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

func withEvents(r events.Recorder) harnessOption { return func(cfg *Config) { cfg.Events = r } }

// nodeClaimRequest builds an UpsertNodeClaim request for name at phase.
func nodeClaimRequest(name, phase string, at time.Time, options ...func(*activities.UpsertNodeClaimRequest)) activities.UpsertNodeClaimRequest {
	req := activities.UpsertNodeClaimRequest{
		NodeClaimName: name, WorkflowID: "node/test/" + name, NodePool: "default", NodeClassName: "default",
		Phase: phase, At: at, CreatedAt: at,
		Labels:       map[string]string{activities.NodeClaimLabel: name, "team": "payments"},
		Requirements: []corev1.NodeSelectorRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}}},
		ExpireAfter:  activities.After(720 * time.Hour),
		Annotations:  map[string]string{apisv1.AnnotationNodePoolHash: "123", apisv1.AnnotationImageID: "ami-0123"},
	}
	for _, option := range options {
		option(&req)
	}
	return req
}

func launched(at time.Time) func(*activities.UpsertNodeClaimRequest) {
	return func(req *activities.UpsertNodeClaimRequest) {
		req.Instance = &activities.LaunchResponse{
			InstanceID: "i-0abc", InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot",
			ProviderID: "aws:///us-east-1a/i-0abc", ImageID: "ami-0123", LaunchTime: at,
			Labels: map[string]string{apisv1.LabelInstanceCPU: "2", apisv1.LabelInstanceMemory: "8192"},
		}
	}
}

func terminating(reason string) func(*activities.UpsertNodeClaimRequest) {
	return func(req *activities.UpsertNodeClaimRequest) {
		req.Termination = &activities.NodeClaimTermination{Reason: reason, Detail: "because", Voluntary: true}
	}
}

func (h *harness) nodeClaim(t *testing.T, name string) (*apisv1.NodeClaim, error) {
	t.Helper()
	u, err := testDynamic.Resource(NodeClaimResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return fromUnstructured(u)
}

func publishedEvents(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestUpsertNodeClaimMirrorsTheLifecycleOnce(t *testing.T) {
	fake := record.NewFakeRecorder(100)
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := newHarness(t, withEvents(events.NewRecorder(fake, clocktesting.NewFakeClock(t0))))
	ctx := context.Background()
	name := "nc-lifecycle"

	steps := []struct {
		req         activities.UpsertNodeClaimRequest
		wantEntered string
		wantLeft    string
		wantEvents  []string
	}{
		{req: nodeClaimRequest(name, activities.NodePhaseLaunching, t0), wantEntered: "Launching"},
		// A retry after a lost completion: nothing new.
		{req: nodeClaimRequest(name, activities.NodePhaseLaunching, t0.Add(time.Second))},
		{
			req:         nodeClaimRequest(name, activities.NodePhaseRegistering, t0.Add(time.Minute), launched(t0.Add(30*time.Second))),
			wantEntered: "Registering", wantLeft: "Launching",
			wantEvents: []string{"Normal Launched Launched instance i-0abc: m5.large in us-east-1a (spot)"},
		},
		{
			req:         nodeClaimRequest(name, activities.NodePhaseDraining, t0.Add(2*time.Minute), launched(t0.Add(30*time.Second)), terminating("Expired")),
			wantEntered: "Draining", wantLeft: "Registering",
			wantEvents: []string{"Normal Terminating Terminating: Expired: because"},
		},
	}
	for i, step := range steps {
		resp, err := h.activities.UpsertNodeClaim(ctx, step.req)
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, step.req.Phase, err)
		}
		if resp.Entered != step.wantEntered || resp.Left != step.wantLeft || resp.Created != (i == 0) {
			t.Errorf("step %d (%s): response %+v, want entered %q left %q created %v", i, step.req.Phase, resp, step.wantEntered, step.wantLeft, i == 0)
		}
		if got := publishedEvents(fake); strings.Join(got, "|") != strings.Join(step.wantEvents, "|") {
			t.Errorf("step %d (%s): events %q, want %q", i, step.req.Phase, got, step.wantEvents)
		}
	}
	claim, err := h.nodeClaim(t, name)
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		apisv1.LabelNodePool: "default", corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "us-east-1a",
		apisv1.LabelCapacityType: "spot", activities.NodeClaimLabel: name, "team": "payments",
	}
	for k, v := range wantLabels {
		if claim.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, claim.Labels[k], v)
		}
	}
	if claim.Status.ProviderID != "aws:///us-east-1a/i-0abc" || claim.Status.ImageID != "ami-0123" || claim.Status.Phase != "Draining" {
		t.Errorf("status %+v", claim.Status)
	}
	if cpu := claim.Status.Capacity[corev1.ResourceCPU]; cpu.String() != "2" {
		t.Errorf("capacity cpu %s, want 2 (from the instance type's labels)", cpu.String())
	}
	if !meta.IsStatusConditionTrue(claim.Status.Conditions, apisv1.ConditionTypeLaunched) || !meta.IsStatusConditionFalse(claim.Status.Conditions, apisv1.ConditionTypeReady) ||
		!meta.IsStatusConditionTrue(claim.Status.Conditions, apisv1.ConditionTypeDisrupted) || !meta.IsStatusConditionFalse(claim.Status.Conditions, apisv1.ConditionTypeRegistered) {
		t.Errorf("conditions %+v: want Launched and Disrupted, not Registered nor Ready", claim.Status.Conditions)
	}
	if claim.Spec.NodeClassRef == nil || claim.Spec.NodeClassRef.Name != "default" || claim.Spec.ExpireAfter != "720h" || len(claim.Spec.Requirements) != 1 {
		t.Errorf("spec %+v", claim.Spec)
	}
	if claim.Annotations[WorkflowIDAnnotation] != "node/test/"+name || !hasFinalizer(claim.Finalizers, activities.TerminationFinalizer) {
		t.Errorf("annotations %v finalizers %v", claim.Annotations, claim.Finalizers)
	}
	if claim.Annotations[apisv1.AnnotationNodePoolHash] != "123" || claim.Annotations[apisv1.AnnotationImageID] != "ami-0123" {
		t.Errorf("annotations %v: want the request's drift stamps", claim.Annotations)
	}

	// Terminated: the NodeClaim goes.
	resp, err := h.activities.UpsertNodeClaim(ctx, nodeClaimRequest(name, activities.NodePhaseTerminated, t0.Add(3*time.Minute), launched(t0), terminating("Expired")))
	if err != nil || resp.Entered != "Terminated" || resp.Left != "Draining" || resp.LeftAfter != time.Minute {
		t.Fatalf("Terminated: %+v, %v", resp, err)
	}
	if _, err := h.nodeClaim(t, name); !apierrors.IsNotFound(err) {
		t.Errorf("NodeClaim of a terminated node: %v, want NotFound", err)
	}
	// A node on its way out whose NodeClaim is gone does not get it back.
	resp, err = h.activities.UpsertNodeClaim(ctx, nodeClaimRequest(name, activities.NodePhaseTerminated, t0.Add(4*time.Minute)))
	if err != nil || resp.Skipped == "" || resp.Created {
		t.Errorf("a gone NodeClaim of a leaving node: %+v, %v; want skipped", resp, err)
	}
	if _, err := h.nodeClaim(t, name); !apierrors.IsNotFound(err) {
		t.Errorf("NodeClaim recreated for a leaving node: %v", err)
	}
}

func drifted(kind, message string) func(*activities.UpsertNodeClaimRequest) {
	return func(req *activities.UpsertNodeClaimRequest) {
		req.Drift = &activities.NodeClaimCause{Reason: kind, Message: message}
	}
}

func reservedFor(reason, message string) func(*activities.UpsertNodeClaimRequest) {
	return func(req *activities.UpsertNodeClaimRequest) {
		req.Disruption = &activities.NodeClaimCause{Reason: reason, Message: message}
	}
}

// The drift and the disruption command the workflow reports show as
// Karpenter's Drifted and DisruptionReason conditions, True with the kind
// or command reason, and are removed (not set False) once gone; a write
// that changes neither keeps its transition time and publishes nothing.
func TestUpsertNodeClaimWritesDriftedAndDisruptionReason(t *testing.T) {
	fake := record.NewFakeRecorder(100)
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := newHarness(t, withEvents(events.NewRecorder(fake, clocktesting.NewFakeClock(t0))))
	ctx := context.Background()
	name := "nc-drifted"
	ready := func(at time.Duration, options ...func(*activities.UpsertNodeClaimRequest)) activities.UpsertNodeClaimRequest {
		return nodeClaimRequest(name, activities.NodePhaseReady, t0.Add(at), append([]func(*activities.UpsertNodeClaimRequest){launched(t0)}, options...)...)
	}
	type want struct {
		status          metav1.ConditionStatus // "" when the condition is absent
		reason, message string
		since           time.Duration // LastTransitionTime after t0
	}
	steps := []struct {
		name                     string
		req                      activities.UpsertNodeClaimRequest
		drifted, disruptedReason want
	}{
		{name: "ready", req: ready(0)},
		{
			name: "AMI drift", req: ready(time.Hour, drifted("AMIDrift", "AMI ami-a → ami-b")),
			drifted: want{metav1.ConditionTrue, "AMIDrift", "AMI ami-a → ami-b", time.Hour},
		},
		{
			name: "another drift", req: ready(2*time.Hour, drifted("NodePoolDrifted", "NodePool hash 1 → 2")),
			drifted: want{metav1.ConditionTrue, "NodePoolDrifted", "NodePool hash 1 → 2", time.Hour},
		},
		{
			name: "reserved", req: ready(3*time.Hour, drifted("NodePoolDrifted", "NodePool hash 1 → 2"), reservedFor("Drifted", "Drifted: replace 1 node")),
			drifted:         want{metav1.ConditionTrue, "NodePoolDrifted", "NodePool hash 1 → 2", time.Hour},
			disruptedReason: want{metav1.ConditionTrue, "Drifted", "Drifted: replace 1 node", 3 * time.Hour},
		},
		{name: "no longer drifted, released", req: ready(4 * time.Hour)},
	}
	for _, step := range steps {
		if _, err := h.activities.UpsertNodeClaim(ctx, step.req); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		claim, err := h.nodeClaim(t, name)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		for conditionType, w := range map[string]want{apisv1.ConditionTypeDrifted: step.drifted, apisv1.ConditionTypeDisruptionReason: step.disruptedReason} {
			c := meta.FindStatusCondition(claim.Status.Conditions, conditionType)
			switch {
			case w.status == "" && c != nil:
				t.Errorf("%s: %s condition %+v, want none", step.name, conditionType, *c)
			case w.status == "":
			case c == nil:
				t.Errorf("%s: no %s condition, want %+v", step.name, conditionType, w)
			case c.Status != w.status || c.Reason != w.reason || c.Message != w.message || !c.LastTransitionTime.Time.Equal(t0.Add(w.since)):
				t.Errorf("%s: %s condition %s/%s %q since t0+%s, want %+v", step.name, conditionType, c.Status, c.Reason, c.Message, c.LastTransitionTime.Sub(t0), w)
			}
		}
		if !meta.IsStatusConditionTrue(claim.Status.Conditions, apisv1.ConditionTypeLaunched) || claim.Status.Phase != activities.NodePhaseReady {
			t.Errorf("%s: the other conditions or the phase changed: %s %+v", step.name, claim.Status.Phase, claim.Status.Conditions)
		}
	}
	if got := publishedEvents(fake); len(got) != 1 {
		t.Errorf("events %q, want only the first write's (same-phase writes publish nothing)", got)
	}
}

// A NodeClaim deleted by hand while its node lives is written again by the
// next phase; `kubectl delete nodeclaim` (with the finalizer) keeps it
// until the node is Terminated.
func TestUpsertNodeClaimRecreatesAndHonoursDeletion(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	name := "nc-deleted"
	if _, err := h.activities.UpsertNodeClaim(ctx, nodeClaimRequest(name, activities.NodePhaseLaunching, t0)); err != nil {
		t.Fatal(err)
	}
	// Forced away: finalizer removed, then deleted.
	client := testDynamic.Resource(NodeClaimResource)
	if _, err := client.Patch(ctx, name, "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	resp, err := h.activities.UpsertNodeClaim(ctx, nodeClaimRequest(name, activities.NodePhaseRegistering, t0.Add(time.Minute), launched(t0)))
	if err != nil || !resp.Created || resp.Entered != "Registering" {
		t.Fatalf("recreating: %+v, %v", resp, err)
	}
	// kubectl delete: held by the finalizer.
	if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	claim, err := h.nodeClaim(t, name)
	if err != nil || claim.DeletionTimestamp == nil {
		t.Fatalf("after kubectl delete: %v, %v; want held with a deletion timestamp", claim, err)
	}
	for _, phase := range []string{activities.NodePhaseDraining, activities.NodePhaseTerminating, activities.NodePhaseTerminated} {
		if _, err := h.activities.UpsertNodeClaim(ctx, nodeClaimRequest(name, phase, t0.Add(2*time.Minute), launched(t0), terminating("Deleted"))); err != nil {
			t.Fatalf("%s: %v", phase, err)
		}
		if phase != activities.NodePhaseTerminated {
			if claim, err := h.nodeClaim(t, name); err != nil || claim.Status.Phase != phase {
				t.Errorf("%s: NodeClaim %v, %v", phase, claim, err)
			}
		}
	}
	if _, err := h.nodeClaim(t, name); !apierrors.IsNotFound(err) {
		t.Errorf("NodeClaim after Terminated: %v, want NotFound", err)
	}
}

func TestUpsertNodeClaimRefusesBadRequests(t *testing.T) {
	h := offlineHarness(t)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cases := map[string]activities.UpsertNodeClaimRequest{
		"nodeClaimName is empty": nodeClaimRequest("", activities.NodePhaseLaunching, at),
		"nodePool is empty":      nodeClaimRequest("x", activities.NodePhaseLaunching, at, func(r *activities.UpsertNodeClaimRequest) { r.NodePool = "" }),
		"at is zero":             nodeClaimRequest("x", activities.NodePhaseLaunching, time.Time{}),
		"is not a node phase":    nodeClaimRequest("x", "Sleeping", at),
	}
	for want, req := range cases {
		_, err := h.activities.UpsertNodeClaim(context.Background(), req)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one saying %q", err, want)
		}
	}
}

// nodeClaimRequests counts a client's NodeClaim requests by method.
type nodeClaimRequests struct {
	mu       sync.Mutex
	byMethod map[string]int
}

func (c *nodeClaimRequests) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	taken := c.byMethod
	c.byMethod = map[string]int{}
	return taken
}

// countingDynamic is a dynamic client of the test control plane that counts
// its NodeClaim requests.
func countingDynamic(t *testing.T) (dynamic.Interface, *nodeClaimRequests) {
	t.Helper()
	counts := &nodeClaimRequests{byMethod: map[string]int{}}
	cfg := testCluster.RESTConfig()
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if strings.Contains(r.URL.Path, "/nodeclaims") {
				counts.mu.Lock()
				counts.byMethod[r.Method]++
				counts.mu.Unlock()
			}
			return next.RoundTrip(r)
		})
	})
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client, counts
}

// With a NodeClaim cache, a phase is one status write: no read, and no
// metadata write (the phase's start is status.phaseSince). A stale copy
// costs a Conflict and a live read: the phase is still recorded once, and
// a retry of a recorded phase publishes nothing.
func TestUpsertNodeClaimFromTheCache(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	name := "nc-cached"
	writer := newHarness(t)
	liveCopy := func() *unstructured.Unstructured {
		u, err := testDynamic.Resource(NodeClaimResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	if _, err := writer.activities.UpsertNodeClaim(ctx, nodeClaimRequest(name, activities.NodePhaseLaunching, t0)); err != nil {
		t.Fatal(err)
	}
	launching := liveCopy()
	if _, err := writer.activities.UpsertNodeClaim(ctx, nodeClaimRequest(name, activities.NodePhaseRegistering, t0.Add(time.Minute), launched(t0))); err != nil {
		t.Fatal(err)
	}

	claims := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	dyn, requests := countingDynamic(t)
	fake := record.NewFakeRecorder(100)
	h := newHarness(t, withEvents(events.NewRecorder(fake, clocktesting.NewFakeClock(t0))), func(cfg *Config) {
		cfg.Dynamic = dyn
		cfg.NodeClaims = cache.NewGenericLister(claims, NodeClaimResource.GroupResource())
	})
	cacheHolds := func(u *unstructured.Unstructured) {
		t.Helper()
		if err := claims.Update(u); err != nil {
			t.Fatal(err)
		}
	}
	draining := func(at time.Duration) activities.UpsertNodeClaimRequest {
		return nodeClaimRequest(name, activities.NodePhaseDraining, t0.Add(at), launched(t0), terminating("Expired"))
	}

	steps := []struct {
		name         string
		cached       *unstructured.Unstructured // nil: the live NodeClaim
		req          activities.UpsertNodeClaimRequest
		wantResponse activities.UpsertNodeClaimResponse
		wantEvents   int
		wantRequests map[string]int
	}{
		{
			name: "a fresh copy", req: draining(2 * time.Minute),
			wantResponse: activities.UpsertNodeClaimResponse{Entered: "Draining", Left: "Registering", LeftAfter: time.Minute},
			wantEvents:   1, wantRequests: map[string]int{http.MethodPatch: 1},
		},
		{
			name: "a stale copy, retrying a recorded phase", cached: launching, req: draining(2*time.Minute + time.Second),
			wantRequests: map[string]int{http.MethodPatch: 1, http.MethodGet: 1}, // the Conflict, the live read
		},
		{
			name: "a stale copy, a new phase", cached: launching, req: nodeClaimRequest(name, activities.NodePhaseTerminating, t0.Add(3*time.Minute), launched(t0), terminating("Expired")),
			wantResponse: activities.UpsertNodeClaimResponse{Entered: "Terminating", Left: "Draining", LeftAfter: time.Minute},
			wantRequests: map[string]int{http.MethodPatch: 2, http.MethodGet: 1}, // Draining published the node's leaving
		},
	}
	for _, step := range steps {
		cached := step.cached
		if cached == nil {
			cached = liveCopy()
		}
		cacheHolds(cached)
		requests.take()
		resp, err := h.activities.UpsertNodeClaim(ctx, step.req)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if resp != step.wantResponse {
			t.Errorf("%s: response %+v, want %+v", step.name, resp, step.wantResponse)
		}
		if got := publishedEvents(fake); len(got) != step.wantEvents {
			t.Errorf("%s: events %q, want %d", step.name, got, step.wantEvents)
		}
		if got := requests.take(); !equality.Semantic.DeepEqual(got, step.wantRequests) {
			t.Errorf("%s: NodeClaim requests %v, want %v", step.name, got, step.wantRequests)
		}
		claim, err := h.nodeClaim(t, name)
		if err != nil {
			t.Fatal(err)
		}
		if claim.Status.Phase != step.req.Phase || claim.Status.PhaseSince == nil {
			t.Errorf("%s: phase %s since %v, want %s", step.name, claim.Status.Phase, claim.Status.PhaseSince, step.req.Phase)
		}
		if _, ok := claim.Annotations[LegacyPhaseSinceAnnotation]; ok {
			t.Errorf("%s: the legacy %s annotation is written", step.name, LegacyPhaseSinceAnnotation)
		}
	}
	if claim, _ := h.nodeClaim(t, name); !claim.Status.PhaseSince.Time.Equal(t0.Add(3 * time.Minute)) {
		t.Errorf("phaseSince %v, want t0+3m", claim.Status.PhaseSince)
	}

	// Terminated from a stale copy: the guarded finalizer patch conflicts,
	// and the live read releases the NodeClaim.
	cacheHolds(launching)
	resp, err := h.activities.UpsertNodeClaim(ctx, nodeClaimRequest(name, activities.NodePhaseTerminated, t0.Add(4*time.Minute), launched(t0), terminating("Expired")))
	if err != nil || resp.Entered != "Terminated" || resp.Left != "Terminating" || resp.LeftAfter != time.Minute {
		t.Fatalf("Terminated: %+v, %v", resp, err)
	}
	if _, err := h.nodeClaim(t, name); !apierrors.IsNotFound(err) {
		t.Errorf("NodeClaim of a terminated node: %v, want NotFound", err)
	}
}

// A NodeClaim written before status.phaseSince kept the phase's start in an
// annotation: it is still read, and the next write moves it to the status.
func TestUpsertNodeClaimReadsTheLegacyPhaseSince(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	name := "nc-legacy"
	h := newHarness(t)
	if _, err := h.activities.UpsertNodeClaim(ctx, nodeClaimRequest(name, activities.NodePhaseLaunching, t0)); err != nil {
		t.Fatal(err)
	}
	// As the previous release wrote it: the annotation, no status field.
	client := testDynamic.Resource(NodeClaimResource)
	legacy := []byte(`{"metadata":{"annotations":{"` + LegacyPhaseSinceAnnotation + `":"` + t0.Format(time.RFC3339Nano) + `"}}}`)
	if _, err := client.Patch(ctx, name, types.MergePatchType, legacy, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Patch(ctx, name, types.MergePatchType, []byte(`{"status":{"phaseSince":null}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	resp, err := h.activities.UpsertNodeClaim(ctx, nodeClaimRequest(name, activities.NodePhaseRegistering, t0.Add(90*time.Second), launched(t0)))
	if err != nil || resp.Entered != "Registering" || resp.LeftAfter != 90*time.Second {
		t.Fatalf("Registering: %+v, %v; want Launching left after 90s", resp, err)
	}
	claim, err := h.nodeClaim(t, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := claim.Annotations[LegacyPhaseSinceAnnotation]; ok || claim.Status.PhaseSince == nil || !claim.Status.PhaseSince.Time.Equal(t0.Add(90*time.Second)) {
		t.Errorf("annotations %v, phaseSince %v: want the annotation gone and phaseSince t0+90s", claim.Annotations, claim.Status.PhaseSince)
	}
}
