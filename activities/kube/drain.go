package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/flowcontrol"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/events"
)

// evictionJitter spreads the retries of PDB-refused evictions by up to this
// fraction of the backoff, so pods refused together do not retry together.
const evictionJitter = 1.0

// drainGroups are the eviction stages in order: workloads first, then the
// node agents that serve them (DaemonSets), then what the node or cluster
// cannot run without.
var drainGroups = []activities.DrainStage{
	activities.DrainStageEvictNonCritical,
	activities.DrainStageEvictDaemonSet,
	activities.DrainStageEvictCritical,
}

// Drain empties the Node: it taints it millwright.dev/disrupted:NoSchedule
// and cordons it, then evicts its pods through the Eviction API one group at
// a time — non-critical non-DaemonSet pods, then non-critical DaemonSet pods,
// then critical ones (system-cluster-critical, system-node-critical) — moving
// to the next group only once every pod of the previous one is gone. It
// skips mirror pods (the kubelet owns them), terminal pods and pods that
// tolerate the disrupted taint (they would be scheduled straight back).
//
// A PodDisruptionBudget refusal (429) is retried per pod with jittered
// exponential backoff; a PDB is never overridden before req.Deadline. On a
// voluntary drain, pods annotated millwright.dev/do-not-disrupt=true are not
// evicted and are reported in DrainProgress.Blocked. When req.Deadline is
// set, each remaining pod is deleted regardless of PDBs and do-not-disrupt
// at Deadline minus its own termination grace period, with a grace period of
// min(its own, time left) (at least 1s, so its kubelet still stops it), so
// that every pod is gone by the Deadline.
//
// Within a group the largest pods (by CPU, then memory requested) are
// evicted first: kube-scheduler places the pods that replace them in the
// order they come (by priority, then arrival), and the consolidation plan
// that chose this drain placed them largest first (model/disruption
// quickFit). Evicted in list order, small pods could take the holes the
// plan had left for large ones, which then went pending and had the
// provisioner launch a node for each (during one mixed-600 run's
// consolidation it launched for 33 pods in 24 batches, most of them a
// node for one large pod).
//
// Drain heartbeats DrainProgress after every step and, when retried, resumes
// from the last one: its counters carry over and the taint step only writes
// if the taint or cordon went missing. It returns once two passes,
// DrainConfirmation apart, found no drainable pod left on the Node.
func (a *Activities) Drain(ctx context.Context, req activities.DrainRequest) (activities.DrainResponse, error) {
	if req.NodeName == "" {
		return activities.DrainResponse{}, invalidRequest(activities.DrainActivity, "nodeName", "empty")
	}
	logger := a.logger.With(zap.String("node", req.NodeName), zap.String("reason", req.Reason),
		zap.Bool("voluntary", req.Voluntary))
	progress := a.resumedProgress(ctx, logger)

	tainted, err := a.cordon(ctx, req, logger)
	if err != nil {
		return activities.DrainResponse{}, err
	}
	if progress.Stage == activities.DrainStageTaint {
		progress.Stage = activities.DrainStageEvictNonCritical
	}
	heartbeat(ctx, progress)

	drain := &nodeDrain{
		Activities: a,
		req:        req,
		logger:     logger,
		progress:   progress,
		// The "fake" constructor is the one that takes an injected clock.
		backoff: flowcontrol.NewFakeBackOffWithJitter(a.evictionRetryInitial, a.evictionRetryMax, a.clock, evictionJitter),
	}
	if since := req.UnschedulableSince; tainted && !since.IsZero() && !since.After(a.clock.Now()) {
		drain.unschedulableSince = since
	}
	err = drain.run(ctx)
	response := activities.DrainResponse{Evicted: drain.progress.Evicted, Deleted: drain.progress.Deleted}
	if err != nil {
		return response, err
	}
	logger.Info("Drained node", zap.Int("evicted", response.Evicted), zap.Int("deleted", response.Deleted))
	return response, nil
}

// resumedProgress is the progress a previous attempt heartbeated, or the
// start.
func (a *Activities) resumedProgress(ctx context.Context, logger *zap.Logger) activities.DrainProgress {
	start := activities.DrainProgress{Stage: activities.DrainStageTaint}
	if !activity.IsActivity(ctx) || !activity.HasHeartbeatDetails(ctx) {
		return start
	}
	var previous activities.DrainProgress
	if err := activity.GetHeartbeatDetails(ctx, &previous); err != nil || previous.Stage == "" {
		logger.Warn("Ignoring unreadable drain progress from the previous attempt", zap.Error(err))
		return start
	}
	logger.Info("Resuming drain", zap.String("stage", string(previous.Stage)),
		zap.Int("evicted", previous.Evicted), zap.Int("deleted", previous.Deleted))
	return previous
}

// cordon puts the disrupted taint on the Node and marks it unschedulable,
// writing only what is missing, and reports whether the taint was already
// there. A Node already gone is not an error: its pods are still drained
// (the pod garbage collector would otherwise get to them much later).
func (a *Activities) cordon(ctx context.Context, req activities.DrainRequest, logger *zap.Logger) (tainted bool, err error) {
	node, changed, err := a.updateNode(ctx, req.NodeName, func(node *corev1.Node) {
		tainted = hasTaint(node.Spec.Taints, disruptedTaint)
		node.Spec.Taints = addMissingTaints(node.Spec.Taints, disruptedTaint)
		node.Spec.Unschedulable = true
	})
	if apierrors.IsNotFound(err) {
		logger.Info("Node already gone; draining its remaining pods")
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cordon node %s: %w", req.NodeName, err)
	}
	if changed {
		logger.Info("Cordoned node", zap.String("taint", disruptedTaint.ToString()))
		a.events.Publish(events.Event{
			InvolvedObject: events.NodeRef(node.Name, node.UID), Type: corev1.EventTypeNormal,
			Reason: events.Draining, Message: "Draining node: " + req.Reason,
			DedupeValues: []string{string(node.UID), events.Draining},
		})
	}
	return tainted, nil
}

// nodeDrain is one Drain execution's state between polls.
type nodeDrain struct {
	*Activities
	req      activities.DrainRequest
	logger   *zap.Logger
	progress activities.DrainProgress
	// backoff holds, per pod UID, when an eviction refused by a PDB may be
	// tried again.
	backoff *flowcontrol.Backoff
	// emptySeen is set by the first pass that found no drainable pod. The
	// Node is drained only when the next pass, DrainConfirmation later
	// (see run), agrees: a scheduler whose cache missed the cordon (seen
	// after a kube-apiserver restart in the chaos suite) can still bind a
	// pod to the Node just after it looked empty, and terminating the
	// instance then would take that pod down without an eviction, past
	// its PDB.
	emptySeen bool
	// unschedulableSince is when a disruption command tainted the Node,
	// if the taint was there when the drain began (see
	// DrainRequest.UnschedulableSince); zero otherwise.
	unschedulableSince time.Time
}

// run passes over the Node's pods every PollInterval until one reports it
// drained; the look that confirms an empty Node comes DrainConfirmation
// after the first, not a whole poll later: while an empty Node waits for it,
// it still counts against its pool's disruption budget, so in a scale-down
// the pace of every budget-limited round is set by this wait (2 s of the
// 2.5 s a one-node round took at the poll interval).
func (d *nodeDrain) run(ctx context.Context) error {
	for {
		done, err := d.step(ctx)
		if err != nil || done {
			return err
		}
		wait := d.pollInterval
		if d.emptySeen && !d.apiServerTroubled() {
			wait = d.confirmationWait()
		}
		if wait <= 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-d.clock.After(wait):
		}
	}
}

// confirmationWait is how long after its first empty look the drain looks
// again: DrainConfirmation, counted from when the Node was tainted when a
// disruption command did that before the drain began (what the window
// waits for, pods placed before kube-scheduler saw the taint, cannot come
// later than that), else from now.
func (d *nodeDrain) confirmationWait() time.Duration {
	if d.unschedulableSince.IsZero() {
		return d.drainConfirmation
	}
	return min(max(d.unschedulableSince.Add(d.drainConfirmation).Sub(d.clock.Now()), 0), d.drainConfirmation)
}

// step is one pass over the Node's pods: deadline deletions, then evictions
// of the current group. It reports done when no drainable pod is left.
func (d *nodeDrain) step(ctx context.Context) (bool, error) {
	// The passes that evict and wait read the API server's watch cache; the
	// one that confirms an empty Node reads consistently, so a pod bound a
	// moment ago is seen before the instance goes. At 5,000 pods each
	// consistent read of a draining Node's pods cost the API server a read
	// of every pod from etcd, every poll, for every draining Node.
	list := d.recentPodsOnNode
	if d.emptySeen {
		list = d.podsOnNode
	}
	pods, err := list(ctx, d.req.NodeName)
	if err != nil {
		if ctx.Err() == nil { // a cancelled activity is no API server trouble
			d.noteAPIServerTrouble()
		}
		return false, err
	}
	now := d.clock.Now()
	groups := make([][]*corev1.Pod, len(drainGroups))
	var blocked []string
	allTerminating := true
	remaining := 0
	for i := range pods {
		pod := &pods[i]
		if isMirrorPod(pod) || isTerminal(pod) || toleratesDisruption(pod) || isStuckTerminating(pod, now) {
			continue
		}
		remaining++
		if deleted, err := d.deleteIfDue(ctx, pod, now); err != nil {
			return false, err
		} else if deleted {
			continue // now terminating: it is waited for, not evicted
		}
		if pod.DeletionTimestamp == nil {
			allTerminating = false
		}
		group := drainGroupOf(pod)
		groups[group] = append(groups[group], pod)
	}
	if remaining > 0 {
		d.emptySeen = false
	}

	switch {
	case remaining == 0 && !d.emptySeen:
		d.emptySeen = true
		return false, nil
	case remaining == 0:
		d.progress.Stage = activities.DrainStageDone
		d.progress.Blocked = nil
		heartbeat(ctx, d.progress)
		return true, nil
	case allTerminating:
		d.progress.Stage = activities.DrainStageWaitForPodsTerminating
	default:
		for i, group := range groups {
			if len(group) == 0 {
				continue
			}
			largestFirst(group)
			d.progress.Stage = drainGroups[i]
			blocked, err = d.evict(ctx, group, now)
			if err != nil {
				return false, err
			}
			break
		}
	}
	d.progress.Blocked = blocked
	heartbeat(ctx, d.progress)
	return false, nil
}

// largestFirst orders pods by CPU requested, then memory, largest first
// (then by name, so the order is stable).
func largestFirst(pods []*corev1.Pod) {
	type size struct{ cpu, memory int64 }
	sizes := make(map[*corev1.Pod]size, len(pods))
	for _, pod := range pods {
		requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
		sizes[pod] = size{requests.Cpu().MilliValue(), requests.Memory().Value()}
	}
	slices.SortStableFunc(pods, func(a, b *corev1.Pod) int {
		sa, sb := sizes[a], sizes[b]
		if c := cmp.Compare(sb.cpu, sa.cpu); c != 0 {
			return c
		}
		if c := cmp.Compare(sb.memory, sa.memory); c != 0 {
			return c
		}
		return cmp.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
}

// drainGroupOf is the index in drainGroups of the stage that evicts pod.
func drainGroupOf(pod *corev1.Pod) int {
	switch {
	case isCritical(pod):
		return 2
	case isDaemonSetPod(pod):
		return 1
	default:
		return 0
	}
}

// evict asks the Eviction API to evict each pod of group not already
// terminating, and returns the pods whose eviction is refused.
func (d *nodeDrain) evict(ctx context.Context, group []*corev1.Pod, now time.Time) ([]string, error) {
	var blocked []string
	for _, pod := range group {
		if pod.DeletionTimestamp != nil {
			continue
		}
		key := podKey(pod)
		uid := string(pod.UID)
		if protection := doNotDisrupt(pod, now); d.req.Voluntary && protection != "" {
			blocked = append(blocked, key+" ("+protection+")")
			continue
		}
		if d.backoff.IsInBackOffSinceUpdate(uid, now) {
			blocked = append(blocked, key+" (PodDisruptionBudget, retrying)")
			continue
		}
		err := d.clientset.PolicyV1().Evictions(pod.Namespace).Evict(ctx, &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
			DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}},
		})
		switch {
		case err == nil:
			d.backoff.DeleteEntry(uid)
			d.progress.Evicted++
			d.logger.Info("Evicted pod", zap.String("pod", key), zap.String("stage", string(d.progress.Stage)))
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Gone already, or a different pod under the same name now (the
			// UID precondition failed): the next list shows what is left.
			d.backoff.DeleteEntry(uid)
		case apierrors.IsTooManyRequests(err):
			// The PDB allows no disruption now; the API server did not
			// touch the pod. Try this pod again after its backoff.
			d.backoff.Next(uid, now)
			blocked = append(blocked, key+" (PodDisruptionBudget)")
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			return nil, err
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			// Retrying will not help until someone fixes RBAC; fail the
			// attempt so it is visible in the workflow.
			return nil, fmt.Errorf("evict pod %s: %w", key, err)
		default:
			// E.g. 500 "pod matches multiple PDBs": retried like a refusal,
			// and reported so a human can see why the drain is stuck.
			d.backoff.Next(uid, now)
			blocked = append(blocked, fmt.Sprintf("%s (eviction failed: %v)", key, err))
			d.logger.Warn("Eviction failed", zap.String("pod", key), zap.Error(err))
		}
		// Within the pass, not only after it: a node with hundreds of pods
		// (and a throttled client) takes longer than the heartbeat timeout
		// to go through them once. The SDK throttles what it sends.
		heartbeat(ctx, d.progress)
	}
	return blocked, nil
}

// deleteIfDue deletes pod, ignoring PDBs and do-not-disrupt, once the
// drain's deadline is less than the pod's grace period away, with grace
// min(its own, time left), at least 1s. A pod already terminating in time is
// left alone.
func (d *nodeDrain) deleteIfDue(ctx context.Context, pod *corev1.Pod, now time.Time) (bool, error) {
	if d.req.Deadline.IsZero() {
		return false, nil
	}
	ownGrace := podGracePeriod(pod)
	if now.Before(d.req.Deadline.Add(-ownGrace)) {
		return false, nil
	}
	if pod.DeletionTimestamp != nil && !pod.DeletionTimestamp.After(d.req.Deadline) {
		return false, nil
	}
	grace := min(ownGrace, d.req.Deadline.Sub(now))
	// Whole seconds, rounded up, at least 1: 0 would remove the pod from
	// the API at once while its containers keep running on the kubelet.
	seconds := max(int64(math.Ceil(grace.Seconds())), 1)
	err := d.clientset.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &seconds,
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete pod %s past the drain deadline: %w", podKey(pod), err)
	}
	if pod.DeletionTimestamp == nil {
		d.progress.Deleted++
	}
	d.logger.Info("Deleted pod past the drain deadline", zap.String("pod", podKey(pod)),
		zap.Int64("gracePeriodSeconds", seconds), zap.Time("deadline", d.req.Deadline))
	return true, nil
}
