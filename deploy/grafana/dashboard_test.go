package grafana

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/activities"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/worker/metrics"
)

type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// Every metric the dashboard queries is served on the worker's /metrics:
// the worker's collectors, each fed one sample, scraped over HTTP.
func TestDashboardQueriesOnlyMetricsTheWorkerServes(t *testing.T) {
	served := servedMetrics(t)
	var d dashboard
	if err := json.Unmarshal(Dashboard, &d); err != nil {
		t.Fatalf("millwright.json: %v", err)
	}
	if len(d.Panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	queried := map[string]bool{}
	for _, panel := range d.Panels {
		if len(panel.Targets) == 0 {
			t.Errorf("panel %q has no query", panel.Title)
		}
		for _, target := range panel.Targets {
			expr, err := parser.ParseExpr(target.Expr)
			if err != nil {
				t.Errorf("panel %q: %q does not parse: %v", panel.Title, target.Expr, err)
				continue
			}
			names := metricNames(expr)
			if len(names) == 0 {
				t.Errorf("panel %q: %q names no metric", panel.Title, target.Expr)
			}
			for _, name := range names {
				queried[name] = true
				if !served[name] {
					t.Errorf("panel %q queries %s, which the worker does not serve", panel.Title, name)
				}
			}
		}
	}
	labelValues := regexp.MustCompile(`label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*)`)
	for _, variable := range d.Templating.List {
		query, _ := variable.Query.(string)
		if m := labelValues.FindStringSubmatch(query); m != nil && !served[m[1]] {
			t.Errorf("variable %q reads %s, which the worker does not serve", variable.Name, m[1])
		}
	}
	// The metrics the issue names are on the dashboard.
	for _, name := range []string{
		"millwright_nodeclaims_created_total", "millwright_nodeclaims_terminated_total", "millwright_nodeclaims_disrupted_total",
		"millwright_pods_startup_duration_seconds", "millwright_scheduler_scheduling_duration_seconds_bucket",
		"millwright_scheduler_queue_depth", "millwright_nodepools_usage", "millwright_nodepools_limit",
		"millwright_nodepools_allowed_disruptions", "millwright_cloudprovider_duration_seconds_bucket",
		"millwright_cloudprovider_errors_total", "millwright_interruption_received_messages_total",
		"millwright_node_workflows", "millwright_node_phase_duration_seconds_bucket",
	} {
		if !queried[name] {
			t.Errorf("the dashboard does not show %s", name)
		}
	}
	t.Logf("%d panels, %d metrics queried, all among the %d the worker serves", len(d.Panels), len(queried), len(served))
}

// metricNames are the metric names expr selects.
func metricNames(expr parser.Expr) []string {
	var names []string
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					name = m.Value
				}
			}
			if name != "" && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
		return nil
	})
	return names
}

// servedMetrics scrapes /metrics of a worker's registry (metrics.New on
// metrics.NewRegistry, with the cluster gauges) after one sample of every
// recorder, and returns every series name, histogram and summary suffixes
// included.
func servedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	m, err := metrics.New(metrics.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.RegisterCluster(oneNodeCluster(), nil); err != nil {
		t.Fatal(err)
	}
	feed(m)

	server, err := metrics.Listen("127.0.0.1:0", m.Gatherer(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- server.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-served })

	resp, err := http.Get("http://" + server.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	textParser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := textParser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	names := map[string]bool{}
	for name, family := range families {
		names[name] = true
		switch family.GetType().String() {
		case "HISTOGRAM":
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case "SUMMARY":
			names[name+"_sum"], names[name+"_count"] = true, true
		}
	}
	return names
}

// feed records one sample through every recorder the worker calls.
func feed(m *metrics.Metrics) {
	instance := &activities.LaunchResponse{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}
	expired := &activities.NodeClaimTermination{Reason: "Expired"}
	for _, step := range []struct {
		phase, left string
		created     bool
	}{
		{activities.NodePhaseLaunching, "", true}, {activities.NodePhaseRegistering, activities.NodePhaseLaunching, false},
		{activities.NodePhaseInitializing, activities.NodePhaseRegistering, false}, {activities.NodePhaseReady, activities.NodePhaseInitializing, false},
		{activities.NodePhaseDraining, activities.NodePhaseReady, false}, {activities.NodePhaseTerminated, activities.NodePhaseDraining, false},
	} {
		m.NodeTransition(
			activities.UpsertNodeClaimRequest{NodePool: "default", Phase: step.phase, Instance: instance, Termination: expired},
			activities.UpsertNodeClaimResponse{Created: step.created, Entered: step.phase, Left: step.left, LeftAfter: time.Minute})
	}
	m.LaunchFailed("default", metrics.CauseThrottled)
	m.OfferingUnavailable("m5.large", "us-east-1a", "spot")
	m.Planned(3, 1, time.Second, map[string]int{"default": 1})
	m.PodStarted(20 * time.Second)
	m.InterruptionMessageReceived("spot-warning")
	m.CloudAPICall("EC2", "CreateFleet", activities.LaunchActivity, 50*time.Millisecond, "RequestLimitExceeded")
	m.NodeWorkflowsInPhase("Ready", 1)
}

// staticCluster is a ClusterView of fixed objects.
type staticCluster struct {
	pools []*apisv1.NodePool
	nodes []*corev1.Node
	pods  []*corev1.Pod
}

func (c staticCluster) NodePools() ([]*apisv1.NodePool, error) { return c.pools, nil }
func (c staticCluster) Nodes() ([]*corev1.Node, error)         { return c.nodes, nil }
func (c staticCluster) Pods() ([]*corev1.Pod, error)           { return c.pods, nil }

func oneNodeCluster() staticCluster {
	cpu := resource.MustParse("2")
	pool := &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	pool.Spec.Limits = apisv1.Limits{corev1.ResourceCPU: resource.MustParse("100")}
	pool.Status.Resources = corev1.ResourceList{corev1.ResourceCPU: cpu, "nodes": resource.MustParse("1")}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1", Labels: map[string]string{
			activities.NodeClaimLabel: "default-abc", apisv1.LabelNodePool: "default",
		}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: cpu}},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{
			Name: "web", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
		}}},
	}
	return staticCluster{pools: []*apisv1.NodePool{pool}, nodes: []*corev1.Node{node}, pods: []*corev1.Pod{pod}}
}
