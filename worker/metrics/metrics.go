package metrics

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/activities"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// Namespace prefixes every Millwright metric. Where Karpenter has the same
// metric, the rest of the name and the labels are Karpenter's
// (karpenter_nodeclaims_created_total → millwright_nodeclaims_created_total),
// so its dashboards and alerts only need the prefix changed.
const Namespace = "millwright"

// Launch error causes (the cause label of millwright_nodes_launch_errors_total).
const (
	CauseInsufficientCapacity = "insufficient_capacity"
	CauseThrottled            = "throttled"
	CauseInvalidNodeClass     = "invalid_nodeclass"
	CauseLaunchRejected       = "launch_rejected"
	CauseOther                = "other"
)

// Unknown labels what could not be found out.
const Unknown = "unknown"

// ProvisionerController is the controller label of the scheduler metrics
// the provisioning workflow's planning passes record (Karpenter's
// "provisioner").
const ProvisionerController = "provisioner"

// CreatedReasonProvisioned is the reason label of nodeclaims created for
// pending pods (Karpenter's "provisioned").
const CreatedReasonProvisioned = "provisioned"

// durationBuckets span 5 ms to about 80 s: cloud calls and planning passes.
var durationBuckets = prometheus.ExponentialBuckets(0.005, 2, 15)

// schedulingBuckets are Karpenter's DurationBuckets (controller-runtime's,
// extended to 10 minutes), so histogram_quantile panels compare alike.
var schedulingBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
	1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60, 120, 150, 300, 450, 600}

// phaseBuckets span 1 s to about 18 days: from a registration to a node's
// life in Ready.
var phaseBuckets = prometheus.ExponentialBuckets(1, 4, 12)

// podBuckets span 1 to 4096 pods per batch.
var podBuckets = prometheus.ExponentialBuckets(1, 2, 13)

// summaryObjectives are Karpenter's (min, median, p90, p99, max).
var summaryObjectives = map[float64]float64{0: 0.01, 0.5: 0.01, 0.9: 0.01, 0.99: 0.01, 1: 0.01}

// Metrics are Millwright's collectors, registered on one registry.
type Metrics struct {
	gatherer   prometheus.Gatherer
	registerer prometheus.Registerer

	// Node lifecycle, counted once per transition of a node workflow's
	// NodeClaim (UpsertNodeClaim reports each transition once, however
	// often it is retried).
	nodeClaimsCreated    *prometheus.CounterVec
	nodeClaimsTerminated *prometheus.CounterVec
	nodeClaimsDisrupted  *prometheus.CounterVec
	nodesCreated         *prometheus.CounterVec
	nodesLaunched        *prometheus.CounterVec
	nodesTerminated      *prometheus.CounterVec
	phaseDuration        *prometheus.HistogramVec

	launchErrors         *prometheus.CounterVec
	offeringsUnavailable *prometheus.CounterVec
	offeringsRejected    *prometheus.CounterVec

	// Provisioning.
	pendingPods          prometheus.Histogram
	planDuration         prometheus.Histogram
	plannedNodes         *prometheus.CounterVec
	schedulingDuration   *prometheus.HistogramVec
	queueDepth           *prometheus.GaugeVec
	unschedulablePods    *prometheus.GaugeVec
	podStartupDuration   prometheus.Summary
	interruptionMessages *prometheus.CounterVec
	interruptionReceived *prometheus.CounterVec
	cloudDuration        *prometheus.HistogramVec
	cloudErrors          *prometheus.CounterVec
	kubeAPIDuration      *prometheus.HistogramVec

	// Disruption (Karpenter's voluntary_disruption series).
	disruptionDecisions *prometheus.CounterVec
	disruptionEligible  *prometheus.GaugeVec
	disruptionFailures  *prometheus.CounterVec

	// Visibility: running node workflows by phase.
	nodeWorkflows    *prometheus.GaugeVec
	garbageCollected *prometheus.CounterVec

	// cluster is the view RegisterCluster was given: the disrupted
	// counter reads the pool's consolidation policy from it.
	cluster atomic.Pointer[ClusterView]
}

// NewRegistry is a registry with the Go runtime and process collectors, as
// the worker serves it.
func NewRegistry() *prometheus.Registry {
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return registry
}

func counter(subsystem, name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help}, labels)
}

func gauge(subsystem, name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help}, labels)
}

func histogram(subsystem, name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help, Buckets: buckets}, labels)
}

// New registers Millwright's collectors on registry. It fails when they are
// registered there already.
func New(registry *prometheus.Registry) (*Metrics, error) {
	m := &Metrics{
		gatherer:   registry,
		registerer: registry,
		nodeClaimsCreated: counter("nodeclaims", "created_total",
			"Node claims created, by reason (provisioned), NodePool and whether minValues was relaxed (never: Millwright does not relax).",
			"reason", "nodepool", "min_values_relaxed"),
		nodeClaimsTerminated: counter("nodeclaims", "terminated_total",
			"Node claims whose node workflow reached Terminated, by NodePool, capacity type and zone.",
			"nodepool", "capacity_type", "zone"),
		nodeClaimsDisrupted: counter("nodeclaims", "disrupted_total",
			"Node claims that started leaving, by reason (empty, expired, interrupted, drained, deleted, registration_timeout...), NodePool, capacity type, the pool's consolidation policy (consolidation reasons only) and the termination mode (graceful, eventual, forceful).",
			"reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode"),
		nodesCreated: counter("nodes", "created_total",
			"Nodes registered and adopted by node workflows, by NodePool and zone.",
			"nodepool", "zone"),
		nodesLaunched: counter("nodes", "launched_total",
			"Instances launched for node claims, by NodePool and the offering EC2 chose.",
			"nodepool", "instance_type", "zone", "capacity_type"),
		nodesTerminated: counter("nodes", "terminated_total",
			"Node workflows that terminated their node, by NodePool, zone and termination reason.",
			"nodepool", "zone", "reason"),
		phaseDuration: histogram("node", "phase_duration_seconds",
			"How long node workflows stayed in a phase (Launching, Registering, Initializing, Ready, Draining, Terminating), by NodePool, observed when they leave it.",
			phaseBuckets, "nodepool", "phase"),
		launchErrors: counter("nodes", "launch_errors_total",
			"Failed Launch activity attempts, by NodePool and cause (insufficient_capacity, throttled, invalid_nodeclass, launch_rejected, other).",
			"nodepool", "cause"),
		offeringsUnavailable: counter("offerings", "unavailable_total",
			"Offerings EC2 reported out of capacity during a launch.",
			"instance_type", "zone", "capacity_type"),
		offeringsRejected: counter("offerings", "launch_rejected_total",
			"Offerings EC2 rejected a launch on for a reason other than capacity; each is backed off (1m doubling to 30m).",
			"nodepool", "instance_type", "zone", "capacity_type"),
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
		plannedNodes: counter("provisioner", "planned_nodes_total", "Node plans produced by planning passes, by NodePool.", "nodepool"),
		schedulingDuration: histogram("scheduler", "scheduling_duration_seconds",
			"Duration of scheduling simulations (planning passes), by controller.",
			schedulingBuckets, "controller"),
		queueDepth: gauge("scheduler", "queue_depth",
			"Pods the last scheduling simulation considered, by controller.", "controller"),
		unschedulablePods: gauge("scheduler", "unschedulable_pods_count",
			"Pods the last scheduling simulation could place on no NodePool, by controller.", "controller"),
		podStartupDuration: prometheus.NewSummary(prometheus.SummaryOpts{
			Namespace: Namespace, Subsystem: "pods", Name: "startup_duration_seconds",
			Help:       "The time from pod creation until the pod is running.",
			Objectives: summaryObjectives,
		}),
		interruptionMessages: counter("interruption", "messages_received_total",
			"Interruption queue messages received, by kind (spot-warning, rebalance, state-change, scheduled-change, ignored, unreadable); redeliveries count again. Same as millwright_interruption_received_messages_total, under its first name.",
			"kind"),
		interruptionReceived: counter("interruption", "received_messages_total",
			"Interruption queue messages received, by message type (Karpenter's name; the types are Millwright's kinds).",
			"message_type"),
		cloudDuration: histogram("cloudprovider", "duration_seconds",
			"Duration of AWS API calls, the SDK's retries included, by service and operation, and with Karpenter's labels: controller (the activity), method (the operation) and provider (aws).",
			durationBuckets, "service", "operation", "controller", "method", "provider"),
		cloudErrors: counter("cloudprovider", "errors_total",
			"AWS API calls that failed after the SDK's retries, by service, operation and error code, and with Karpenter's controller, method and provider labels.",
			"service", "operation", "controller", "method", "provider", "error"),
		kubeAPIDuration: histogram("kube_api", "duration_seconds",
			"Duration of Kubernetes API requests (watches excluded; the client's rate limiter waits before), by verb, resource (with subresource) and controller (the activity, or empty outside one).",
			durationBuckets, "verb", "resource", "controller"),
		disruptionDecisions: counter("voluntary_disruption", "decisions_total",
			"Disruption commands decided by the disruption workflow's passes (validations not counted), by decision (delete, replace), reason (empty, underutilized, drifted, unhealthy) and consolidation_type (empty, single, multi; empty for drift and repair).",
			"decision", "reason", "consolidation_type"),
		disruptionEligible: gauge("voluntary_disruption", "eligible_nodes",
			"Nodes the last disruption pass found eligible, by reason (underutilized: every candidate; drifted and unhealthy: candidates with that finding).",
			"reason"),
		disruptionFailures: counter("voluntary_disruption", "queue_failures_total",
			"Disruption commands rolled back after they tainted their candidates (a replacement failed or was not initialized in time), by decision, reason and consolidation_type.",
			"decision", "reason", "consolidation_type"),
		garbageCollected: counter("", "garbage_collected_total",
			"Instances terminated and Nodes removed by garbage collection because no node workflow owned them, by resource (instance, node).",
			"resource"),
		nodeWorkflows: gauge("", "node_workflows",
			"Running node workflows by phase, counted from Temporal visibility (MillwrightPhase).", "phase"),
	}
	for _, c := range m.collectors() {
		if err := registry.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: registering Millwright's collectors: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.nodeClaimsCreated, m.nodeClaimsTerminated, m.nodeClaimsDisrupted, m.nodesCreated, m.nodesLaunched,
		m.nodesTerminated, m.phaseDuration, m.launchErrors, m.offeringsUnavailable, m.offeringsRejected, m.pendingPods, m.planDuration,
		m.plannedNodes, m.schedulingDuration, m.queueDepth, m.unschedulablePods, m.podStartupDuration,
		m.interruptionMessages, m.interruptionReceived, m.cloudDuration, m.cloudErrors, m.kubeAPIDuration, m.nodeWorkflows, m.garbageCollected,
		m.disruptionDecisions, m.disruptionEligible, m.disruptionFailures,
	}
}

// RegisterCluster adds the NodePool and Node gauges read from view at each
// scrape (ClusterCollector).
func (m *Metrics) RegisterCluster(view ClusterView, clk clock.PassiveClock) error {
	if err := m.registerer.Register(NewClusterCollector(view, clk)); err != nil {
		return fmt.Errorf("metrics: registering the cluster gauges: %w", err)
	}
	m.cluster.Store(&view)
	return nil
}

// Gatherer is what /metrics serves.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.gatherer }

// NodeClaimCreated counts a node claim created for pending pods.
func (m *Metrics) NodeClaimCreated(nodePool string) {
	m.nodeClaimsCreated.WithLabelValues(CreatedReasonProvisioned, nodePool, "false").Inc()
}

// NodeLaunched counts an instance launched for a node claim.
func (m *Metrics) NodeLaunched(nodePool, instanceType, zone, capacityType string) {
	m.nodesLaunched.WithLabelValues(nodePool, instanceType, zone, capacityType).Inc()
}

// NodeRegistered counts a Node that joined and was adopted.
func (m *Metrics) NodeRegistered(nodePool, zone string) {
	m.nodesCreated.WithLabelValues(nodePool, zone).Inc()
}

// Termination modes, Karpenter's termination_mode label: graceful without a
// terminationGracePeriod, forceful with one of 0, eventual with a longer one.
const (
	TerminationModeGraceful = "graceful"
	TerminationModeEventual = "eventual"
	TerminationModeForceful = "forceful"
)

// TerminationMode is the termination_mode label of a node whose drain is
// bounded by gracePeriod.
func TerminationMode(gracePeriod activities.OptionalDuration) string {
	d, set := gracePeriod.Get()
	switch {
	case !set:
		return TerminationModeGraceful
	case d <= 0:
		return TerminationModeForceful
	default:
		return TerminationModeEventual
	}
}

// NodeDisrupted counts a node that started leaving, for reason (a
// workflows.TerminationReason; the label is its snake_case form). As
// Karpenter does, consolidation reasons (Empty, Underutilized) carry the
// pool's consolidation policy in snake_case, read from the cluster view
// (empty without one, or for any other reason).
func (m *Metrics) NodeDisrupted(nodePool, capacityType, reason, terminationMode string) {
	m.nodeClaimsDisrupted.WithLabelValues(snakeCase(reason), nodePool, capacityType,
		m.consolidationPolicy(nodePool, reason), terminationMode).Inc()
}

// consolidationPolicy is the consolidation_policy label for a node of pool
// leaving for reason.
func (m *Metrics) consolidationPolicy(pool, reason string) string {
	if reason != string(apisv1.DisruptionReasonEmpty) && reason != string(apisv1.DisruptionReasonUnderutilized) {
		return ""
	}
	view := m.cluster.Load()
	if view == nil {
		return ""
	}
	pools, err := (*view).NodePools()
	if err != nil {
		return ""
	}
	for _, np := range pools {
		if np.Name == pool {
			return snakeCase(string(np.ConsolidationPolicyOrDefault()))
		}
	}
	return ""
}

// NodeTerminated counts a node workflow that reached Terminated. zone and
// capacityType are empty for a node that never launched; reason keeps the
// workflow's spelling (Empty, Expired...), as it always has.
func (m *Metrics) NodeTerminated(nodePool, zone, capacityType, reason string) {
	m.nodeClaimsTerminated.WithLabelValues(nodePool, capacityType, zone).Inc()
	m.nodesTerminated.WithLabelValues(nodePool, zone, reason).Inc()
}

// PhaseLeft records how long a node stayed in phase.
func (m *Metrics) PhaseLeft(nodePool, phase string, after time.Duration) {
	m.phaseDuration.WithLabelValues(nodePool, phase).Observe(after.Seconds())
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

// Planned records one planning pass: the pending pods it considered, those
// it could place nowhere, how long it took and the node plans it produced,
// by NodePool.
func (m *Metrics) Planned(pendingPods, unschedulable int, took time.Duration, plansByPool map[string]int) {
	m.pendingPods.Observe(float64(pendingPods))
	m.planDuration.Observe(took.Seconds())
	m.schedulingDuration.WithLabelValues(ProvisionerController).Observe(took.Seconds())
	m.queueDepth.WithLabelValues(ProvisionerController).Set(float64(pendingPods))
	m.unschedulablePods.WithLabelValues(ProvisionerController).Set(float64(unschedulable))
	for pool, n := range plansByPool {
		m.plannedNodes.WithLabelValues(pool).Add(float64(n))
	}
}

// PodStarted records the time from a pod's creation until it ran.
func (m *Metrics) PodStarted(took time.Duration) { m.podStartupDuration.Observe(took.Seconds()) }

// InterruptionMessageReceived counts an interruption queue message by kind.
func (m *Metrics) InterruptionMessageReceived(kind string) {
	m.interruptionMessages.WithLabelValues(kind).Inc()
	m.interruptionReceived.WithLabelValues(kind).Inc()
}

// GarbageCollected counts an instance or Node (resource "instance" or
// "node") garbage collection removed.
func (m *Metrics) GarbageCollected(resource string) {
	m.garbageCollected.WithLabelValues(resource).Inc()
}

// CloudAPICall records one AWS API call made by controller (the activity,
// or "" outside one); errorCode is empty on success.
func (m *Metrics) CloudAPICall(service, operation, controller string, took time.Duration, errorCode string) {
	m.cloudDuration.WithLabelValues(service, operation, controller, operation, "aws").Observe(took.Seconds())
	if errorCode != "" {
		m.cloudErrors.WithLabelValues(service, operation, controller, operation, "aws", errorCode).Inc()
	}
}

// NodeWorkflowsInPhase sets the running node workflows counted in phase.
func (m *Metrics) NodeWorkflowsInPhase(phase string, count int64) {
	m.nodeWorkflows.WithLabelValues(phase).Set(float64(count))
}

// snakeCase turns a CamelCase reason into Karpenter's label style
// (RegistrationTimeout → registration_timeout).
func snakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// DisruptionDecided counts one command a disruption pass decided.
func (m *Metrics) DisruptionDecided(decision, reason string, candidates int) {
	m.disruptionDecisions.WithLabelValues(snakeCase(decision), snakeCase(reason), consolidationType(reason, candidates)).Inc()
}

// DisruptionEligible sets the nodes the last pass found eligible for reason.
func (m *Metrics) DisruptionEligible(reason string, nodes int) {
	m.disruptionEligible.WithLabelValues(snakeCase(reason)).Set(float64(nodes))
}

// DisruptionFailed counts a command rolled back.
func (m *Metrics) DisruptionFailed(decision, reason string, candidates int) {
	m.disruptionFailures.WithLabelValues(snakeCase(decision), snakeCase(reason), consolidationType(reason, candidates)).Inc()
}

// consolidationType is Karpenter's label: empty, single or multi for
// consolidation, "" for the other reasons.
func consolidationType(reason string, candidates int) string {
	switch {
	case reason == string(apisv1.DisruptionReasonEmpty):
		return "empty"
	case reason != string(apisv1.DisruptionReasonUnderutilized):
		return ""
	case candidates > 1:
		return "multi"
	}
	return "single"
}
