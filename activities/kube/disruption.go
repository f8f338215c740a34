package kube

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/millwright/millwright/activities"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// nodePoolResource is where NodePools live; they have no typed clientset, so
// they are read through the dynamic client and converted to model/apis/v1.
var nodePoolResource = apisv1.GroupVersion.WithResource("nodepools")

// AllowDisruption tells whether the voluntary disruption of req.NodeName for
// req.Reason may start now. It reads the NodePool and the pool's live Nodes:
// a Node counts as being disrupted when it carries the disrupted taint or is
// being deleted. The most restrictive budget that applies to the reason and
// is active now (no schedule, or inside its cron window) caps how many may
// be; minNodes caps how few may remain. A Node already being disrupted is
// allowed (it is already counted), which keeps the answer stable when the
// workflow asks again.
//
// The answer is a reservation: decisions of one pool take turns under the
// pool's Lease (disruptionlock.go), and an allowed node is annotated
// ReservedForDisruptionAnnotation before the Lease is released, so the next
// decision counts it even though its drain has not tainted it yet. A
// reservation the workflow does not use (a pod arrived meanwhile) lapses
// after disruptionReservationTTL.
func (a *Activities) AllowDisruption(ctx context.Context, req activities.AllowDisruptionRequest) (activities.AllowDisruptionResponse, error) {
	switch {
	case req.NodePool == "":
		return activities.AllowDisruptionResponse{}, invalidRequest(activities.AllowDisruptionActivity, "nodePool", "empty")
	case req.NodeName == "":
		return activities.AllowDisruptionResponse{}, invalidRequest(activities.AllowDisruptionActivity, "nodeName", "empty")
	}
	ctx, unlock, err := a.lockPool(ctx, req.NodePool)
	if err != nil {
		return activities.AllowDisruptionResponse{}, err
	}
	defer unlock()
	pool, err := a.nodePool(ctx, req.NodePool)
	if apierrors.IsNotFound(err) {
		// The pool's nodes are orphans: nothing protects them any more.
		return activities.AllowDisruptionResponse{Allowed: true,
			Why: fmt.Sprintf("NodePool %s no longer exists: no budget applies", req.NodePool)}, nil
	}
	if err != nil {
		return activities.AllowDisruptionResponse{}, err
	}
	list, err := a.clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{NodePoolLabel: req.NodePool}).String(),
	})
	if err != nil {
		return activities.AllowDisruptionResponse{}, fmt.Errorf("list Nodes of NodePool %s: %w", req.NodePool, err)
	}
	now := a.clock.Now()
	answer := decideDisruption(pool, list.Items, req, now)
	if answer.Allowed {
		if err := a.reserveDisruption(ctx, req.NodeName, now); err != nil {
			return activities.AllowDisruptionResponse{}, err
		}
	}
	return answer, nil
}

// ReservedForDisruptionAnnotation records when AllowDisruption allowed the
// Node's disruption (RFC 3339): until its drain taints the Node, this is what
// the pool's next decision counts.
const ReservedForDisruptionAnnotation = "millwright.dev/disruption-reserved-at"

// disruptionReservationTTL is how long an allowed disruption counts without
// the drain's taint: the workflow cordons within seconds of being allowed.
const disruptionReservationTTL = time.Minute

// reserveDisruption annotates the Node with now.
func (a *Activities) reserveDisruption(ctx context.Context, nodeName string, now time.Time) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, ReservedForDisruptionAnnotation, now.UTC().Format(time.RFC3339))
	_, err := a.clientset.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil // the Node is gone: nothing to count
	}
	if err != nil {
		return fmt.Errorf("reserve the disruption of Node %s: %w", nodeName, err)
	}
	return nil
}

// nodePool reads one NodePool and applies the CRD's defaults (so a pool
// without budgets gets the default 10% budget, as the API server would have
// stored it).
func (a *Activities) nodePool(ctx context.Context, name string) (*apisv1.NodePool, error) {
	obj, err := a.dynamic.Resource(nodePoolResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var pool apisv1.NodePool
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &pool); err != nil {
		return nil, fmt.Errorf("decode NodePool %s: %w", name, err)
	}
	pool.SetDefaults()
	return &pool, nil
}

// doNotDisruptRetry is how long a node protected by its do-not-disrupt
// annotation waits before asking again: a user removes the annotation by
// hand, so there is no deadline to wait for.
const doNotDisruptRetry = 5 * time.Minute

// decideDisruption is AllowDisruption's decision on read state.
func decideDisruption(pool *apisv1.NodePool, nodes []corev1.Node, req activities.AllowDisruptionRequest, now time.Time) activities.AllowDisruptionResponse {
	total, disrupting := 0, 0
	for i := range nodes {
		node := &nodes[i]
		total++
		if !beingDisrupted(node, now) {
			if node.Name == req.NodeName {
				if key, _, protected := apisv1.DoNotDisrupt(node.Annotations, node.CreationTimestamp.Time, now); protected {
					return activities.AllowDisruptionResponse{Allowed: false,
						Why:        fmt.Sprintf("Node %s is annotated %s=%s", node.Name, key, node.Annotations[key]),
						RetryAfter: doNotDisruptRetry}
				}
			}
			continue
		}
		if node.Name == req.NodeName {
			return activities.AllowDisruptionResponse{Allowed: true, Why: "node is already being disrupted"}
		}
		disrupting++
	}

	limit, err := disruptionLimit(pool, req.Reason, total, now)
	if err != nil {
		// A budget that cannot be read must not silently allow everything.
		return activities.AllowDisruptionResponse{Allowed: false, Why: err.Error()}
	}
	if limit != nil && disrupting >= limit.allowed {
		return activities.AllowDisruptionResponse{
			Allowed: false,
			Why: fmt.Sprintf("NodePool %s budget %s allows %d of %d node(s) disrupted for reason %q; %d already are",
				pool.Name, limit.budget, limit.allowed, total, req.Reason, disrupting),
			RetryAfter: limit.windowLeft,
		}
	}
	if pool.Spec.MinNodes != nil {
		remaining := total - disrupting - 1
		if remaining < int(*pool.Spec.MinNodes) {
			return activities.AllowDisruptionResponse{
				Allowed: false,
				Why: fmt.Sprintf("NodePool %s minNodes %d: disrupting %s would leave %d node(s)",
					pool.Name, *pool.Spec.MinNodes, req.NodeName, remaining),
			}
		}
	}
	return activities.AllowDisruptionResponse{Allowed: true}
}

// beingDisrupted: Drain has tainted the node, it is being deleted, or its
// disruption was allowed less than disruptionReservationTTL ago.
func beingDisrupted(node *corev1.Node, now time.Time) bool {
	if node.DeletionTimestamp != nil || hasTaint(node.Spec.Taints, disruptedTaint) {
		return true
	}
	reserved, err := time.Parse(time.RFC3339, node.Annotations[ReservedForDisruptionAnnotation])
	return err == nil && now.Before(reserved.Add(disruptionReservationTTL))
}

// budgetLimit is the most restrictive active budget.
type budgetLimit struct {
	// budget names it for messages: spec.disruption.budgets[i] (nodes X).
	budget  string
	allowed int
	// windowLeft is how long the budget's cron window stays open (zero for
	// a budget without schedule): asking again after it may get a
	// different answer.
	windowLeft time.Duration
}

// disruptionLimit returns the most restrictive budget of pool that applies
// to reason and is active at now, or nil when none is (no cap). Percentages
// are of total and rounded up.
func disruptionLimit(pool *apisv1.NodePool, reason string, total int, now time.Time) (*budgetLimit, error) {
	var tightest *budgetLimit
	for i, budget := range pool.Spec.Disruption.Budgets {
		field := fmt.Sprintf("spec.disruption.budgets[%d]", i)
		if len(budget.Reasons) > 0 && !slices.Contains(budget.Reasons, apisv1.DisruptionReason(reason)) {
			continue
		}
		active, windowLeft, err := budgetWindow(budget, now)
		if err != nil {
			return nil, fmt.Errorf("NodePool %s %s: %w", pool.Name, field, err)
		}
		if !active {
			continue
		}
		nodes := intstr.Parse(budget.Nodes)
		allowed, err := intstr.GetScaledValueFromIntOrPercent(&nodes, total, true)
		if err != nil {
			return nil, fmt.Errorf("NodePool %s %s.nodes %q: %w", pool.Name, field, budget.Nodes, err)
		}
		if allowed < 0 {
			return nil, fmt.Errorf("NodePool %s %s.nodes %q: negative", pool.Name, field, budget.Nodes)
		}
		if tightest == nil || allowed < tightest.allowed {
			tightest = &budgetLimit{budget: fmt.Sprintf("%s (nodes %s)", field, budget.Nodes), allowed: allowed, windowLeft: windowLeft}
		}
	}
	return tightest, nil
}

// budgetWindow tells whether budget is active at now and, for a scheduled
// budget, how long its current window stays open. A window opens at each
// time the cron schedule (UTC) fires and lasts budget.Duration, so it is
// open at now exactly when the schedule fired in (now-duration, now].
func budgetWindow(budget apisv1.Budget, now time.Time) (bool, time.Duration, error) {
	if budget.Schedule == nil {
		return true, 0, nil
	}
	if budget.Duration == nil {
		return false, 0, fmt.Errorf("schedule %q has no duration", *budget.Schedule)
	}
	schedule, err := cron.ParseStandard(*budget.Schedule)
	if err != nil {
		return false, 0, fmt.Errorf("schedule %q: %w", *budget.Schedule, err)
	}
	duration, err := budget.Duration.Parse()
	if err != nil {
		return false, 0, fmt.Errorf("duration: %w", err)
	}
	now = now.UTC() // robfig/cron evaluates in the location of the time it is given
	opened := schedule.Next(now.Add(-duration))
	if opened.After(now) || opened.IsZero() {
		return false, 0, nil
	}
	return true, opened.Add(duration).Sub(now), nil
}
