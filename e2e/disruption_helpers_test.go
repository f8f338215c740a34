package e2e

// Helpers of the disruption scenarios (spot interruption, manual drains
// through starter and through the UI, expiry, PodDisruptionBudgets): a
// watch that records every change of a workload's pods, the drain signal
// sent exactly as the Temporal UI's "Send a Signal" sends it, and pool
// edits.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/millwright/millwright/local/stack/stacktest"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// onlyCapacityType restricts a pool to one capacity type ("spot" or
// "on-demand"), replacing the example pool's requirement that allows both.
func onlyCapacityType(capacityType string) func(*apisv1.NodePool) {
	return func(pool *apisv1.NodePool) {
		requirements := slices.DeleteFunc(pool.Spec.Template.Spec.Requirements, func(r apisv1.NodeSelectorRequirementWithMinValues) bool {
			return r.Key == apisv1.LabelCapacityType
		})
		pool.Spec.Template.Spec.Requirements = append(requirements, apisv1.NodeSelectorRequirementWithMinValues{
			Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{capacityType},
		})
	}
}

// ---- Pod timeline ----

// podTimeline is what a watch on a workload's pods saw, event by event: a
// watch, not snapshots, so a pod that was unavailable for a few
// milliseconds still counts.
type podTimeline struct {
	// replicas is the workload's desired count: unavailable = replicas -
	// available pods (Running, Ready, not terminating).
	replicas int

	mu      sync.Mutex
	current map[string]*corev1.Pod
	// nodeOf is the node each pod was seen bound to.
	nodeOf map[string]string
	// goneAt is when the watch saw each pod deleted.
	goneAt         map[string]time.Time
	maxUnavailable int
	// worst describes the first moment maxUnavailable was reached.
	worst string
	err   error

	stop     func()
	stopOnce sync.Once
	done     chan struct{}
}

// watchPodTimeline lists the pods matching selector in the scenario's
// namespace and follows every change from there on, until the returned
// timeline's finish is called (or the test ends). A RetryWatcher resumes
// from the last seen resource version if the API server closes the watch.
func (s *scenario) watchPodTimeline(t *testing.T, selector string, replicas int) *podTimeline {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pods := suite.kube.CoreV1().Pods(s.namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		cancel()
		t.Fatalf("listing pods %q in %s: %v", selector, s.namespace, err)
	}
	timeline := &podTimeline{
		replicas: replicas, current: map[string]*corev1.Pod{}, nodeOf: map[string]string{}, goneAt: map[string]time.Time{},
		done: make(chan struct{}),
	}
	// The listed pods count as one moment: applied one by one, the first
	// would look like replicas-1 unavailable.
	timeline.apply(time.Now(), "listed", list.Items...)
	watcher, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			options.LabelSelector = selector
			return pods.Watch(ctx, options)
		},
	})
	if err != nil {
		cancel()
		t.Fatalf("watching pods %q in %s: %v", selector, s.namespace, err)
	}
	timeline.stop = func() { watcher.Stop(); cancel() }
	go func() {
		defer close(timeline.done)
		for event := range watcher.ResultChan() {
			if event.Type == watch.Error {
				timeline.mu.Lock()
				timeline.err = fmt.Errorf("pod watch error: %v", event.Object)
				timeline.mu.Unlock()
				continue
			}
			if pod, ok := event.Object.(*corev1.Pod); ok {
				if event.Type == watch.Deleted {
					timeline.forget(pod)
				} else {
					timeline.apply(time.Now(), fmt.Sprintf("%s %s", event.Type, pod.Name), *pod)
				}
			}
		}
	}()
	t.Cleanup(timeline.finish)
	return timeline
}

// apply records pods' new versions at one moment, then measures
// availability.
func (p *podTimeline) apply(at time.Time, what string, pods ...corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range pods {
		pod := &pods[i]
		if pod.Spec.NodeName != "" {
			p.nodeOf[pod.Name] = pod.Spec.NodeName
		}
		p.current[pod.Name] = pod.DeepCopy()
	}
	p.measureLocked(at, what)
}

// forget records a pod's deletion.
func (p *podTimeline) forget(pod *corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pod.Spec.NodeName != "" {
		p.nodeOf[pod.Name] = pod.Spec.NodeName
	}
	delete(p.current, pod.Name)
	at := time.Now()
	p.goneAt[pod.Name] = at
	p.measureLocked(at, "DELETED "+pod.Name)
}

func (p *podTimeline) measureLocked(at time.Time, what string) {
	available := 0
	var states []string
	for _, name := range slices.Sorted(maps.Keys(p.current)) {
		current := p.current[name]
		state := string(current.Status.Phase)
		if current.DeletionTimestamp != nil {
			state += ",terminating"
		}
		if stacktest.PodAvailable(current) {
			available++
			state = "available"
		}
		states = append(states, fmt.Sprintf("%s:%s@%s", name, state, current.Spec.NodeName))
	}
	if unavailable := p.replicas - available; unavailable > p.maxUnavailable {
		p.maxUnavailable = unavailable
		p.worst = fmt.Sprintf("%s after %s: %s", at.Format("15:04:05.000"), what, strings.Join(states, " "))
	}
}

// finish stops the watch; further calls do nothing.
func (p *podTimeline) finish() {
	p.stopOnce.Do(p.stop)
	<-p.done
}

// mostUnavailable is the most pods unavailable at once so far, and the
// moment it first happened.
func (p *podTimeline) mostUnavailable() (int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maxUnavailable, p.worst
}

// watchError is the first error event of the watch, if any.
func (p *podTimeline) watchError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// goneFromNode reports, for the pods seen bound to node, whether all of
// them are deleted and when the last one went.
func (p *podTimeline) goneFromNode(node string) (pods int, allGone bool, lastGone time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	allGone = true
	for name, on := range p.nodeOf {
		if on != node {
			continue
		}
		pods++
		at, gone := p.goneAt[name]
		if !gone {
			allGone = false
			continue
		}
		if at.After(lastGone) {
			lastGone = at
		}
	}
	return pods, allGone, lastGone
}

// ---- The Temporal UI ----

// uiServerSettings is the part of the UI server's /api/v1/settings the
// signal dialog depends on.
type uiServerSettings struct {
	Version                string
	DisableWriteActions    bool
	WorkflowSignalDisabled bool
}

func uiSettings(ctx context.Context, t *testing.T, browser *http.Client, base string) uiServerSettings {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/settings", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatalf("GET %s/api/v1/settings: %v", base, err)
	}
	defer resp.Body.Close()
	var settings uiServerSettings
	if err := json.NewDecoder(resp.Body).Decode(&settings); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/api/v1/settings: HTTP %d, %v", base, resp.StatusCode, err)
	}
	return settings
}

// versionBefore reports whether a "major.minor.patch" version is older than
// major.minor; an unparsable version counts as current.
func versionBefore(version string, major, minor int) bool {
	var gotMajor, gotMinor int
	if _, err := fmt.Sscanf(version, "%d.%d", &gotMajor, &gotMinor); err != nil {
		return false
	}
	return gotMajor < major || (gotMajor == major && gotMinor < minor)
}

// uiPayload is a Temporal payload in the UI API's JSON: encoding and data
// base64-encoded, as the browser builds it from the "Input" box.
type uiPayload struct {
	Metadata map[string]string `json:"metadata"`
	Data     string            `json:"data"`
}

// uiSignalRequest is the body the UI posts for "Send a Signal" (UI server
// 2.22 and later put the execution in the body).
type uiSignalRequest struct {
	SignalName string `json:"signalName"`
	Input      struct {
		Payloads []uiPayload `json:"payloads"`
	} `json:"input"`
	Identity          string `json:"identity,omitempty"`
	WorkflowExecution struct {
		WorkflowID string `json:"workflowId"`
		RunID      string `json:"runId"`
	} `json:"workflowExecution"`
}

// signalThroughUI sends a signal the way the Temporal UI's "Send a Signal"
// dialog does (ui-server v2.54's bundled app, workflow-service signalWorkflow):
// a page load sets the _csrf cookie; the app reads /api/v1/settings; the
// POST to /api/v1/namespaces/NS/workflows/ID/signal/NAME echoes the cookie
// in X-CSRF-Token, with the route parameters URI-encoded twice (the app does
// so for servers from 2.23 on) and the input typed as JSON sent as one
// json/plain payload.
func signalThroughUI(t *testing.T, workflowID, runID, signalName string, input any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	base := strings.TrimSuffix(suite.stack.Temporal.UIURL(), "/")

	page, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := browser.Do(page)
	if err != nil {
		t.Fatalf("loading the UI at %s: %v", base, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	baseURL, err := url.Parse(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	var csrf string
	for _, c := range jar.Cookies(baseURL) {
		if c.Name == "_csrf" {
			csrf = c.Value
		}
	}
	if csrf == "" {
		t.Fatalf("GET %s/ set no _csrf cookie the browser would keep (cookies %v)", base, resp.Cookies())
	}

	typed, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	var body uiSignalRequest
	body.SignalName = signalName
	body.Identity = "e2e (Temporal UI)"
	body.WorkflowExecution.WorkflowID, body.WorkflowExecution.RunID = workflowID, runID
	body.Input.Payloads = []uiPayload{{
		Metadata: map[string]string{"encoding": base64.StdEncoding.EncodeToString([]byte("json/plain"))},
		Data:     base64.StdEncoding.EncodeToString(typed),
	}}
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	// The app reads the server's settings first: they say whether signals
	// are allowed at all (it hides the button otherwise) and, by version,
	// how route parameters are encoded.
	settings := uiSettings(ctx, t, browser, base)
	if settings.DisableWriteActions || settings.WorkflowSignalDisabled {
		t.Fatalf("the UI server disables signals (settings %+v): the UI offers no \"Send a Signal\"", settings)
	}
	encode := func(parameter string) string {
		// encodeURIComponent once for UI servers before 2.23, twice since.
		if versionBefore(settings.Version, 2, 23) {
			return url.PathEscape(parameter)
		}
		return url.PathEscape(url.PathEscape(parameter))
	}
	signalURL := fmt.Sprintf("%s/api/v1/namespaces/%s/workflows/%s/signal/%s", base,
		encode(suite.stack.Temporal.Namespace()), encode(workflowID), encode(signalName))
	post, err := http.NewRequestWithContext(ctx, http.MethodPost, signalURL, strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	post.Header.Set("Content-Type", "application/json")
	post.Header.Set("X-CSRF-Token", csrf)
	resp, err = browser.Do(post)
	if err != nil {
		t.Fatalf("POST %s: %v", signalURL, err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s = %d %s, want 200", signalURL, resp.StatusCode, strings.TrimSpace(string(answer)))
	}
	t.Logf("UI signal %s to %s through UI server %s: HTTP %d", signalName, workflowID, settings.Version, resp.StatusCode)
}

// TestPodTimelineCountsUnavailableReplicas checks the PDB scenario's
// measure on its own (no stack): terminating, pending and deleted replicas
// count as unavailable, and the listed pods are one moment.
func TestPodTimelineCountsUnavailableReplicas(t *testing.T) {
	now := time.Now()
	pod := func(name string, available, terminating bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: "node-a"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
		if available {
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		if terminating {
			p.DeletionTimestamp = &metav1.Time{Time: now}
		}
		return p
	}
	tests := []struct {
		name  string
		steps func(*podTimeline)
		want  int
	}{
		{name: "listed at once", want: 0, steps: func(p *podTimeline) {
			p.apply(now, "listed", pod("a", true, false), pod("b", true, false), pod("c", true, false))
		}},
		{name: "one evicted and replaced at a time", want: 1, steps: func(p *podTimeline) {
			p.apply(now, "listed", pod("a", true, false), pod("b", true, false), pod("c", true, false))
			p.apply(now, "evict a", pod("a", true, true))
			p.apply(now, "replacement d", pod("d", false, false))
			gone := pod("a", true, true)
			p.forget(&gone)
			p.apply(now, "d ready", pod("d", true, false))
			p.apply(now, "evict b", pod("b", true, true))
		}},
		{name: "two terminating at once", want: 2, steps: func(p *podTimeline) {
			p.apply(now, "listed", pod("a", true, false), pod("b", true, false), pod("c", true, false))
			p.apply(now, "evict a", pod("a", true, true))
			p.apply(now, "evict b", pod("b", true, true))
		}},
		{name: "deleted before its replacement exists", want: 2, steps: func(p *podTimeline) {
			p.apply(now, "listed", pod("a", true, false), pod("b", true, false), pod("c", true, false))
			p.apply(now, "evict a", pod("a", true, true))
			gone := pod("a", true, true)
			p.forget(&gone)
			p.apply(now, "b not ready", pod("b", false, false))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &podTimeline{replicas: 3, current: map[string]*corev1.Pod{}, nodeOf: map[string]string{}, goneAt: map[string]time.Time{}}
			tt.steps(p)
			if got, when := p.mostUnavailable(); got != tt.want {
				t.Errorf("most unavailable %d (%s), want %d", got, when, tt.want)
			}
		})
	}
}

// onOneNode is the node all pods run on; it fails the test if they are
// spread (a scenario that drains "the pods' node" and expects a
// replacement needs them together: a pod moved to another existing node
// needs no replacement).
func onOneNode(t *testing.T, pods []corev1.Pod) string {
	t.Helper()
	node := pods[0].Spec.NodeName
	for _, p := range pods {
		if p.Spec.NodeName != node {
			t.Fatalf("the scenario's pods landed on %s and %s; it wants them on one node", node, p.Spec.NodeName)
		}
	}
	return node
}
