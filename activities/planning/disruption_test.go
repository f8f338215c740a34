package planning

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/local/cluster/clustertesting"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/disruption"
)

// newDisruptionPlanner reads the live cluster with a clock an hour ahead,
// so every node created by the test is past its nomination window and
// consolidateAfter.
func newDisruptionPlanner(t *testing.T) *Planner {
	t.Helper()
	return newDisruptionPlannerAfter(t, time.Hour)
}

// newDisruptionPlannerAfter reads the live cluster with a clock ahead by
// ahead.
func newDisruptionPlannerAfter(t *testing.T, ahead time.Duration) *Planner {
	t.Helper()
	p, err := New(Config{
		Cluster: testClusterName, State: NewAPIState(testClientset, testDynamic), InstanceTypes: testProvider,
		Clock: clocktesting.NewFakeClock(time.Now().Add(ahead)), Logger: zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// millwrightNode is a Node as a node workflow leaves it once registered:
// pool and node claim labels, the offering's labels.
func millwrightNode(pool, instanceType, cpu, memory string) *nodeBuilder {
	b := newNode(cpu, memory).label(poolLabel, pool).label(apisv1.LabelNodePool, pool).
		label(corev1.LabelInstanceTypeStable, instanceType).label(corev1.LabelTopologyZone, "us-east-1a").
		label(apisv1.LabelCapacityType, apisv1.CapacityTypeOnDemand)
	return b.label(activities.NodeClaimLabel, "claim-"+b.node.Name)
}

func (b *nodeBuilder) annotate(key, value string) *nodeBuilder {
	b.node.Annotations[key] = value
	return b
}

func computeCommands(t *testing.T, p *Planner, req activities.ComputeCommandsRequest) activities.ComputeCommandsResponse {
	t.Helper()
	if req.Cluster == "" {
		req.Cluster = testClusterName
	}
	resp, err := p.ComputeCommands(t.Context(), req)
	if err != nil {
		t.Fatalf("ComputeCommands: %v", err)
	}
	return resp
}

// commandsOfPool keeps the commands whose candidates are the pool's (the
// cluster is shared with other tests).
func commandsOfPool(resp activities.ComputeCommandsResponse, pool string) []activities.DisruptionCommand {
	var out []activities.DisruptionCommand
	for _, cmd := range resp.Commands {
		if len(cmd.Candidates) > 0 && cmd.Candidates[0].NodePool == pool {
			out = append(out, cmd)
		}
	}
	return out
}

func verdictOf(resp activities.ComputeCommandsResponse, node string) (activities.DisruptionVerdict, bool) {
	for _, v := range resp.Verdicts {
		if v.NodeName == node {
			return v, true
		}
	}
	return activities.DisruptionVerdict{}, false
}

// Two mostly idle nodes are replaced by one cheaper node holding both
// pods: the command names both candidates and carries a launch spec of the
// pool, marked as a consolidation replacement.
func TestComputeCommandsConsolidatesIdleNodes(t *testing.T) {
	requireStack(t)
	planner := newDisruptionPlanner(t)
	ns := clustertesting.CreateNamespace(t, testClientset, "disruption")
	pool := newPool(createNodeClass(t)).onDemandTypes("m5.large", "m5.2xlarge").
		mutate(func(np *apisv1.NodePool) { np.Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: "100%"}} }).create(t)
	var nodes, pods []string
	for range 2 {
		node := millwrightNode(pool, "m5.2xlarge", "8", "32Gi").createReady(t)
		pod := newPod(ns, clustertesting.UniqueName("app"), "500m", "1Gi").selectPool(pool).bindTo(node).create(t)
		nodes, pods = append(nodes, node), append(pods, podKey(pod))
	}
	slices.Sort(nodes)
	slices.Sort(pods)

	resp := computeCommands(t, planner, activities.ComputeCommandsRequest{})

	cmds := commandsOfPool(resp, pool)
	if len(cmds) != 1 {
		t.Fatalf("%d command(s) for the pool, want 1: %+v (verdicts %+v)", len(cmds), cmds, resp.Verdicts)
	}
	cmd := cmds[0]
	var candidates []string
	for _, c := range cmd.Candidates {
		candidates = append(candidates, c.NodeName)
		if c.NodeClaimName != "claim-"+c.NodeName || c.PricePerHour <= 0 {
			t.Errorf("candidate %+v: want its node claim and its offering's price", c)
		}
	}
	slices.Sort(candidates)
	if cmd.Reason != disruption.ReasonUnderutilized || cmd.Kind != disruption.KindReplace || !slices.Equal(candidates, nodes) {
		t.Fatalf("command %s/%s over %v, want Underutilized/replace over %v (%s)", cmd.Reason, cmd.Kind, candidates, nodes, cmd.Message)
	}
	if len(cmd.Replacements) != 1 {
		t.Fatalf("%d replacement(s), want 1", len(cmd.Replacements))
	}
	spec := cmd.Replacements[0]
	if spec.NodePool != pool || spec.InstanceTypeOptions[0].Name != "m5.large" || !slices.Equal(spec.PodKeys, pods) {
		t.Errorf("replacement: pool %s, options %v, pods %v; want %s, m5.large first, %v", spec.NodePool, optionNames(spec), spec.PodKeys, pool, pods)
	}
	if spec.Annotations[apisv1.AnnotationLaunchedByConsolidation] == "" {
		t.Errorf("replacement annotations %v lack %s", spec.Annotations, apisv1.AnnotationLaunchedByConsolidation)
	}
	if cmd.SavingsPerHour <= 0 || cmd.Message == "" {
		t.Errorf("savings %v, message %q", cmd.SavingsPerHour, cmd.Message)
	}
	for _, b := range resp.Budgets {
		if b.NodePool == pool && (b.Nodes != 2 || b.Allowed[disruption.ReasonUnderutilized] != 2) {
			t.Errorf("budget %+v: want 2 nodes, 2 allowed", b)
		}
	}
	// The launch spec carries the drift stamps of the pool and its class,
	// and a node stamped with them is not drifted.
	for _, key := range []string{apisv1.AnnotationNodePoolHash, apisv1.AnnotationNodeClassHash} {
		if spec.Annotations[key] == "" {
			t.Errorf("replacement annotations %v lack %s", spec.Annotations, key)
		}
	}
	if spec.Annotations[apisv1.AnnotationNodePoolHashVersion] != disruption.NodePoolHashVersion ||
		spec.Annotations[apisv1.AnnotationNodeClassHashVersion] != disruption.NodeClassHashVersion {
		t.Errorf("replacement annotations %v: want the current hash versions", spec.Annotations)
	}
	stamped := millwrightNode(pool, "m5.2xlarge", "8", "32Gi")
	for k, v := range spec.Annotations {
		stamped.annotate(k, v)
	}
	current := stamped.createReady(t)
	resp = computeCommands(t, planner, activities.ComputeCommandsRequest{})
	if v, ok := verdictOf(resp, current); !ok || v.Drifted != "" {
		t.Errorf("node stamped at launch: verdict %+v, want no drift", v)
	}
}

// A Node still starting up (not yet registered by its workflow, within the
// registration timeout) takes none of the pods consolidation moves: the
// pod of a node that could otherwise only be deleted has no other place,
// so the decision waits for the new node (Karpenter: "would schedule
// against uninitialized nodeclaim"), once it is initialized it goes.
// Read as provisioning reads it, the new node's room is there in spite of
// its unregistered taint, which it sheds at registration.
func TestComputeCommandsWaitsForNodesStartingUp(t *testing.T) {
	requireStack(t)
	// Past the candidate's nomination window (20 s after Ready), within
	// the new node's registration timeout.
	planner := newDisruptionPlannerAfter(t, time.Minute)
	ns := clustertesting.CreateNamespace(t, testClientset, "disruption")
	pool := newPool(createNodeClass(t)).onDemandTypes("m5.large").
		mutate(func(np *apisv1.NodePool) { np.Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: "100%"}} }).create(t)
	candidate := millwrightNode(pool, "m5.large", "2", "8Gi").createReady(t)
	pod := newPod(ns, clustertesting.UniqueName("app"), "1", "1Gi").selectPool(pool).bindTo(candidate).create(t)
	starting := millwrightNode(pool, "m5.large", "2", "8Gi").taint(activities.UnregisteredTaintKey, corev1.TaintEffectNoExecute).create(t)
	// A pod that keeps the new node from being a candidate once it is
	// initialized (empty, it would be deleted itself); it tolerates the
	// unregistered taint, which would otherwise evict it (NoExecute).
	kept := newPod(ns, clustertesting.UniqueName("kept"), "500m", "1Gi").selectPool(pool).tolerate(activities.UnregisteredTaintKey).bindTo(starting)
	kept.pod.Annotations = map[string]string{apisv1.AnnotationKarpenterDoNotDisrupt: "true"}
	kept.create(t)

	resp := computeCommands(t, planner, activities.ComputeCommandsRequest{})
	if cmds := commandsOfPool(resp, pool); len(cmds) != 0 {
		t.Fatalf("commands %+v, want none while %s starts up", cmds, starting)
	}
	want := "Not all pods would schedule, pod " + podKey(pod) + " would schedule against uninitialized node/" + starting
	if v, ok := verdictOf(resp, candidate); !ok || v.Message != want {
		t.Errorf("verdict of %s = %+v, want %q", candidate, v, want)
	}
	if v, ok := verdictOf(resp, starting); !ok || !strings.HasPrefix(v.Message, "node isn't initialized") {
		t.Errorf("verdict of %s = %+v, want it not initialized", starting, v)
	}

	// Registered and Ready: the node workflow's initialized label.
	initialized, err := testClientset.CoreV1().Nodes().Get(t.Context(), starting, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	initialized.Spec.Taints = nil
	initialized.Labels[apisv1.LabelNodeInitialized] = "true"
	if _, err := testClientset.CoreV1().Nodes().Update(t.Context(), initialized, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	resp = computeCommands(t, planner, activities.ComputeCommandsRequest{})
	cmds := commandsOfPool(resp, pool)
	if len(cmds) != 1 || cmds[0].Kind != disruption.KindDelete || cmds[0].Candidates[0].NodeName != candidate {
		t.Errorf("commands %+v, want %s deleted once %s is initialized (verdicts %+v)", cmds, candidate, starting, resp.Verdicts)
	}
}

// ComputeCommands reads the pods' volumes from the cluster: a pod whose
// claim is bound to a zonal EBS volume is replaced in the volume's zone,
// never planned onto a node where kube-scheduler would leave it Pending.
func TestComputeCommandsKeepsPodsInTheirVolumesZone(t *testing.T) {
	requireStack(t)
	planner := newDisruptionPlanner(t)
	ns := clustertesting.CreateNamespace(t, testClientset, "disruption")
	pool := newPool(createNodeClass(t)).onDemandTypes("m5.large", "m5.2xlarge").
		mutate(func(np *apisv1.NodePool) { np.Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: "100%"}} }).create(t)
	node := millwrightNode(pool, "m5.2xlarge", "8", "32Gi").createReady(t) // in us-east-1a
	createZonalClaim(t, ns, "data", "us-east-1c")
	newPod(ns, clustertesting.UniqueName("db"), "500m", "1Gi").selectPool(pool).withClaim("data").bindTo(node).create(t)

	resp := computeCommands(t, planner, activities.ComputeCommandsRequest{})

	cmds := commandsOfPool(resp, pool)
	if len(cmds) != 1 || cmds[0].Kind != disruption.KindReplace || len(cmds[0].Replacements) != 1 {
		t.Fatalf("commands %+v, want one replacement (verdicts %+v)", cmds, resp.Verdicts)
	}
	for _, o := range cmds[0].Replacements[0].InstanceTypeOptions {
		for _, off := range o.Offerings {
			if off.Zone != "us-east-1c" {
				t.Errorf("option %s offered in %s, want the volume's zone us-east-1c only", o.Name, off.Zone)
			}
		}
	}
}

// What the cluster shows decides each node's verdict: a do-not-disrupt
// annotation, a PodDisruptionBudget allowing no eviction, the unregistered
// taint, a stale template hash (drift), an AMI the class no longer
// resolves (drift), and what the request says of a node claim (reserved,
// or the replacement of a running command).
func TestComputeCommandsJudgesNodesFromTheCluster(t *testing.T) {
	requireStack(t)
	planner := newDisruptionPlanner(t)
	ns := clustertesting.CreateNamespace(t, testClientset, "disruption")
	nodeClass := createNodeClass(t)
	setResolvedAMIs(t, nodeClass, "ami-new")
	pool := newPool(nodeClass).onDemandTypes("m5.large", "m5.xlarge").
		mutate(func(np *apisv1.NodePool) { np.Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: "100%"}} }).create(t)
	node := func(b *nodeBuilder) string { return b.createReady(t) }
	base := func() *nodeBuilder { return millwrightNode(pool, "m5.xlarge", "4", "16Gi") }

	protected := node(base().annotate(apisv1.AnnotationKarpenterDoNotDisrupt, "true"))
	guarded := node(base())
	guardedPod := newPod(ns, clustertesting.UniqueName("guarded"), "3", "1Gi").selectPool(pool).bindTo(guarded)
	guardedPod.pod.Labels = map[string]string{"app": "guarded"}
	guardedPod.create(t)
	createBlockingPDB(t, ns, "guarded")
	unregistered := node(base().taint(activities.UnregisteredTaintKey, corev1.TaintEffectNoExecute))
	stale := node(base().annotate(apisv1.AnnotationNodePoolHash, "stale").annotate(apisv1.AnnotationNodePoolHashVersion, disruption.NodePoolHashVersion))
	oldAMI := node(base().annotate(apisv1.AnnotationImageID, "ami-old"))
	reserved := node(base())
	replacement := node(base())
	awaited := node(base())
	nominated := newPod(ns, clustertesting.UniqueName("nominated"), "1", "1Gi").selectPool(pool).create(t)
	nominated.Status.NominatedNodeName = awaited
	if _, err := testClientset.CoreV1().Pods(ns).UpdateStatus(t.Context(), nominated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	newPod(ns, clustertesting.UniqueName("busy"), "3", "1Gi").selectPool(pool).bindTo(oldAMI).create(t)

	resp := computeCommands(t, planner, activities.ComputeCommandsRequest{
		Nodes: []activities.DisruptionNodeState{{NodeClaimName: "claim-" + reserved, Reserved: true},
			{NodeClaimName: "claim-" + replacement, ReplacementFor: "disruption/c1/command-1"}},
	})

	for node, want := range map[string]string{
		protected:    `disruption is blocked through the "karpenter.sh/do-not-disrupt" annotation`,
		guarded:      "pdb " + ns + "/guarded prevents pod evictions",
		unregistered: "node isn't initialized",
		reserved:     "node is deleting or marked for deletion",
		replacement:  "node is a replacement of running disruption command disruption/c1/command-1",
		// Its pod was nominated at registration and the scheduler has not
		// bound it yet: not empty, long after its nomination window.
		awaited: "node is nominated for a pending pod",
	} {
		v, ok := verdictOf(resp, node)
		if !ok || !strings.HasPrefix(v.Message, want) || v.Event != disruption.EventDisruptionBlocked {
			t.Errorf("verdict of %s = %+v, want DisruptionBlocked %q", node, v, want)
		}
	}
	drifted := map[string]string{}
	for _, cmd := range commandsOfPool(resp, pool) {
		if cmd.Reason == disruption.ReasonDrifted {
			drifted[cmd.Candidates[0].NodeName] = cmd.Message
		}
	}
	if got, want := drifted[stale], "Drifted: NodePool template changed since launch"; got != want {
		t.Errorf("stale template: command %q, want %q (commands %+v)", got, want, resp.Commands)
	}
	if got, want := drifted[oldAMI], "Drifted: AMI ami-old → ami-new"; got != want {
		t.Errorf("old AMI: command %q, want %q", got, want)
	}
}

// createBlockingPDB guards the pods labelled app with minAvailable 1 and
// waits until the disruption controller has computed that no eviction is
// allowed.
func createBlockingPDB(t *testing.T, ns, app string) {
	t.Helper()
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
	}
	if _, err := testClientset.PolicyV1().PodDisruptionBudgets(ns).Create(t.Context(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clustertesting.Eventually(t, time.Minute, "PDB "+app+" computed", func(ctx context.Context) (bool, error) {
		got, err := testClientset.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.ObservedGeneration == got.Generation && got.Status.ExpectedPods == 1, nil
	})
}

// setResolvedAMIs writes the class's status as the status controller
// would: these AMIs resolved.
func setResolvedAMIs(t *testing.T, name string, ids ...string) {
	t.Helper()
	client := testDynamic.Resource(EC2NodeClassResource)
	u, err := client.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var amis []any
	for _, id := range ids {
		amis = append(amis, map[string]any{"id": id, "requirements": []any{}})
	}
	if err := unstructured.SetNestedSlice(u.Object, amis, "status", "amis"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.UpdateStatus(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Whose budget a computation charges (changeAdmitAtCommit): a pass charges
// the nodes of commands still validating and not those of admitted
// (committed) commands; an admission the other way round. Either way the
// held node is no candidate.
func TestComputeCommandsChargesTheLedgerByPurpose(t *testing.T) {
	requireStack(t)
	planner := newDisruptionPlanner(t)
	pool := newPool(createNodeClass(t)).onDemandTypes("m5.large").
		mutate(func(np *apisv1.NodePool) { np.Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: "1"}} }).create(t)
	held := millwrightNode(pool, "m5.large", "2", "8Gi").createReady(t)
	free := []string{millwrightNode(pool, "m5.large", "2", "8Gi").createReady(t), millwrightNode(pool, "m5.large", "2", "8Gi").createReady(t)}
	cases := []struct {
		name      string
		admission bool
		// validatingWait: the pass's ValidatingWait (changeValidatingWait).
		validatingWait bool
		// lookahead is the pass's Options.ValidationLookahead.
		lookahead int
		state     activities.DisruptionNodeState
		// allowed is the pool's Empty budget left; 1 means one free node
		// goes in a command.
		allowed int
		// underutilized, when set, is the pool's Underutilized budget left.
		underutilized int
	}{
		{name: "a pass charges a validating node", state: activities.DisruptionNodeState{Validating: true}, allowed: 0},
		{name: "a pass does not charge a committed node", state: activities.DisruptionNodeState{Committed: true}, allowed: 1},
		{name: "an admission charges a committed node", admission: true, state: activities.DisruptionNodeState{Committed: true}, allowed: 0},
		{name: "an admission does not charge a validating node", admission: true, state: activities.DisruptionNodeState{Validating: true}, allowed: 1},
		// Under ValidatingWait the validating node uses no budget but fills
		// the pool's waiting ledger (one budget's worth: 1 here), so
		// nothing more is decided either (model/disruption's budget tests
		// show the difference with a larger budget).
		{name: "a pass with ValidatingWait and no lookahead keeps one budget's worth waiting", validatingWait: true, lookahead: -1, state: activities.DisruptionNodeState{Validating: true}, allowed: 0},
		// By default (DefaultValidationLookahead) consolidation decides
		// ahead of the budget: one node waits of the 3 budgets' worth, so
		// one more (a budget's worth a pass) may be decided, its command
		// needing the budget at its admission; Empty decisions, admitted
		// by the pass, do not go ahead.
		{name: "a pass with ValidatingWait decides consolidation ahead of the budget", validatingWait: true, state: activities.DisruptionNodeState{Validating: true}, allowed: 0, underutilized: 1},
		{name: "a pass with ValidatingWait does not charge a committed node", validatingWait: true, state: activities.DisruptionNodeState{Committed: true}, allowed: 1},
		{name: "a reserved node is charged by both", admission: true, state: activities.DisruptionNodeState{Reserved: true}, allowed: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.state.NodeClaimName = "claim-" + held
			resp := computeCommands(t, planner, activities.ComputeCommandsRequest{Admission: tc.admission, Validation: tc.admission,
				ValidatingWait: tc.validatingWait, Nodes: []activities.DisruptionNodeState{tc.state},
				Options: activities.DisruptionOptions{ValidationLookahead: tc.lookahead}})
			var taken []string
			for _, cmd := range commandsOfPool(resp, pool) {
				for _, c := range cmd.Candidates {
					taken = append(taken, c.NodeName)
				}
			}
			if slices.Contains(taken, held) {
				t.Errorf("the held node %s is a candidate: %v", held, taken)
			}
			if len(taken) != tc.allowed || (len(taken) == 1 && !slices.Contains(free, taken[0])) {
				t.Errorf("candidates %v, want %d of the free nodes %v", taken, tc.allowed, free)
			}
			for _, b := range resp.Budgets {
				if b.NodePool == pool && b.Allowed[disruption.ReasonEmpty] != tc.allowed {
					t.Errorf("budget %+v: want %d Empty allowed", b, tc.allowed)
				}
				if b.NodePool == pool && tc.underutilized > 0 && b.Allowed[disruption.ReasonUnderutilized] != tc.underutilized {
					t.Errorf("budget %+v: want %d Underutilized allowed", b, tc.underutilized)
				}
			}
		})
	}
}
