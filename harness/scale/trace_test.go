package scale

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/harness/driver"
	"github.com/millwright/millwright/local/stack/stacktest"
	"github.com/millwright/millwright/workflows"
)

// podTracker follows the scenario's pods through a watch (instead of
// listing thousands of pods twice a second on the loaded apiserver) and
// records when the scheduler first marked each one unschedulable: the
// condition's own time, set by the scheduler, so the tracker's lag does not
// count.
type podTracker struct {
	stop chan struct{}

	mu            sync.Mutex
	lastCreated   time.Time
	seen          map[types.UID]bool
	available     map[types.UID]bool
	unschedulable map[types.UID]time.Time
	// leftAt is when each pod was first seen terminating or deleted.
	leftAt map[types.UID]time.Time
}

func startPodTracker(s *driver.Stack) (*podTracker, error) {
	t := &podTracker{
		stop:          make(chan struct{}),
		seen:          map[types.UID]bool{},
		available:     map[types.UID]bool{},
		unschedulable: map[types.UID]time.Time{},
		leftAt:        map[types.UID]time.Time{},
	}
	factory := informers.NewSharedInformerFactoryWithOptions(s.Kube, 0, informers.WithNamespace(namespace))
	informer := factory.Core().V1().Pods().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.observe,
		UpdateFunc: func(_, obj any) { t.observe(obj) },
		DeleteFunc: t.forget,
	}); err != nil {
		return nil, err
	}
	factory.Start(t.stop)
	for _, synced := range factory.WaitForCacheSync(t.stop) {
		if !synced {
			return nil, fmt.Errorf("pod tracker: cache did not sync")
		}
	}
	return t, nil
}

func (t *podTracker) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seen[pod.UID] = true
	if created := pod.CreationTimestamp.Time; created.After(t.lastCreated) {
		t.lastCreated = created
	}
	t.available[pod.UID] = stacktest.PodAvailable(pod)
	if _, known := t.leftAt[pod.UID]; !known && pod.DeletionTimestamp != nil {
		t.leftAt[pod.UID] = time.Now()
	}
	if _, known := t.unschedulable[pod.UID]; !known {
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				t.unschedulable[pod.UID] = c.LastTransitionTime.Time
			}
		}
	}
}

func (t *podTracker) forget(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		t.mu.Lock()
		delete(t.seen, pod.UID)
		delete(t.available, pod.UID)
		if _, known := t.leftAt[pod.UID]; !known {
			t.leftAt[pod.UID] = time.Now()
		}
		t.mu.Unlock()
	}
}

// counts are the pods that exist and those Running and Ready, and the
// creation time of the newest.
func (t *podTracker) counts() (existing, running int, lastCreated time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ok := range t.available {
		if ok {
			running++
		}
	}
	return len(t.seen), running, t.lastCreated
}

// leavingSince is when pod was first seen terminating or deleted.
func (t *podTracker) leavingSince(pod types.UID) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.leftAt[pod]
	return at, ok
}

// unschedulableAt is when the scheduler first marked pod unschedulable.
func (t *podTracker) unschedulableAt(pod types.UID) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.unschedulable[pod]
	return at, ok
}

func (t *podTracker) close() { close(t.stop) }

// provisionerProfile is where the provisioner's time went: its batches'
// Plan and StartNodeWorkflows activities (scheduled → completed) and the
// signals it received, over every run.
type provisionerProfile struct {
	plans, starts []time.Duration
	signals       map[string]int
	batches       []batchTrace
	pending       []pendingSignal
	// plannedAt is, per pod key, when each Plan that put it on a new node
	// was scheduled and the node claim that plan named.
	plannedAt map[string][]plannedPod
}

// plannedPod is one Plan that put a pod on a new node.
type plannedPod struct {
	at    time.Time
	claim string
}

// pendingSignal is one podsPending signal the provisioner received.
type pendingSignal struct {
	at   time.Time
	keys int
}

// batchTrace is one Plan activity of the provisioner: when it was
// scheduled, what it was asked and what it answered.
type batchTrace struct {
	at                        time.Time
	took                      time.Duration
	signalled                 int
	allPending                bool
	considered, plans, placed int
	deferred, unschedulable   int
}

// timeline is, by window of width after start, the podsPending signals the
// provisioner received and its batches: how many, the pods they were
// signalled and considered, the node plans they returned.
func (p provisionerProfile) timeline(start time.Time, width time.Duration) string {
	type window struct {
		signals, keys                                                    int
		batches, resyncs, signalled, considered, plans, placed, deferred int
		took                                                             time.Duration
	}
	windows := map[time.Duration]*window{}
	at := func(t time.Time) *window {
		k := t.Sub(start) / width
		if windows[k] == nil {
			windows[k] = &window{}
		}
		return windows[k]
	}
	for _, ps := range p.pending {
		w := at(ps.at)
		w.signals++
		w.keys += ps.keys
	}
	for _, bt := range p.batches {
		w := at(bt.at)
		w.batches++
		w.signalled += bt.signalled
		w.considered += bt.considered
		w.plans += bt.plans
		w.placed += bt.placed
		w.deferred += bt.deferred
		w.took += bt.took
		if bt.allPending {
			w.resyncs++
		}
	}
	keys := slices.Collect(maps.Keys(windows))
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		w := windows[k]
		fmt.Fprintf(&b, "    +%3ds  %4d podsPending signals (%4d keys); %2d batches (%d resync), %4d pods signalled, %4d considered, %3d plans, %4d on existing/in-flight, %4d deferred, Plan %s\n",
			int((k * width).Seconds()), w.signals, w.keys, w.batches, w.resyncs, w.signalled, w.considered, w.plans, w.placed, w.deferred, w.took.Round(100*time.Millisecond))
	}
	return b.String()
}

func (p provisionerProfile) String() string {
	return fmt.Sprintf("%d batches, Plan p50 %s max %s (total %s), StartNodeWorkflows p50 %s max %s (total %s); signals %s",
		len(p.plans), percentile(p.plans, 50), percentile(p.plans, 100), sum(p.plans).Round(100*time.Millisecond),
		percentile(p.starts, 50), percentile(p.starts, 100), sum(p.starts).Round(100*time.Millisecond), p.signalsString())
}

func (p provisionerProfile) signalsString() string {
	var names []string
	for name, n := range p.signals {
		names = append(names, fmt.Sprintf("%s %d", name, n))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func sum(ds []time.Duration) time.Duration {
	var total time.Duration
	for _, d := range ds {
		total += d
	}
	return total
}

// profileWorkflow reads every event of one run and adds its activities'
// durations and its signals to p.
func profileWorkflow(ctx context.Context, s *driver.Stack, workflowID, runID string, p *provisionerProfile) {
	scheduled := map[int64]*historypb.HistoryEvent{}
	iter := s.Temporal.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		event, err := iter.Next()
		if err != nil {
			return
		}
		switch event.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled[event.GetEventId()] = event
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			from, ok := scheduled[event.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]
			if !ok {
				continue
			}
			took := event.GetEventTime().AsTime().Sub(from.GetEventTime().AsTime())
			switch from.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() {
			case "Plan":
				p.plans = append(p.plans, took)
				p.batches = append(p.batches, traceBatch(from, event, took))
				p.notePlanned(from, event)
			case "StartNodeWorkflows":
				p.starts = append(p.starts, took)
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			if p.signals == nil {
				p.signals = map[string]int{}
			}
			attrs := event.GetWorkflowExecutionSignaledEventAttributes()
			p.signals[attrs.GetSignalName()]++
			if attrs.GetSignalName() == workflows.SignalPodsPending {
				var pending workflows.PodsPending
				if in := attrs.GetInput().GetPayloads(); len(in) > 0 && converter.GetDefaultDataConverter().FromPayload(in[0], &pending) == nil {
					p.pending = append(p.pending, pendingSignal{at: event.GetEventTime().AsTime(), keys: len(pending.PodKeys)})
				}
			}
		}
	}
}

// traceBatch decodes a Plan activity's request and response.
func traceBatch(scheduled, completed *historypb.HistoryEvent, took time.Duration) batchTrace {
	bt := batchTrace{at: scheduled.GetEventTime().AsTime(), took: took}
	var req activities.PlanRequest
	if in := scheduled.GetActivityTaskScheduledEventAttributes().GetInput().GetPayloads(); len(in) > 0 &&
		converter.GetDefaultDataConverter().FromPayload(in[0], &req) == nil {
		bt.signalled, bt.allPending = len(req.PodKeys), req.AllPending
	}
	var resp activities.PlanResponse
	if out := completed.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads(); len(out) > 0 &&
		converter.GetDefaultDataConverter().FromPayload(out[0], &resp) == nil {
		bt.considered, bt.plans, bt.placed = resp.PodsConsidered, len(resp.Plans), resp.PlacedOnExisting
		bt.deferred, bt.unschedulable = len(resp.Deferred), max(len(resp.Unschedulable), resp.UnschedulableCount)
	}
	return bt
}

// notePlanned records the pods a Plan activity put on new nodes.
func (p *provisionerProfile) notePlanned(scheduled, completed *historypb.HistoryEvent) {
	var resp activities.PlanResponse
	out := completed.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads()
	if len(out) == 0 || converter.GetDefaultDataConverter().FromPayload(out[0], &resp) != nil {
		return
	}
	if p.plannedAt == nil {
		p.plannedAt = map[string][]plannedPod{}
	}
	at := scheduled.GetEventTime().AsTime()
	for _, plan := range resp.Plans {
		for _, key := range plan.PodKeys {
			p.plannedAt[key] = append(p.plannedAt[key], plannedPod{at: at, claim: plan.NodeClaimName})
		}
	}
}

// latePod is a pod whose node's CreateFleet came later than the target
// after the pod was created.
type latePod struct {
	key                    string
	created, unschedulable time.Time
	toFleet                time.Duration
}

// tailDiagnosis sorts the late pods by what the provisioner did with them:
// planned on a new node only late (first plan > 10 s after the pod was
// marked unschedulable), planned more than once (their first node's room
// went to other pods), or never planned on a new node (placed each time on
// existing or in-flight room, and landing on a node launched for others).
func (p provisionerProfile) tailDiagnosis(late []latePod) string {
	if len(late) == 0 {
		return "    none\n"
	}
	var once, replanned, never, firstLate int
	var firstDelay []time.Duration
	for _, lp := range late {
		plans := p.plannedAt[lp.key]
		switch {
		case len(plans) == 0:
			never++
			continue
		case len(plans) == 1:
			once++
		default:
			replanned++
		}
		from := lp.created
		if !lp.unschedulable.IsZero() {
			from = lp.unschedulable
		}
		d := plans[0].at.Sub(from)
		firstDelay = append(firstDelay, d)
		if d > 10*time.Second {
			firstLate++
		}
	}
	return fmt.Sprintf("    %d pods: %d planned on a new node once, %d planned more than once, %d never (placed on existing/in-flight room each batch); "+
		"of the planned, first plan after marked unschedulable p50 %s, max %s (%d over 10 s)\n",
		len(late), once, replanned, never, percentile(firstDelay, 50), percentile(firstDelay, 100), firstLate)
}

// taskLatency is the workers' summed Temporal SDK histogram for one
// schedule-to-start latency (workflow tasks or activities): how long tasks
// waited in the task queue for a worker's poller.
type taskLatency struct{ sum, count float64 }

func (l taskLatency) minus(before taskLatency) taskLatency {
	return taskLatency{sum: l.sum - before.sum, count: l.count - before.count}
}

func (l taskLatency) String() string {
	if l.count <= 0 {
		return "none"
	}
	return fmt.Sprintf("mean %s over %.0f", time.Duration(l.sum/l.count*float64(time.Second)).Round(time.Millisecond), l.count)
}

// Schedule-to-start histograms of the Temporal SDK (tally's Prometheus
// names).
const (
	workflowTaskScheduleToStart = "temporal_workflow_task_schedule_to_start_latency"
	activityScheduleToStart     = "temporal_activity_schedule_to_start_latency"
)

// scrapeTaskLatency sums name's histogram (_sum, _count; every label set)
// over the workers' /metrics.
func scrapeTaskLatency(s *driver.Stack, name string) taskLatency {
	return scrapeLatencyBy(s, name)[""]
}

// activityExecution is the SDK's histogram of activity execution time, by
// activity_type.
const activityExecution = "temporal_activity_execution_latency"

// kubeAPIDuration is the workers' histogram of Kubernetes API requests, by
// verb, resource and the calling activity.
const kubeAPIDuration = "millwright_kube_api_duration_seconds"

// latencyBy is one histogram summed per combination of some labels' values.
type latencyBy map[string]taskLatency

func (l latencyBy) minus(before latencyBy) latencyBy {
	out := latencyBy{}
	for k, v := range l {
		if d := v.minus(before[k]); d.count > 0 {
			out[k] = d
		}
	}
	return out
}

// String lists the label values by total time spent, most first.
func (l latencyBy) String() string { return l.top(0) }

// top lists the n label values with the most time spent (every one when n
// is 0), most first.
func (l latencyBy) top(n int) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return l[keys[i]].sum > l[keys[j]].sum })
	if n > 0 && len(keys) > n {
		keys = keys[:n]
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + l[k].String()
	}
	return strings.Join(parts, "; ")
}

// scrapeLatencyBy sums name's histogram (_sum, _count) over the workers'
// /metrics per combination of the labels' values (joined by spaces; no
// labels sums every label set under "").
func scrapeLatencyBy(s *driver.Stack, name string, labels ...string) latencyBy {
	totals := latencyBy{}
	for _, addr := range s.MetricsAddrs {
		c := http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get("http://" + addr + "/metrics")
		if err != nil {
			continue
		}
		scanner := bufio.NewScanner(resp.Body)
		scanner.Buffer(make([]byte, 64*1024), 4*1024*1024)
		for scanner.Scan() {
			line := scanner.Text()
			if !strings.HasPrefix(line, name) {
				continue
			}
			metric, value, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			key := ""
			if i := strings.IndexByte(metric, '{'); i >= 0 {
				values := make([]string, len(labels))
				for j, label := range labels {
					values[j] = labelValue(metric[i:], label)
				}
				key = strings.Join(values, " ")
				metric = metric[:i]
			}
			f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil {
				continue
			}
			total := totals[key]
			switch {
			case strings.HasSuffix(metric, "_sum"):
				total.sum += f
			case strings.HasSuffix(metric, "_count"):
				total.count += f
			}
			totals[key] = total
		}
		resp.Body.Close()
	}
	return totals
}

// labelValue is label's value in a Prometheus label set ({a="x",b="y"}).
func labelValue(labels, label string) string {
	_, rest, ok := strings.Cut(labels, label+`="`)
	if !ok {
		return ""
	}
	value, _, _ := strings.Cut(rest, `"`)
	return value
}
