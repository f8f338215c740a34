package e2e

// Crash recovery of a disruption command: the worker is SIGKILLed while a
// command replaces a drifted node — after the command reserved its
// candidate, after the replacement was launched, and while the candidate
// drains — then started again. The command must resume at the step it was
// at and finish: one replacement instance, no instance without a node
// workflow, no Node left tainted or cordoned, the old instance terminated
// once.
//
// The three kills share one scenario: one pod on one node, and each kill
// point is its own command, forced by editing the pool's template (drift:
// NodePoolDrifted), so the next kill point's candidate is the previous one's
// replacement. The replacement is held uninitialized by a startup taint
// (which only the test removes) where a kill point needs the command to wait
// in its Replace step for as long as the test wants.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/planning"
	"github.com/millwright/millwright/local/stack/stacktest"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/workflows"
)

// Bounds of the command scenarios' waits.
const (
	// commandStartTimeout: a pool edit triggers a disruption pass within
	// seconds (the trigger's debounce), and the pass starts the command.
	commandStartTimeout = 2 * time.Minute
	// commandEndTimeout: validation delay (15 s), the replacement's launch
	// and initialization, the candidate's drain and termination, plus the
	// heartbeat timeout (30 s) of an activity the killed worker held.
	commandEndTimeout = 5 * time.Minute
	// holdTaintKey is the startup taint that holds a replacement
	// uninitialized until the test removes it.
	holdTaintKey = "e2e.millwright.dev/hold"
)

// TestWorkerKilledDuringDisruptionCommand: the worker is SIGKILLed at three
// points of a drift replacement, one command each (see the file comment).
func TestWorkerKilledDuringDisruptionCommand(t *testing.T) {
	// Budgets of 100%: nothing but the commands' own logic holds the
	// replacement while its candidate drains (the default 10% of two
	// nodes would forbid any other disruption meanwhile).
	s := newScenario(t, "killed-command", withPool(func(pool *apisv1.NodePool) {
		pool.Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: "100%"}}
	}))
	// A failed run must not leave nodes held by the startup taint (they
	// would never initialize, and the suite's leak check would wait). A
	// run that passed held none (and editing the pool then would drift
	// its last node once more).
	t.Cleanup(func() {
		if t.Failed() {
			s.releaseHeldNodes(t)
		}
	})
	s.createDeployment(t, "app", 1, "500m")
	s.waitPodsRunning(t, "app=app", 1, launchTimeout)

	// After reserve: the command reserved its candidate and waits out its
	// validation delay; nothing is tainted disrupted (only the soft
	// candidate taint) or launched yet.
	ok := t.Run("AfterReserve", func(t *testing.T) {
		run := s.startDriftCommand(t, func(pool *apisv1.NodePool) {
			if pool.Spec.Template.Labels == nil {
				pool.Spec.Template.Labels = map[string]string{}
			}
			pool.Spec.Template.Labels["e2e.test/generation"] = "1"
		})
		view := run.waitStep(t, workflows.StepValidate)
		if len(view.Replacements) != 0 {
			t.Fatalf("command %s launched %v before it validated", run.commandID, view.Replacements)
		}
		s.assertNodeClean(t, run.oldNode, "after reserve, before the kill")
		run.kill(t)
		suite.worker.start(t)
		run.finish(t)
	})

	// After the replacement launched: its instance runs and its Node
	// registered, held uninitialized by a startup taint, while the command
	// waits in Replace.
	ok = ok && t.Run("AfterReplacementLaunched", func(t *testing.T) {
		run := s.startDriftCommand(t, withHoldTaint("replacement"))
		replacement := run.waitReplacementRegistered(t)
		run.kill(t)
		suite.worker.start(t)
		s.removeHoldTaint(t, replacement.NodeName)
		run.finish(t)
	})

	// Mid-drain: the replacement is initialized, the command committed and
	// the candidate drains, held by a PodDisruptionBudget created after the
	// command validated (a budget allowing no eviction would have made the
	// node no candidate at all).
	_ = ok && t.Run("MidDrain", func(t *testing.T) {
		run := s.startDriftCommand(t, withHoldTaint("drain"))
		replacement := run.waitReplacementRegistered(t)
		s.createPDB(t, "app", policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))}, 1, 0)
		s.removeHoldTaint(t, replacement.NodeName)
		drain := run.waitDrainHeld(t)
		progress, _ := drainProgressOf(drain)
		t.Logf("candidate %s draining (Drain attempt %d, last heartbeat %+v)", run.oldNode, drain.GetAttempt(), progress)
		from := run.kill(t)
		for _, p := range s.waitPodsRunning(t, "app=app", 1, time.Minute) {
			if p.Spec.NodeName != run.oldNode {
				t.Fatalf("pod %s moved to %s while the budget allowed no eviction", p.Name, p.Spec.NodeName)
			}
		}
		suite.worker.start(t)
		if err := suite.kube.PolicyV1().PodDisruptionBudgets(s.namespace).Delete(context.Background(), "app", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		suite.worker.waitLog(t, from, drainHeartbeatWait, "Resuming drain")
		run.finish(t)
		if n := scheduledActivities(t, run.oldWorkflow)[activities.DrainActivity]; n != 1 {
			t.Errorf("candidate %s scheduled Drain %d times, want once (the restart resumes the attempt's progress)", run.oldWorkflow, n)
		}
	})
}

// commandRun is one drift command the scenario forced, from its candidate's
// side.
type commandRun struct {
	s *scenario
	// edited is when the pool edit that drifted the candidate was applied;
	// killed when the worker was killed.
	edited, killed time.Time
	commandID      string
	oldNode        string
	oldWorkflow    string
	oldInstance    string
	// instancesBefore are the pool's instances (any state) before the edit;
	// commandsBefore the commands the disruption workflow had started.
	instancesBefore []string
	commandsBefore  int64
}

// commandsStarted is how many commands the disruption workflow has started
// in its life.
func commandsStarted(t *testing.T) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stacktest.QueryTimeout)
	defer cancel()
	answer, err := suite.temporal.QueryWorkflow(ctx, workflows.DisruptionWorkflowID(suite.stack.ClusterName()), "", workflows.QueryDisruptionState)
	if err != nil {
		t.Fatalf("querying the disruption workflow: %v", err)
	}
	var view workflows.DisruptionStateView
	if err := answer.Get(&view); err != nil {
		t.Fatal(err)
	}
	return view.Commands
}

// releaseHeldNodes drops the pool's startup taints and removes the hold
// taint from every Node of the pool.
func (s *scenario) releaseHeldNodes(t *testing.T) {
	s.editNodePool(t, func(pool *apisv1.NodePool) { pool.Spec.Template.Spec.StartupTaints = nil })
	for _, n := range s.nodes(t) {
		if stacktest.HasTaint(&n, holdTaintKey) {
			s.removeHoldTaint(t, n.Name)
		}
	}
}

// withHoldTaint is a pool edit that gives new nodes the startup taint
// holdTaintKey=value (a template change: existing nodes drift).
func withHoldTaint(value string) func(*apisv1.NodePool) {
	return func(pool *apisv1.NodePool) {
		pool.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: holdTaintKey, Value: value, Effect: corev1.TaintEffectNoSchedule}}
	}
}

// startDriftCommand edits the pool's template so that its one node drifts
// and waits until a disruption command reserved that node.
func (s *scenario) startDriftCommand(t *testing.T, edit func(*apisv1.NodePool)) *commandRun {
	t.Helper()
	nodes := s.nodes(t)
	if len(nodes) != 1 {
		t.Fatalf("pool %s has %d Nodes, want the one the command replaces", s.pool, len(nodes))
	}
	wf, state := s.readyWorkflowOf(t, nodes[0].Name)
	run := &commandRun{s: s, oldNode: nodes[0].Name, oldWorkflow: wf.ID, oldInstance: state.Instance.InstanceID,
		commandsBefore: commandsStarted(t)}
	for _, i := range s.instances() {
		run.instancesBefore = append(run.instancesBefore, i.ID)
	}
	s.editNodePool(t, edit)
	run.edited = time.Now()
	poll(t, commandStartTimeout, "a disruption command to reserve "+run.oldNode, func(context.Context) (bool, error) {
		state, err := tryQueryState(run.oldWorkflow)
		if err != nil || state.Reservation == nil {
			return false, err
		}
		run.commandID = state.Reservation.CommandID
		if state.Reservation.Reason != string(workflows.ReasonDrifted) {
			return false, fmt.Errorf("node %s reserved by %s for %s (%s), want Drifted", run.oldNode, run.commandID, state.Reservation.Reason, state.Reservation.Message)
		}
		return true, nil
	})
	t.Logf("pool edited → %s reserved by %s: %s", run.oldNode, run.commandID, time.Since(run.edited).Round(time.Millisecond))
	return run
}

// editNodePool changes the scenario's pool as it is in the cluster (its
// finalizer and the worker's annotations kept).
func (s *scenario) editNodePool(t *testing.T, edit func(*apisv1.NodePool)) {
	t.Helper()
	ctx := context.Background()
	pools := suite.dynamic.Resource(planning.NodePoolResource)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := pools.Get(ctx, s.pool, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var pool apisv1.NodePool
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(current.Object, &pool); err != nil {
			return err
		}
		edit(&pool)
		object, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pool)
		if err != nil {
			return err
		}
		_, err = pools.Update(ctx, &unstructured.Unstructured{Object: object}, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("editing NodePool %s: %v", s.pool, err)
	}
}

// commandView queries the command workflow (bounded: its worker may be
// dead).
func (r *commandRun) commandView() (workflows.CommandStateView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), stacktest.QueryTimeout)
	defer cancel()
	var view workflows.CommandStateView
	answer, err := suite.temporal.QueryWorkflow(ctx, r.commandID, "", workflows.QueryCommandState)
	if err != nil {
		return view, fmt.Errorf("querying command %s: %w", r.commandID, err)
	}
	return view, answer.Get(&view)
}

// waitStep waits until the command is at step and returns its state.
func (r *commandRun) waitStep(t *testing.T, step string) workflows.CommandStateView {
	t.Helper()
	var view workflows.CommandStateView
	poll(t, commandStartTimeout, fmt.Sprintf("command %s at step %s", r.commandID, step), func(context.Context) (bool, error) {
		var err error
		view, err = r.commandView()
		if err == nil && view.Step != step && slices.Index(commandSteps, view.Step) > slices.Index(commandSteps, step) {
			return false, fmt.Errorf("command %s is already at step %s (decisions %+v)", r.commandID, view.Step, view.Decisions)
		}
		return err == nil && view.Step == step, err
	})
	return view
}

// commandSteps are the steps of a command that succeeds, in order.
var commandSteps = []string{workflows.StepReserve, workflows.StepValidate, workflows.StepMark, workflows.StepReplace, workflows.StepDrain, workflows.StepDone}

// waitReplacementRegistered waits until the command is in Replace with one
// replacement whose instance runs and whose Node registered (held by the
// startup taint), and returns the replacement's state.
func (r *commandRun) waitReplacementRegistered(t *testing.T) workflows.NodeStateView {
	t.Helper()
	view := r.waitStep(t, workflows.StepReplace)
	if len(view.Replacements) != 1 {
		t.Fatalf("command %s launches %v, want one replacement", r.commandID, view.Replacements)
	}
	id := workflows.NodeWorkflowID(suite.stack.ClusterName(), view.Replacements[0])
	var state workflows.NodeStateView
	poll(t, launchTimeout, "replacement "+view.Replacements[0]+" registered and held by its startup taint", func(ctx context.Context) (bool, error) {
		var err error
		if state, err = tryQueryState(id); err != nil || state.Phase != workflows.PhaseInitializing || state.NodeName == "" {
			return false, err
		}
		node, err := suite.kube.CoreV1().Nodes().Get(ctx, state.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return stacktest.HasTaint(node, holdTaintKey), nil
	})
	t.Logf("replacement %s: instance %s, Node %s registered and held, %s after the pool edit",
		state.NodeClaimName, state.Instance.InstanceID, state.NodeName, time.Since(r.edited).Round(time.Millisecond))
	return state
}

// waitDrainHeld waits until the candidate's Drain activity runs, its
// progress heartbeated with the pod's eviction refused, on the cordoned and
// tainted Node, and returns the pending activity.
func (r *commandRun) waitDrainHeld(t *testing.T) *workflowpb.PendingActivityInfo {
	t.Helper()
	var drain *workflowpb.PendingActivityInfo
	poll(t, terminateTimeout, "the candidate's Drain running, held by the budget, its progress heartbeated", func(ctx context.Context) (bool, error) {
		var err error
		if drain, err = pendingActivityOf(ctx, r.oldWorkflow, activities.DrainActivity); err != nil || drain == nil {
			return false, err
		}
		node, err := suite.kube.CoreV1().Nodes().Get(ctx, r.oldNode, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		progress, ok := drainProgressOf(drain)
		return drain.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED && ok && len(progress.Blocked) > 0 &&
			node.Spec.Unschedulable && stacktest.HasTaint(node, activities.DisruptedTaintKey), nil
	})
	return drain
}

// kill SIGKILLs the worker and returns the worker log's offset at the kill.
func (r *commandRun) kill(t *testing.T) int64 {
	t.Helper()
	from := suite.worker.logOffset()
	suite.worker.kill(t)
	r.killed = time.Now()
	return from
}

// removeHoldTaint removes the startup taint from a Node, as the system that
// put it there would once the node is set up.
func (s *scenario) removeHoldTaint(t *testing.T, nodeName string) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := suite.kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(taint corev1.Taint) bool { return taint.Key == holdTaintKey })
		_, err = suite.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("removing the startup taint %s from Node %s: %v", holdTaintKey, nodeName, err)
	}
}

// finish waits until the command ends and checks what it left: succeeded,
// each step done once, exactly one replacement instance (running, owned by
// its running node workflow, the pod on its Node), no other live instance
// in the pool, no Node tainted or cordoned, the candidate's workflow ended
// Drifted and its instance terminated once.
func (r *commandRun) finish(t *testing.T) {
	t.Helper()
	s := r.s
	ctx, cancel := context.WithTimeout(context.Background(), commandEndTimeout)
	defer cancel()
	var outcome workflows.CommandOutcome
	if err := suite.temporal.GetWorkflow(ctx, r.commandID, "").Get(ctx, &outcome); err != nil {
		t.Fatalf("command %s did not end within %s: %v", r.commandID, commandEndTimeout, err)
	}
	t.Logf("command %s ended %s (%s): %s after the kill, %s after the pool edit", r.commandID, outcome.Result, outcome.Detail,
		time.Since(r.killed).Round(time.Millisecond), time.Since(r.edited).Round(time.Millisecond))
	if outcome.Result != workflows.CommandSucceeded {
		t.Errorf("command %s ended %s (%s), want %s", r.commandID, outcome.Result, outcome.Detail, workflows.CommandSucceeded)
	}
	view, err := r.commandView()
	if err != nil {
		t.Fatal(err)
	}
	steps := scheduledActivities(t, r.commandID)
	// The command validates through the disruption workflow's admission
	// (changeAdmitAtCommit), which runs ComputeCommands there, not here.
	// MarkDisruption twice: the soft candidate taint while waiting to be
	// admitted, then the disrupted taint.
	if n := steps[activities.MarkDisruptionActivity]; n != 2 {
		t.Errorf("command %s scheduled MarkDisruption %d times, want twice (candidate taint, then disrupted): %v", r.commandID, n, steps)
	}
	for _, activity := range []string{activities.ReserveNodesActivity, activities.AdmitCommandActivity, activities.StartNodeWorkflowsActivity} {
		if steps[activity] != 1 {
			t.Errorf("command %s scheduled %s %d times, want once (a retry is an attempt of one): %v", r.commandID, activity, steps[activity], steps)
		}
	}
	if n := steps[activities.ComputeCommandsActivity]; n != 0 {
		t.Errorf("command %s scheduled ComputeCommands %d times, want none (the disruption workflow admits it): %v", r.commandID, n, steps)
	}

	// The candidate: drained, terminated once, gone.
	result := waitWorkflowResult(t, r.oldWorkflow, terminateTimeout)
	assertTerminated(t, r.oldWorkflow, result, workflows.ReasonDrifted)
	if n := scheduledActivities(t, r.oldWorkflow)[activities.TerminateInstanceActivity]; n != 1 {
		t.Errorf("candidate %s scheduled TerminateInstance %d times, want once", r.oldWorkflow, n)
	}
	if inst := instance(t, r.oldInstance); inst.State != "terminated" || !strings.Contains(inst.StateReason, "UserInitiated") {
		t.Errorf("candidate's instance %s is %s (%s), want terminated by the worker", r.oldInstance, inst.State, inst.StateReason)
	}

	// The replacement: one instance, running, owned by its workflow.
	if len(view.Replacements) != 1 {
		t.Fatalf("command %s launched %v, want one replacement", r.commandID, view.Replacements)
	}
	claim := view.Replacements[0]
	owned := instancesOfClaim(claim)
	if len(owned) != 1 || owned[0].State != "running" {
		t.Fatalf("replacement %s has instances %+v, want exactly one, running", claim, owned)
	}
	var launched []string
	for _, i := range s.instances() {
		if !slices.Contains(r.instancesBefore, i.ID) {
			launched = append(launched, i.ID)
		}
	}
	if len(launched) != 1 || launched[0] != owned[0].ID {
		t.Errorf("pool %s launched %v during the command, want only the replacement's %s", s.pool, launched, owned[0].ID)
	}
	replacementWorkflow := workflows.NodeWorkflowID(suite.stack.ClusterName(), claim)
	state := waitReadyState(t, replacementWorkflow)
	if state.Instance == nil || state.Instance.InstanceID != owned[0].ID {
		t.Errorf("replacement workflow %s owns instance %+v, want %s", replacementWorkflow, state.Instance, owned[0].ID)
	}
	if n := scheduledActivities(t, replacementWorkflow)[activities.LaunchActivity]; n != 1 {
		t.Errorf("replacement %s scheduled Launch %d times, want once", replacementWorkflow, n)
	}
	s.assertNoOrphans(t)
	if started := commandsStarted(t) - r.commandsBefore; started != 1 {
		t.Errorf("the disruption workflow started %d commands during this one, want only it (a replacement taken as Empty, or refusals in a loop)", started)
	}
	pods := s.waitPodsRunning(t, "app=app", 1, launchTimeout)
	if pods[0].Spec.NodeName != state.NodeName {
		t.Errorf("pod %s runs on %s, want the replacement's Node %s", pods[0].Name, pods[0].Spec.NodeName, state.NodeName)
	}
	s.assertNodeClean(t, state.NodeName, "after the command")
	for _, n := range s.nodes(t) {
		if n.Name != state.NodeName {
			t.Errorf("pool %s still has Node %s besides the replacement's %s", s.pool, n.Name, state.NodeName)
		}
	}
}

// assertNoOrphans: every live instance of the pool belongs to a running node
// workflow whose state names it.
func (s *scenario) assertNoOrphans(t *testing.T) {
	t.Helper()
	running := map[string]bool{}
	for _, wf := range s.runningWorkflowsNoFail(context.Background()) {
		if state, err := tryQueryState(wf.ID); err == nil && state.Instance != nil {
			running[state.Instance.InstanceID] = true
		}
	}
	for _, i := range s.liveInstances() {
		if !running[i.ID] {
			t.Errorf("instance %s (%s, node claim %s) is live without a running node workflow", i.ID, i.State, i.Tags[apisv1.TagNodeClaim])
		}
	}
}

// assertNodeClean: the Node is schedulable and carries no disrupted taint.
func (s *scenario) assertNodeClean(t *testing.T, nodeName, when string) {
	t.Helper()
	node, err := suite.kube.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Spec.Unschedulable || stacktest.HasTaint(node, activities.DisruptedTaintKey) {
		t.Errorf("Node %s %s: unschedulable %v, taints %v; want schedulable without %s", nodeName, when, node.Spec.Unschedulable, node.Spec.Taints, activities.DisruptedTaintKey)
	}
}
