package planning

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/cloud"
	"github.com/millwright/millwright/local/cluster/clustertesting"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

func TestPlanLaunchesANodeForPendingPods(t *testing.T) {
	requireStack(t)
	planner := newPlanner(t, testProvider)
	nodeClass := createNodeClass(t)
	pool := newPool(nodeClass).onDemandTypes("m5.large", "m5.xlarge").taint("dedicated").create(t)
	ns := clustertesting.CreateNamespace(t, testClientset, "planning")
	var keys []string
	for range 3 {
		keys = append(keys, newPod(ns, clustertesting.UniqueName("web"), "500m", "1Gi").selectPool(pool).tolerate("dedicated").createPending(t))
	}
	keys = sortedCopy(keys)

	resp := plan(t, planner, activities.PlanRequest{Cluster: testClusterName, PodKeys: keys, MaxNodePlans: 10})

	if resp.PodsConsidered != 3 || resp.PlacedOnExisting != 0 || len(resp.Unschedulable) != 0 {
		t.Fatalf("considered %d, placed %d, unschedulable %v; want 3, 0, none", resp.PodsConsidered, resp.PlacedOnExisting, resp.Unschedulable)
	}
	plans := plansOfPool(resp, pool)
	if len(plans) != 1 {
		t.Fatalf("plans for pool %s: %d, want 1 (all plans: %+v)", pool, len(plans), resp.Plans)
	}
	spec := plans[0]
	if got, want := optionNames(spec), []string{"m5.large", "m5.xlarge"}; !slices.Equal(got, want) {
		t.Errorf("options %v, want %v (cheapest first)", got, want)
	}
	// The pods do not depend on the zone: every option is offered in each
	// of the emulator's three zones, so CreateFleet chooses among them.
	zone := spec.InstanceTypeOptions[0].Offerings[0].Zone
	for _, option := range spec.InstanceTypeOptions {
		zones := map[string]bool{}
		for _, o := range option.Offerings {
			zones[o.Zone] = true
			if o.CapacityType != activities.CapacityTypeOnDemand || o.PricePerHour <= 0 {
				t.Errorf("option %s offering %+v: want on-demand with a price", option.Name, o)
			}
		}
		if len(zones) != 3 || len(option.Offerings) != 3 {
			t.Errorf("option %s offerings %+v: want one in each of 3 zones", option.Name, option.Offerings)
		}
	}
	if !slices.Equal(spec.PodKeys, keys) {
		t.Errorf("pod keys %v, want %v", spec.PodKeys, keys)
	}
	if spec.Cluster != testClusterName || spec.NodeClassName != nodeClass || spec.NodeClaimName != "" {
		t.Errorf("cluster %q, node class %q, node claim %q; want %q, %q and a name left to the provisioner",
			spec.Cluster, spec.NodeClassName, spec.NodeClaimName, testClusterName, nodeClass)
	}
	wantLabels := map[string]string{poolLabel: pool, apisv1.LabelNodePool: pool}
	if !reflect.DeepEqual(spec.Labels, wantLabels) {
		t.Errorf("labels %v, want %v (no instance-type labels: the launch picks the type)", spec.Labels, wantLabels)
	}
	if len(spec.Taints) != 1 || spec.Taints[0].Key != "dedicated" {
		t.Errorf("taints %v, want the pool's", spec.Taints)
	}
	wantReq := corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "m5.xlarge"}}
	if !slices.ContainsFunc(spec.Requirements, func(r corev1.NodeSelectorRequirement) bool { return reflect.DeepEqual(r, wantReq) }) {
		t.Errorf("requirements %v lack %v", spec.Requirements, wantReq)
	}
	if d, ok := spec.ExpireAfter.Get(); !ok || d != 720*time.Hour {
		t.Errorf("expireAfter %s, want the default 720h", spec.ExpireAfter)
	}
	if d, ok := spec.ConsolidateAfter.Get(); !ok || d != 0 {
		t.Errorf("consolidateAfter %s, want the default 0s", spec.ConsolidateAfter)
	}
	if !spec.TerminationGracePeriod.IsNever() {
		t.Errorf("terminationGracePeriod %s, want Never (unset)", spec.TerminationGracePeriod)
	}
	for _, want := range []string{"3 pod(s) (", "need cpu 1500m, memory 3Gi", "chose m5.large on-demand " + zone + " $0.0960/h",
		"1 fallback option(s)", "by pool requirement node.kubernetes.io/instance-type"} {
		if !strings.Contains(spec.LaunchReason, want) {
			t.Errorf("launch reason %q lacks %q", spec.LaunchReason, want)
		}
	}
	named := spec
	named.NodeClaimName = "claim"
	if err := named.Validate(); err != nil {
		t.Errorf("the spec, once named, is not valid: %v", err)
	}
}

// A signalled pod brings its siblings the scheduler has not looked at yet
// (or has marked since) into the same plan; a pod of another owner, or of
// none, waits for its own verdict, and a nominated sibling keeps its node.
func TestPlanTakesSiblingsTheSchedulerHasNotReached(t *testing.T) {
	requireStack(t)
	planner := newPlanner(t, testProvider)
	pool := newPool(createNodeClass(t)).onDemandTypes("m5.2xlarge").create(t)
	ns := clustertesting.CreateNamespace(t, testClientset, "planning")
	// Kubernetes' garbage collector only needs the owner to exist; a
	// ConfigMap stands in for a ReplicaSet whose controller would manage
	// the pods' number itself.
	owner := func(name string) *corev1.ConfigMap {
		cm, err := testClientset.CoreV1().ConfigMaps(ns).Create(t.Context(),
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}
	web, other := owner("web"), owner("other")
	marked := newPod(ns, "web-marked", "1", "1Gi").selectPool(pool).ownedBy(web, "ConfigMap").createPending(t)
	markedToo := newPod(ns, "web-marked-too", "1", "1Gi").selectPool(pool).ownedBy(web, "ConfigMap").createPending(t)
	notLooked := newPod(ns, "web-not-looked-at", "1", "1Gi").selectPool(pool).ownedBy(web, "ConfigMap").create(t)
	nominated := newPod(ns, "web-nominated", "1", "1Gi").selectPool(pool).ownedBy(web, "ConfigMap").create(t)
	nominated.Status.NominatedNodeName = "elsewhere"
	if _, err := testClientset.CoreV1().Pods(ns).UpdateStatus(t.Context(), nominated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	newPod(ns, "other-not-looked-at", "1", "1Gi").selectPool(pool).ownedBy(other, "ConfigMap").create(t)
	newPod(ns, "lone-not-looked-at", "1", "1Gi").selectPool(pool).create(t)

	resp := plan(t, planner, activities.PlanRequest{Cluster: testClusterName, PodKeys: []string{marked}, MaxNodePlans: 10})
	var planned []string
	for _, spec := range plansOfPool(resp, pool) {
		planned = append(planned, spec.PodKeys...)
	}
	want := sortedCopy([]string{marked, markedToo, ns + "/" + notLooked.Name})
	if got := sortedCopy(planned); !slices.Equal(got, want) {
		t.Fatalf("planned %v, want the signalled pod with its waiting siblings %v", got, want)
	}
	if resp.PodsConsidered != 3 {
		t.Errorf("considered %d pods, want 3", resp.PodsConsidered)
	}
}

// A pod the real kube-scheduler found no node for is provisionable.
func TestPlanPicksUpPodsTheSchedulerCannotPlace(t *testing.T) {
	requireStack(t)
	planner := newPlanner(t, testProvider)
	pool := newPool(createNodeClass(t)).onDemandTypes("m5.large").create(t)
	ns := clustertesting.CreateNamespace(t, testClientset, "planning")
	pod := newPod(ns, "unplaceable", "1", "1Gi").selectPool(pool).defaultScheduler().create(t)
	clustertesting.Eventually(t, time.Minute, "kube-scheduler marks the pod Unschedulable", func(ctx context.Context) (bool, error) {
		live, err := testClientset.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && isUnbound(live) && failedToSchedule(live), err
	})

	resp := plan(t, planner, activities.PlanRequest{Cluster: testClusterName, PodKeys: []string{ns + "/" + pod.Name}})
	plans := plansOfPool(resp, pool)
	if len(plans) != 1 || !slices.Equal(plans[0].PodKeys, []string{ns + "/" + pod.Name}) {
		t.Fatalf("plans %+v, want one node for %s/%s", resp.Plans, ns, pod.Name)
	}
}

func TestPlanUsesRoomOnExistingNodes(t *testing.T) {
	requireStack(t)
	planner := newPlanner(t, testProvider)
	nodeClass := createNodeClass(t)
	ns := clustertesting.CreateNamespace(t, testClientset, "planning")
	cases := []struct {
		name string
		// node builds the Node the pods could go to; disrupted names it in
		// the request.
		node      func(pool string) *nodeBuilder
		fill      string // cpu a pod already bound to the node requests
		disrupted bool
		// ahead plans this long after the Node's creation, with the
		// planner's registration timeout (zero: the default 15m).
		ahead, registrationTimeout time.Duration
		wantPlans                  int
	}{
		{name: "a Ready node with room takes the pods, managed by Millwright or not",
			node: func(pool string) *nodeBuilder { return newNode("4", "16Gi").label(poolLabel, pool) }},
		{name: "a Millwright node still starting up takes them despite its unregistered taint",
			node: func(pool string) *nodeBuilder {
				return newNode("4", "16Gi").label(poolLabel, pool).label(apisv1.LabelNodePool, pool).
					taint(activities.UnregisteredTaintKey, corev1.TaintEffectNoExecute)
			}},
		// Regression (issue 10, defect 2): such a node counted as free
		// capacity forever, so the pods never got a node.
		{name: "a Millwright node that kept its unregistered taint past the registration timeout does not",
			node: func(pool string) *nodeBuilder {
				return newNode("4", "16Gi").label(poolLabel, pool).label(apisv1.LabelNodePool, pool).
					taint(activities.UnregisteredTaintKey, corev1.TaintEffectNoExecute)
			},
			ahead: 20 * time.Minute, wantPlans: 1},
		// Regression (issue 10, defect 9): the window was a fixed 15m.
		{name: "a Millwright node within a longer configured registration timeout still takes them",
			node: func(pool string) *nodeBuilder {
				return newNode("4", "16Gi").label(poolLabel, pool).label(apisv1.LabelNodePool, pool).
					taint(activities.UnregisteredTaintKey, corev1.TaintEffectNoExecute)
			},
			ahead: 20 * time.Minute, registrationTimeout: time.Hour},
		{name: "a full node does not",
			node: func(pool string) *nodeBuilder { return newNode("1", "16Gi").label(poolLabel, pool) },
			fill: "900m", wantPlans: 1},
		{name: "a cordoned node does not",
			node:      func(pool string) *nodeBuilder { return newNode("4", "16Gi").label(poolLabel, pool).unschedulable() },
			wantPlans: 1},
		{name: "a node being disrupted does not",
			node: func(pool string) *nodeBuilder {
				return newNode("4", "16Gi").label(poolLabel, pool).label(apisv1.LabelNodePool, pool).
					taint(activities.DisruptedTaintKey, corev1.TaintEffectPreferNoSchedule)
			},
			wantPlans: 1},
		{name: "a node the request names as disrupted does not",
			node:      func(pool string) *nodeBuilder { return newNode("4", "16Gi").label(poolLabel, pool) },
			disrupted: true, wantPlans: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool := newPool(nodeClass).onDemandTypes("m5.large").create(t)
			node := tc.node(pool).createReady(t)
			if tc.fill != "" {
				newPod(ns, clustertesting.UniqueName("filler"), tc.fill, "1Gi").bindTo(node).create(t)
			}
			keys := createPendingPods(t, ns, pool, 2, "250m", "512Mi")
			req := activities.PlanRequest{Cluster: testClusterName, PodKeys: keys}
			if tc.disrupted {
				req.DisruptedNodes = []string{node}
			}

			planner := planner
			if tc.ahead != 0 {
				planner = newPlannerWith(t, testProvider, func(cfg *Config) {
					cfg.Clock = clocktesting.NewFakePassiveClock(time.Now().Add(tc.ahead))
					cfg.RegistrationTimeout = tc.registrationTimeout
				})
			}
			resp := plan(t, planner, req)

			if got := len(plansOfPool(resp, pool)); got != tc.wantPlans {
				t.Fatalf("%d plan(s) for the pool, want %d (response %+v)", got, tc.wantPlans, resp)
			}
			if wantPlaced := 2 * (1 - tc.wantPlans); resp.PlacedOnExisting != wantPlaced {
				t.Errorf("placed on existing %d, want %d", resp.PlacedOnExisting, wantPlaced)
			}
		})
	}
}

// In-flight nodes absorb the pods they were launched for and what fits
// beside them; once their Node registers they are settled.
func TestPlanCountsInFlightNodes(t *testing.T) {
	requireStack(t)
	planner := newPlanner(t, testProvider)
	pool := newPool(createNodeClass(t)).onDemandTypes("m5.large", "m5.xlarge").create(t)
	ns := clustertesting.CreateNamespace(t, testClientset, "planning")
	first := createPendingPods(t, ns, pool, 2, "500m", "1Gi")
	resp := plan(t, planner, activities.PlanRequest{Cluster: testClusterName, PodKeys: first})
	plans := plansOfPool(resp, pool)
	if len(plans) != 1 {
		t.Fatalf("first batch: %d plans, want 1", len(plans))
	}
	claim := clustertesting.UniqueName("claim")
	inFlight := []activities.InFlightNode{{
		NodeClaimName: claim, NodePool: pool, InstanceTypes: optionNames(plans[0]),
		PodKeys: plans[0].PodKeys, StartedAt: time.Now(),
	}}

	// m5.large holds 1930m: 1000m are the first pods', 500m more fit.
	fits := newPod(ns, clustertesting.UniqueName("fits"), "500m", "1Gi").selectPool(pool).createPending(t)
	batch := append(slices.Clone(first), fits)
	resp = plan(t, planner, activities.PlanRequest{Cluster: testClusterName, PodKeys: batch, InFlight: inFlight})
	if got := plansOfPool(resp, pool); len(got) != 0 {
		t.Fatalf("second batch planned %+v; the in-flight node should absorb every pod", got)
	}
	// Two await the node launched for them; one takes its free room.
	if resp.PodsConsidered != 3 || resp.PlacedOnExisting != 3 || resp.PlacedInRoom != 1 {
		t.Errorf("considered %d, placed %d (%d in free room); want 3, 3 (1)", resp.PodsConsidered, resp.PlacedOnExisting, resp.PlacedInRoom)
	}

	tooBig := newPod(ns, clustertesting.UniqueName("big"), "1500m", "1Gi").selectPool(pool).createPending(t)
	resp = plan(t, planner, activities.PlanRequest{Cluster: testClusterName, PodKeys: append(batch, tooBig), InFlight: inFlight})
	if got := plansOfPool(resp, pool); len(got) != 1 || !slices.Equal(got[0].PodKeys, []string{tooBig}) {
		t.Fatalf("third batch planned %+v, want one node for %s only", got, tooBig)
	}

	newNode("2", "8Gi").label(poolLabel, pool).label(apisv1.LabelNodePool, pool).label(activities.NodeClaimLabel, claim).create(t)
	resp = plan(t, planner, activities.PlanRequest{Cluster: testClusterName, InFlight: inFlight})
	if !slices.Equal(resp.Settled, []string{claim}) {
		t.Errorf("settled %v, want [%s] once its Node exists", resp.Settled, claim)
	}
}

func TestPlanSkipsUnusablePools(t *testing.T) {
	requireStack(t)
	planner := newPlanner(t, testProvider)
	nodeClass := createNodeClass(t)
	valid := newPool(nodeClass).onDemandTypes("m5.large").weight(10).create(t)
	// Higher-weight pools that would take the same pods if they were usable.
	badSchedule := "61 * * * *" // passes the CRD's pattern; cron cannot parse it
	hour := apisv1.Duration("1h")
	invalid := newPool(nodeClass).onDemandTypes("m5.xlarge").weight(50).mutate(func(np *apisv1.NodePool) {
		np.Spec.Template.Labels[poolLabel] = valid
		np.Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: "1", Schedule: &badSchedule, Duration: &hour}}
	}).create(t)
	orphan := newPool("no-such-class").onDemandTypes("m5.xlarge").weight(40).mutate(func(np *apisv1.NodePool) {
		np.Spec.Template.Labels[poolLabel] = valid
	}).create(t)
	noSubnets := createNodeClassWithSubnets(t, map[string]string{"planning.example.com/no-such-tag": "x"})
	unresolvable := newPool(noSubnets).onDemandTypes("m5.xlarge").weight(30).mutate(func(np *apisv1.NodePool) {
		np.Spec.Template.Labels[poolLabel] = valid
	}).create(t)
	ns := clustertesting.CreateNamespace(t, testClientset, "planning")
	keys := createPendingPods(t, ns, valid, 1, "1", "1Gi")

	resp := plan(t, planner, activities.PlanRequest{Cluster: testClusterName, PodKeys: keys})

	if got := plansOfPool(resp, valid); len(got) != 1 {
		t.Errorf("valid pool: %d plan(s), want 1 (plans %+v)", len(got), resp.Plans)
	}
	for _, pool := range []string{invalid, orphan, unresolvable} {
		if got := plansOfPool(resp, pool); len(got) != 0 {
			t.Errorf("unusable pool %s got %d plan(s)", pool, len(got))
		}
	}
	cases := []struct{ kind, name, reason string }{
		{"NodePool", invalid, "spec.disruption.budgets[0].schedule"},
		{"NodePool", orphan, `spec.template.spec.nodeClassRef.name: EC2NodeClass "no-such-class" does not exist`},
		{"NodePool", unresolvable, `spec.template.spec.nodeClassRef.name: EC2NodeClass "` + noSubnets + `" cannot be used`},
		{"EC2NodeClass", noSubnets, "spec.subnetSelectorTerms: matched no subnet"},
	}
	for _, tc := range cases {
		i := slices.IndexFunc(resp.Skipped, func(s activities.SkippedObject) bool { return s.Kind == tc.kind && s.Name == tc.name })
		if i < 0 {
			t.Errorf("%s %s not reported as skipped (skipped: %+v)", tc.kind, tc.name, resp.Skipped)
			continue
		}
		if !strings.Contains(resp.Skipped[i].Reason, tc.reason) {
			t.Errorf("%s %s skipped for %q, want the reason to name %q", tc.kind, tc.name, resp.Skipped[i].Reason, tc.reason)
		}
	}
}

func TestPlanKeepsMinNodes(t *testing.T) {
	requireStack(t)
	planner := newPlanner(t, testProvider)
	pool := newPool(createNodeClass(t)).onDemandTypes("m5.large", "m5.xlarge").minNodes(3).create(t)
	inFlight := activities.InFlightNode{NodeClaimName: clustertesting.UniqueName("claim"), NodePool: pool, InstanceTypes: []string{"m5.large"}}
	cases := []struct {
		name      string
		inFlight  []activities.InFlightNode
		liveNode  bool
		wantPlans int
	}{
		{name: "an empty pool gets minNodes empty nodes", wantPlans: 3},
		{name: "in-flight nodes count", inFlight: []activities.InFlightNode{inFlight}, wantPlans: 2},
		{name: "registered nodes count", inFlight: []activities.InFlightNode{inFlight}, liveNode: true, wantPlans: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.liveNode {
				newNode("2", "8Gi").label(poolLabel, pool).label(apisv1.LabelNodePool, pool).create(t)
			}
			resp := plan(t, planner, activities.PlanRequest{Cluster: testClusterName, InFlight: tc.inFlight})
			plans := plansOfPool(resp, pool)
			if len(plans) != tc.wantPlans {
				t.Fatalf("%d plan(s), want %d", len(plans), tc.wantPlans)
			}
			for _, spec := range plans {
				if len(spec.PodKeys) != 0 || spec.InstanceTypeOptions[0].Name != "m5.large" {
					t.Errorf("plan %+v: want an empty m5.large node", spec)
				}
				if zones := len(spec.InstanceTypeOptions[0].Offerings); zones != 3 {
					t.Errorf("m5.large offered in %d zones, want all 3 (an empty node can go anywhere)", zones)
				}
				if !strings.Contains(spec.LaunchReason, "keeps at least 3 node(s)") {
					t.Errorf("launch reason %q does not mention minNodes", spec.LaunchReason)
				}
			}
		})
	}
}

func TestPlanAvoidsUnavailableOfferings(t *testing.T) {
	requireStack(t)
	nodeClass := createNodeClass(t)
	ns := clustertesting.CreateNamespace(t, testClientset, "planning")
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	unavailable := func(until time.Time) []activities.UnavailableOffering {
		var out []activities.UnavailableOffering
		for _, z := range zones {
			out = append(out, activities.UnavailableOffering{
				OfferingKey: activities.OfferingKey{InstanceType: "m5.large", Zone: z, CapacityType: activities.CapacityTypeOnDemand}, Until: until})
		}
		return out
	}
	cases := []struct {
		name          string
		reported      []activities.UnavailableOffering
		markedByCache bool
		wantType      string
	}{
		{name: "offerings the provisioner reports out of capacity", reported: unavailable(time.Now().Add(time.Minute)), wantType: "m5.xlarge"},
		{name: "offerings this worker's launches found out of capacity", markedByCache: true, wantType: "m5.xlarge"},
		{name: "reports that have expired are ignored", reported: unavailable(time.Now().Add(-time.Second)), wantType: "m5.large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			provider := newProvider(t)
			if tc.markedByCache {
				for _, u := range unavailable(time.Time{}) {
					provider.Unavailable.MarkUnavailable(u.OfferingKey, "InsufficientInstanceCapacity")
				}
			}
			planner := newPlanner(t, provider)
			pool := newPool(nodeClass).onDemandTypes("m5.large", "m5.xlarge").create(t)
			keys := createPendingPods(t, ns, pool, 1, "1", "1Gi")

			resp := plan(t, planner, activities.PlanRequest{Cluster: testClusterName, PodKeys: keys, UnavailableOfferings: tc.reported})

			plans := plansOfPool(resp, pool)
			if len(plans) != 1 {
				t.Fatalf("%d plans, want 1", len(plans))
			}
			if got := optionNames(plans[0]); got[0] != tc.wantType || (tc.wantType == "m5.xlarge" && slices.Contains(got, "m5.large")) {
				t.Errorf("options %v, want %s first and no unavailable offering", got, tc.wantType)
			}
		})
	}
}

// Planning is a pure function of the cluster and the request: a retried
// activity plans the same nodes.
func TestPlanIsDeterministic(t *testing.T) {
	requireStack(t)
	planner := newPlanner(t, testProvider)
	nodeClass := createNodeClass(t)
	big := newPool(nodeClass).onDemandTypes("m5.large", "m5.xlarge", "m5.2xlarge").create(t)
	small := newPool(nodeClass).require(apisv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "c5", "m5").
		require(apisv1.LabelInstanceSize, corev1.NodeSelectorOpIn, "large", "xlarge").create(t)
	ns := clustertesting.CreateNamespace(t, testClientset, "planning")
	keys := append(createPendingPods(t, ns, big, 7, "700m", "2Gi"), createPendingPods(t, ns, small, 5, "300m", "512Mi")...)
	// The pools' pods cannot share a node, so there are at least two plans.
	req := activities.PlanRequest{Cluster: testClusterName, PodKeys: keys, MaxNodePlans: 1}

	first := plan(t, planner, req)
	second := plan(t, planner, req)

	if !reflect.DeepEqual(first, second) {
		t.Fatalf("two plans of the same state differ:\n%+v\n%+v", first, second)
	}
	if len(first.Plans) != 1 || len(first.Deferred) == 0 {
		t.Errorf("%d plans and %d deferred pods; want MaxNodePlans=1 plan and the rest deferred", len(first.Plans), len(first.Deferred))
	}
}

// The worker plans from its informer caches; they must give what direct
// reads give.
func TestInformerStatePlansLikeAPIState(t *testing.T) {
	requireStack(t)
	provider := testProvider
	pool := newPool(createNodeClass(t)).onDemandTypes("m5.large").create(t)
	ns := clustertesting.CreateNamespace(t, testClientset, "planning")
	keys := createPendingPods(t, ns, pool, 2, "500m", "1Gi")
	req := activities.PlanRequest{Cluster: testClusterName, PodKeys: keys}
	want := plan(t, newPlanner(t, provider), req)

	factory := informers.NewSharedInformerFactory(testClientset, 0)
	dynamicFactory := dynamicinformer.NewDynamicSharedInformerFactory(testDynamic, 0)
	state := NewInformerState(factory, dynamicFactory)
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	dynamicFactory.Start(stop)
	planner, err := New(Config{Cluster: testClusterName, State: state, InstanceTypes: provider})
	if err != nil {
		t.Fatal(err)
	}
	got := plan(t, planner, req)
	if !reflect.DeepEqual(plansOfPool(got, pool), plansOfPool(want, pool)) {
		t.Fatalf("informer state planned %+v, API state %+v", plansOfPool(got, pool), plansOfPool(want, pool))
	}
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	cases := []struct {
		name  string
		cfg   Config
		field string
	}{
		{name: "no cluster state", cfg: Config{InstanceTypes: (*cloud.Provider)(nil)}, field: "State"},
		{name: "no instance types", cfg: Config{State: NewAPIState(nil, nil)}, field: "InstanceTypes"},
		{name: "negative registration timeout", cfg: Config{State: NewAPIState(nil, nil), InstanceTypes: (*cloud.Provider)(nil), RegistrationTimeout: -time.Second}, field: "RegistrationTimeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if !IsInvalidConfig(err) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("New: %v, want an InvalidConfigError naming %s", err, tc.field)
			}
		})
	}
}

// A new node must hold the DaemonSets that will run on it besides its pods.
func TestPlanLeavesRoomForDaemonSets(t *testing.T) {
	requireStack(t)
	planner := newPlanner(t, testProvider)
	pool := newPool(createNodeClass(t)).onDemandTypes("m5.large", "m5.xlarge").create(t)
	ns := clustertesting.CreateNamespace(t, testClientset, "planning")
	agent := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec:       newPod(ns, "agent", "1", "256Mi").selectPool(pool).pod.Spec,
			},
		},
	}
	if _, err := testClientset.AppsV1().DaemonSets(ns).Create(t.Context(), agent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// 1 cpu fits m5.large's 1930m alone, but not beside the agent's 1 cpu.
	keys := createPendingPods(t, ns, pool, 1, "1", "1Gi")

	resp := plan(t, planner, activities.PlanRequest{Cluster: testClusterName, PodKeys: keys})

	plans := plansOfPool(resp, pool)
	if len(plans) != 1 || optionNames(plans[0])[0] != "m5.xlarge" {
		t.Fatalf("plans %+v, want one m5.xlarge node", plans)
	}
	if want := "(+ 1 DaemonSet(s) cpu 1, memory 256Mi)"; !strings.Contains(plans[0].LaunchReason, want) {
		t.Errorf("launch reason %q lacks %q", plans[0].LaunchReason, want)
	}
}

// Pods of a node being drained (an interrupted spot instance) get room
// elsewhere before they are evicted.
func TestPlanReplansPodsOfDisruptedNodes(t *testing.T) {
	requireStack(t)
	planner := newPlanner(t, testProvider)
	pool := newPool(createNodeClass(t)).onDemandTypes("m5.large").create(t)
	ns := clustertesting.CreateNamespace(t, testClientset, "planning")
	node := newNode("4", "16Gi").label(poolLabel, pool).label(apisv1.LabelNodePool, pool).createReady(t)
	var keys []string
	for range 2 {
		pod := newPod(ns, clustertesting.UniqueName("bound"), "500m", "1Gi").selectPool(pool).bindTo(node).create(t)
		keys = append(keys, pod.Namespace+"/"+pod.Name)
	}

	resp := plan(t, planner, activities.PlanRequest{Cluster: testClusterName, DisruptedNodes: []string{node}})

	plans := plansOfPool(resp, pool)
	if len(plans) != 1 || !slices.Equal(plans[0].PodKeys, sortedCopy(keys)) {
		t.Fatalf("plans %+v, want one node for %v", plans, keys)
	}
}

// Regression (issue 10, defect 7): an interruption wave needing more nodes
// than one batch may plan deferred the rest by pod key, and the next batch
// skipped those pods (they are still bound to the interrupted nodes), so
// their replacement capacity was never launched. The planner now names the
// disrupted nodes it deferred, and planning the nodes again with the first
// batch's node in flight plans exactly the rest.
func TestPlanDefersPodsOfDisruptedNodesByNode(t *testing.T) {
	requireStack(t)
	planner := newPlanner(t, testProvider)
	pool := newPool(createNodeClass(t)).onDemandTypes("m5.large").create(t)
	ns := clustertesting.CreateNamespace(t, testClientset, "planning")
	var nodes []string
	for range 3 {
		node := newNode("4", "16Gi").label(poolLabel, pool).label(apisv1.LabelNodePool, pool).createReady(t)
		// 1500m: one per m5.large (1930m allocatable).
		newPod(ns, clustertesting.UniqueName("bound"), "1500m", "1Gi").selectPool(pool).bindTo(node).create(t)
		nodes = append(nodes, node)
	}

	first := plan(t, planner, activities.PlanRequest{Cluster: testClusterName, DisruptedNodes: nodes, MaxNodePlans: 1})
	plans := plansOfPool(first, pool)
	if len(plans) != 1 || len(first.DeferredDisruptedNodes) != 2 || len(first.Deferred) != 0 {
		t.Fatalf("first batch: %d plan(s), deferred nodes %v, deferred pods %v; want 1 plan and the other 2 nodes deferred",
			len(plans), first.DeferredDisruptedNodes, first.Deferred)
	}
	inFlight := []activities.InFlightNode{{NodeClaimName: clustertesting.UniqueName("claim"), NodePool: pool,
		InstanceTypes: optionNames(plans[0]), PodKeys: plans[0].PodKeys, StartedAt: time.Now()}}

	// The provisioner names the batch's disrupted nodes again.
	second := plan(t, planner, activities.PlanRequest{Cluster: testClusterName, DisruptedNodes: nodes,
		InFlight: inFlight, MaxNodePlans: 10})
	planned := map[string]bool{plans[0].PodKeys[0]: true}
	for _, spec := range plansOfPool(second, pool) {
		for _, key := range spec.PodKeys {
			if planned[key] {
				t.Errorf("pod %s planned twice", key)
			}
			planned[key] = true
		}
	}
	if len(planned) != 3 || len(second.DeferredDisruptedNodes) != 0 {
		t.Errorf("after two batches %d of 3 pods planned (deferred nodes %v)", len(planned), second.DeferredDisruptedNodes)
	}
}

// The provisioner bounds its in-flight state by the pods it lets a batch
// plan (issue 10, defect 5): plans beyond MaxPlannedPods are deferred, and
// a negative bound plans no pods at all.
func TestPlanHonoursMaxPlannedPods(t *testing.T) {
	requireStack(t)
	planner := newPlanner(t, testProvider)
	pool := newPool(createNodeClass(t)).onDemandTypes("m5.large").create(t)
	ns := clustertesting.CreateNamespace(t, testClientset, "planning")
	// 1500m: one per m5.large.
	keys := createPendingPods(t, ns, pool, 5, "1500m", "1Gi")
	cases := []struct {
		maxPlannedPods, wantPlans int
	}{
		{maxPlannedPods: 0, wantPlans: 5},
		{maxPlannedPods: 2, wantPlans: 2},
		{maxPlannedPods: -1, wantPlans: 0},
	}
	for _, tc := range cases {
		resp := plan(t, planner, activities.PlanRequest{Cluster: testClusterName, PodKeys: keys, MaxPlannedPods: tc.maxPlannedPods})
		if got := len(plansOfPool(resp, pool)); got != tc.wantPlans || len(resp.Deferred) != 5-tc.wantPlans {
			t.Errorf("MaxPlannedPods %d: %d plan(s), %d deferred; want %d and %d", tc.maxPlannedPods, got, len(resp.Deferred), tc.wantPlans, 5-tc.wantPlans)
		}
	}
}

// Pending pods nominated to a Node (status.nominatedNodeName: registration
// nominates the pods a node was launched for) take their room there when
// they fit, as kube-scheduler counts them: they are not planned again, and
// other pods are not placed in that room (kube-scheduler would leave them
// pending). A nomination to a Node without room for the pod holds nothing.
func TestPlanCountsPodsNominatedToANode(t *testing.T) {
	requireStack(t)
	planner := newPlanner(t, testProvider)
	nodeClass := createNodeClass(t)
	ns := clustertesting.CreateNamespace(t, testClientset, "planning")
	for _, tc := range []struct {
		name string
		// fill is the cpu a pod already bound to the node requests.
		fill string
		// wantPlanned are the pods (by index, of three) the plans hold.
		wantPlanned []int
		wantPlaced  int
	}{
		{name: "the nominated pods keep their room; the other is planned a node", wantPlanned: []int{0}, wantPlaced: 2},
		{name: "a nomination to a full node holds nothing", fill: "900m", wantPlanned: []int{0, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := newPool(nodeClass).onDemandTypes("m5.large").create(t)
			node := newNode("1", "16Gi").label(poolLabel, pool).createReady(t)
			if tc.fill != "" {
				newPod(ns, clustertesting.UniqueName("filler"), tc.fill, "1Gi").bindTo(node).create(t)
			}
			keys := createPendingPods(t, ns, pool, 3, "500m", "512Mi")
			// The last two sort after the first, so a first fit in key
			// order would give the node's room to the first.
			for _, key := range keys[1:] {
				name := key[strings.Index(key, "/")+1:]
				pod, err := testClientset.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				pod.Status.NominatedNodeName = node
				if _, err := testClientset.CoreV1().Pods(ns).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			resp := plan(t, planner, activities.PlanRequest{Cluster: testClusterName, PodKeys: keys})

			var planned []string
			for _, spec := range plansOfPool(resp, pool) {
				planned = append(planned, spec.PodKeys...)
			}
			slices.Sort(planned)
			var want []string
			for _, i := range tc.wantPlanned {
				want = append(want, keys[i])
			}
			if !slices.Equal(planned, want) {
				t.Errorf("planned %v, want %v", planned, want)
			}
			if resp.PlacedOnExisting != tc.wantPlaced {
				t.Errorf("placed on existing %d, want %d", resp.PlacedOnExisting, tc.wantPlaced)
			}
		})
	}
}
