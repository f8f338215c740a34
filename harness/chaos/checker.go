package chaos

import (
	"context"
	"fmt"
	"maps"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/millwright/millwright/harness/driver"
	"github.com/millwright/millwright/local/stack/stacktest"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/workflows"
)

// Invariants the checker counts violations of.
const (
	InvariantLeakedInstance    = "leaked-instance"
	InvariantDuplicateLaunch   = "duplicate-launch"
	InvariantPDBViolation      = "pdb-violation"
	InvariantPodNotRunning     = "pod-not-running"
	InvariantStuckWorkflow     = "stuck-node-workflow"
	InvariantWorkflowTaskFail  = "workflow-task-failure"
	InvariantBudgetExceeded    = "budget-exceeded"
	InvariantInstancesLeftOver = "instances-left-after-cleanup"
)

// Invariants lists them in report order.
var Invariants = []string{
	InvariantLeakedInstance, InvariantDuplicateLaunch, InvariantPDBViolation, InvariantPodNotRunning,
	InvariantStuckWorkflow, InvariantWorkflowTaskFail, InvariantBudgetExceeded, InvariantInstancesLeftOver,
}

// gcGrace is how long a live instance may run without an open node
// workflow before it counts as leaked (Karpenter's garbage collection
// waits about as long).
const gcGrace = 2 * time.Minute

// checker samples the invariants during the run and checks them all after
// quiescence; every violation goes to the history once per subject.
type checker struct {
	s       *driver.Stack
	history *History
	nemesis *nemesis

	mu         sync.Mutex
	violations map[string]map[string]bool // invariant → subjects
	// diagnoses explain stuck workflows and failed workflow tasks by id,
	// for the test's report.
	diagnoses map[string]string
	orphans   map[string]time.Time // instance → first seen without an open workflow
}

func newChecker(s *driver.Stack, history *History, n *nemesis) *checker {
	return &checker{s: s, history: history, nemesis: n, violations: map[string]map[string]bool{}, diagnoses: map[string]string{}, orphans: map[string]time.Time{}}
}

func (c *checker) violate(invariant, subject string, fields ...any) {
	c.mu.Lock()
	if c.violations[invariant] == nil {
		c.violations[invariant] = map[string]bool{}
	}
	first := !c.violations[invariant][subject]
	c.violations[invariant][subject] = true
	c.mu.Unlock()
	if first {
		c.history.Record(KindViolation, invariant, append([]any{"subject", subject}, fields...)...)
	}
}

// Counts are the violations by invariant (each subject once).
func (c *checker) Counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, inv := range Invariants {
		out[inv] = len(c.violations[inv])
	}
	return out
}

// Diagnoses explain the stuck workflows by id.
func (c *checker) Diagnoses() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.diagnoses)
}

// Subjects are the violating subjects of an invariant, sorted.
func (c *checker) Subjects(invariant string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for s := range c.violations[invariant] {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// openWorkflows are the running node workflows of the pool by id.
func (c *checker) openWorkflows(ctx context.Context) (map[string]stacktest.NodeWorkflow, error) {
	open, err := stacktest.ListNodeWorkflows(ctx, c.s.Temporal, c.s.Namespace, stacktest.PoolQuery(poolName)+" AND ExecutionStatus = 'Running'")
	if err != nil {
		return nil, err
	}
	out := map[string]stacktest.NodeWorkflow{}
	for _, wf := range open {
		out[wf.ID] = wf
	}
	return out, nil
}

// sample checks what can be checked while the faults go on: duplicates,
// instances orphaned longer than the GC grace, PDBs, budgets.
func (c *checker) sample(ctx context.Context, pdbsSettled bool) {
	open, err := c.openWorkflows(ctx)
	if err != nil {
		c.history.Record(KindObservation, "sample-error", "error", err)
		return
	}
	c.checkInstances(open, gcGrace)
	if pdbsSettled && time.Now().After(c.nemesis.involuntaryUntil()) {
		c.checkPDBs(ctx)
	}
	c.checkBudget(open)
	phases := map[string]int{}
	for _, wf := range open {
		phases[wf.Phase]++
	}
	c.history.Record(KindObservation, "sample", "openNodeWorkflows", len(open), "phases", phases, "liveInstances", len(c.s.Emulator().State().LiveInstances()))
}

// checkInstances: at most one instance per node claim ever; no live
// instance without an open node workflow for longer than grace.
func (c *checker) checkInstances(open map[string]stacktest.NodeWorkflow, grace time.Duration) {
	cluster := c.s.Local.ClusterName()
	perClaim := map[string][]string{}
	state := c.s.Emulator().State()
	for _, i := range state.Instances {
		if i.Tags[apisv1.TagNodePool] != poolName {
			continue
		}
		claim := i.Tags[apisv1.TagNodeClaim]
		perClaim[claim] = append(perClaim[claim], i.ID)
	}
	for claim, ids := range perClaim {
		if len(ids) > 1 {
			c.violate(InvariantDuplicateLaunch, claim, "instances", ids)
		}
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	live := map[string]bool{}
	for _, i := range state.LiveInstances() {
		if i.Tags[apisv1.TagNodePool] != poolName {
			continue
		}
		live[i.ID] = true
		if _, ok := open[workflows.NodeWorkflowID(cluster, i.Tags[apisv1.TagNodeClaim])]; ok {
			delete(c.orphans, i.ID)
			continue
		}
		first, seen := c.orphans[i.ID]
		if !seen {
			c.orphans[i.ID] = now
			first = now
		}
		if now.Sub(first) >= grace {
			c.mu.Unlock()
			c.violate(InvariantLeakedInstance, i.ID, "nodeClaim", i.Tags[apisv1.TagNodeClaim], "state", i.State, "orphanedFor", now.Sub(first).Round(time.Second).String())
			c.mu.Lock()
		}
	}
	for id := range c.orphans {
		if !live[id] {
			delete(c.orphans, id)
		}
	}
}

// checkPDBs: a budget's healthy pods never below its desired count while
// no involuntary disruption (a spot storm) is under way.
func (c *checker) checkPDBs(ctx context.Context) {
	pdbs, err := c.s.Kube.PolicyV1().PodDisruptionBudgets(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range pdbs.Items {
		if p.Status.ObservedGeneration == p.Generation && p.Status.ExpectedPods > 0 && p.Status.CurrentHealthy < p.Status.DesiredHealthy {
			c.violate(InvariantPDBViolation, fmt.Sprintf("%s@%s", p.Name, time.Now().Format(time.RFC3339)),
				"currentHealthy", p.Status.CurrentHealthy, "desiredHealthy", p.Status.DesiredHealthy)
		}
	}
}

// checkBudget: voluntary disruptions under way never exceed the pool's
// budget of its nodes.
func (c *checker) checkBudget(open map[string]stacktest.NodeWorkflow) {
	var total, disrupting int
	var who []string
	for _, wf := range open {
		total++
		voluntary := wf.TerminationReason == string(workflows.ReasonEmpty) || wf.TerminationReason == string(workflows.ReasonExpired)
		if voluntary && (wf.Phase == string(workflows.PhaseDraining) || wf.Phase == string(workflows.PhaseTerminating)) {
			disrupting++
			who = append(who, wf.ID)
		}
	}
	allowed := int(math.Ceil(float64(total) * budgetPercent / 100))
	if disrupting > allowed {
		sort.Strings(who)
		c.violate(InvariantBudgetExceeded, strings.Join(who, ","), "disrupting", disrupting, "allowed", allowed, "nodes", total)
	}
}

// final checks everything after healing and quiescence.
func (c *checker) final(ctx context.Context) error {
	open, err := c.openWorkflows(ctx)
	if err != nil {
		return err
	}
	// Quiescent: no grace any more.
	c.checkInstances(open, 0)
	c.checkBudget(open)
	for id, wf := range open {
		if wf.Phase != string(workflows.PhaseReady) {
			diagnosis := c.diagnose(ctx, wf)
			c.mu.Lock()
			c.diagnoses[id] = diagnosis
			c.mu.Unlock()
			c.violate(InvariantStuckWorkflow, id, "phase", wf.Phase, "diagnosis", diagnosis)
		}
	}
	deployments, err := c.s.Kube.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, d := range deployments.Items {
		want := int32(0)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		pods, err := stacktest.WaitPodsAvailable(ctx, c.s.Kube, namespace, "app="+d.Name, int(want), time.Second)
		if err != nil {
			diagnosis := c.diagnoseDeployment(ctx, d.Name)
			c.mu.Lock()
			c.diagnoses["deployment/"+d.Name] = diagnosis
			c.mu.Unlock()
			for i := len(pods); i < int(want); i++ {
				c.violate(InvariantPodNotRunning, fmt.Sprintf("%s#%d", d.Name, i), "running", len(pods), "want", want, "diagnosis", diagnosis)
			}
		}
	}
	return nil
}

// allQuiet reports whether the system settled: every deployment's pods
// available, every open node workflow Ready, no live instance without an
// open node workflow.
func (c *checker) allQuiet(ctx context.Context) (bool, string) {
	open, err := c.openWorkflows(ctx)
	if err != nil {
		return false, err.Error()
	}
	for id, wf := range open {
		if wf.Phase != string(workflows.PhaseReady) {
			return false, fmt.Sprintf("%s in %s", id, wf.Phase)
		}
	}
	cluster := c.s.Local.ClusterName()
	for _, i := range c.s.Emulator().State().LiveInstances() {
		if _, ok := open[workflows.NodeWorkflowID(cluster, i.Tags[apisv1.TagNodeClaim])]; !ok && i.Tags[apisv1.TagNodePool] == poolName {
			return false, "instance " + i.ID + " without an open workflow"
		}
	}
	deployments, err := c.s.Kube.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	for _, d := range deployments.Items {
		if d.Spec.Replicas != nil && d.Status.AvailableReplicas != *d.Spec.Replicas {
			return false, fmt.Sprintf("deployment %s %d/%d available", d.Name, d.Status.AvailableReplicas, *d.Spec.Replicas)
		}
	}
	return true, ""
}

// pdbDeploymentsAvailable reports whether the PDBs' deployments have all
// their pods available: from then on the PDBs are checked.
func (c *checker) pdbDeploymentsAvailable(ctx context.Context) bool {
	for _, name := range []string{pdbZeroDeployment, pdbMinusDeployment} {
		d, err := c.s.Kube.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil || d.Spec.Replicas == nil || d.Status.AvailableReplicas != *d.Spec.Replicas {
			return false
		}
	}
	return true
}

// workflowTaskFailures reads every node workflow's history (every run) and
// the provisioner's, and counts WorkflowTaskFailed events (non-determinism,
// panics); a killed worker's task times out instead, which is fine.
func (c *checker) workflowTaskFailures(ctx context.Context) error {
	return findWorkflowTaskFailures(ctx, c.s.Temporal, c.s.Namespace, c.s.Local.ClusterName(), func(key, cause, message string) {
		c.violate(InvariantWorkflowTaskFail, key, "cause", cause, "message", message)
		// The report says why, so a CI failure explains itself without
		// the SQLite state.
		c.mu.Lock()
		c.diagnoses[key] = cause + ": " + message
		c.mu.Unlock()
	})
}

// historyReadAttempts: each visibility page and each history is read again
// after an error this many times. After 1,000 lifecycles on a loaded
// machine, one page of the SQLite visibility query once outlasted the
// client's RPC deadline and the whole check was lost.
const historyReadAttempts = 5

// findWorkflowTaskFailures reads the history of every node workflow of the
// pool and of the provisioner and reports each workflow task failed by the
// workflow code.
func findWorkflowTaskFailures(ctx context.Context, temporal client.Client, namespace, cluster string, report func(key, cause, message string)) error {
	var token []byte
	query := fmt.Sprintf("%s = '%s' OR WorkflowId = '%s'", workflows.NodePoolAttribute.GetName(), poolName, workflows.ProvisionerWorkflowID(cluster))
	for {
		var resp *workflowservice.ListWorkflowExecutionsResponse
		err := retryRead(ctx, func() (err error) {
			resp, err = temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, Query: query, NextPageToken: token})
			return err
		})
		if err != nil {
			return fmt.Errorf("listing workflows: %w", err)
		}
		for _, info := range resp.Executions {
			id, run := info.GetExecution().GetWorkflowId(), info.GetExecution().GetRunId()
			var failures [][3]string
			err := retryRead(ctx, func() error {
				failures = failures[:0]
				iter := temporal.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
				for iter.HasNext() {
					event, err := iter.Next()
					if err != nil {
						return err
					}
					if attrs, ok := event.GetAttributes().(*historypb.HistoryEvent_WorkflowTaskFailedEventAttributes); ok && isCodeFailure(attrs.WorkflowTaskFailedEventAttributes.GetCause()) {
						a := attrs.WorkflowTaskFailedEventAttributes
						failures = append(failures, [3]string{fmt.Sprintf("%s/%s#%d", id, run, event.GetEventId()), a.GetCause().String(), a.GetFailure().GetMessage()})
					}
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("history of %s: %w", id, err)
			}
			for _, f := range failures {
				report(f[0], f[1], f[2])
			}
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return nil
		}
	}
}

// retryRead runs read until it succeeds or fails historyReadAttempts
// times, a second apart (client-go's retry, on any error while ctx lives).
func retryRead(ctx context.Context, read func() error) error {
	backoff := wait.Backoff{Steps: historyReadAttempts, Duration: time.Second, Factor: 1}
	return retry.OnError(backoff, func(error) bool { return ctx.Err() == nil }, read)
}

// isCodeFailure reports whether a WorkflowTaskFailed cause is the
// workflow code's failure (non-determinism, a panic, a bad command). Two
// causes are the server's and lose nothing:
//   - UnhandledCommand: the server refuses a task that completes or
//     continues as new while new events (a signal) arrived meanwhile, and
//     the worker runs the next task with them. (The 1,000-lifecycle run
//     counted one on the provisioner, which receives many signals.)
//   - ForceCloseCommand: the server fails the started task when the run is
//     terminated or timed out, or when more than 100 events were buffered
//     behind it (history.maximumBufferedEventsBatch), and schedules a new
//     one with them. Seed 1 met the last twice on the provisioner: both
//     workers were killed just after it started a task, and over 100
//     podsPending signals arrived during the 10 s the task took to time
//     out.
func isCodeFailure(cause enumspb.WorkflowTaskFailedCause) bool {
	return cause != enumspb.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND &&
		cause != enumspb.WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND
}

// lifecycles counts the pool's node workflows that completed.
func lifecycles(ctx context.Context, s *driver.Stack) (int, error) {
	resp, err := s.Temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Namespace: s.Namespace, Query: stacktest.PoolQuery(poolName) + " AND ExecutionStatus = 'Completed'",
	})
	if err != nil {
		return 0, err
	}
	return int(resp.GetCount()), nil
}

// diagnose says why a node workflow did not settle: its pending activities
// (attempt, last heartbeat, last failure), its state, and the pods still on
// its node, so a stuck workflow in CI can be explained from the report alone.
func (c *checker) diagnose(ctx context.Context, wf stacktest.NodeWorkflow) string {
	var b strings.Builder
	described, err := c.s.Temporal.DescribeWorkflowExecution(ctx, wf.ID, "")
	if err != nil {
		fmt.Fprintf(&b, "describe: %v; ", err)
	} else {
		for _, activity := range described.GetPendingActivities() {
			fmt.Fprintf(&b, "activity %s attempt %d state %s", activity.GetActivityType().GetName(), activity.GetAttempt(), activity.GetState())
			if details := activity.GetHeartbeatDetails().GetPayloads(); len(details) > 0 {
				fmt.Fprintf(&b, " heartbeat %s", details[len(details)-1].GetData())
			}
			if failure := activity.GetLastFailure(); failure != nil {
				fmt.Fprintf(&b, " last failure %q", failure.GetMessage())
			}
			b.WriteString("; ")
		}
	}
	if value, err := c.s.Temporal.QueryWorkflow(ctx, wf.ID, "", workflows.QueryState); err != nil {
		fmt.Fprintf(&b, "query: %v; ", err)
	} else {
		var state workflows.NodeStateView
		if err := value.Get(&state); err == nil {
			fmt.Fprintf(&b, "node %s termination %+v; ", state.NodeName, state.Termination)
		}
	}
	if wf.NodeName != "" {
		pods, err := c.s.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + wf.NodeName})
		if err != nil {
			fmt.Fprintf(&b, "pods: %v", err)
		}
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "pod %s/%s %s deleting=%t; ", p.Namespace, p.Name, p.Status.Phase, p.DeletionTimestamp != nil)
		}
		if node, err := c.s.Kube.CoreV1().Nodes().Get(ctx, wf.NodeName, metav1.GetOptions{}); err != nil {
			fmt.Fprintf(&b, "node: %v", err)
		} else {
			fmt.Fprintf(&b, "node unschedulable=%t deleting=%t taints %v", node.Spec.Unschedulable, node.DeletionTimestamp != nil, node.Spec.Taints)
		}
	}
	return b.String()
}

// diagnoseDeployment says why a deployment's pods are not available: its
// ReplicaSets' counts, each pod's phase, node (and whether that Node
// exists), nomination and conditions, and the last events of both, so a
// CI failure explains itself after the cluster is gone.
func (c *checker) diagnoseDeployment(ctx context.Context, name string) string {
	var b strings.Builder
	selector := metav1.ListOptions{LabelSelector: "app=" + name}
	involved := map[string]bool{}
	if sets, err := c.s.Kube.AppsV1().ReplicaSets(namespace).List(ctx, selector); err != nil {
		fmt.Fprintf(&b, "replicasets: %v; ", err)
	} else {
		for _, rs := range sets.Items {
			involved[rs.Name] = true
			want := int32(0)
			if rs.Spec.Replicas != nil {
				want = *rs.Spec.Replicas
			}
			fmt.Fprintf(&b, "replicaset %s want %d has %d ready %d available %d generation %d observed %d; ",
				rs.Name, want, rs.Status.Replicas, rs.Status.ReadyReplicas, rs.Status.AvailableReplicas, rs.Generation, rs.Status.ObservedGeneration)
		}
	}
	if pods, err := c.s.Kube.CoreV1().Pods(namespace).List(ctx, selector); err != nil {
		fmt.Fprintf(&b, "pods: %v; ", err)
	} else {
		for _, p := range pods.Items {
			involved[p.Name] = true
			fmt.Fprintf(&b, "pod %s %s created %s deleting=%t node %q", p.Name, p.Status.Phase,
				p.CreationTimestamp.Format(time.TimeOnly), p.DeletionTimestamp != nil, p.Spec.NodeName)
			if p.Spec.NodeName != "" {
				if _, err := c.s.Kube.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{}); err != nil {
					fmt.Fprintf(&b, " (node: %v)", err)
				}
			}
			if p.Status.NominatedNodeName != "" {
				fmt.Fprintf(&b, " nominated %q", p.Status.NominatedNodeName)
			}
			for _, cond := range p.Status.Conditions {
				fmt.Fprintf(&b, " %s=%s", cond.Type, cond.Status)
				if cond.Reason != "" {
					fmt.Fprintf(&b, " (%s: %s, %s)", cond.Reason, cond.Message, cond.LastTransitionTime.Format(time.TimeOnly))
				}
			}
			b.WriteString("; ")
		}
	}
	if events, err := c.s.Kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{}); err != nil {
		fmt.Fprintf(&b, "events: %v", err)
	} else {
		var lines []string
		for _, e := range events.Items {
			if involved[e.InvolvedObject.Name] {
				last := e.LastTimestamp.Time
				if last.IsZero() {
					last = e.EventTime.Time
				}
				lines = append(lines, fmt.Sprintf("%s %s %s %s: %s (×%d)", last.Format(time.TimeOnly), e.InvolvedObject.Name, e.Type, e.Reason, e.Message, max(e.Count, 1)))
			}
		}
		sort.Strings(lines)
		b.WriteString(strings.Join(lines[max(0, len(lines)-15):], "; "))
	}
	return b.String()
}
