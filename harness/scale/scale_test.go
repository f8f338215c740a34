package scale

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/millwright/millwright/activities/planning"
	"github.com/millwright/millwright/harness/driver"
	"github.com/millwright/millwright/local/stack/stacktest"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/workflows"
)

var (
	scenariosFlag = flag.String("scale.scenarios", "ci", "comma-separated scenarios (basic, mixed, anti-affinity, 5000, ci) or all")
	keepFlag      = flag.Bool("scale.keep", false, "keep the state dir (logs) even when the run passes")
)

// Bounds of a scenario's waits, per 1,000 pods (and at least the minimum):
// beyond them the run is a failure, not a slow figure.
const (
	runningBoundPer1000 = 6 * time.Minute
	zeroBoundPer1000    = 12 * time.Minute
	minBound            = 4 * time.Minute
)

func bound(per1000 time.Duration, pods int) time.Duration {
	return max(minBound, time.Duration(float64(per1000)*float64(pods)/1000))
}

func TestScale(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack (not with -short)")
	}
	names := strings.Split(*scenariosFlag, ",")
	if *scenariosFlag == "all" {
		names = allScenarios
	}
	for _, name := range names {
		if _, ok := scenarios[name]; !ok {
			t.Fatalf("-scale.scenarios: no scenario %q (have basic, mixed, anti-affinity, 5000, ci, all)", name)
		}
	}
	ctx := context.Background()
	s := driver.StartForTest(t, "millwright-scale-", *keepFlag, driver.Options{})
	if err := stacktest.ApplyObject(ctx, s.Dynamic, planning.NodePoolResource, nodePool()); err != nil {
		t.Fatal(err)
	}
	var reports []string
	for _, name := range names {
		r := runScenario(t, s, scenarios[name])
		reports = append(reports, r.String())
		fmt.Fprintln(os.Stderr, r.String())
		if t.Failed() {
			break
		}
	}
	t.Log("\n" + strings.Join(reports, "\n"))
}

// result is one scenario's figures.
type result struct {
	scenario                       string
	pods                           int
	podsCreated, allRunning        time.Duration
	nodes                          int
	dollarsPerHour                 float64
	cpuUtilization, memUtilization float64
	toFleet, toReady               []time.Duration
	// toUnschedulable is the scheduler's share (pod created → marked
	// unschedulable); unschedulableToFleet and workflowToFleet are
	// Millwright's (marked → CreateFleet; node workflow started →
	// CreateFleet).
	toUnschedulable, unschedulableToFleet, workflowToFleet []time.Duration
	// late are the pods whose pod → CreateFleet is above lateAfter.
	late                     []latePod
	provisioner, nodeSignals provisionerProfile
	nodeWorkflowsProfiled    int
	// workflowTaskWait and activityWait are the tasks' schedule-to-start
	// latencies while the pods came up.
	workflowTaskWait, activityWait taskLatency
	// downWorkflowTaskWait, downActivityWait and downActivities are the
	// same while scaling to zero, and each activity type's execution time
	// there (where a scale-down round's time goes).
	downWorkflowTaskWait, downActivityWait taskLatency
	downActivities                         latencyBy
	// downKubeAPI is the Kubernetes API requests' time while scaling to
	// zero, by activity, verb and resource.
	downKubeAPI              latencyBy
	toZero                   time.Duration
	nodesLeft, instancesLeft int
	// zeroTimeline is the pool's Node count each time it changed while
	// scaling to zero ("+31s 52" …), to show the disruption rounds.
	zeroTimeline []string
	// podsLeaving is when the last of the workload's pods was seen
	// terminating or gone (the garbage collector's share of the scale to
	// zero), and emptyToGone each node's time from its last pod leaving to
	// its Node's deletion: the scale-down target is per empty node
	// (≤ consolidateAfter + 60 s).
	podsLeaving                      time.Duration
	emptyToGone                      []time.Duration
	heapPeak, rssPeak                int64
	eventsPerNode                    float64
	eventsPerNodeMax                 int64
	provisionerEvents, provisionerCN int64
	// created is when the scenario's deployments were created.
	created time.Time
}

func (r result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scale %s: %d pods\n", r.scenario, r.pods)
	fmt.Fprintf(&b, "  pods created            %s\n", r.podsCreated.Round(100*time.Millisecond))
	fmt.Fprintf(&b, "  all Running             %s\n", r.allRunning.Round(100*time.Millisecond))
	fmt.Fprintf(&b, "  nodes                   %d, $%.2f/h, reserved CPU %.0f%%, memory %.0f%%\n", r.nodes, r.dollarsPerHour, 100*r.cpuUtilization, 100*r.memUtilization)
	fmt.Fprintf(&b, "  pod → CreateFleet       p50 %s, p99 %s\n", percentile(r.toFleet, 50), percentile(r.toFleet, 99))
	fmt.Fprintf(&b, "    pod → unschedulable   p50 %s, p99 %s (the scheduler's share)\n", percentile(r.toUnschedulable, 50), percentile(r.toUnschedulable, 99))
	fmt.Fprintf(&b, "    unschedulable → Fleet p50 %s, p99 %s (Millwright's share)\n", percentile(r.unschedulableToFleet, 50), percentile(r.unschedulableToFleet, 99))
	fmt.Fprintf(&b, "    workflow → Fleet      p50 %s, p99 %s (node workflow started → CreateFleet)\n", percentile(r.workflowToFleet, 50), percentile(r.workflowToFleet, 99))
	fmt.Fprintf(&b, "    task queue wait       workflow tasks %s, activities %s (schedule → start, until all Running)\n", r.workflowTaskWait, r.activityWait)
	fmt.Fprintf(&b, "    pods over %s       why, from the provisioner's plans:\n", lateAfter)
	b.WriteString(r.provisioner.tailDiagnosis(r.late))
	fmt.Fprintf(&b, "  pod → Ready             p50 %s, p99 %s\n", percentile(r.toReady, 50), percentile(r.toReady, 99))
	fmt.Fprintf(&b, "  deleted → zero nodes    %s (nodes left %d, instances left %d)\n", r.toZero.Round(100*time.Millisecond), r.nodesLeft, r.instancesLeft)
	fmt.Fprintf(&b, "    Nodes as they went    %s\n", strings.Join(r.zeroTimeline, ", "))
	fmt.Fprintf(&b, "    pods all leaving      +%s (the garbage collector's share)\n", r.podsLeaving.Round(100*time.Millisecond))
	fmt.Fprintf(&b, "    node empty → gone     p50 %s, max %s over %d nodes (target consolidateAfter + 60 s)\n", percentile(r.emptyToGone, 50), percentile(r.emptyToGone, 100), len(r.emptyToGone))
	fmt.Fprintf(&b, "    task queue wait       workflow tasks %s, activities %s (schedule → start, while scaling to zero)\n", r.downWorkflowTaskWait, r.downActivityWait)
	fmt.Fprintf(&b, "    activity time         %s\n", r.downActivities)
	fmt.Fprintf(&b, "    Kubernetes API time   %s (the 12 most, by activity, verb and resource)\n", r.downKubeAPI.top(12))
	fmt.Fprintf(&b, "  worker peak             heap %s, RSS %s\n", mib(r.heapPeak), mib(r.rssPeak))
	fmt.Fprintf(&b, "  history events          %.1f per node workflow (max %d), provisioner %d in its current run after %d continue-as-new\n", r.eventsPerNode, r.eventsPerNodeMax, r.provisionerEvents, r.provisionerCN)
	fmt.Fprintf(&b, "  provisioner             %s\n", r.provisioner)
	b.WriteString(r.provisioner.timeline(r.created, 10*time.Second))
	fmt.Fprintf(&b, "  node workflow signals   %s (over %d node workflows)\n", r.nodeSignals.signalsString(), r.nodeWorkflowsProfiled)
	return b.String()
}

// lateAfter is issue 11's pod → CreateFleet p99 target (the 10 s max
// batch window + 2 s): pods above it are diagnosed.
const lateAfter = 12 * time.Second

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sorted := append([]time.Duration(nil), ds...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))].Round(100 * time.Millisecond)
}

// runScenario creates the workload at once, measures, deletes it and
// measures again. Correctness (all Running, nothing left) fails t.
func runScenario(t *testing.T, s *driver.Stack, sc scenario) result {
	ctx := context.Background()
	r := result{scenario: sc.name, pods: sc.pods()}
	if _, err := s.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tracker, err := startPodTracker(s)
	if err != nil {
		t.Fatal(err)
	}
	defer tracker.close()
	memory := startMemorySampler(s)
	workflowTasksBefore, activitiesBefore := scrapeTaskLatency(s, workflowTaskScheduleToStart), scrapeTaskLatency(s, activityScheduleToStart)
	created := time.Now()
	r.created = created
	var wg sync.WaitGroup
	errs := make(chan error, len(sc.deployments))
	for _, d := range sc.deployments {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Kube.AppsV1().Deployments(namespace).Create(ctx, d.object(), metav1.CreateOptions{}); err != nil {
				errs <- fmt.Errorf("creating deployment %s: %w", d.name, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	limit := bound(runningBoundPer1000, r.pods)
	for {
		existing, running, lastCreated := tracker.counts()
		if r.podsCreated == 0 && existing >= r.pods {
			r.podsCreated = max(0, lastCreated.Sub(created))
		}
		if running >= r.pods {
			r.allRunning = time.Since(created)
			break
		}
		if time.Since(created) > limit {
			t.Errorf("scenario %s: %d of %d pods Running after %s", sc.name, running, r.pods, limit)
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	r.workflowTaskWait = scrapeTaskLatency(s, workflowTaskScheduleToStart).minus(workflowTasksBefore)
	r.activityWait = scrapeTaskLatency(s, activityScheduleToStart).minus(activitiesBefore)
	var pods []corev1.Pod
	if list, err := s.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		pods = list.Items
	}
	measureNodes(ctx, s, pods, tracker, &r)

	workflowTasksBefore, activitiesBefore = scrapeTaskLatency(s, workflowTaskScheduleToStart), scrapeTaskLatency(s, activityScheduleToStart)
	activityTimeBefore := scrapeLatencyBy(s, activityExecution, "activity_type")
	kubeAPIBefore := scrapeLatencyBy(s, kubeAPIDuration, "controller", "verb", "resource")
	deleted := time.Now()
	for _, d := range sc.deployments {
		if err := s.Kube.AppsV1().Deployments(namespace).Delete(ctx, d.name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting deployment %s: %v", d.name, err)
		}
	}
	limit = bound(zeroBoundPer1000, r.pods)
	podsOn := map[string][]types.UID{}
	for _, pod := range pods {
		podsOn[pod.Spec.NodeName] = append(podsOn[pod.Spec.NodeName], pod.UID)
	}
	goneAt := map[string]time.Time{}
	for {
		nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: apisv1.LabelNodePool + "=" + poolName})
		live := poolInstances(s, true)
		if err == nil {
			present := map[string]bool{}
			for _, n := range nodes.Items {
				present[n.Name] = true
			}
			for name := range podsOn {
				if _, gone := goneAt[name]; !gone && !present[name] {
					goneAt[name] = time.Now()
				}
			}
			if len(r.zeroTimeline) == 0 || len(nodes.Items) != r.nodesLeft {
				r.zeroTimeline = append(r.zeroTimeline, fmt.Sprintf("+%s %d", time.Since(deleted).Round(time.Second), len(nodes.Items)))
			}
			r.nodesLeft, r.instancesLeft = len(nodes.Items), len(live)
			if r.nodesLeft == 0 && r.instancesLeft == 0 {
				r.toZero = time.Since(deleted)
				break
			}
		}
		if time.Since(deleted) > limit {
			r.toZero = time.Since(deleted)
			t.Errorf("scenario %s: %d nodes and %d instances left %s after deleting the workload", sc.name, r.nodesLeft, r.instancesLeft, limit)
			break
		}
		time.Sleep(time.Second)
	}
	r.podsLeaving, r.emptyToGone = emptiness(tracker, podsOn, goneAt, deleted)
	r.downWorkflowTaskWait = scrapeTaskLatency(s, workflowTaskScheduleToStart).minus(workflowTasksBefore)
	r.downActivityWait = scrapeTaskLatency(s, activityScheduleToStart).minus(activitiesBefore)
	r.downActivities = scrapeLatencyBy(s, activityExecution, "activity_type").minus(activityTimeBefore)
	r.downKubeAPI = scrapeLatencyBy(s, kubeAPIDuration, "controller", "verb", "resource").minus(kubeAPIBefore)
	r.heapPeak, r.rssPeak = memory.stop()
	measureHistories(ctx, s, &r)
	return r
}

// emptiness is when the last pod of podsOn (pods by node) was seen leaving,
// after deleted, and for each node gone (goneAt) the time from its last
// pod leaving to its deletion.
func emptiness(tracker *podTracker, podsOn map[string][]types.UID, goneAt map[string]time.Time, deleted time.Time) (time.Duration, []time.Duration) {
	var lastLeft time.Time
	var emptyToGone []time.Duration
	for node, uids := range podsOn {
		var empty time.Time
		for _, uid := range uids {
			if at, ok := tracker.leavingSince(uid); ok && at.After(empty) {
				empty = at
			}
		}
		if empty.After(lastLeft) {
			lastLeft = empty
		}
		if gone, ok := goneAt[node]; ok && !empty.IsZero() {
			emptyToGone = append(emptyToGone, gone.Sub(empty))
		}
	}
	if lastLeft.IsZero() {
		return 0, emptyToGone
	}
	return lastLeft.Sub(deleted), emptyToGone
}

// poolInstances are the emulator's instances of the pool (live only, or all).
func poolInstances(s *driver.Stack, liveOnly bool) map[string]instanceInfo {
	return poolInstancesOf(s, poolName, liveOnly)
}

// poolInstancesOf are the emulator's instances of pool (live only, or all).
func poolInstancesOf(s *driver.Stack, pool string, liveOnly bool) map[string]instanceInfo {
	out := map[string]instanceInfo{}
	state := s.Emulator().State()
	instances := state.Instances
	if liveOnly {
		instances = state.LiveInstances()
	}
	for _, i := range instances {
		if i.Tags[apisv1.TagNodePool] == pool {
			out[i.ID] = instanceInfo{launched: i.LaunchTime, instanceType: i.InstanceType, zone: i.Zone, capacityType: i.CapacityType}
		}
	}
	return out
}

type instanceInfo struct {
	launched                         time.Time
	instanceType, zone, capacityType string
}

// measureNodes fills nodes, $/h, utilization and the per-pod latencies.
func measureNodes(ctx context.Context, s *driver.Stack, pods []corev1.Pod, tracker *podTracker, r *result) {
	nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: apisv1.LabelNodePool + "=" + poolName})
	if err != nil {
		return
	}
	instances := poolInstances(s, false)
	launchOf := map[string]time.Time{}
	var cpuAllocatable, memAllocatable resource.Quantity
	for _, n := range nodes.Items {
		id := n.Spec.ProviderID[strings.LastIndex(n.Spec.ProviderID, "/")+1:]
		inst, ok := instances[id]
		if !ok {
			continue
		}
		r.nodes++
		price, _ := s.Emulator().HourlyPrice(inst.instanceType, inst.zone, inst.capacityType)
		r.dollarsPerHour += price
		launchOf[n.Name] = inst.launched
		cpuAllocatable.Add(n.Status.Allocatable[corev1.ResourceCPU])
		memAllocatable.Add(n.Status.Allocatable[corev1.ResourceMemory])
	}
	var cpuRequested, memRequested resource.Quantity
	for _, p := range pods {
		for _, c := range p.Spec.Containers {
			cpuRequested.Add(c.Resources.Requests[corev1.ResourceCPU])
			memRequested.Add(c.Resources.Requests[corev1.ResourceMemory])
		}
		createdAt := p.CreationTimestamp.Time
		unschedulable, marked := tracker.unschedulableAt(p.UID)
		if marked {
			r.toUnschedulable = append(r.toUnschedulable, max(0, unschedulable.Sub(createdAt)))
		}
		if launched, ok := launchOf[p.Spec.NodeName]; ok {
			r.toFleet = append(r.toFleet, max(0, launched.Sub(createdAt)))
			if launched.Sub(createdAt) > lateAfter {
				lp := latePod{key: p.Namespace + "/" + p.Name, created: createdAt, toFleet: launched.Sub(createdAt)}
				if marked {
					lp.unschedulable = unschedulable
				}
				r.late = append(r.late, lp)
			}
			if marked {
				r.unschedulableToFleet = append(r.unschedulableToFleet, max(0, launched.Sub(unschedulable)))
			}
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				r.toReady = append(r.toReady, max(0, c.LastTransitionTime.Sub(createdAt)))
			}
		}
	}
	if cpuAllocatable.MilliValue() > 0 {
		r.cpuUtilization = float64(cpuRequested.MilliValue()) / float64(cpuAllocatable.MilliValue())
	}
	if memAllocatable.Value() > 0 {
		r.memUtilization = float64(memRequested.Value()) / float64(memAllocatable.Value())
	}
}

// maxNodeWorkflowsProfiled bounds the node workflow histories read for
// their signal counts.
const maxNodeWorkflowsProfiled = 100

// measureHistories reads the history lengths of the pool's node workflows
// and of the provisioner from visibility.
func measureHistories(ctx context.Context, s *driver.Stack, r *result) {
	var total, count int64
	provisioner := workflows.ProvisionerWorkflowID(s.Local.ClusterName())
	launchOfClaim := map[string]time.Time{}
	for _, i := range s.Emulator().State().Instances {
		if i.Tags[apisv1.TagNodePool] == poolName {
			launchOfClaim[i.Tags[apisv1.TagNodeClaim]] = i.LaunchTime
		}
	}
	query := fmt.Sprintf("%s OR WorkflowId = '%s'", stacktest.PoolQuery(poolName), provisioner)
	var token []byte
	for {
		resp, err := s.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: s.Namespace, Query: query, NextPageToken: token})
		if err != nil {
			return
		}
		for _, info := range resp.Executions {
			execution := info.GetExecution()
			if execution.GetWorkflowId() == provisioner {
				if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
					r.provisionerEvents = info.GetHistoryLength()
				} else {
					r.provisionerCN++
				}
				profileWorkflow(ctx, s, execution.GetWorkflowId(), execution.GetRunId(), &r.provisioner)
				continue
			}
			claim := execution.GetWorkflowId()[strings.LastIndex(execution.GetWorkflowId(), "/")+1:]
			if launched, ok := launchOfClaim[claim]; ok {
				r.workflowToFleet = append(r.workflowToFleet, max(0, launched.Sub(info.GetStartTime().AsTime())))
			}
			if r.nodeWorkflowsProfiled < maxNodeWorkflowsProfiled {
				profileWorkflow(ctx, s, execution.GetWorkflowId(), execution.GetRunId(), &r.nodeSignals)
				r.nodeWorkflowsProfiled++
			}
			total += info.GetHistoryLength()
			count++
			r.eventsPerNodeMax = max(r.eventsPerNodeMax, info.GetHistoryLength())
		}
		if token = resp.NextPageToken; len(token) == 0 {
			break
		}
	}
	if count > 0 {
		r.eventsPerNode = float64(total) / float64(count)
	}
	// The provisioner's current run, described directly (visibility may
	// not list it under the pool's query).
	if described, err := s.Temporal.DescribeWorkflowExecution(ctx, provisioner, ""); err == nil {
		r.provisionerEvents = described.GetWorkflowExecutionInfo().GetHistoryLength()
	}
}

// memorySampler records the workers' peak Go heap (from /metrics) and RSS
// (from /proc) every second.
type memorySampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	heap int64
	rss  int64
}

func startMemorySampler(s *driver.Stack) *memorySampler {
	m := &memorySampler{done: make(chan struct{})}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			for i, w := range s.Workers {
				if pid := w.PID(); pid != 0 {
					if mem, err := driver.MemoryOf(pid); err == nil {
						m.rss = max(m.rss, mem.PeakRSS)
					}
				}
				m.heap = max(m.heap, heapInuse(s.MetricsAddrs[i]))
			}
			select {
			case <-m.done:
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

func (m *memorySampler) stop() (heap, rss int64) {
	close(m.done)
	m.wg.Wait()
	return m.heap, m.rss
}

// heapInuse scrapes go_memstats_heap_inuse_bytes from a worker's /metrics.
func heapInuse(addr string) int64 {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	scanner := bufio.NewScanner(resp.Body)
	scanner.Buffer(make([]byte, 64*1024), 1024*1024)
	for scanner.Scan() {
		line := scanner.Text()
		if value, ok := strings.CutPrefix(line, "go_memstats_heap_inuse_bytes "); ok {
			f, _ := strconv.ParseFloat(value, 64)
			return int64(f)
		}
	}
	return 0
}
