package planning

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/events"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/disruption"
	"github.com/millwright/millwright/model/scheduling"
)

// reservedAnnotation is what the disruption lock (activities/kube) puts on
// a Node it reserved for an empty-node disruption.
const reservedAnnotation = "millwright.dev/disruption-reserved-at"

// defaultBatchMaxDuration is the provisioner's batch max window, from
// which a node's nomination window follows when the request names none.
const defaultBatchMaxDuration = 10 * time.Second

// ComputeCommands reads the cluster and returns the disruption commands to
// run now, with a verdict per managed node (see
// activities.DisruptionActivities). It only reads; the same cluster state
// and request yield the same answer.
func (p *Planner) ComputeCommands(ctx context.Context, req activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
	defer p.keepAlive(ctx)()
	cluster, err := p.clusterOf("compute commands", req.Cluster)
	if err != nil {
		return activities.ComputeCommandsResponse{}, err
	}
	started := p.clock.Now()
	w, in, err := p.observeForDisruption(ctx, req)
	if err != nil {
		return activities.ComputeCommandsResponse{}, err
	}
	observed := p.clock.Since(started)
	r := disruption.Compute(in)
	resp := activities.ComputeCommandsResponse{Skipped: w.skipped, NodesConsidered: len(in.Nodes), PodsConsidered: len(in.PendingPods)}
	for _, n := range in.Nodes {
		resp.PodsConsidered += len(n.Pods)
	}
	for _, cmd := range r.Commands {
		resp.Commands = append(resp.Commands, w.disruptionCommand(cluster, cmd, p.registrationTimeout))
	}
	for _, v := range r.Verdicts {
		resp.Verdicts = append(resp.Verdicts, activities.DisruptionVerdict{
			NodeClaimName: v.ClaimName, NodeName: v.NodeName, NodePool: v.NodePool, Candidate: v.Candidate,
			Command: v.Command, Event: v.Event, Message: v.Message, Drifted: v.Drifted, DriftKind: string(v.DriftKind), Unhealthy: v.Unhealthy,
			Outlier: v.Outlier,
		})
	}
	for _, b := range r.Budgets {
		resp.Budgets = append(resp.Budgets, activities.DisruptionBudget{NodePool: b.NodePool, Nodes: b.Nodes,
			Disrupting: b.Disrupting, Allowed: b.Allowed, Limit: b.Limit, Errors: b.Errors})
	}
	if !r.RecheckAt.IsZero() {
		resp.RecheckAfter = max(r.RecheckAt.Sub(in.Now), 0)
	}
	p.publishVerdicts(w, r)
	p.log.Debug("Computed disruption commands", zap.Int("nodes", resp.NodesConsidered), zap.Int("pods", resp.PodsConsidered),
		zap.Int("commands", len(resp.Commands)), zap.Duration("observed", observed), zap.Duration("took", p.clock.Since(started)))
	for _, cmd := range resp.Commands {
		p.log.Debug("Disruption command", zap.String("reason", string(cmd.Reason)), zap.String("kind", string(cmd.Kind)),
			zap.String("message", cmd.Message))
	}
	return resp, nil
}

// publishVerdicts tells every Node the decision could not take why
// (DisruptionBlocked, Unconsolidatable, in Karpenter's words) and every
// NodePool a budget stops (DisruptionBlocked); the recorder deduplicates
// them (for a minute per object and message) and rate-limits them.
func (p *Planner) publishVerdicts(w *world, r disruption.Result) {
	for _, v := range r.Verdicts {
		node := w.disruptionNodes[v.NodeName]
		if node == nil || v.Message == "" {
			continue
		}
		ref := events.NodeRef(node.Name, node.UID)
		switch v.Event {
		case disruption.EventDisruptionBlocked:
			p.events.Publish(events.DisruptionBlockedEvent(ref, node.Name, v.Message))
		case disruption.EventUnconsolidatable:
			p.events.Publish(events.UnconsolidatableEvent(ref, node.Name, v.Message))
		}
	}
	for _, b := range r.Budgets {
		ps := w.pools[b.NodePool]
		if ps == nil || b.Nodes == 0 {
			continue
		}
		for _, reason := range []disruption.Reason{disruption.ReasonEmpty, disruption.ReasonUnderutilized, disruption.ReasonDrifted} {
			if allowed, ok := b.Allowed[reason]; ok && allowed == 0 {
				why := fmt.Sprintf("No allowed disruptions for disruption reason %s due to blocking budget", reason)
				p.events.Publish(events.DisruptionBlockedEvent(events.NodePoolRef(ps.pool.Name, ps.pool.UID), ps.pool.Name, why))
			}
		}
	}
}

// disruptionCommand turns a decision into the contract's command, its
// replacements into launch specs (NodeClaimName left for the caller).
func (w *world) disruptionCommand(cluster string, cmd disruption.Command, registrationTimeout time.Duration) activities.DisruptionCommand {
	out := activities.DisruptionCommand{Reason: cmd.Reason, Kind: cmd.Kind, SavingsPerHour: cmd.SavingsPerHour, Message: cmd.Message}
	for _, c := range cmd.Candidates {
		out.Candidates = append(out.Candidates, activities.DisruptionCandidate{
			NodeClaimName: c.ClaimName, NodeName: c.NodeName, NodePool: c.NodePool, InstanceType: c.InstanceType,
			CapacityType: c.CapacityType, PricePerHour: c.Price, PodKeys: c.Pods, Why: c.Why,
		})
	}
	for i := range cmd.Replacements {
		plan := &cmd.Replacements[i]
		ps := w.pools[plan.NodePool]
		if ps == nil {
			continue // cannot happen: replacements come from usable pools
		}
		spec := w.launchSpec(cluster, ps, plan, registrationTimeout)
		spec.LaunchReason = cmd.Message + "; " + spec.LaunchReason
		if cmd.Reason == disruption.ReasonUnderutilized {
			spec.Annotations = withAnnotation(spec.Annotations, apisv1.AnnotationLaunchedByConsolidation, w.now.UTC().Format(time.RFC3339))
		}
		out.Replacements = append(out.Replacements, spec)
	}
	return out
}

// withAnnotation is m with k=v added, copied so the pool's template is not changed.
func withAnnotation(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for mk, mv := range m {
		out[mk] = mv
	}
	out[k] = v
	return out
}

// observeForDisruption reads the cluster into the decision's input.
func (p *Planner) observeForDisruption(ctx context.Context, req activities.ComputeCommandsRequest) (*world, disruption.Input, error) {
	pods, err := p.state.ListPods(ctx)
	if err != nil {
		return nil, disruption.Input{}, err
	}
	nodes, err := p.state.ListNodes(ctx)
	if err != nil {
		return nil, disruption.Input{}, err
	}
	daemonSets, err := p.state.ListDaemonSets(ctx)
	if err != nil {
		return nil, disruption.Input{}, err
	}
	pdbs, err := p.state.ListPodDisruptionBudgets(ctx)
	if err != nil {
		return nil, disruption.Input{}, err
	}
	rawPools, err := p.state.ListNodePools(ctx)
	if err != nil {
		return nil, disruption.Input{}, err
	}
	rawClasses, err := p.state.ListEC2NodeClasses(ctx)
	if err != nil {
		return nil, disruption.Input{}, err
	}
	w := &world{now: p.clock.Now(), pools: map[string]*poolState{}}
	if err := w.usePools(ctx, p.instanceTypes, rawPools, rawClasses, req.UnavailableOfferings); err != nil {
		return nil, disruption.Input{}, err
	}
	w.daemonSetPods = daemonSetPods(daemonSets)
	if err := w.readNamespacesAndStorage(ctx, p.state); err != nil {
		return nil, disruption.Input{}, err
	}

	byKey := make(map[string]*corev1.Pod, len(pods))
	bound := map[string][]*corev1.Pod{}
	all := map[string]bool{}
	for _, node := range nodes {
		all[node.Name] = true
	}
	registerRequestedResources(pods, w.daemonSetPods, all)
	in := disruption.Input{Now: w.now, DaemonSetPods: w.daemonSetPods, Options: disruptionOptions(req),
		Storage: w.storage, Namespaces: w.namespaces}
	if req.Admission {
		in.Only = req.Admitting
	}
	in.Validation = req.Validation || req.Admission
	// awaited are the Nodes that unbound pods are nominated to: their room
	// is spoken for until the scheduler binds them (see below).
	awaited := map[string]bool{}
	for _, pod := range pods {
		byKey[podKey(pod)] = pod
		switch {
		case pod.Spec.NodeName != "" && !isTerminal(pod):
			bound[pod.Spec.NodeName] = append(bound[pod.Spec.NodeName], pod)
		case IsProvisionable(pod, w.now):
			in.PendingPods = append(in.PendingPods, pod)
		}
		if pod.Status.NominatedNodeName != "" && awaitsNode(pod) {
			awaited[pod.Status.NominatedNodeName] = true
		}
	}
	sort.Slice(in.PendingPods, func(i, j int) bool { return podKey(in.PendingPods[i]) < podKey(in.PendingPods[j]) })
	w.useInFlight(req.InFlight, nodes, byKey)
	in.InFlight = w.inFlight

	for _, name := range w.poolNames {
		ps := w.pools[name]
		in.NodePools = append(in.NodePools, disruption.NodePool{
			Pool: ps.pool, Launch: w.packerPool(name), Launchable: true,
			NodePoolHash: disruption.NodePoolHash(ps.pool), NodeClass: nodeClassState(ps.nodeClass),
		})
	}
	states := map[string]activities.DisruptionNodeState{}
	for _, s := range req.Nodes {
		states[s.NodeClaimName] = s
	}
	blocking := pdbIndex(pdbs)
	window := activities.NominationWindowFor(in.Options.BatchMaxDuration)
	sorted := slices.Clone(nodes)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	w.disruptionNodes = make(map[string]*corev1.Node, len(nodes))
	for _, node := range nodes {
		w.disruptionNodes[node.Name] = node
	}
	events, _ := p.state.(PodEventSource)
	for _, node := range sorted {
		n := w.disruptionNode(node, bound[node.Name], states, req.Admission, req.ValidatingWait, blocking, window)
		if awaited[node.Name] {
			// A pod nominated to this Node (RegisterNode nominates the pods
			// a node was launched for) waits for kube-scheduler to bind it,
			// which at thousands of pending pods takes minutes: the Node is
			// not empty, whatever its nomination window says. Such pods are
			// not provisionable, so nominate() does not see them.
			n.NominatedUntil = later(n.NominatedUntil, w.now.Add(window))
		}
		if events != nil {
			n.LastPodEventAt = later(n.LastPodEventAt, events.LastPodEvent(node.Name))
		}
		in.Nodes = append(in.Nodes, n)
	}
	return w, in, nil
}

func disruptionOptions(req activities.ComputeCommandsRequest) disruption.Options {
	o := req.Options
	batch := o.BatchMaxDuration
	if batch <= 0 {
		batch = defaultBatchMaxDuration
	}
	lookahead := 0
	if req.ValidatingWait && !req.Admission {
		lookahead = o.ValidationLookahead
		if lookahead == 0 {
			lookahead = activities.DefaultValidationLookahead
		}
		lookahead = max(lookahead, 0)
	}
	return disruption.Options{
		BatchMaxDuration: batch, ConsolidationThreshold: o.ConsolidationThreshold, ReplaceSavingsFraction: o.ReplaceSavingsFraction,
		RepackSavingsFraction: o.RepackSavingsFraction, MinSavingsPerHour: o.MinSavingsPerHour,
		DisableSpotToSpot: o.DisableSpotToSpot, DisableSplit: o.DisableSplit, RepairToleration: o.RepairToleration, MaxCommands: req.MaxCommands,
		SkipSettlingDestinations: o.SkipSettlingDestinations,
		ValidationLookahead:      lookahead,
	}
}

// nodeClassState is what drift compares a node with: the class's hash and
// the ids its status resolves to now.
func nodeClassState(nc *apisv1.EC2NodeClass) *disruption.NodeClass {
	if nc == nil {
		return nil
	}
	out := &disruption.NodeClass{Name: nc.Name, Hash: disruption.NodeClassHash(nc)}
	for _, a := range nc.Status.AMIs {
		out.AMIs = append(out.AMIs, a.ID)
	}
	for _, s := range nc.Status.Subnets {
		out.Subnets = append(out.Subnets, s.ID)
	}
	for _, g := range nc.Status.SecurityGroups {
		out.SecurityGroups = append(out.SecurityGroups, g.ID)
	}
	return out
}

// disruptionNode is a Node as the decision sees it; what the node
// workflow reported (states) wins over what the Node suggests.
func (w *world) disruptionNode(node *corev1.Node, pods []*corev1.Pod, states map[string]activities.DisruptionNodeState, admission, validatingWait bool,
	blocking func(*corev1.Pod) ([]string, bool), window time.Duration) disruption.Node {
	canonical := scheduling.CanonicalLabels(node.Labels)
	claim := node.Labels[activities.NodeClaimLabel]
	n := disruption.Node{
		Name: node.Name, Labels: node.Labels, Annotations: node.Annotations, Taints: node.Spec.Taints,
		Allocatable: knownResources(node.Status.Allocatable), CreatedAt: node.CreationTimestamp.Time,
		InstanceType: canonical[scheduling.LabelInstanceType], Zone: canonical[scheduling.LabelZone],
		CapacityType: canonical[scheduling.LabelCapacityType], Deleting: node.DeletionTimestamp != nil,
	}
	ps := w.pools[canonical[scheduling.LabelNodePool]]
	if claim != "" {
		// A Node starting up sheds its ephemeral and startup taints soon,
		// as provisioning sees it: its room is there for the pods that come
		// first (pending, or from nodes leaving), and a decision whose moved
		// pods it alone would hold waits for it (see disruption's closedTo),
		// as Karpenter's simulation ignores those taints and then refuses
		// the decision.
		n.Taints = w.schedulingTaints(node, ps)
	}
	if node.Spec.Unschedulable && !slices.ContainsFunc(n.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnschedulable }) {
		n.Taints = append(slices.Clip(n.Taints), corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			n.Ready, n.ReadySince = c.Status, c.LastTransitionTime.Time
		}
	}
	n.Conditions = node.Status.Conditions
	last := n.CreatedAt
	for _, pod := range pods {
		blocked, always := blocking(pod)
		n.Pods = append(n.Pods, disruption.Pod{Pod: pod, PDBBlocked: blocked, PDBAlwaysBlocks: always})
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && c.LastTransitionTime.After(last) {
				last = c.LastTransitionTime.Time
			}
		}
		if pod.DeletionTimestamp != nil && pod.DeletionTimestamp.After(last) {
			last = pod.DeletionTimestamp.Time
		}
	}
	n.LastPodEventAt = last
	if claim == "" || canonical[scheduling.LabelNodePool] == "" {
		return n // not Millwright's: capacity only
	}
	n.ClaimName, n.NodePool = claim, canonical[scheduling.LabelNodePool]
	if ps != nil {
		if it := ps.typeByName[n.InstanceType]; it != nil {
			for _, o := range it.Offerings {
				if o.Zone == n.Zone && o.CapacityType == n.CapacityType {
					n.Price = o.Price
				}
			}
		}
	}
	n.Initialized = w.looksInitialized(node, ps)
	if n.Initialized && n.Ready == corev1.ConditionTrue {
		n.NominatedUntil = later(n.CreatedAt, n.ReadySince).Add(window)
	}
	n.Disrupting = node.Annotations[reservedAnnotation] != "" || hasTaintKey(node.Spec.Taints, activities.DisruptedTaintKey)
	n.NodePoolHash, n.NodePoolHashVersion = node.Annotations[apisv1.AnnotationNodePoolHash], node.Annotations[apisv1.AnnotationNodePoolHashVersion]
	n.NodeClassHash, n.NodeClassHashVersion = node.Annotations[apisv1.AnnotationNodeClassHash], node.Annotations[apisv1.AnnotationNodeClassHashVersion]
	n.ImageID, n.SubnetID = node.Annotations[apisv1.AnnotationImageID], node.Annotations[apisv1.AnnotationSubnetID]
	if sgs := node.Annotations[apisv1.AnnotationSecurityGroupIDs]; sgs != "" {
		n.SecurityGroupIDs = strings.Split(sgs, ",")
	}
	if t, err := time.Parse(time.RFC3339, node.Annotations[apisv1.AnnotationLaunchedByConsolidation]); err == nil {
		n.LaunchedByConsolidationAt = t
	}
	if s, ok := states[claim]; ok {
		n.Initialized = n.Initialized || s.Initialized
		n.NominatedUntil = later(n.NominatedUntil, s.NominatedUntil)
		n.LastPodEventAt = later(n.LastPodEventAt, s.LastPodEventAt)
		n.LaunchedByConsolidationAt = later(n.LaunchedByConsolidationAt, s.LaunchedByConsolidationAt)
		n.Disrupting = n.Disrupting || s.Reserved || s.Validating || s.Committed
		// Whose budget this computation charges (see
		// activities.DisruptionNodeState): a pass charges validating
		// nodes (or, under ValidatingWait, counts them in the pool's
		// waiting ledger instead), an admission committed ones.
		n.Uncharged = (s.Committed && !admission) || (s.Validating && admission)
		n.DecidedAfter = s.Validating && s.DecidedLater && admission
		if s.Validating && !admission && validatingWait {
			n.Uncharged, n.Waiting = true, true
		}
		n.Deleting = n.Deleting || s.Deleting
		n.DriftedSince = s.DriftedSince
		if s.ReplacementFor != "" {
			n.ReplacementFor = s.ReplacementFor
		}
	}
	return n
}

// looksInitialized judges from the Node alone whether its workflow
// initialized it: labelled so by WaitForInitialization; or, for Nodes
// initialized before that label, registered (unregistered taint gone),
// startup taints gone, and Ready — or older than registration can take,
// since a node that goes NotReady after initialization stays initialized.
func (w *world) looksInitialized(node *corev1.Node, ps *poolState) bool {
	if node.Labels[apisv1.LabelNodeInitialized] == "true" {
		return true
	}
	if hasTaintKey(node.Spec.Taints, activities.UnregisteredTaintKey) {
		return false
	}
	if ps != nil {
		for _, t := range ps.pool.Spec.Template.Spec.StartupTaints {
			if containsTaint(node.Spec.Taints, t) {
				return false
			}
		}
	}
	return nodeReady(node) || w.now.Sub(node.CreationTimestamp.Time) >= w.registrationWindow()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// pdbIndex returns, for a pod, the PodDisruptionBudgets that block its
// eviction: its one matching PDB when that allows no disruption now, or
// all of them when several match (the Eviction API refuses those); and
// whether they always will (Karpenter's fully blocking PDBs: several, or
// one whose spec allows none, maxUnavailable 0 or "0%" or minAvailable
// "100%").
func pdbIndex(pdbs []*policyv1.PodDisruptionBudget) func(*corev1.Pod) (blocked []string, always bool) {
	type entry struct {
		name     string
		selector labels.Selector
		allowed  int32
		// alwaysAllowUnhealthy: unhealthyPodEvictionPolicy AlwaysAllow,
		// under which a pod that is not Ready is evicted whatever the
		// budget allows.
		alwaysAllowUnhealthy bool
		// none: the spec allows no eviction, whatever the pods' health.
		none bool
	}
	byNamespace := map[string][]entry{}
	for _, pdb := range pdbs {
		if pdb.Spec.Selector == nil {
			continue // a nil selector selects no pod
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			continue
		}
		always := pdb.Spec.UnhealthyPodEvictionPolicy != nil && *pdb.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow
		byNamespace[pdb.Namespace] = append(byNamespace[pdb.Namespace],
			entry{name: pdb.Namespace + "/" + pdb.Name, selector: sel, allowed: pdb.Status.DisruptionsAllowed, alwaysAllowUnhealthy: always,
				none: allowsNoEviction(pdb.Spec)})
	}
	return func(pod *corev1.Pod) ([]string, bool) {
		if !evictedByDrain(pod) {
			// The drain never evicts it, so no budget stands in its way
			// (Karpenter's isEvictable: a static pod's budget does not
			// block its node).
			return nil, false
		}
		var matched []entry
		for _, e := range byNamespace[pod.Namespace] {
			if e.selector.Matches(labels.Set(pod.Labels)) {
				matched = append(matched, e)
			}
		}
		switch {
		case len(matched) == 1 && matched[0].alwaysAllowUnhealthy && podNotReady(pod):
			return nil, false
		case len(matched) == 1 && matched[0].allowed <= 0:
			return []string{matched[0].name}, matched[0].none
		case len(matched) > 1:
			names := make([]string, len(matched))
			for i, e := range matched {
				names[i] = e.name
			}
			sort.Strings(names)
			return names, true
		}
		return nil, false
	}
}

// allowsNoEviction: a budget whose spec can never allow an eviction
// (Karpenter's isFullyBlocking).
func allowsNoEviction(spec policyv1.PodDisruptionBudgetSpec) bool {
	if u := spec.MaxUnavailable; u != nil && ((u.Type == intstr.Int && u.IntVal == 0) || (u.Type == intstr.String && u.StrVal == "0%")) {
		return true
	}
	m := spec.MinAvailable
	return m != nil && m.Type == intstr.String && m.StrVal == "100%"
}

// disruptedTaint is the taint a drain puts on its Node.
var disruptedTaint = []corev1.Taint{{Key: activities.DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule}}

// evictedByDrain: the drain calls the Eviction API for pod (see
// activities/kube drain.go): not a static (mirror) pod, and not one that
// tolerates the disrupted taint (it would be scheduled straight back).
func evictedByDrain(pod *corev1.Pod) bool {
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "Node" {
			return false
		}
	}
	_, untolerated := scheduling.UntoleratedTaint(pod.Spec.Tolerations, disruptedTaint)
	return untolerated
}

// podNotReady: the pod's Ready condition is False.
func podNotReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionFalse
		}
	}
	return false
}
