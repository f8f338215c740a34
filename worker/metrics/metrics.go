package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Namespace prefixes every Millwright metric.
const Namespace = "millwright"

// Launch error causes (the cause label of millwright_nodes_launch_errors_total).
const (
	CauseInsufficientCapacity = "insufficient_capacity"
	CauseThrottled            = "throttled"
	CauseInvalidNodeClass     = "invalid_nodeclass"
	CauseLaunchRejected       = "launch_rejected"
	CauseOther                = "other"
)

// Unknown labels what could not be found out (a termination whose workflow
// could not be described).
const Unknown = "unknown"

// durationBuckets span 5 ms to about 80 s: cloud calls and planning passes.
var durationBuckets = prometheus.ExponentialBuckets(0.005, 2, 15)

// podBuckets span 1 to 4096 pods per batch.
var podBuckets = prometheus.ExponentialBuckets(1, 2, 13)

// Metrics are Millwright's collectors, registered on one registry.
type Metrics struct {
	gatherer prometheus.Gatherer

	nodesLaunched        *prometheus.CounterVec
	launchErrors         *prometheus.CounterVec
	offeringsUnavailable *prometheus.CounterVec
	offeringsRejected    *prometheus.CounterVec
	nodesTerminated      *prometheus.CounterVec
	pendingPods          prometheus.Histogram
	planDuration         prometheus.Histogram
	plannedNodes         *prometheus.CounterVec
	interruptionMessages *prometheus.CounterVec
	cloudDuration        *prometheus.HistogramVec
	cloudErrors          *prometheus.CounterVec
}

// NewRegistry is a registry with the Go runtime and process collectors, as
// the worker serves it.
func NewRegistry() *prometheus.Registry {
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return registry
}

// New registers Millwright's collectors on registry. It fails when they are
// registered there already.
func New(registry *prometheus.Registry) (*Metrics, error) {
	m := &Metrics{
		gatherer: registry,
		nodesLaunched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "nodes", Name: "launched_total",
			Help: "Instances launched for node claims, by NodePool and the offering EC2 chose.",
		}, []string{"nodepool", "instance_type", "zone", "capacity_type"}),
		launchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "nodes", Name: "launch_errors_total",
			Help: "Failed Launch activity attempts, by NodePool and cause (insufficient_capacity, throttled, invalid_nodeclass, launch_rejected, other).",
		}, []string{"nodepool", "cause"}),
		offeringsUnavailable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "offerings", Name: "unavailable_total",
			Help: "Offerings EC2 reported out of capacity during a launch.",
		}, []string{"instance_type", "zone", "capacity_type"}),
		offeringsRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "offerings", Name: "launch_rejected_total",
			Help: "Offerings EC2 rejected a launch on for a reason other than capacity; each is backed off (1m doubling to 30m).",
		}, []string{"nodepool", "instance_type", "zone", "capacity_type"}),
		nodesTerminated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "nodes", Name: "terminated_total",
			Help: "Instances terminated by node workflows, by NodePool and termination reason.",
		}, []string{"nodepool", "reason"}),
		pendingPods: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "provisioner", Name: "pending_pods",
			Help:    "Provisionable pending pods a planning pass found, per provisioning batch.",
			Buckets: podBuckets,
		}),
		planDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "provisioner", Name: "plan_duration_seconds",
			Help:    "Duration of a planning pass (the Plan activity: reading cluster state and packing pods into node plans).",
			Buckets: durationBuckets,
		}),
		plannedNodes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "provisioner", Name: "planned_nodes_total",
			Help: "Node plans produced by planning passes, by NodePool.",
		}, []string{"nodepool"}),
		interruptionMessages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "interruption", Name: "messages_received_total",
			Help: "Interruption queue messages received, by kind (spot-warning, rebalance, state-change, scheduled-change, ignored, unreadable); redeliveries count again.",
		}, []string{"kind"}),
		cloudDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "cloudprovider", Name: "duration_seconds",
			Help:    "Duration of AWS API calls, the SDK's retries included, by service and operation.",
			Buckets: durationBuckets,
		}, []string{"service", "operation"}),
		cloudErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "cloudprovider", Name: "errors_total",
			Help: "AWS API calls that failed after the SDK's retries, by service, operation and error code.",
		}, []string{"service", "operation", "error"}),
	}
	for _, c := range []prometheus.Collector{
		m.nodesLaunched, m.launchErrors, m.offeringsUnavailable, m.offeringsRejected, m.nodesTerminated, m.pendingPods,
		m.planDuration, m.plannedNodes, m.interruptionMessages, m.cloudDuration, m.cloudErrors,
	} {
		if err := registry.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: registering Millwright's collectors: %w", err)
		}
	}
	return m, nil
}

// Gatherer is what /metrics serves.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.gatherer }

// NodeLaunched counts an instance launched for a node claim.
func (m *Metrics) NodeLaunched(nodePool, instanceType, zone, capacityType string) {
	m.nodesLaunched.WithLabelValues(nodePool, instanceType, zone, capacityType).Inc()
}

// LaunchFailed counts a failed launch attempt with its cause (Cause...).
func (m *Metrics) LaunchFailed(nodePool, cause string) {
	m.launchErrors.WithLabelValues(nodePool, cause).Inc()
}

// OfferingRejected counts an offering EC2 rejected a launch on for a reason
// other than capacity.
func (m *Metrics) OfferingRejected(nodePool, instanceType, zone, capacityType string) {
	m.offeringsRejected.WithLabelValues(nodePool, instanceType, zone, capacityType).Inc()
}

// OfferingUnavailable counts an offering EC2 had no capacity for.
func (m *Metrics) OfferingUnavailable(instanceType, zone, capacityType string) {
	m.offeringsUnavailable.WithLabelValues(instanceType, zone, capacityType).Inc()
}

// NodeTerminated counts an instance terminated for reason.
func (m *Metrics) NodeTerminated(nodePool, reason string) {
	m.nodesTerminated.WithLabelValues(nodePool, reason).Inc()
}

// Planned records one planning pass: the pending pods it considered, how
// long it took and the node plans it produced, by NodePool.
func (m *Metrics) Planned(pendingPods int, took time.Duration, plansByPool map[string]int) {
	m.pendingPods.Observe(float64(pendingPods))
	m.planDuration.Observe(took.Seconds())
	for pool, n := range plansByPool {
		m.plannedNodes.WithLabelValues(pool).Add(float64(n))
	}
}

// InterruptionMessageReceived counts an interruption queue message by kind.
func (m *Metrics) InterruptionMessageReceived(kind string) {
	m.interruptionMessages.WithLabelValues(kind).Inc()
}

// CloudAPICall records one AWS API call; errorCode is empty on success.
func (m *Metrics) CloudAPICall(service, operation string, took time.Duration, errorCode string) {
	m.cloudDuration.WithLabelValues(service, operation).Observe(took.Seconds())
	if errorCode != "" {
		m.cloudErrors.WithLabelValues(service, operation, errorCode).Inc()
	}
}
