package scale

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/planning"
	"github.com/millwright/millwright/harness/driver"
	"github.com/millwright/millwright/local/stack/stacktest"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
	"github.com/millwright/millwright/workflows"
)

var (
	consolidationFlag = flag.String("consolidation.scenarios", "ci",
		"comma-separated consolidation scenarios (ci, mixed-600, karpenter-perf)")
	// The workers get no MILLWRIGHT_* variables from this process
	// (driver.WorkerEnviron), so settings are tried through their flags.
	consolidationWorkerArgs = flag.String("consolidation.worker-args", "",
		"extra worker flags, space-separated (e.g. --consolidation-threshold=4)")
)

// The consolidation benchmark's pool and namespace (apart from TestScale's).
const (
	consolidationPool      = "consolidate"
	consolidationNamespace = "consolidate"
	consolidateAfter       = 30 * time.Second
	// settleWindow is the bound: within it after consolidateAfter
	// the nodes must cost at most maxCostRatio × a fresh plan.
	settleWindow = 5 * time.Minute
	maxCostRatio = 1.15
	// settleQuiet: the nodes unchanged (none disrupting) this long means
	// consolidation found nothing more to do.
	settleQuiet = 90 * time.Second
	// defaultBudget is the pool's (Karpenter's default, 10%).
	defaultBudget = 0.10
)

// consolidationScenario scales deployments up, then down to keep of each.
type consolidationScenario struct {
	name        string
	deployments []deployment
	// keep is the share of each deployment's replicas left after the
	// scale-down.
	keep float64
	// watchWindow samples on after the target is reached, to the end of
	// the window or until the nodes stop changing, and reports where
	// consolidation ends as well as when it first got under the target.
	// Stopping at the first sample under 1.15× reports the threshold, not
	// the outcome: runs 41–48 all "reached" at 1.14–1.15×. ci stops at
	// the target to keep `make test` short.
	watchWindow bool
}

var consolidationScenarios = map[string]consolidationScenario{
	// `make test`'s: 60 pods of the mixed shapes → 30%.
	"ci": {name: "ci", deployments: mixed("c", 6).deployments, keep: 0.3},
	// The issue's: 600 pods over 10 deployments → 30% of each.
	"mixed-600": {name: "mixed-600", deployments: mixed("c", 60).deployments, keep: 0.3, watchWindow: true},
	// Karpenter's performance suite: 500 + 500 pods, then 350 + 350.
	"karpenter-perf": {name: "karpenter-perf", deployments: []deployment{
		{name: "small", replicas: 500, cpu: "900m", memory: "3100Mi"},
		{name: "large", replicas: 500, cpu: "3500m", memory: "28Gi"},
	}, keep: 0.7, watchWindow: true},
}

// TestConsolidation scales a workload up on a WhenEmptyOrUnderutilized pool
// (consolidateAfter 30s, the default 10% budget), scales every deployment
// down, and samples until the nodes cost at most 1.15× a fresh plan of the
// remaining pods: it prints the cost before and after, the ratio and the
// time it took (or, when the nodes stop changing first, that the target was
// not reached). The large scenarios sample on to the end of the window (or
// until the nodes stop changing) and print where consolidation ended too.
// It fails on correctness only — a remaining pod not Running,
// a PodDisruptionBudget below its desired healthy pods, more nodes
// disrupting than the budget allows. `make consolidation` runs the large
// scenarios.
func TestConsolidation(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack (not with -short)")
	}
	var chosen []consolidationScenario
	for _, name := range strings.Split(*consolidationFlag, ",") {
		sc, ok := consolidationScenarios[name]
		if !ok {
			t.Fatalf("-consolidation.scenarios: no scenario %q (have ci, mixed-600, karpenter-perf)", name)
		}
		chosen = append(chosen, sc)
	}
	ctx := context.Background()
	s := driver.StartForTest(t, "millwright-consolidation-", *keepFlag, driver.Options{WorkerArgs: strings.Fields(*consolidationWorkerArgs)})
	if err := stacktest.ApplyObject(ctx, s.Dynamic, planning.NodePoolResource, consolidatingPool()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: consolidationNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var reports []string
	for _, sc := range chosen {
		report := runConsolidation(t, s, sc)
		reports = append(reports, report)
		fmt.Fprintln(os.Stderr, report)
		if t.Failed() {
			break
		}
	}
	t.Log("\n" + strings.Join(reports, "\n"))
}

// consolidatingPool is TestScale's pool under WhenEmptyOrUnderutilized.
func consolidatingPool() *unstructured.Unstructured {
	pool := nodePool()
	pool.SetName(consolidationPool)
	_ = unstructured.SetNestedField(pool.Object, string(apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized), "spec", "disruption", "consolidationPolicy")
	_ = unstructured.SetNestedField(pool.Object, consolidateAfter.String(), "spec", "disruption", "consolidateAfter")
	return pool
}

// inPool is d on the consolidation pool and namespace.
func inPool(d deployment, replicas int) deployment {
	d.replicas = replicas
	return d
}

func runConsolidation(t *testing.T, s *driver.Stack, sc consolidationScenario) string {
	ctx := context.Background()
	kube := s.Kube
	var b strings.Builder
	pods := 0
	for _, d := range sc.deployments {
		pods += d.replicas
	}
	fmt.Fprintf(&b, "consolidation %s: %d pods → %.0f%% of each deployment\n", sc.name, pods, 100*sc.keep)

	created := time.Now()
	for _, d := range sc.deployments {
		obj := d.object()
		obj.Namespace = consolidationNamespace
		obj.Spec.Template.Spec.NodeSelector = map[string]string{apisv1.LabelNodePool: consolidationPool}
		if _, err := kube.AppsV1().Deployments(consolidationNamespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating deployment %s: %v", d.name, err)
		}
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: d.name, Namespace: consolidationNamespace},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MaxUnavailable: ptr.To(intstr.FromString("20%")),
				Selector:       obj.Spec.Selector,
			},
		}
		if _, err := kube.PolicyV1().PodDisruptionBudgets(consolidationNamespace).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating PDB %s: %v", d.name, err)
		}
	}
	// Deferred, not t.Cleanup: the next scenario must start from an empty
	// pool. Registered on the test, mixed-600's deployments (180 pods)
	// stayed through karpenter-perf, which then counted 880 pods Running
	// of 700 and could never reach its target.
	defer cleanUpConsolidation(t, s, sc)
	if !waitConsolidationPods(t, s, pods, bound(runningBoundPer1000, pods)) {
		return b.String()
	}
	before := sampleConsolidation(ctx, s)
	fmt.Fprintf(&b, "  scaled up               %d nodes, $%.2f/h, all Running after %s\n", before.nodes, before.cost, time.Since(created).Round(time.Second))

	var kept []deployment
	remaining := 0
	for _, d := range sc.deployments {
		n := int(math.Round(float64(d.replicas) * sc.keep))
		kept = append(kept, inPool(d, n))
		remaining += n
		// The scale carries the Deployment's resourceVersion, which its
		// controller's status writes move on: read and write again on a
		// conflict.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			scale, err := kube.AppsV1().Deployments(consolidationNamespace).GetScale(ctx, d.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			scale.Spec.Replicas = int32(n)
			_, err = kube.AppsV1().Deployments(consolidationNamespace).UpdateScale(ctx, d.name, scale, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("scaling deployment %s to %d: %v", d.name, n, err)
		}
	}
	scaledDown := time.Now()
	fresh, freshNodes, freshLaunched, freshUse := freshPlanCost(t, s, kept)

	deadline := scaledDown.Add(consolidateAfter + settleWindow)
	var last, atReach consolidationSample
	var reached, stableFor time.Duration
	stableSince, stableNodes := time.Now(), -1
	budgetExceeded, pdbViolations, samples, maxDisrupting := 0, 0, 0, 0
	for time.Now().Before(deadline) {
		last = sampleConsolidation(ctx, s)
		samples++
		maxDisrupting = max(maxDisrupting, last.disrupting)
		if allowed := int(math.Ceil(defaultBudget * float64(last.nodes))); last.disrupting > allowed {
			budgetExceeded++
			t.Errorf("%s: %d nodes disrupting of %d, the 10%% budget allows %d", time.Since(scaledDown).Round(time.Second), last.disrupting, last.nodes, allowed)
		}
		for _, v := range last.pdbViolations {
			pdbViolations++
			t.Errorf("%s: %s", time.Since(scaledDown).Round(time.Second), v)
		}
		if reached == 0 && last.cost <= maxCostRatio*fresh && last.running == remaining && last.disrupting == 0 {
			reached, atReach = time.Since(scaledDown), last
			if !sc.watchWindow {
				break
			}
		}
		// Nothing left to do: the same nodes, none disrupting, for
		// settleQuiet past consolidateAfter.
		if last.nodes != stableNodes || last.disrupting > 0 {
			stableSince, stableNodes = time.Now(), last.nodes
		}
		if stableFor = time.Since(stableSince); stableFor >= settleQuiet && time.Since(scaledDown) > consolidateAfter+settleQuiet {
			break
		}
		time.Sleep(2 * time.Second)
	}
	ratio := last.cost / fresh
	fmt.Fprintf(&b, "  fresh plan of the %3d   %d nodes, $%.2f/h at their cheapest options (the target's yardstick); $%.2f/h as CreateFleet's price-capacity-optimized would launch them (the end costs %.2f× that)\n",
		remaining, freshNodes, fresh, freshLaunched, last.cost/freshLaunched)
	if reached > 0 {
		fmt.Fprintf(&b, "  settled after           %s (consolidateAfter %s): %d nodes, $%.2f/h = %.2f× the fresh plan\n",
			reached.Round(time.Second), consolidateAfter, atReach.nodes, atReach.cost, atReach.cost/fresh)
		if sc.watchWindow {
			how := "the window closed"
			if stableFor >= settleQuiet {
				how = fmt.Sprintf("nodes unchanged for %s", stableFor.Round(time.Second))
			}
			fmt.Fprintf(&b, "  at the end              %s after the scale-down (%s): %d nodes, $%.2f/h = %.2f× the fresh plan, %d of %d pods Running, %d disrupting\n",
				time.Since(scaledDown).Round(time.Second), how, last.nodes, last.cost, ratio, last.running, remaining, last.disrupting)
		}
	} else {
		// A figure, not a failure: the target is reported, and the
		// correctness checks below fail the run.
		fmt.Fprintf(&b, "  target NOT reached      %s after the scale-down (nodes unchanged for %s): %d nodes, $%.2f/h = %.2f× the fresh plan (target ≤ %.2f×), %d of %d pods Running\n",
			time.Since(scaledDown).Round(time.Second), stableFor.Round(time.Second), last.nodes, last.cost, ratio, maxCostRatio, last.running, remaining)
		b.WriteString(whyNotConsolidated(ctx, s))
		b.WriteString(lastDisruptionPass(ctx, s))
	}
	endUse := nodesUse(ctx, s)
	fmt.Fprintf(&b, "  requested / allocatable the end's nodes %s; the fresh plan's %s\n", endUse, freshUse)
	if last.running < remaining {
		// The window may close mid-command, with evicted pods between
		// nodes: a pod is lost only if it does not run again.
		moving := time.Now()
		if waitConsolidationPods(t, s, remaining, bound(runningBoundPer1000, remaining)) {
			fmt.Fprintf(&b, "  pods in motion          %d of %d Running when the window closed, all %d %s later\n",
				last.running, remaining, remaining, time.Since(moving).Round(time.Second))
		} else {
			t.Errorf("consolidation %s: %d of %d remaining pods Running at the end", sc.name, last.running, remaining)
		}
	}
	fmt.Fprintf(&b, "  samples                 %d: most nodes disrupting at once %d, over budget %d, PDB violations %d\n",
		samples, maxDisrupting, budgetExceeded, pdbViolations)
	return b.String()
}

// whyNotConsolidated is, for each of the pool's nodes, the last
// Unconsolidatable or DisruptionBlocked event: what kept it.
func whyNotConsolidated(ctx context.Context, s *driver.Stack) string {
	nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: apisv1.LabelNodePool + "=" + consolidationPool})
	if err != nil {
		return ""
	}
	evs, err := s.Kube.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node"})
	if err != nil {
		return ""
	}
	last := map[string]corev1.Event{}
	for _, e := range evs.Items {
		if e.Reason != "Unconsolidatable" && e.Reason != "DisruptionBlocked" {
			continue
		}
		if prev, ok := last[e.InvolvedObject.Name]; !ok || eventTime(e).After(eventTime(prev)) {
			last[e.InvolvedObject.Name] = e
		}
	}
	var b strings.Builder
	for _, n := range nodes.Items {
		var pods int
		if list, err := s.Kube.CoreV1().Pods(consolidationNamespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name}); err == nil {
			pods = len(list.Items)
		}
		e, ok := last[n.Name]
		why := "no event"
		if ok {
			why = e.Reason + ": " + e.Message
		}
		fmt.Fprintf(&b, "    %s %s %s, %d pods: %s\n", n.Name, n.Labels[corev1.LabelInstanceTypeStable], n.Labels[apisv1.LabelCapacityType], pods, why)
	}
	return b.String()
}

// lastDisruptionPass is the disruption workflow's last decision: when it
// ran, the budgets, the commands it decided and every node's verdict (the
// events above may be minutes old: they are deduplicated).
func lastDisruptionPass(ctx context.Context, s *driver.Stack) string {
	value, err := s.Temporal.QueryWorkflow(ctx, workflows.DisruptionWorkflowID(s.Local.ClusterName()), "", workflows.QueryDisruptionState)
	var view workflows.DisruptionStateView
	if err == nil {
		err = value.Get(&view)
	}
	if err != nil {
		return fmt.Sprintf("    (disruption state: %v)\n", err)
	}
	var b strings.Builder
	if pass := view.LastPass; pass != nil {
		fmt.Fprintf(&b, "    last pass %s: %d candidate(s), %d command(s)%s\n", pass.At.UTC().Format(time.TimeOnly), pass.Candidates, pass.Commands, errorSuffix(pass.Error))
	}
	for _, budget := range view.Budgets {
		fmt.Fprintf(&b, "    budget %s: %d node(s), %d disrupting, allowed %v\n", budget.NodePool, budget.Nodes, budget.Disrupting, budget.Allowed)
	}
	for _, running := range view.Running {
		fmt.Fprintf(&b, "    running %s: %s\n", running.ID, running.Message)
	}
	for _, command := range view.Decided {
		fmt.Fprintf(&b, "    decided %s\n", command.Message)
	}
	for _, verdict := range view.Verdicts {
		fmt.Fprintf(&b, "    verdict %s: %s %s\n", verdict.NodeName, verdict.Event, verdict.Message)
	}
	return b.String()
}

func eventTime(e corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// consolidationSample is the pool as one look sees it.
type consolidationSample struct {
	nodes, disrupting, running int
	cost                       float64
	pdbViolations              []string
}

func sampleConsolidation(ctx context.Context, s *driver.Stack) consolidationSample {
	var out consolidationSample
	nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: apisv1.LabelNodePool + "=" + consolidationPool})
	if err != nil {
		return out
	}
	instances := poolInstancesOf(s, consolidationPool, true)
	for _, n := range nodes.Items {
		out.nodes++
		id := n.Spec.ProviderID[strings.LastIndex(n.Spec.ProviderID, "/")+1:]
		if inst, ok := instances[id]; ok {
			price, _ := s.Emulator().HourlyPrice(inst.instanceType, inst.zone, inst.capacityType)
			out.cost += price
		}
		disrupting := n.DeletionTimestamp != nil || n.Spec.Unschedulable ||
			slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == activities.DisruptedTaintKey })
		if disrupting {
			out.disrupting++
		}
	}
	pods, err := s.Kube.CoreV1().Pods(consolidationNamespace).List(ctx, metav1.ListOptions{})
	if err == nil {
		for i := range pods.Items {
			if stacktest.PodAvailable(&pods.Items[i]) && pods.Items[i].DeletionTimestamp == nil {
				out.running++
			}
		}
	}
	pdbs, err := s.Kube.PolicyV1().PodDisruptionBudgets(consolidationNamespace).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, pdb := range pdbs.Items {
			st := pdb.Status
			// Evictions keep currentHealthy ≥ desiredHealthy; a scale-down
			// lowers both, so only a drop below is a violation.
			if st.ObservedGeneration == pdb.Generation && st.ExpectedPods > 0 && st.CurrentHealthy < st.DesiredHealthy {
				out.pdbViolations = append(out.pdbViolations, fmt.Sprintf("PDB %s: %d healthy, %d desired", pdb.Name, st.CurrentHealthy, st.DesiredHealthy))
			}
		}
	}
	return out
}

// freshPlanCost is what the packer would launch for the kept pods from
// nothing: the pool's requirements over the catalog, priced as the emulator
// prices them, in the zones the pool's nodes used. cheapest prices each
// node at its cheapest option (the target's yardstick); launched at the
// option CreateFleet would take (asLaunched), which for spot is the
// cheapest deep pool, as it takes for the nodes being measured.
func freshPlanCost(t *testing.T, s *driver.Stack, kept []deployment) (cheapest float64, nodes int, launched float64, use resourceUse) {
	t.Helper()
	zones := map[string]bool{}
	for _, inst := range poolInstancesOf(s, consolidationPool, false) {
		zones[inst.zone] = true
	}
	var zoneList []string
	for z := range zones {
		zoneList = append(zoneList, z)
	}
	slices.Sort(zoneList)
	var types []*catalog.InstanceType
	for _, spec := range catalog.MustDefault().InstanceTypes {
		var offerings catalog.Offerings
		for _, z := range zoneList {
			for _, ct := range []string{apisv1.CapacityTypeSpot, apisv1.CapacityTypeOnDemand} {
				if price, ok := s.Emulator().HourlyPrice(spec.Name, z, ct); ok {
					offerings = append(offerings, catalog.Offering{Zone: z, CapacityType: ct, Price: price, Available: true})
				}
			}
		}
		types = append(types, spec.InstanceType(offerings))
	}
	requirements := consolidatingPoolRequirements()
	in := packer.Input{NodePools: []packer.NodePool{{
		Name: consolidationPool, Requirements: requirements, InstanceTypes: types,
		CapacityTypes: []string{apisv1.CapacityTypeSpot, apisv1.CapacityTypeOnDemand},
	}}}
	for _, d := range kept {
		template := d.object().Spec.Template
		for i := range d.replicas {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", d.name, i), Namespace: consolidationNamespace, Labels: template.Labels},
				Spec: *template.Spec.DeepCopy()}
			pod.Spec.NodeSelector = nil
			in.Pods = append(in.Pods, pod)
		}
	}
	result, err := packer.Pack(in)
	if err != nil {
		t.Fatalf("fresh plan: %v", err)
	}
	if len(result.Unschedulable) > 0 {
		t.Errorf("fresh plan: %d pods unschedulable (first: %s)", len(result.Unschedulable), result.Unschedulable[0].Reason)
	}
	for _, n := range result.NewNodes {
		launched += asLaunched(s, n)
		if spec, ok := catalog.MustDefault().Get(n.InstanceType); ok {
			use.add(spec.Allocatable(), n.Pods)
		}
	}
	return result.TotalPrice(), len(result.NewNodes), launched, use
}

// resourceUse sums what pods request against what their nodes offer: the
// part of the gap to a fresh plan that is room left unused, as opposed to
// dearer types.
type resourceUse struct {
	requested, allocatable scheduling.Resources
}

func (u *resourceUse) add(allocatable scheduling.Resources, pods []*corev1.Pod) {
	u.allocatable = u.allocatable.Add(allocatable)
	for _, p := range pods {
		if r, err := scheduling.EffectiveRequests(p); err == nil {
			u.requested = u.requested.Add(r)
		}
	}
}

func (u resourceUse) String() string {
	share := func(req, alloc int64) float64 {
		if alloc == 0 {
			return 0
		}
		return 100 * float64(req) / float64(alloc)
	}
	return fmt.Sprintf("CPU %.0f%%, memory %.0f%%", share(u.requested.CPU(), u.allocatable.CPU()), share(u.requested.Memory(), u.allocatable.Memory()))
}

// nodesUse is the resourceUse of the pool's nodes now: the benchmark's
// pods on them over their allocatable.
func nodesUse(ctx context.Context, s *driver.Stack) resourceUse {
	var use resourceUse
	nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: apisv1.LabelNodePool + "=" + consolidationPool})
	if err != nil {
		return use
	}
	pods, err := s.Kube.CoreV1().Pods(consolidationNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return use
	}
	byNode := map[string][]*corev1.Pod{}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	}
	for _, n := range nodes.Items {
		if allocatable, err := scheduling.ResourcesFromList(n.Status.Allocatable); err == nil {
			use.add(allocatable, byNode[n.Name])
		}
	}
	return use
}

// asLaunched is the hourly price of the instance CreateFleet would launch
// for plan: on-demand at the chosen option's price; spot by
// price-capacity-optimized over the plan's offerings (the cheapest pool of
// capacity score ≥ 6, else the cheapest), as the emulator orders them.
func asLaunched(s *driver.Stack, plan packer.NodePlan) float64 {
	if plan.CapacityType != apisv1.CapacityTypeSpot {
		return plan.Price
	}
	deep, shallow := math.Inf(1), math.Inf(1)
	for _, o := range plan.Options {
		if o.CapacityType != apisv1.CapacityTypeSpot {
			continue
		}
		z := plan.ZoneOf(o)
		price, ok := s.Emulator().HourlyPrice(o.InstanceType, z, apisv1.CapacityTypeSpot)
		if !ok {
			continue
		}
		if s.Emulator().SpotCapacityScore(o.InstanceType, z) >= 6 {
			deep = min(deep, price)
		} else {
			shallow = min(shallow, price)
		}
	}
	switch {
	case !math.IsInf(deep, 1):
		return deep
	case !math.IsInf(shallow, 1):
		return shallow
	}
	return plan.Price
}

// consolidatingPoolRequirements are the pool's template requirements.
func consolidatingPoolRequirements() []corev1.NodeSelectorRequirement {
	return []corev1.NodeSelectorRequirement{
		{Key: apisv1.LabelInstanceCategory, Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
	}
}

func waitConsolidationPods(t *testing.T, s *driver.Stack, want int, limit time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		sample := sampleConsolidation(context.Background(), s)
		if sample.running >= want {
			return true
		}
		if time.Now().After(deadline) {
			t.Errorf("%d of %d pods Running after %s", sample.running, want, limit)
			return false
		}
		time.Sleep(time.Second)
	}
}

// cleanUpConsolidation deletes the scenario's deployments and PDBs and
// waits for the pool to empty, so the next scenario starts from nothing.
func cleanUpConsolidation(t *testing.T, s *driver.Stack, sc consolidationScenario) {
	ctx := context.Background()
	for _, d := range sc.deployments {
		_ = s.Kube.AppsV1().Deployments(consolidationNamespace).Delete(ctx, d.name, metav1.DeleteOptions{})
		_ = s.Kube.PolicyV1().PodDisruptionBudgets(consolidationNamespace).Delete(ctx, d.name, metav1.DeleteOptions{})
	}
	deadline := time.Now().Add(bound(zeroBoundPer1000, 1000))
	for time.Now().Before(deadline) {
		nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: apisv1.LabelNodePool + "=" + consolidationPool})
		if err == nil && len(nodes.Items) == 0 && len(poolInstancesOf(s, consolidationPool, true)) == 0 {
			return
		}
		time.Sleep(2 * time.Second)
	}
	t.Errorf("consolidation %s: the pool's nodes are still there after the cleanup", sc.name)
}

func errorSuffix(err string) string {
	if err == "" {
		return ""
	}
	return ", error: " + err
}
