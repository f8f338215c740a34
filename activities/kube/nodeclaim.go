package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/events"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// NodeClaimResource is millwright.dev/v1 nodeclaims.
var NodeClaimResource = apisv1.GroupVersion.WithResource("nodeclaims")

// Annotations on a NodeClaim.
const (
	// WorkflowIDAnnotation names the node workflow the NodeClaim mirrors.
	WorkflowIDAnnotation = apisv1.Group + "/workflow-id"
	// LegacyPhaseSinceAnnotation held, before status.phaseSince, when the
	// node entered its recorded phase (RFC 3339): it is still read from
	// NodeClaims written then, and removed by their next write.
	LegacyPhaseSinceAnnotation = apisv1.Group + "/phase-since"
)

// InvalidNodeClaimRequestErrorType fails an UpsertNodeClaim request that
// can never succeed. Not retryable.
const InvalidNodeClaimRequestErrorType = "InvalidNodeClaimRequest"

// maxNominatedPods bounds the pods one launch tells they are nominated
// (one read each); the nomination rate limiter bounds the events anyway.
const maxNominatedPods = 50

// UpsertNodeClaim writes the node workflow's state, as of entering
// req.Phase, to its NodeClaim: created when missing (unless the node is
// already leaving: a NodeClaim deleted then stays deleted), updated
// otherwise, and deleted once the node is Terminated (its finalizer
// removed). It publishes the events of the transition (Nominated to the
// pods when the node claim is created, Launched, Registered, Initialized,
// Terminating, Terminated or the failure's Warning) only when the
// NodeClaim did not record req.Phase yet, so a retry neither repeats them
// nor reports the transition twice. Idempotent.
func (a *Activities) UpsertNodeClaim(ctx context.Context, req activities.UpsertNodeClaimRequest) (activities.UpsertNodeClaimResponse, error) {
	var resp activities.UpsertNodeClaimResponse
	if err := validateNodeClaimRequest(req); err != nil {
		return resp, temporal.NewNonRetryableApplicationError(err.Error(), InvalidNodeClaimRequestErrorType, nil)
	}
	current, live, err := a.readNodeClaim(ctx, req.NodeClaimName)
	if err != nil {
		return resp, err
	}
	resp, err = a.upsertNodeClaimFrom(ctx, req, current)
	if apierrors.IsConflict(err) || (!live && apierrors.IsNotFound(err)) {
		// The copy was stale (the cache lags, or someone wrote since the
		// read): every write is guarded by its resourceVersion, so nothing
		// was lost. Once more from a live read.
		if current, err = a.getNodeClaim(ctx, req.NodeClaimName); err != nil {
			return resp, err
		}
		return a.upsertNodeClaimFrom(ctx, req, current)
	}
	return resp, err
}

// readNodeClaim is the NodeClaim called name from the cache when there is
// one and it holds the NodeClaim, else from the API server (live); nil when
// there is none. A cache miss is read live: a NodeClaim created a moment
// ago may not be in it yet.
func (a *Activities) readNodeClaim(ctx context.Context, name string) (claim *apisv1.NodeClaim, live bool, err error) {
	if a.nodeClaims != nil {
		if obj, err := a.nodeClaims.Get(name); err == nil {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				if claim, err := fromUnstructured(u); err == nil {
					return claim, false, nil
				}
			}
		}
	}
	claim, err = a.getNodeClaim(ctx, name)
	return claim, true, err
}

// getNodeClaim reads the NodeClaim called name from the API server; nil
// when there is none.
func (a *Activities) getNodeClaim(ctx context.Context, name string) (*apisv1.NodeClaim, error) {
	u, err := a.dynamic.Resource(NodeClaimResource).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get NodeClaim %s: %w", name, err)
	}
	return fromUnstructured(u)
}

// upsertNodeClaimFrom writes req's phase over current (nil: there is no
// NodeClaim). Its writes are guarded by current's resourceVersion.
func (a *Activities) upsertNodeClaimFrom(ctx context.Context, req activities.UpsertNodeClaimRequest, current *apisv1.NodeClaim) (activities.UpsertNodeClaimResponse, error) {
	var resp activities.UpsertNodeClaimResponse
	if current == nil && activities.NodePhaseLeaving(req.Phase) {
		resp.Skipped = "the NodeClaim is gone and the node is leaving: not recreated"
		a.publishTransition(ctx, req, nil, "")
		return resp, nil
	}
	if current != nil && req.Phase == activities.NodePhaseTerminated {
		return a.releaseTerminated(ctx, req, current)
	}
	node := a.nodeOf(ctx, req.NodeName)
	desired := desiredNodeClaim(req, current, node)
	written, err := a.writeNodeClaim(ctx, current, desired)
	if current == nil && apierrors.IsNotFound(err) {
		// Creating answered NotFound: the API server does not serve
		// NodeClaims (a cluster whose CRDs predate them). The mirror is
		// optional; the node's lifecycle is not.
		resp.Skipped = "the API server does not serve millwright.dev/v1 nodeclaims: install deploy/crds"
		return resp, nil
	}
	if err != nil {
		return resp, err
	}
	resp.Created = current == nil
	a.recordTransition(ctx, req, current, written, &resp)
	return resp, nil
}

// releaseTerminated deletes the NodeClaim of a terminated node without
// writing its last phase first: the object is going, and those two writes
// (metadata, status) were half of its four requests (NodeClaim status
// writes were 45% of the API server's update CPU in a 5,000-pod
// scale-down). The transition is still reported and its events published.
// A NodeClaim that other finalizers hold keeps its last written phase.
func (a *Activities) releaseTerminated(ctx context.Context, req activities.UpsertNodeClaimRequest, current *apisv1.NodeClaim) (activities.UpsertNodeClaimResponse, error) {
	var resp activities.UpsertNodeClaimResponse
	if err := a.releaseNodeClaim(ctx, current); err != nil {
		return resp, err
	}
	a.recordTransition(ctx, req, current, current, &resp)
	return resp, nil
}

// phaseSince is when claim entered its recorded phase; zero when unknown.
func phaseSince(claim *apisv1.NodeClaim) time.Time {
	if claim.Status.PhaseSince != nil {
		return claim.Status.PhaseSince.Time
	}
	since, err := time.Parse(time.RFC3339Nano, claim.Annotations[LegacyPhaseSinceAnnotation])
	if err != nil {
		return time.Time{}
	}
	return since
}

// recordTransition reports and publishes entering req.Phase when current
// (nil: none yet) was in another phase.
func (a *Activities) recordTransition(ctx context.Context, req activities.UpsertNodeClaimRequest, current, written *apisv1.NodeClaim, resp *activities.UpsertNodeClaimResponse) {
	previous := ""
	if current != nil {
		previous = current.Status.Phase
	}
	if previous == req.Phase {
		return
	}
	resp.Entered = req.Phase
	if previous != "" {
		resp.Left = previous
		if since := phaseSince(current); !since.IsZero() && req.At.After(since) {
			resp.LeftAfter = req.At.Sub(since)
		}
	}
	a.publishTransition(ctx, req, written, previous)
	a.logger.Debug("NodeClaim phase recorded", zap.String("nodeClaim", req.NodeClaimName),
		zap.String("phase", req.Phase), zap.String("previous", previous))
}

func validateNodeClaimRequest(req activities.UpsertNodeClaimRequest) error {
	switch {
	case req.NodeClaimName == "":
		return fmt.Errorf("upsert NodeClaim: nodeClaimName is empty")
	case req.NodePool == "":
		return fmt.Errorf("upsert NodeClaim %s: nodePool is empty", req.NodeClaimName)
	case req.At.IsZero():
		return fmt.Errorf("upsert NodeClaim %s: at is zero", req.NodeClaimName)
	}
	switch req.Phase {
	case activities.NodePhaseLaunching, activities.NodePhaseRegistering, activities.NodePhaseInitializing,
		activities.NodePhaseReady, activities.NodePhaseDraining, activities.NodePhaseTerminating, activities.NodePhaseTerminated:
		return nil
	}
	return fmt.Errorf("upsert NodeClaim %s: phase %q is not a node phase", req.NodeClaimName, req.Phase)
}

// nodeOf is the cached Node called name, or nil (unknown, not registered,
// or the cache is not ready).
func (a *Activities) nodeOf(ctx context.Context, name string) *corev1.Node {
	if name == "" {
		return nil
	}
	indexer, err := a.nodeCache(ctx)
	if err != nil {
		return nil
	}
	node, err := cachedNode(indexer, name)
	if err != nil {
		return nil
	}
	return node
}

// writeNodeClaim creates desired, or updates current's metadata and spec to
// desired's, then its status; it returns what the API server holds.
func (a *Activities) writeNodeClaim(ctx context.Context, current, desired *apisv1.NodeClaim) (*apisv1.NodeClaim, error) {
	client := a.dynamic.Resource(NodeClaimResource)
	var written *apisv1.NodeClaim
	if current == nil {
		obj, err := toUnstructured(desired)
		if err != nil {
			return nil, err
		}
		created, err := client.Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create NodeClaim %s: %w", desired.Name, err)
		}
		if written, err = fromUnstructured(created); err != nil {
			return nil, err
		}
		a.logger.Info("Created nodeclaim", zap.String("nodeClaim", desired.Name), zap.String("nodePool", desired.Labels[apisv1.LabelNodePool]))
	} else {
		written = current
		if !equality.Semantic.DeepEqual(current.ObjectMeta.Labels, desired.Labels) ||
			!equality.Semantic.DeepEqual(current.ObjectMeta.Annotations, desired.Annotations) ||
			!equality.Semantic.DeepEqual(current.Finalizers, desired.Finalizers) ||
			!equality.Semantic.DeepEqual(current.Spec, desired.Spec) {
			// Guarded by resourceVersion: a concurrent change (another
			// controller's finalizer) conflicts and the activity retries.
			patched, err := a.patchNodeClaim(ctx, desired.Name, map[string]any{
				"metadata": map[string]any{
					"resourceVersion": current.ResourceVersion,
					"labels":          mergePatchOf(current.Labels, desired.Labels),
					"annotations":     mergePatchOf(current.Annotations, desired.Annotations),
					"finalizers":      desired.Finalizers,
				},
				"spec": desired.Spec,
			})
			if err != nil {
				return nil, err
			}
			written = patched
		}
	}
	if equality.Semantic.DeepEqual(written.Status, desired.Status) {
		return written, nil
	}
	// Guarded like the metadata: the status was computed from written's
	// conditions, and a merge patch replaces the whole list.
	return a.patchNodeClaim(ctx, desired.Name, map[string]any{
		"metadata": map[string]any{"resourceVersion": written.ResourceVersion},
		"status":   desired.Status,
	}, "status")
}

// mergePatchOf is the JSON merge patch that turns the map current into
// desired: desired's entries, and null for each key desired drops (a merge
// patch leaves a key it does not name).
func mergePatchOf(current, desired map[string]string) map[string]any {
	patch := make(map[string]any, len(desired))
	for k, v := range desired {
		patch[k] = v
	}
	for k := range current {
		if _, kept := desired[k]; !kept {
			patch[k] = nil
		}
	}
	return patch
}

// patchNodeClaim applies a JSON merge patch to the NodeClaim (or its
// subresource).
func (a *Activities) patchNodeClaim(ctx context.Context, name string, patch map[string]any, subresource ...string) (*apisv1.NodeClaim, error) {
	data, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("NodeClaim %s: build patch: %w", name, err)
	}
	patched, err := a.dynamic.Resource(NodeClaimResource).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}, subresource...)
	if err != nil {
		return nil, fmt.Errorf("patch NodeClaim %s %v: %w", name, subresource, err)
	}
	return fromUnstructured(patched)
}

// releaseNodeClaim removes the termination finalizer and deletes the
// NodeClaim of a terminated node; one already gone is success.
func (a *Activities) releaseNodeClaim(ctx context.Context, claim *apisv1.NodeClaim) error {
	client := a.dynamic.Resource(NodeClaimResource)
	if claim == nil {
		return nil
	}
	if hasFinalizer(claim.Finalizers, activities.TerminationFinalizer) {
		patch := jsonMergeFinalizers(withoutFinalizer(claim.Finalizers, activities.TerminationFinalizer), claim.ResourceVersion)
		_, err := client.Patch(ctx, claim.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("remove the finalizer of NodeClaim %s: %w", claim.Name, err)
		}
	}
	if claim.DeletionTimestamp == nil {
		err := client.Delete(ctx, claim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &claim.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete NodeClaim %s: %w", claim.Name, err)
		}
	}
	a.logger.Info("Deleted nodeclaim", zap.String("nodeClaim", claim.Name))
	return nil
}

// desiredNodeClaim is the NodeClaim req describes, keeping from current
// what the workflow does not own (conditions of other writers, transition
// times of conditions that did not change, other finalizers and labels).
func desiredNodeClaim(req activities.UpsertNodeClaimRequest, current *apisv1.NodeClaim, node *corev1.Node) *apisv1.NodeClaim {
	claim := &apisv1.NodeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: apisv1.GroupVersion.String(), Kind: "NodeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: req.NodeClaimName},
	}
	entered := req.At
	if current != nil {
		claim.ObjectMeta = *current.ObjectMeta.DeepCopy()
		claim.Status = *current.Status.DeepCopy()
		if since := phaseSince(current); !since.IsZero() && current.Status.Phase == req.Phase {
			entered = since
		}
	}
	claim.Labels = mergeStrings(claim.Labels, req.Labels)
	claim.Labels[apisv1.LabelNodePool] = req.NodePool
	claim.Labels[apisv1.LabelNodeClass] = req.NodeClassName
	if inst := req.Instance; inst != nil {
		claim.Labels[corev1.LabelInstanceTypeStable] = inst.InstanceType
		claim.Labels[corev1.LabelTopologyZone] = inst.Zone
		claim.Labels[apisv1.LabelCapacityType] = inst.CapacityType
	}
	if claim.Labels[apisv1.LabelNodeClass] == "" {
		delete(claim.Labels, apisv1.LabelNodeClass)
	}
	claim.Annotations = mergeStrings(claim.Annotations, req.Annotations)
	delete(claim.Annotations, LegacyPhaseSinceAnnotation) // now status.phaseSince
	if req.WorkflowID != "" {
		claim.Annotations[WorkflowIDAnnotation] = req.WorkflowID
	}
	if req.Phase != activities.NodePhaseTerminated && !hasFinalizer(claim.Finalizers, activities.TerminationFinalizer) {
		claim.Finalizers = append(claim.Finalizers, activities.TerminationFinalizer)
	}

	claim.Spec = apisv1.NodeClaimSpec{
		Taints: req.Taints, StartupTaints: req.StartupTaints,
		Requirements: req.Requirements,
		ExpireAfter:  expireAfter(req.ExpireAfter),
	}
	if current != nil {
		claim.Spec.Resources = current.Spec.Resources
	}
	if req.NodeClassName != "" {
		claim.Spec.NodeClassRef = &apisv1.NodeClassReference{Group: apisv1.Group, Kind: "EC2NodeClass", Name: req.NodeClassName}
	}

	claim.Status.Phase = req.Phase
	// MicroTime holds microseconds: what the API server returns compares
	// equal to what was written.
	claim.Status.PhaseSince = &metav1.MicroTime{Time: entered.UTC().Truncate(time.Microsecond)}
	if req.NodeName != "" {
		claim.Status.NodeName = req.NodeName
	}
	if inst := req.Instance; inst != nil {
		claim.Status.ProviderID = inst.ProviderID
		claim.Status.ImageID = inst.ImageID
		if capacity := capacityFromLabels(inst.Labels); len(capacity) > 0 {
			claim.Status.Capacity = capacity
		}
	}
	if node != nil {
		claim.Status.Capacity = node.Status.Capacity.DeepCopy()
		claim.Status.Allocatable = node.Status.Allocatable.DeepCopy()
	}
	setLifecycleConditions(&claim.Status.Conditions, req)
	return claim
}

// setLifecycleConditions sets the conditions the workflow owns; a condition
// whose status does not change keeps its transition time.
func setLifecycleConditions(conditions *[]metav1.Condition, req activities.UpsertNodeClaimRequest) {
	set := func(conditionType string, status metav1.ConditionStatus, at time.Time, reason, message string) {
		if at.IsZero() {
			at = req.At
		}
		meta.SetStatusCondition(conditions, metav1.Condition{
			Type: conditionType, Status: status, Reason: reason, Message: message,
			LastTransitionTime: metav1.NewTime(at.UTC().Truncate(time.Second)),
		})
	}
	leaving := activities.NodePhaseLeaving(req.Phase)
	pending := func(conditionType, step string) {
		if leaving {
			set(conditionType, metav1.ConditionFalse, req.At, "NotReached", "the node left before "+step)
			return
		}
		set(conditionType, metav1.ConditionUnknown, req.At, "AwaitingReconciliation", "waiting for "+step)
	}
	if inst := req.Instance; inst != nil {
		set(apisv1.ConditionTypeLaunched, metav1.ConditionTrue, inst.LaunchTime, "Launched", "instance "+inst.InstanceID)
	} else {
		pending(apisv1.ConditionTypeLaunched, "the launch")
	}
	if !req.RegisteredAt.IsZero() {
		set(apisv1.ConditionTypeRegistered, metav1.ConditionTrue, req.RegisteredAt, "Registered", "node "+req.NodeName)
	} else {
		pending(apisv1.ConditionTypeRegistered, "the Node to register")
	}
	if !req.InitializedAt.IsZero() {
		set(apisv1.ConditionTypeInitialized, metav1.ConditionTrue, req.InitializedAt, "Initialized", "node "+req.NodeName)
	} else {
		pending(apisv1.ConditionTypeInitialized, "the Node to initialize")
	}
	// Drifted and DisruptionReason hold while their cause does, as
	// Karpenter's: removed, not False, once it is gone.
	for _, c := range []struct {
		conditionType string
		cause         *activities.NodeClaimCause
	}{{apisv1.ConditionTypeDrifted, req.Drift}, {apisv1.ConditionTypeDisruptionReason, req.Disruption}} {
		if c.cause == nil {
			meta.RemoveStatusCondition(conditions, c.conditionType)
			continue
		}
		set(c.conditionType, metav1.ConditionTrue, req.At, conditionReason(c.cause.Reason), c.cause.Message)
	}
	if t := req.Termination; t != nil && leaving {
		set(apisv1.ConditionTypeDisrupted, metav1.ConditionTrue, req.At, conditionReason(t.Reason), t.Detail)
	}
	if req.Phase == activities.NodePhaseTerminating || req.Phase == activities.NodePhaseTerminated {
		set(apisv1.ConditionTypeInstanceTerminating, metav1.ConditionTrue, req.At, "InstanceTerminating", "")
		if !req.RegisteredAt.IsZero() {
			set(apisv1.ConditionTypeDrained, metav1.ConditionTrue, req.At, "Drained", "")
		}
	}
	switch {
	case req.Phase == activities.NodePhaseReady:
		set(apisv1.ConditionTypeReady, metav1.ConditionTrue, req.At, "Ready", "")
	case leaving:
		set(apisv1.ConditionTypeReady, metav1.ConditionFalse, req.At, req.Phase, "the node is leaving")
	default:
		set(apisv1.ConditionTypeReady, metav1.ConditionUnknown, req.At, req.Phase, "the node is "+strings.ToLower(req.Phase))
	}
}

// conditionReason is reason as a condition reason (CamelCase, non-empty).
func conditionReason(reason string) string {
	if reason == "" {
		return "Unknown"
	}
	return reason
}

// publishTransition publishes the events of entering req.Phase from
// previous, on the NodeClaim (claim; nil when there is none) and its Node.
func (a *Activities) publishTransition(ctx context.Context, req activities.UpsertNodeClaimRequest, claim *apisv1.NodeClaim, previous string) {
	var claimRef runtime.Object = events.NodeClaimRef(req.NodeClaimName, "")
	if claim != nil {
		claimRef = events.NodeClaimRef(claim.Name, claim.UID)
	}
	on := []runtime.Object{claimRef}
	if node := a.nodeOf(ctx, req.NodeName); node != nil {
		on = append(on, events.NodeRef(node.Name, node.UID))
	}
	publish := func(make func(obj runtime.Object) events.Event, objects []runtime.Object) {
		for _, obj := range objects {
			e := make(obj)
			// Deduplicate per object: the same event on the NodeClaim and
			// on the Node are two events.
			e.DedupeValues = append(e.DedupeValues, objectKind(obj))
			a.events.Publish(e)
		}
	}
	claimOnly := on[:1]
	switch req.Phase {
	case activities.NodePhaseLaunching:
		a.nominate(ctx, req)
	case activities.NodePhaseRegistering:
		if inst := req.Instance; inst != nil {
			publish(func(obj runtime.Object) events.Event {
				return events.NodeClaimLaunched(obj, req.NodeClaimName, inst.InstanceID, inst.InstanceType, inst.Zone, inst.CapacityType)
			}, claimOnly)
		}
	case activities.NodePhaseInitializing:
		publish(func(obj runtime.Object) events.Event {
			return events.NodeRegistered(obj, req.NodeClaimName, req.NodeName)
		}, on)
	case activities.NodePhaseReady:
		publish(func(obj runtime.Object) events.Event {
			return events.NodeInitialized(obj, req.NodeClaimName, req.NodeName)
		}, on)
	case activities.NodePhaseDraining, activities.NodePhaseTerminating:
		if activities.NodePhaseLeaving(previous) {
			return
		}
		why := "termination requested"
		if t := req.Termination; t != nil {
			why = t.Reason
			if t.Detail != "" {
				why += ": " + t.Detail
			}
			if reason := failureEventReason(t.Reason); reason != "" {
				publish(func(obj runtime.Object) events.Event {
					return events.NodeClaimFailed(obj, req.NodeClaimName, reason, t.Detail)
				}, claimOnly)
			}
		}
		publish(func(obj runtime.Object) events.Event { return events.NodeTerminating(obj, req.NodeClaimName, why) }, on)
	case activities.NodePhaseTerminated:
		why := "terminated"
		if t := req.Termination; t != nil {
			why = t.Reason
			// A node that never launched goes straight to Terminated: its
			// failure is said here.
			if reason := failureEventReason(t.Reason); reason != "" && req.Instance == nil {
				publish(func(obj runtime.Object) events.Event {
					return events.NodeClaimFailed(obj, req.NodeClaimName, reason, t.Detail)
				}, claimOnly)
			}
		}
		publish(func(obj runtime.Object) events.Event { return events.NodeClaimTerminated(obj, req.NodeClaimName, why) }, claimOnly)
	}
}

func objectKind(obj runtime.Object) string {
	if ref, ok := obj.(*corev1.ObjectReference); ok {
		return ref.Kind
	}
	return obj.GetObjectKind().GroupVersionKind().Kind
}

// failureEventReason is the Warning reason of a termination that is a
// failure, or "" for a disruption.
func failureEventReason(terminationReason string) string {
	switch terminationReason {
	case "InsufficientCapacity":
		return events.InsufficientCapacityError
	case "LaunchFailed":
		return events.FailedLaunch
	case "RegistrationTimeout":
		return events.RegistrationTimeout
	case "InitializationTimeout":
		return events.InitializationTimeout
	case "Failed":
		return events.TerminationFailed
	}
	return ""
}

// nominate tells the pods the node was launched for where they should land.
func (a *Activities) nominate(ctx context.Context, req activities.UpsertNodeClaimRequest) {
	for i, key := range req.PodKeys {
		if i == maxNominatedPods {
			return
		}
		namespace, name, ok := strings.Cut(key, "/")
		if !ok {
			continue
		}
		// From the watch cache (resourceVersion "0"): an event needs the
		// pod's UID, not a read from etcd for every pod of every launch.
		pod, err := a.clientset.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
		if err != nil || pod.Spec.NodeName != "" {
			continue
		}
		a.events.Publish(events.PodNominated(events.PodRef(pod.Namespace, pod.Name, pod.UID), string(pod.UID), req.NodeClaimName, ""))
	}
}

func expireAfter(d activities.OptionalDuration) apisv1.DurationOrNever {
	if dur, ok := d.Get(); ok {
		return apisv1.DurationOrNeverOf(dur)
	}
	return apisv1.Never
}

// capacityFromLabels estimates an instance's capacity from its
// well-known labels (vCPUs, memory in MiB) until its Node reports its own.
func capacityFromLabels(labels map[string]string) corev1.ResourceList {
	out := corev1.ResourceList{}
	if cpu, err := resource.ParseQuantity(labels[apisv1.LabelInstanceCPU]); err == nil && labels[apisv1.LabelInstanceCPU] != "" {
		out[corev1.ResourceCPU] = cpu
	}
	if mib, err := resource.ParseQuantity(labels[apisv1.LabelInstanceMemory] + "Mi"); err == nil && labels[apisv1.LabelInstanceMemory] != "" {
		out[corev1.ResourceMemory] = mib
	}
	return out
}

func mergeStrings(into, from map[string]string) map[string]string {
	if into == nil {
		into = map[string]string{}
	}
	for k, v := range from {
		into[k] = v
	}
	return into
}

func hasFinalizer(finalizers []string, f string) bool {
	for _, x := range finalizers {
		if x == f {
			return true
		}
	}
	return false
}

func withoutFinalizer(finalizers []string, f string) []string {
	var out []string
	for _, x := range finalizers {
		if x != f {
			out = append(out, x)
		}
	}
	return out
}

// jsonMergeFinalizers is a merge patch setting the finalizers, guarded by
// resourceVersion so another controller's finalizer added meanwhile is not
// lost (a conflict is retried by the activity).
func jsonMergeFinalizers(finalizers []string, resourceVersion string) []byte {
	quoted := make([]string, len(finalizers))
	for i, f := range finalizers {
		quoted[i] = fmt.Sprintf("%q", f)
	}
	return []byte(fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"finalizers":[%s]}}`, resourceVersion, strings.Join(quoted, ",")))
}

func toUnstructured(claim *apisv1.NodeClaim) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(claim)
	if err != nil {
		return nil, fmt.Errorf("encode NodeClaim %s: %w", claim.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(apisv1.GroupVersion.String())
	u.SetKind("NodeClaim")
	return u, nil
}

func fromUnstructured(u *unstructured.Unstructured) (*apisv1.NodeClaim, error) {
	claim := &apisv1.NodeClaim{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, claim); err != nil {
		return nil, fmt.Errorf("decode NodeClaim %s: %w", u.GetName(), err)
	}
	return claim, nil
}

// RestoreNodeClaim writes back a NodeClaim removed while its node lives
// (its finalizer stripped by hand, then deleted): gone is its final state,
// as the informer last saw it. The caller checked with the node workflow
// that the node is not leaving. An existing NodeClaim of that name is left
// alone.
func RestoreNodeClaim(ctx context.Context, client dynamic.Interface, gone *unstructured.Unstructured) error {
	claim, err := fromUnstructured(gone)
	if err != nil {
		return err
	}
	restored := &apisv1.NodeClaim{
		TypeMeta: claim.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: claim.Name, Labels: claim.Labels, Annotations: claim.Annotations,
			Finalizers: append(withoutFinalizer(claim.Finalizers, activities.TerminationFinalizer), activities.TerminationFinalizer),
		},
		Spec: claim.Spec,
	}
	obj, err := toUnstructured(restored)
	if err != nil {
		return err
	}
	created, err := client.Resource(NodeClaimResource).Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("restore NodeClaim %s: %w", claim.Name, err)
	}
	status, err := json.Marshal(map[string]any{"status": claim.Status})
	if err != nil {
		return err
	}
	if _, err := client.Resource(NodeClaimResource).Patch(ctx, created.GetName(), types.MergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("restore NodeClaim %s status: %w", claim.Name, err)
	}
	return nil
}
