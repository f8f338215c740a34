package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/activities"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// poolsView is a ClusterView of NodePools only.
type poolsView []*apisv1.NodePool

func (v poolsView) NodePools() ([]*apisv1.NodePool, error) { return v, nil }
func (poolsView) Nodes() ([]*corev1.Node, error)           { return nil, nil }
func (poolsView) Pods() ([]*corev1.Pod, error)             { return nil, nil }

// pool is a NodePool with a consolidation policy ("" for the default).
func pool(name string, policy apisv1.ConsolidationPolicy) *apisv1.NodePool {
	np := &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Disruption.ConsolidationPolicy = policy
	return np
}

// newTestMetrics registers Millwright's collectors on a fresh registry.
func newTestMetrics(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	registry := prometheus.NewRegistry()
	m, err := New(registry)
	if err != nil {
		t.Fatal(err)
	}
	return m, registry
}

func TestNewRefusesASecondRegistrationOnTheSameRegistry(t *testing.T) {
	_, registry := newTestMetrics(t)
	if _, err := New(registry); err == nil {
		t.Fatal("registering Millwright's collectors twice on one registry succeeded")
	}
}

func TestRecordersExposeKarpenterStyleSeries(t *testing.T) {
	cases := []struct {
		name   string
		record func(m *Metrics)
		metric string
		want   string
	}{
		{
			name: "nodes launched by pool and offering",
			record: func(m *Metrics) {
				m.NodeLaunched("default", "m5.large", "us-east-1a", "spot")
				m.NodeLaunched("default", "m5.large", "us-east-1a", "spot")
				m.NodeLaunched("gpu", "g5.xlarge", "us-east-1b", "on-demand")
			},
			metric: "millwright_nodes_launched_total",
			want: `
# HELP millwright_nodes_launched_total Instances launched for node claims, by NodePool and the offering EC2 chose.
# TYPE millwright_nodes_launched_total counter
millwright_nodes_launched_total{capacity_type="on-demand",instance_type="g5.xlarge",nodepool="gpu",zone="us-east-1b"} 1
millwright_nodes_launched_total{capacity_type="spot",instance_type="m5.large",nodepool="default",zone="us-east-1a"} 2
`,
		},
		{
			name: "launch errors by cause",
			record: func(m *Metrics) {
				m.LaunchFailed("default", CauseInsufficientCapacity)
				m.LaunchFailed("default", CauseThrottled)
				m.LaunchFailed("default", CauseThrottled)
			},
			metric: "millwright_nodes_launch_errors_total",
			want: `
# HELP millwright_nodes_launch_errors_total Failed Launch activity attempts, by NodePool and cause (insufficient_capacity, throttled, invalid_nodeclass, launch_rejected, other).
# TYPE millwright_nodes_launch_errors_total counter
millwright_nodes_launch_errors_total{cause="insufficient_capacity",nodepool="default"} 1
millwright_nodes_launch_errors_total{cause="throttled",nodepool="default"} 2
`,
		},
		{
			name: "offerings EC2 rejected a launch on",
			record: func(m *Metrics) {
				m.OfferingRejected("default", "m5.large", "us-east-1a", "spot")
				m.OfferingRejected("default", "m5.large", "us-east-1a", "spot")
			},
			metric: "millwright_offerings_launch_rejected_total",
			want: `
# HELP millwright_offerings_launch_rejected_total Offerings EC2 rejected a launch on for a reason other than capacity; each is backed off (1m doubling to 30m).
# TYPE millwright_offerings_launch_rejected_total counter
millwright_offerings_launch_rejected_total{capacity_type="spot",instance_type="m5.large",nodepool="default",zone="us-east-1a"} 2
`,
		},
		{
			name:   "nodes terminated by pool, zone and reason",
			record: func(m *Metrics) { m.NodeTerminated("default", "us-east-1a", "spot", "Expired") },
			metric: "millwright_nodes_terminated_total",
			want: `
# HELP millwright_nodes_terminated_total Node workflows that terminated their node, by NodePool, zone and termination reason.
# TYPE millwright_nodes_terminated_total counter
millwright_nodes_terminated_total{nodepool="default",reason="Expired",zone="us-east-1a"} 1
`,
		},
		{
			name:   "nodeclaims terminated with Karpenter's labels",
			record: func(m *Metrics) { m.NodeTerminated("default", "us-east-1a", "spot", "Expired") },
			metric: "millwright_nodeclaims_terminated_total",
			want: `
# HELP millwright_nodeclaims_terminated_total Node claims whose node workflow reached Terminated, by NodePool, capacity type and zone.
# TYPE millwright_nodeclaims_terminated_total counter
millwright_nodeclaims_terminated_total{capacity_type="spot",nodepool="default",zone="us-east-1a"} 1
`,
		},
		{
			name: "nodeclaims disrupted with Karpenter's labels",
			record: func(m *Metrics) {
				if err := m.RegisterCluster(poolsView{
					pool("default", apisv1.ConsolidationPolicyWhenEmpty), pool("batch", ""),
				}, nil); err != nil {
					t.Fatal(err)
				}
				m.NodeDisrupted("default", "spot", "RegistrationTimeout", TerminationMode(activities.Never()))
				m.NodeDisrupted("default", "spot", "Empty", TerminationMode(activities.After(time.Hour)))
				m.NodeDisrupted("batch", "on-demand", "Underutilized", TerminationMode(activities.After(0)))
				m.NodeDisrupted("gone", "spot", "Empty", TerminationMode(activities.Never()))
			},
			metric: "millwright_nodeclaims_disrupted_total",
			want: `
# HELP millwright_nodeclaims_disrupted_total Node claims that started leaving, by reason (empty, expired, interrupted, drained, deleted, registration_timeout...), NodePool, capacity type, the pool's consolidation policy (consolidation reasons only) and the termination mode (graceful, eventual, forceful).
# TYPE millwright_nodeclaims_disrupted_total counter
millwright_nodeclaims_disrupted_total{capacity_type="on-demand",consolidation_policy="when_empty_or_underutilized",nodepool="batch",reason="underutilized",termination_mode="forceful"} 1
millwright_nodeclaims_disrupted_total{capacity_type="spot",consolidation_policy="",nodepool="default",reason="registration_timeout",termination_mode="graceful"} 1
millwright_nodeclaims_disrupted_total{capacity_type="spot",consolidation_policy="",nodepool="gone",reason="empty",termination_mode="graceful"} 1
millwright_nodeclaims_disrupted_total{capacity_type="spot",consolidation_policy="when_empty",nodepool="default",reason="empty",termination_mode="eventual"} 1
`,
		},
		{
			name: "interruption messages by kind",
			record: func(m *Metrics) {
				m.InterruptionMessageReceived("spot-warning")
				m.InterruptionMessageReceived("ignored")
			},
			metric: "millwright_interruption_messages_received_total",
			want: `
# HELP millwright_interruption_messages_received_total Interruption queue messages received, by kind (spot-warning, rebalance, state-change, scheduled-change, ignored, unreadable); redeliveries count again. Same as millwright_interruption_received_messages_total, under its first name.
# TYPE millwright_interruption_messages_received_total counter
millwright_interruption_messages_received_total{kind="ignored"} 1
millwright_interruption_messages_received_total{kind="spot-warning"} 1
`,
		},
		{
			name:   "interruption messages under Karpenter's name",
			record: func(m *Metrics) { m.InterruptionMessageReceived("spot-warning") },
			metric: "millwright_interruption_received_messages_total",
			want: `
# HELP millwright_interruption_received_messages_total Interruption queue messages received, by message type (Karpenter's name; the types are Millwright's kinds).
# TYPE millwright_interruption_received_messages_total counter
millwright_interruption_received_messages_total{message_type="spot-warning"} 1
`,
		},
		{
			name: "cloud API errors only for failed calls",
			record: func(m *Metrics) {
				m.CloudAPICall("EC2", "CreateFleet", "Launch", 30*time.Millisecond, "")
				m.CloudAPICall("EC2", "CreateFleet", "Launch", 20*time.Millisecond, "RequestLimitExceeded")
			},
			metric: "millwright_cloudprovider_errors_total",
			want: `
# HELP millwright_cloudprovider_errors_total AWS API calls that failed after the SDK's retries, by service, operation and error code, and with Karpenter's controller, method and provider labels.
# TYPE millwright_cloudprovider_errors_total counter
millwright_cloudprovider_errors_total{controller="Launch",error="RequestLimitExceeded",method="CreateFleet",operation="CreateFleet",provider="aws",service="EC2"} 1
`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, registry := newTestMetrics(t)
			tc.record(m)
			if err := testutil.GatherAndCompare(registry, strings.NewReader(tc.want), tc.metric); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPlannedObservesPodsDurationAndPlansByPool(t *testing.T) {
	m, registry := newTestMetrics(t)
	m.Planned(12, 2, 1500*time.Millisecond, map[string]int{"default": 3, "gpu": 1})
	m.Planned(1, 0, 10*time.Millisecond, map[string]int{"default": 1})
	if got := testutil.ToFloat64(m.queueDepth.WithLabelValues(ProvisionerController)); got != 1 {
		t.Errorf("scheduler queue depth = %v, want the last pass's 1", got)
	}

	if got := testutil.ToFloat64(m.plannedNodes.WithLabelValues("default")); got != 4 {
		t.Errorf("planned nodes for default = %v, want 4", got)
	}
	if got := testutil.ToFloat64(m.plannedNodes.WithLabelValues("gpu")); got != 1 {
		t.Errorf("planned nodes for gpu = %v, want 1", got)
	}
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	histograms := map[string][2]float64{} // name → count, sum
	for _, family := range families {
		for _, metric := range family.GetMetric() {
			if h := metric.GetHistogram(); h != nil {
				histograms[family.GetName()] = [2]float64{float64(h.GetSampleCount()), h.GetSampleSum()}
			}
		}
	}
	if got := histograms["millwright_provisioner_pending_pods"]; got != [2]float64{2, 13} {
		t.Errorf("pending pods (count, sum) = %v, want [2 13]", got)
	}
	if got := histograms["millwright_provisioner_plan_duration_seconds"]; got != [2]float64{2, 1.51} {
		t.Errorf("plan duration (count, sum) = %v, want [2 1.51]", got)
	}
}
