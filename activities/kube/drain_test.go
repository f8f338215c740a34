package kube

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/flowcontrol"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/local/cluster/clustertesting"
)

// podEvents records, in the API server's order, the pod events of one
// namespace: when each pod was first seen terminating and when it was gone.
type podEvents struct {
	mu    sync.Mutex
	seq   int
	evict map[string]int // pod name -> sequence number of its first terminating event
	gone  map[string]int // pod name -> sequence number of its Deleted event
	// onChange sees every pod state, under the lock.
	onChange         func(pods map[string]*corev1.Pod)
	pods             map[string]*corev1.Pod
	firstTerminating map[string]time.Time
}

// watchPods starts recording the pods of namespace until the test ends.
func watchPods(t *testing.T, namespace string, onChange func(pods map[string]*corev1.Pod)) *podEvents {
	t.Helper()
	list, err := testClientset.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	events := &podEvents{evict: map[string]int{}, gone: map[string]int{}, onChange: onChange,
		pods: map[string]*corev1.Pod{}, firstTerminating: map[string]time.Time{}}
	for i := range list.Items {
		events.pods[list.Items[i].Name] = &list.Items[i]
	}
	watcher, err := testClientset.CoreV1().Pods(namespace).Watch(t.Context(), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(watcher.Stop)
	go func() {
		for event := range watcher.ResultChan() {
			pod, ok := event.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			events.observe(event.Type, pod)
		}
	}()
	return events
}

func (e *podEvents) observe(eventType watch.EventType, pod *corev1.Pod) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	if pod.DeletionTimestamp != nil {
		if _, seen := e.evict[pod.Name]; !seen {
			e.evict[pod.Name] = e.seq
			e.firstTerminating[pod.Name] = time.Now()
		}
	}
	if eventType == watch.Deleted {
		e.gone[pod.Name] = e.seq
		delete(e.pods, pod.Name)
	} else {
		e.pods[pod.Name] = pod
	}
	if e.onChange != nil {
		e.onChange(e.pods)
	}
}

func (e *podEvents) goneCount(names []string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	count := 0
	for _, name := range names {
		if _, ok := e.gone[name]; ok {
			count++
		}
	}
	return count
}

// lastGone and firstEvicted are sequence numbers over a group of pods.
func (e *podEvents) lastGone(names []string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	last := 0
	for _, name := range names {
		last = max(last, e.gone[name])
	}
	return last
}

func (e *podEvents) firstEvicted(names []string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	first := -1
	for _, name := range names {
		if seq, ok := e.evict[name]; ok && (first < 0 || seq < first) {
			first = seq
		}
	}
	return first
}

// daemonSet runs one pod on node (selected by its test label).
func daemonSet(namespace, name, node, priorityClass string) *appsv1.DaemonSet {
	labels := map[string]string{"daemon": name}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{"millwright.dev/test-node": node},
					PriorityClassName:             priorityClass,
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers:                    []corev1.Container{{Name: "agent", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
}

// podsOf returns the names of the pods of namespace whose labels match.
func podsOf(t *testing.T, namespace, selector string) []string {
	t.Helper()
	list, err := testClientset.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, pod := range list.Items {
		names = append(names, pod.Name)
	}
	return names
}

func progressDetail(detail any) (activities.DrainProgress, bool) {
	progress, ok := detail.(activities.DrainProgress)
	return progress, ok
}

func TestDrainEvictsWorkloadsThenDaemonSetsThenCriticalPods(t *testing.T) {
	h := newHarness(t)
	node := createNode(t, newNode("order").build())
	waitNodeReady(t, node.Name)
	namespace := clustertesting.CreateNamespace(t, testClientset, "order")

	for _, ds := range []*appsv1.DaemonSet{
		daemonSet(namespace, "agent", node.Name, ""),
		daemonSet(namespace, "critical-agent", node.Name, systemNodeCritical),
	} {
		if _, err := testClientset.AppsV1().DaemonSets(namespace).Create(t.Context(), ds, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createPod(t, newPod(namespace, "web-1", node.Name).build())
	createPod(t, newPod(namespace, "web-2", node.Name).build())
	createPod(t, newPod(namespace, "dns", node.Name).priorityClass(systemClusterCritical).build())
	waitPodsRunning(t, namespace, 5)

	workloads := []string{"web-1", "web-2"}
	daemons := podsOf(t, namespace, "daemon=agent")
	critical := append(podsOf(t, namespace, "daemon=critical-agent"), "dns")
	events := watchPods(t, namespace, nil)

	resp, err := execute[activities.DrainResponse](h, nil, h.activities.Drain,
		activities.DrainRequest{NodeName: node.Name, Reason: "test", Voluntary: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Evicted != 5 || resp.Deleted != 0 {
		t.Errorf("response = %+v, want 5 evicted, 0 deleted", resp)
	}
	all := slices.Concat(workloads, daemons, critical)
	clustertesting.Eventually(t, 30*time.Second, "every pod's Deleted event watched", func(context.Context) (bool, error) {
		return events.goneCount(all) == len(all), nil
	})
	if gone, evicted := events.lastGone(workloads), events.firstEvicted(daemons); evicted < gone {
		t.Errorf("a DaemonSet pod was evicted (event %d) before the last workload pod was gone (event %d)", evicted, gone)
	}
	if gone, evicted := events.lastGone(daemons), events.firstEvicted(critical); evicted < gone {
		t.Errorf("a critical pod was evicted (event %d) before the last non-critical DaemonSet pod was gone (event %d)", evicted, gone)
	}

	drained := getNode(t, node.Name)
	if !drained.Spec.Unschedulable || !hasTaint(drained.Spec.Taints, disruptedTaint) {
		t.Errorf("node not cordoned and tainted: unschedulable=%v taints=%v", drained.Spec.Unschedulable, drained.Spec.Taints)
	}
	if !h.logged("Cordoned node", node.Name) {
		t.Error(`no "Cordoned node" log line naming the node`)
	}
	stages := map[activities.DrainStage]bool{}
	evictedCounts := map[int]bool{}
	for _, detail := range h.heartbeats.all() {
		if progress, ok := progressDetail(detail); ok {
			stages[progress.Stage] = true
			evictedCounts[progress.Evicted] = true
		}
	}
	// Regression (issue 10, defect 6): one heartbeat per pass let a node
	// with many pods outlast the 30 s heartbeat timeout mid-pass.
	for evicted := 1; evicted <= 5; evicted++ {
		if !evictedCounts[evicted] {
			t.Errorf("no heartbeat after eviction %d: heartbeats only per pass (saw evicted counts %v)", evicted, evictedCounts)
		}
	}
	for _, want := range []activities.DrainStage{activities.DrainStageEvictNonCritical, activities.DrainStageEvictDaemonSet,
		activities.DrainStageEvictCritical, activities.DrainStageDone} {
		if !stages[want] {
			t.Errorf("no heartbeat in stage %s (saw %v)", want, stages)
		}
	}
}

// Three replicas under a PodDisruptionBudget of maxUnavailable 1: the drain
// must wait for each replacement to be Ready before the next eviction, so no
// moment has fewer than two healthy replicas.
//
// The spare node stays cordoned until the drain has reported an eviction the
// budget refused: with somewhere to go at once, a fast replacement could be
// Ready between two evictions and the refusal would depend on timing.
// TestDrainEvictsTheLargestPodsFirst: within a group, pods go largest
// first (CPU, then memory), the order the consolidation plan placed them
// in, so kube-scheduler gives the large ones the room the plan kept.
func TestDrainEvictsTheLargestPodsFirst(t *testing.T) {
	h := newHarness(t)
	node := createNode(t, newNode("size").build())
	waitNodeReady(t, node.Name)
	namespace := clustertesting.CreateNamespace(t, testClientset, "size")
	for _, p := range []struct{ name, cpu, memory string }{
		{"a-small", "100m", "128Mi"}, {"b-large", "2", "1Gi"}, {"c-medium", "500m", "4Gi"}, {"d-medium-less-memory", "500m", "1Gi"},
	} {
		createPod(t, newPod(namespace, p.name, node.Name).requests(p.cpu, p.memory).build())
	}
	waitPodsRunning(t, namespace, 4)
	events := watchPods(t, namespace, nil)

	if _, err := execute[activities.DrainResponse](h, nil, h.activities.Drain,
		activities.DrainRequest{NodeName: node.Name, Reason: "test", Voluntary: true}); err != nil {
		t.Fatal(err)
	}
	want := []string{"b-large", "c-medium", "d-medium-less-memory", "a-small"}
	for i := 1; i < len(want); i++ {
		if before, after := events.firstEvicted(want[i-1:i]), events.firstEvicted(want[i:i+1]); before < 0 || after < 0 || before > after {
			t.Errorf("%s evicted at event %d, %s at %d: want the eviction order %v", want[i-1], before, want[i], after, want)
		}
	}
}

func TestDrainNeverViolatesAPodDisruptionBudget(t *testing.T) {
	h := newHarness(t)
	group := clustertesting.UniqueName("pdb")
	draining := createNode(t, newNode("pdb-a").label("millwright.dev/test-pdb", group).build())
	spare := createNode(t, newNode("pdb-b").label("millwright.dev/test-pdb", group).unschedulable().build())
	waitNodeReady(t, draining.Name)
	waitNodeReady(t, spare.Name)
	namespace := clustertesting.CreateNamespace(t, testClientset, "pdb")

	labels := map[string]string{"app": "web"}
	replicaSet := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "web"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{"millwright.dev/test-pdb": group},
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers:                    []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
	if _, err := testClientset.AppsV1().ReplicaSets(namespace).Create(t.Context(), replicaSet, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodsRunning(t, namespace, 3)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: labels},
		},
	}
	if _, err := testClientset.PolicyV1().PodDisruptionBudgets(namespace).Create(t.Context(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clustertesting.Eventually(t, time.Minute, "PDB allows one disruption", func(ctx context.Context) (bool, error) {
		live, err := testClientset.PolicyV1().PodDisruptionBudgets(namespace).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return live.Status.ObservedGeneration == live.Generation && live.Status.CurrentHealthy == 3 && live.Status.DisruptionsAllowed == 1, nil
	})
	refusedByBudget := func(detail any) bool {
		progress, ok := progressDetail(detail)
		return ok && strings.Contains(strings.Join(progress.Blocked, ","), "PodDisruptionBudget")
	}
	uncordoned := make(chan error, 1)
	go func() {
		// Uncordon even when no refusal comes, so a failing drain still ends.
		h.heartbeats.await(2*time.Minute, refusedByBudget)
		_, err := testClientset.CoreV1().Nodes().Patch(context.Background(), spare.Name, types.MergePatchType,
			[]byte(`{"spec":{"unschedulable":false}}`), metav1.PatchOptions{})
		uncordoned <- err
	}()

	var mu sync.Mutex
	fewestHealthy := 3
	watchPods(t, namespace, func(pods map[string]*corev1.Pod) {
		healthy := 0
		for _, pod := range pods {
			if pod.DeletionTimestamp == nil && podIsReady(pod) {
				healthy++
			}
		}
		mu.Lock()
		fewestHealthy = min(fewestHealthy, healthy)
		mu.Unlock()
	})

	resp, err := execute[activities.DrainResponse](h, nil, h.activities.Drain,
		activities.DrainRequest{NodeName: draining.Name, Reason: "test", Voluntary: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-uncordoned; err != nil {
		t.Fatalf("uncordon the spare node: %v", err)
	}
	if resp.Evicted != 3 {
		t.Errorf("Evicted = %d, want 3", resp.Evicted)
	}
	mu.Lock()
	if fewestHealthy < 2 {
		t.Errorf("only %d healthy replica(s) at one point: the PDB (maxUnavailable 1 of 3) was violated", fewestHealthy)
	}
	mu.Unlock()
	refused := false
	for _, detail := range h.heartbeats.all() {
		if refusedByBudget(detail) {
			refused = true
		}
	}
	if !refused {
		t.Error("no heartbeat reported an eviction refused by the PodDisruptionBudget")
	}
}

func podIsReady(pod *corev1.Pod) bool {
	for _, condition := range pod.Status.Conditions {
		if condition.Type == corev1.PodReady {
			return condition.Status == corev1.ConditionTrue
		}
	}
	return false
}

// On a voluntary drain a do-not-disrupt pod is reported as blocked and left
// alone until the deadline is its grace period away; then it is deleted.
func TestDrainDeletesADoNotDisruptPodOnlyAtTheDeadline(t *testing.T) {
	h := newHarness(t)
	node := createNode(t, newNode("dnd").build())
	waitNodeReady(t, node.Name)
	namespace := clustertesting.CreateNamespace(t, testClientset, "dnd")
	createPod(t, newPod(namespace, "batch", node.Name).annotate(activities.DoNotDisruptAnnotation, "true").gracePeriod(1).build())
	createPod(t, newPod(namespace, "web", node.Name).build())
	waitPodsRunning(t, namespace, 2)
	events := watchPods(t, namespace, nil)

	deadline := time.Now().Add(6 * time.Second)
	resp, err := execute[activities.DrainResponse](h, nil, h.activities.Drain,
		activities.DrainRequest{NodeName: node.Name, Reason: "test", Voluntary: true, Deadline: deadline})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Evicted != 1 || resp.Deleted != 1 {
		t.Errorf("response = %+v, want web evicted and batch deleted", resp)
	}
	blocked := false
	for _, detail := range h.heartbeats.all() {
		if progress, ok := progressDetail(detail); ok && slices.ContainsFunc(progress.Blocked, func(b string) bool {
			return strings.HasPrefix(b, namespace+"/batch") && strings.Contains(b, activities.DoNotDisruptAnnotation)
		}) {
			blocked = true
		}
	}
	if !blocked {
		t.Error("no heartbeat reported batch as blocked by do-not-disrupt")
	}
	clustertesting.Eventually(t, 30*time.Second, "batch's termination watched", func(context.Context) (bool, error) {
		events.mu.Lock()
		defer events.mu.Unlock()
		_, ok := events.firstTerminating["batch"]
		return ok, nil
	})
	events.mu.Lock()
	terminatingAt := events.firstTerminating["batch"]
	events.mu.Unlock()
	if earliest := deadline.Add(-time.Second); terminatingAt.Before(earliest) {
		t.Errorf("batch deleted %s before the deadline minus its 1s grace period", earliest.Sub(terminatingAt))
	}
}

func TestInvoluntaryDrainEvictsDoNotDisruptPods(t *testing.T) {
	h := newHarness(t)
	node := createNode(t, newNode("spot").build())
	waitNodeReady(t, node.Name)
	namespace := clustertesting.CreateNamespace(t, testClientset, "spot")
	createPod(t, newPod(namespace, "batch", node.Name).annotate(activities.DoNotDisruptAnnotation, "true").build())
	waitPodsRunning(t, namespace, 1)

	resp, err := execute[activities.DrainResponse](h, nil, h.activities.Drain,
		activities.DrainRequest{NodeName: node.Name, Reason: "spot interruption", Voluntary: false})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Evicted != 1 || resp.Deleted != 0 {
		t.Errorf("response = %+v, want the do-not-disrupt pod evicted", resp)
	}
}

// A retried Drain starts from the progress the previous attempt heartbeated:
// the counters carry on, and the cordon the previous attempt made is not
// written again.
func TestDrainResumesFromHeartbeatDetails(t *testing.T) {
	h := newHarness(t)
	node := createNode(t, newNode("resume").taint(activities.DisruptedTaintKey, corev1.TaintEffectNoSchedule).unschedulable().build())
	waitNodeReady(t, node.Name)
	namespace := clustertesting.CreateNamespace(t, testClientset, "resume")
	createPod(t, newPod(namespace, "web", node.Name).build())
	waitPodsRunning(t, namespace, 1)

	previous := activities.DrainProgress{Stage: activities.DrainStageEvictNonCritical, Evicted: 4, Deleted: 1,
		Blocked: []string{"other/pod (PodDisruptionBudget)"}}
	resp, err := execute[activities.DrainResponse](h, previous, h.activities.Drain,
		activities.DrainRequest{NodeName: node.Name, Reason: "test", Voluntary: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Evicted != 5 || resp.Deleted != 1 {
		t.Errorf("response = %+v, want 5 evicted (4 before + 1) and 1 deleted (before)", resp)
	}
	if !h.logged("Resuming drain", node.Name) {
		t.Error(`no "Resuming drain" log line`)
	}
	if h.logged("Cordoned node", node.Name) {
		t.Error("the resumed drain cordoned the node again")
	}
	first, ok := progressDetail(h.heartbeats.all()[0])
	if !ok || first.Evicted != 4 {
		t.Errorf("first heartbeat = %+v, want the previous attempt's counters", h.heartbeats.all()[0])
	}
}

// A pod bound to the Node just after a pass found it empty (a scheduler
// whose cache missed the cordon, seen after a kube-apiserver restart in the
// chaos suite) is evicted: one empty pass does not end the drain, a second
// one does. Before, Drain returned at the first empty pass, the instance was
// terminated with the late pod on it and its PDB fell below minAvailable.
func TestDrainConfirmsTheNodeEmptyOnASecondPass(t *testing.T) {
	h := newHarness(t)
	node := createNode(t, newNode("late-bind").build())
	waitNodeReady(t, node.Name)
	namespace := clustertesting.CreateNamespace(t, testClientset, "late-bind")
	if _, err := h.activities.cordon(t.Context(), activities.DrainRequest{NodeName: node.Name, Reason: "test"}, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	drain := &nodeDrain{
		Activities: h.activities,
		req:        activities.DrainRequest{NodeName: node.Name, Reason: "test", Voluntary: true},
		logger:     zap.NewNop(),
		progress:   activities.DrainProgress{Stage: activities.DrainStageEvictNonCritical},
		backoff:    flowcontrol.NewBackOff(time.Second, time.Second),
	}
	if done, err := drain.step(t.Context()); err != nil || done {
		t.Fatalf("first empty pass: done = %v, err = %v; want not done until a second pass agrees", done, err)
	}
	createPod(t, newPod(namespace, "bound-late", node.Name).build())
	clustertesting.Eventually(t, 30*time.Second, "the late pod evicted and the drain done", func(ctx context.Context) (bool, error) {
		return drain.step(ctx)
	})
	if drain.progress.Evicted != 1 {
		t.Errorf("evicted = %d, want the late pod evicted (1)", drain.progress.Evicted)
	}
}

// TestDrainConfirmsAnEmptyNodeAfterTheConfirmationWindow: the look that
// confirms an empty Node comes DrainConfirmation after the first, not a
// whole poll interval later (an empty Node waiting for it still counts
// against its pool's budget, so this wait sets the pace of a scale-down);
// within a minute of API server trouble, when kube-scheduler's cache may be
// stale, it comes a poll interval later.
func TestDrainConfirmsAnEmptyNodeAfterTheConfirmationWindow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trouble bool
		want    time.Duration
	}{
		{name: "healthy API server", want: time.Second},
		{name: "API server trouble just now", trouble: true, want: time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := clocktesting.NewFakeClock(time.Now())
			h := newHarness(t, withClock(fake), func(cfg *Config) {
				cfg.PollInterval, cfg.DrainConfirmation = time.Minute, time.Second
			})
			if tc.trouble {
				h.activities.noteAPIServerTrouble()
			}
			node := createNode(t, newNode("confirm-window").build())
			waitNodeReady(t, node.Name)
			done := make(chan error, 1)
			go func() {
				_, err := h.activities.Drain(t.Context(), activities.DrainRequest{NodeName: node.Name, Reason: "test", Voluntary: true})
				done <- err
			}()
			waited := time.Duration(0)
			for _, step := range []time.Duration{time.Second, time.Minute - time.Second} {
				// The drain waits for its next look (after its first, empty, pass).
				clustertesting.Eventually(t, 30*time.Second, "the drain waiting for its next look", func(context.Context) (bool, error) {
					return fake.HasWaiters(), nil
				})
				select {
				case err := <-done:
					t.Fatalf("drain returned %s after its first empty pass (err %v); want its second look after %s", waited, err, tc.want)
				default:
				}
				fake.Step(step)
				waited += step
				if waited < tc.want {
					continue
				}
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
					return
				case <-time.After(30 * time.Second):
					t.Fatalf("drain not done %s after its first empty pass", waited)
				}
			}
		})
	}
}

func TestNewRejectsANegativeDrainConfirmation(t *testing.T) {
	offline := offlineHarness(t).activities
	_, err := New(Config{Clientset: offline.clientset, Dynamic: offline.dynamic, DrainConfirmation: -time.Second})
	if !IsInvalidConfig(err) || !strings.Contains(err.Error(), "DrainConfirmation") {
		t.Fatalf("err = %v, want an InvalidConfigError naming DrainConfirmation", err)
	}
}

func TestDrainSkipsPodsThatCannotOrNeedNotBeEvicted(t *testing.T) {
	now := time.Now()
	daemon := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "1", Controller: ptr.To(true)}
	tests := []struct {
		name      string
		pod       *corev1.Pod
		wantSkip  bool
		wantGroup int
	}{
		{name: "workload", pod: newPod("ns", "web", "n").build(), wantGroup: 0},
		{name: "DaemonSet pod", pod: withOwner(newPod("ns", "agent", "n").build(), daemon), wantGroup: 1},
		{name: "critical DaemonSet pod", pod: withOwner(newPod("ns", "cni", "n").priorityClass(systemNodeCritical).build(), daemon), wantGroup: 2},
		{name: "critical workload", pod: newPod("ns", "dns", "n").priorityClass(systemClusterCritical).build(), wantGroup: 2},
		{name: "mirror pod", pod: newPod("ns", "etcd", "n").annotate(corev1.MirrorPodAnnotationKey, "x").build(), wantSkip: true},
		{name: "succeeded pod", pod: withPhase(newPod("ns", "job", "n").build(), corev1.PodSucceeded), wantSkip: true},
		{name: "failed pod", pod: withPhase(newPod("ns", "job", "n").build(), corev1.PodFailed), wantSkip: true},
		{name: "pod tolerating every taint", pod: withTolerations(newPod("ns", "logs", "n").build(),
			corev1.Toleration{Operator: corev1.TolerationOpExists}), wantSkip: true},
		{name: "pod tolerating the disrupted taint", pod: withTolerations(newPod("ns", "x", "n").build(),
			corev1.Toleration{Key: activities.DisruptedTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}), wantSkip: true},
		{name: "pod tolerating only NoExecute taints", pod: withTolerations(newPod("ns", "y", "n").build(),
			corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}), wantGroup: 0},
		{name: "pod stuck terminating", pod: withDeletion(newPod("ns", "z", "n").build(), now.Add(-2*time.Minute)), wantSkip: true},
		{name: "pod terminating on time", pod: withDeletion(newPod("ns", "z", "n").build(), now.Add(10*time.Second)), wantGroup: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			skip := isMirrorPod(tt.pod) || isTerminal(tt.pod) || toleratesDisruption(tt.pod) || isStuckTerminating(tt.pod, now)
			if skip != tt.wantSkip {
				t.Fatalf("skipped = %v, want %v", skip, tt.wantSkip)
			}
			if !skip {
				if group := drainGroupOf(tt.pod); group != tt.wantGroup {
					t.Errorf("group = %s, want %s", drainGroups[group], drainGroups[tt.wantGroup])
				}
			}
		})
	}
}

func withOwner(pod *corev1.Pod, owner metav1.OwnerReference) *corev1.Pod {
	pod.OwnerReferences = append(pod.OwnerReferences, owner)
	return pod
}

func withPhase(pod *corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
	pod.Status.Phase = phase
	return pod
}

func withTolerations(pod *corev1.Pod, tolerations ...corev1.Toleration) *corev1.Pod {
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, tolerations...)
	return pod
}

func withDeletion(pod *corev1.Pod, at time.Time) *corev1.Pod {
	pod.DeletionTimestamp = &metav1.Time{Time: at}
	return pod
}

// TestDrainCountsTheConfirmationFromTheCommandsTaint: when the disruption
// command tainted the Node before the drain began
// (DrainRequest.UnschedulableSince, the taint still there), the look that
// confirms the Node empty comes DrainConfirmation after the taint, not after
// the drain's first look; at once if that has passed. Without the taint on
// the Node the window counts from the first look, as before.
func TestDrainCountsTheConfirmationFromTheCommandsTaint(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tainted bool
		ago     time.Duration // UnschedulableSince before the drain
		want    time.Duration // after the first empty look
	}{
		{name: "tainted 400ms ago", tainted: true, ago: 400 * time.Millisecond, want: 600 * time.Millisecond},
		{name: "tainted long ago", tainted: true, ago: 10 * time.Minute, want: 0},
		{name: "the taint was taken off", ago: 400 * time.Millisecond, want: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := clocktesting.NewFakeClock(time.Now())
			h := newHarness(t, withClock(fake), func(cfg *Config) {
				cfg.PollInterval, cfg.DrainConfirmation = time.Minute, time.Second
			})
			b := newNode("confirm-from-taint")
			if tc.tainted {
				b = b.taint(activities.DisruptedTaintKey, corev1.TaintEffectNoSchedule)
			}
			node := createNode(t, b.build())
			waitNodeReady(t, node.Name)
			done := make(chan error, 1)
			go func() {
				_, err := h.activities.Drain(t.Context(), activities.DrainRequest{NodeName: node.Name, Reason: "test", Voluntary: true,
					UnschedulableSince: fake.Now().Add(-tc.ago)})
				done <- err
			}()
			if tc.want == 0 {
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("drain not done at once though the window since the taint had passed")
				}
				return
			}
			clustertesting.Eventually(t, 30*time.Second, "the drain waiting for its next look", func(context.Context) (bool, error) {
				return fake.HasWaiters(), nil
			})
			fake.Step(tc.want - 100*time.Millisecond)
			select {
			case err := <-done:
				t.Fatalf("drain returned %s after its first empty look (err %v), want %s", tc.want-100*time.Millisecond, err, tc.want)
			default:
			}
			fake.Step(100 * time.Millisecond)
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("drain not done %s after its first empty look", tc.want)
			}
		})
	}
}
