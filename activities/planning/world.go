package planning

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/millwright/millwright/activities"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// world is one planning pass's view of the cluster, already classified.
type world struct {
	now time.Time
	// disruptionNodes are the Nodes a ComputeCommands call judged, by name
	// (for their events).
	disruptionNodes map[string]*corev1.Node
	// startingUpFor is the registration timeout: how long a new Node may
	// take to be adopted and Ready (see startingUp).
	startingUpFor time.Duration

	// pools are the usable NodePools by name; poolNames is their order.
	pools     map[string]*poolState
	poolNames []string
	skipped   []activities.SkippedObject

	// nodes are existing Nodes pods may be placed on, by name; going are
	// the Nodes going away (deleted, disrupted or named so).
	nodes []packer.Node
	going map[string]bool
	// inFlight are nodes launched or launching whose Node has not
	// registered yet.
	inFlight []packer.Node
	settled  []string

	// batch are the pods to plan, sorted by key; batchInFlight are pods of
	// the batch an in-flight node, or the Node they are nominated to,
	// already owns (not planned again).
	batch         []*corev1.Pod
	batchInFlight []string

	daemonSetPods []*corev1.Pod

	// namespaces are the namespaces' labels; storage the pods' volumes.
	namespaces map[string]map[string]string
	storage    packer.Storage
}

// poolState is a usable NodePool with what the planner learned about it.
type poolState struct {
	pool      *apisv1.NodePool
	nodeClass *apisv1.EC2NodeClass
	reqs      scheduling.Requirements
	// labels are the canonical template labels plus the nodepool label.
	labels map[string]string
	types  []*catalog.InstanceType
	// typeByName indexes types.
	typeByName map[string]*catalog.InstanceType

	// liveNodes counts the pool's Nodes that are not going away; inFlight
	// its unregistered node claims; planned the plans of this pass.
	liveNodes, inFlight, planned int
	// used is the summed capacity of every node of the pool (existing,
	// in flight, planned), which the pool's limits cap; usedNodes their
	// number.
	used      scheduling.Resources
	usedNodes int64
}

func (ps *poolState) addUsage(it *catalog.InstanceType) {
	ps.usedNodes++
	if it != nil {
		ps.used = ps.used.Add(it.Capacity)
	}
}

// observe reads the cluster and the instance types and classifies
// everything the packer and the launch specs need.
func (p *Planner) observe(ctx context.Context, req activities.PlanRequest) (*world, error) {
	pods, err := p.state.ListPods(ctx)
	if err != nil {
		return nil, err
	}
	nodes, err := p.state.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	daemonSets, err := p.state.ListDaemonSets(ctx)
	if err != nil {
		return nil, err
	}
	rawPools, err := p.state.ListNodePools(ctx)
	if err != nil {
		return nil, err
	}
	rawClasses, err := p.state.ListEC2NodeClasses(ctx)
	if err != nil {
		return nil, err
	}

	w := &world{now: p.clock.Now(), startingUpFor: p.registrationTimeout, pools: map[string]*poolState{}, going: map[string]bool{}}
	if w.startingUpFor == 0 {
		w.startingUpFor = activities.DefaultRegistrationTimeout
	}
	if err := w.readNamespacesAndStorage(ctx, p.state); err != nil {
		return nil, err
	}
	if err := w.usePools(ctx, p.instanceTypes, rawPools, rawClasses, req.UnavailableOfferings); err != nil {
		return nil, err
	}
	w.daemonSetPods = daemonSetPods(daemonSets)

	byKey := make(map[string]*corev1.Pod, len(pods))
	bound := map[string][]*corev1.Pod{}
	nominated := map[string][]*corev1.Pod{}
	for _, pod := range pods {
		byKey[podKey(pod)] = pod
		if pod.Spec.NodeName != "" && !isTerminal(pod) {
			bound[pod.Spec.NodeName] = append(bound[pod.Spec.NodeName], pod)
		}
		if node := pod.Status.NominatedNodeName; node != "" && awaitsNode(pod) {
			nominated[node] = append(nominated[node], pod)
		}
	}
	disrupted := map[string]bool{}
	for _, name := range req.DisruptedNodes {
		disrupted[name] = true
	}
	registerRequestedResources(pods, w.daemonSetPods, disrupted)
	owned := w.useNodes(nodes, bound, nominated, disrupted)
	maps.Copy(owned, w.useInFlight(req.InFlight, nodes, byKey))
	w.chooseBatch(req, pods, byKey, bound, disrupted, owned)
	return w, nil
}

// usePools decodes, defaults and validates NodePools and EC2NodeClasses and
// lists each class's instance types. Objects that cannot be used are
// recorded in skipped; only a failure to list instance types for a valid
// class fails the pass (planning without a pool's types would send its pods
// to the wrong pool or report them unschedulable).
func (w *world) usePools(ctx context.Context, source InstanceTypeSource, rawPools, rawClasses []*unstructured.Unstructured, unavailable []activities.UnavailableOffering) error {
	classes := map[string]*apisv1.EC2NodeClass{}
	classProblems := map[string]string{}
	for _, raw := range sortedByName(rawClasses) {
		var nc apisv1.EC2NodeClass
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw.Object, &nc); err != nil {
			w.skip("EC2NodeClass", raw.GetName(), fmt.Sprintf("cannot be decoded: %v", err))
			classProblems[raw.GetName()] = "cannot be decoded"
			continue
		}
		nc.SetDefaults()
		if nc.DeletionTimestamp != nil {
			classProblems[nc.Name] = "is being deleted"
			continue
		}
		if err := nc.Validate(); err != nil {
			w.skip("EC2NodeClass", nc.Name, validationReason(err))
			classProblems[nc.Name] = "is invalid"
			continue
		}
		classes[nc.Name] = &nc
	}

	expired := w.now
	unavailableKeys := map[activities.OfferingKey]bool{}
	for _, u := range unavailable {
		if u.Until.After(expired) {
			unavailableKeys[u.OfferingKey] = true
		}
	}
	typesOfClass := map[string][]*catalog.InstanceType{}
	typeProblems := map[string]string{}
	for _, raw := range sortedByName(rawPools) {
		var np apisv1.NodePool
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw.Object, &np); err != nil {
			w.skip("NodePool", raw.GetName(), fmt.Sprintf("cannot be decoded: %v", err))
			continue
		}
		np.SetDefaults()
		if np.DeletionTimestamp != nil {
			continue // a pool being deleted launches nothing more
		}
		if err := np.Validate(); err != nil {
			w.skip("NodePool", np.Name, validationReason(err))
			continue
		}
		className := np.NodeClassName()
		nc, ok := classes[className]
		if !ok {
			problem, known := classProblems[className]
			if !known {
				problem = "does not exist"
			}
			w.skip("NodePool", np.Name, fmt.Sprintf("spec.template.spec.nodeClassRef.name: EC2NodeClass %q %s", className, problem))
			continue
		}
		types, listed := typesOfClass[className]
		if !listed {
			if problem, failed := typeProblems[className]; failed {
				w.skip("NodePool", np.Name, problem)
				continue
			}
			var err error
			types, err = source.InstanceTypesForNodeClass(ctx, nc)
			if activities.IsInvalidNodeClass(err) {
				w.skip("EC2NodeClass", className, err.Error())
				typeProblems[className] = fmt.Sprintf("spec.template.spec.nodeClassRef.name: EC2NodeClass %q cannot be used", className)
				w.skip("NodePool", np.Name, typeProblems[className])
				continue
			}
			if err != nil {
				return fmt.Errorf("instance types of EC2NodeClass %q: %w", className, err)
			}
			markUnavailable(types, unavailableKeys)
			typesOfClass[className] = types
		}
		reqs, err := scheduling.RequirementsFromNodeSelector(poolRequirements(&np))
		if err != nil {
			// Validate accepted it, so this is a gap between the two.
			w.skip("NodePool", np.Name, fmt.Sprintf("spec.template.spec.%v", err))
			continue
		}
		labels := scheduling.CanonicalLabels(np.Spec.Template.Labels)
		labels[scheduling.LabelNodePool] = np.Name
		ps := &poolState{pool: &np, nodeClass: nc, reqs: reqs, labels: labels, types: types,
			typeByName: make(map[string]*catalog.InstanceType, len(types))}
		for _, it := range types {
			ps.typeByName[it.Name] = it
		}
		w.pools[np.Name] = ps
		w.poolNames = append(w.poolNames, np.Name)
	}
	return nil
}

// readNamespacesAndStorage reads what pod affinity's namespaceSelector and
// the pods' volume topology need.
func (w *world) readNamespacesAndStorage(ctx context.Context, state ClusterState) error {
	namespaces, err := state.ListNamespaces(ctx)
	if err != nil {
		return err
	}
	w.namespaces = make(map[string]map[string]string, len(namespaces))
	for _, ns := range namespaces {
		w.namespaces[ns.Name] = ns.Labels
	}
	if w.storage.PersistentVolumeClaims, err = state.ListPersistentVolumeClaims(ctx); err != nil {
		return err
	}
	if w.storage.PersistentVolumes, err = state.ListPersistentVolumes(ctx); err != nil {
		return err
	}
	if w.storage.StorageClasses, err = state.ListStorageClasses(ctx); err != nil {
		return err
	}
	return nil
}

func (w *world) skip(kind, name, reason string) {
	w.skipped = append(w.skipped, activities.SkippedObject{Kind: kind, Name: name, Reason: reason})
}

// validationReason flattens a ValidationError's field errors into one line.
func validationReason(err error) string {
	ve, ok := apisv1.AsValidationError(err)
	if !ok {
		return err.Error()
	}
	parts := make([]string, len(ve.Errors))
	for i, fe := range ve.Errors {
		parts[i] = fe.Error()
	}
	return "invalid: " + strings.Join(parts, "; ")
}

func sortedByName(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := slices.Clone(objs)
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out
}

// poolMinValues are the requirements' minValues by key (nil when none).
func poolMinValues(np *apisv1.NodePool) map[string]int {
	var out map[string]int
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.MinValues == nil {
			continue
		}
		if out == nil {
			out = map[string]int{}
		}
		out[r.Key] = max(out[r.Key], *r.MinValues)
	}
	return out
}

// poolRequirements are the requirements without minValues (see poolMinValues).
func poolRequirements(np *apisv1.NodePool) []corev1.NodeSelectorRequirement {
	reqs := np.Spec.Template.Spec.Requirements
	out := make([]corev1.NodeSelectorRequirement, len(reqs))
	for i, r := range reqs {
		out[i] = corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values}
	}
	return out
}

// markUnavailable turns off the offerings the provisioner reported out of
// capacity. The provider already applies its own worker's cache; these
// come from launches other workers ran.
func markUnavailable(types []*catalog.InstanceType, keys map[activities.OfferingKey]bool) {
	if len(keys) == 0 {
		return
	}
	for _, it := range types {
		for i := range it.Offerings {
			o := &it.Offerings[i]
			if keys[activities.OfferingKey{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType}] {
				o.Available = false
			}
		}
	}
}

// daemonSetPods are the pods each DaemonSet would run on a new node.
func daemonSetPods(daemonSets []*appsv1.DaemonSet) []*corev1.Pod {
	sorted := slices.Clone(daemonSets)
	sort.Slice(sorted, func(i, j int) bool { return objectKey(sorted[i]) < objectKey(sorted[j]) })
	var out []*corev1.Pod
	for _, ds := range sorted {
		if ds.DeletionTimestamp != nil {
			continue
		}
		out = append(out, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ds.Namespace, Name: ds.Name, Labels: ds.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID}},
			},
			Spec: *ds.Spec.Template.Spec.DeepCopy(),
		})
	}
	return out
}

// registerRequestedResources makes the resource vector track every
// resource a pod that may be planned requests, before Nodes' allocatable is
// read (which keeps tracked resources only). A pod whose requests cannot be
// tracked is reported by the packer.
func registerRequestedResources(pods, daemonSetPods []*corev1.Pod, disrupted map[string]bool) {
	for _, pod := range pods {
		if awaitsNode(pod) || disrupted[pod.Spec.NodeName] {
			_, _ = scheduling.EffectiveRequests(pod)
		}
	}
	for _, pod := range daemonSetPods {
		_, _ = scheduling.EffectiveRequests(pod)
	}
}

func objectKey(obj metav1.Object) string { return obj.GetNamespace() + "/" + obj.GetName() }

// packerInput is the packing problem of this pass.
func (w *world) packerInput() packer.Input {
	in := packer.Input{Pods: w.batch, DaemonSetPods: w.daemonSetPods, Namespaces: w.namespaces, Storage: w.storage}
	in.Nodes = append(append(in.Nodes, w.nodes...), w.inFlight...)
	for _, name := range w.poolNames {
		in.NodePools = append(in.NodePools, w.packerPool(name))
	}
	return in
}

// packerPool is the packer's view of a usable pool, its usage included.
func (w *world) packerPool(name string) packer.NodePool {
	ps := w.pools[name]
	used := ps.used.ResourceList()
	used[scheduling.ResourceNodes] = *resourceQuantity(ps.usedNodes)
	return packer.NodePool{
		Name:          name,
		Weight:        ps.pool.WeightOrZero(),
		Requirements:  poolRequirements(ps.pool),
		MinValues:     poolMinValues(ps.pool),
		Labels:        ps.pool.Spec.Template.Labels,
		Taints:        ps.pool.Spec.Template.Spec.Taints,
		StartupTaints: ps.pool.Spec.Template.Spec.StartupTaints,
		Limits:        corev1.ResourceList(ps.pool.Spec.Limits),
		Used:          used,
		InstanceTypes: ps.types,
	}
}

func (w *world) totalMinNodes() int {
	total := 0
	for _, ps := range w.pools {
		total += int(ps.pool.MinNodesOrZero())
	}
	return total
}
