package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/millwright/millwright/activities"
	kubeactivities "github.com/millwright/millwright/activities/kube"
	"github.com/millwright/millwright/local/stack/stacktest"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/workflows"
)

// nodeEffect is how the "after" kill sees that an activity did its side
// effect on a Node (or saw what it waits for): a change from before to
// after (before nil: the Node was added; after nil: it was deleted).
type nodeEffect func(before, after *corev1.Node) bool

// nodeEffects are the node workflow activities whose side effect is a
// change of their Node. The "after" kill watches Nodes and SIGKILLs the
// workers the moment the change is seen — a fixed delay misses activities
// that are one API call — then checks that the activity was still pending
// (its completion had not reached Temporal), else tries the next one.
var nodeEffects = map[string]nodeEffect{
	// The instance's Node appeared: the wait is about to return.
	activities.WaitForRegistrationActivity: func(before, after *corev1.Node) bool {
		return before == nil && after != nil
	},
	// The termination finalizer was added (the adoption patch).
	activities.RegisterNodeActivity: func(before, after *corev1.Node) bool {
		return before != nil && after != nil && !hasFinalizer(before) && hasFinalizer(after)
	},
	// The Node became Ready: what the wait looks for.
	activities.WaitForInitializationActivity: func(before, after *corev1.Node) bool {
		return before != nil && after != nil && !nodeReady(before) && nodeReady(after)
	},
	// The budget reservation was written on the Node.
	activities.AllowDisruptionActivity: func(before, after *corev1.Node) bool {
		return before != nil && after != nil && !hasAnnotation(before, kubeactivities.ReservedForDisruptionAnnotation) &&
			hasAnnotation(after, kubeactivities.ReservedForDisruptionAnnotation)
	},
	// The Node was cordoned: the drain's first write.
	activities.DrainActivity: func(before, after *corev1.Node) bool {
		return before != nil && after != nil && !before.Spec.Unschedulable && after.Spec.Unschedulable
	},
	// The Node is gone: DeleteNode deleted it and removed the finalizer.
	activities.DeleteNodeActivity: func(before, after *corev1.Node) bool {
		return before != nil && after == nil && hasFinalizer(before)
	},
}

func hasFinalizer(n *corev1.Node) bool {
	return slices.Contains(n.Finalizers, activities.TerminationFinalizer)
}

func hasAnnotation(n *corev1.Node, key string) bool {
	_, ok := n.Annotations[key]
	return ok
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// killAfterNodeEffect watches the pool's Nodes until one shows activity's
// side effect while its node workflow runs activity, SIGKILLs every worker
// at that moment (the one that ran it is among them; which one is not
// known that fast), and reports whether the kill landed: the activity was
// still pending, so its retry runs after its own side effect.
func (n *nemesis) killAfterNodeEffect(ctx context.Context, activity string, effect nodeEffect, deadline time.Time) bool {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	seen := map[string]*corev1.Node{}
	for ctx.Err() == nil {
		list, err := n.s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for i := range list.Items {
			seen[list.Items[i].Name] = &list.Items[i]
		}
		w, err := n.s.Kube.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for event := range w.ResultChan() {
			node, ok := event.Object.(*corev1.Node)
			if !ok {
				break // an error event: list and watch again
			}
			before, after := seen[node.Name], node
			if event.Type == watch.Deleted {
				after = nil
				delete(seen, node.Name)
			} else {
				seen[node.Name] = node
			}
			if !effect(before, after) {
				continue
			}
			claim := n.claimOf(node)
			if claim == "" {
				continue
			}
			if landed := n.killAllIfPending(ctx, activity, claim); landed {
				w.Stop()
				return true
			}
		}
		w.Stop()
	}
	return false
}

// claimOf is the node claim of a Node of the suite's pool: its label once
// registered, else the claim its instance was launched for.
func (n *nemesis) claimOf(node *corev1.Node) string {
	if claim := node.Labels[activities.NodeClaimLabel]; claim != "" {
		return claim
	}
	for _, i := range n.s.Emulator().State().Instances {
		if i.NodeName == node.Name && i.Tags[apisv1.TagNodePool] == poolName {
			return i.Tags[apisv1.TagNodeClaim]
		}
	}
	return ""
}

// killAllIfPending SIGKILLs every worker not already down at once, then
// reports whether the claim's node workflow still had activity pending
// (the kill landed after the side effect, before the completion).
func (n *nemesis) killAllIfPending(ctx context.Context, activity, claim string) bool {
	var killed []int
	for i := range n.s.Workers {
		if n.killNow(i) {
			killed = append(killed, i)
		}
	}
	workflowID := workflows.NodeWorkflowID(n.s.Local.ClusterName(), claim)
	landed, attempt := false, int32(0)
	if described, err := n.s.Temporal.DescribeWorkflowExecution(ctx, workflowID, ""); err == nil {
		for _, p := range described.GetPendingActivities() {
			if p.GetActivityType().GetName() == activity && p.GetState() != enumspb.PENDING_ACTIVITY_STATE_SCHEDULED {
				landed, attempt = true, p.GetAttempt()
			}
		}
	}
	workers := make([]string, 0, len(killed))
	for _, i := range killed {
		workers = append(workers, n.s.Workers[i].Name)
	}
	kind := FaultKillAfter
	if !landed {
		kind = FaultKillAfterMissed
	}
	if len(killed) > 0 {
		n.record(kind, "activity", activity, "workflow", workflowID, "attempt", attempt, "landed", landed,
			"trigger", "node change", "workers", workers)
	}
	for _, i := range killed {
		n.restartLater(i)
	}
	return landed && len(killed) > 0
}

// effectProbe reports whether the running activity target did its side
// effect (or saw what it waits for).
type effectProbe func(ctx context.Context, n *nemesis, target runningActivity) bool

// laterEffects are the activities that run long enough to be found running
// first (they poll every few seconds) and whose side effect is probed.
var laterEffects = map[string]effectProbe{
	// EC2 reports the instance terminated: the wait is about to return.
	activities.WaitForInstanceTerminatedActivity: func(_ context.Context, n *nemesis, target runningActivity) bool {
		claim := target.workflowID[strings.LastIndex(target.workflowID, "/")+1:]
		for _, i := range n.s.Emulator().State().Instances {
			if i.Tags[apisv1.TagNodeClaim] == claim && i.State == "terminated" {
				return true
			}
		}
		return false
	},
	// A node workflow was started since the attempt began.
	activities.StartNodeWorkflowsActivity: func(ctx context.Context, n *nemesis, target runningActivity) bool {
		resp, err := n.s.Temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
			Namespace: n.s.Namespace,
			Query:     fmt.Sprintf("%s AND StartTime >= '%s'", stacktest.PoolQuery(poolName), target.startedAt.UTC().Format(time.RFC3339Nano)),
		})
		return err == nil && resp.GetCount() > 0
	},
}

// effectPoll is how often awaitEffect probes.
const effectPoll = 100 * time.Millisecond

// awaitEffect probes until target's side effect is seen while it is still
// the pending attempt (true), or it ended first (false).
func (n *nemesis) awaitEffect(ctx context.Context, probe effectProbe, target runningActivity) bool {
	for deadline := time.Now().Add(n.sweepTimeout); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(effectPoll) {
		if probe(ctx, n, target) {
			return n.stillPending(ctx, target)
		}
		if !n.stillPending(ctx, target) {
			return false
		}
	}
	return false
}

// stillPending reports whether target's attempt is still the started
// attempt of its workflow.
func (n *nemesis) stillPending(ctx context.Context, target runningActivity) bool {
	described, err := n.s.Temporal.DescribeWorkflowExecution(ctx, target.workflowID, "")
	if err != nil {
		return false
	}
	for _, p := range described.GetPendingActivities() {
		if p.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED && p.GetAttempt() == target.attempt &&
			p.GetLastStartedTime().AsTime().Equal(target.startedAt) {
			return true
		}
	}
	return false
}
