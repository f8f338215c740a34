package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/kube"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// ClusterView is what the cluster gauges read at each scrape: the worker's
// informer caches, never the API server.
type ClusterView interface {
	NodePools() ([]*apisv1.NodePool, error)
	Nodes() ([]*corev1.Node, error)
	Pods() ([]*corev1.Pod, error)
}

// disruptionReasons are the reasons budgets name, as Karpenter labels them.
var disruptionReasons = []apisv1.DisruptionReason{
	apisv1.DisruptionReasonEmpty, apisv1.DisruptionReasonDrifted, apisv1.DisruptionReasonUnderutilized,
}

var nodeLabelNames = []string{"node_name", "nodepool", "zone", "capacity_type", "instance_type", "resource_type"}

// ClusterCollector serves Karpenter's NodePool and Node gauges from a
// ClusterView: millwright_nodepools_usage, _limit and _allowed_disruptions,
// millwright_nodes_allocatable and _total_pod_requests.
type ClusterCollector struct {
	view  ClusterView
	clock clock.PassiveClock

	poolUsage, poolLimit, poolAllowed, nodeAllocatable, nodePodRequests *prometheus.Desc
}

// NewClusterCollector reads view at each scrape; clk decides which
// disruption budgets are active.
func NewClusterCollector(view ClusterView, clk clock.PassiveClock) *ClusterCollector {
	if clk == nil {
		clk = clock.RealClock{}
	}
	name := func(subsystem, n string) string { return prometheus.BuildFQName(Namespace, subsystem, n) }
	return &ClusterCollector{
		view: view, clock: clk,
		poolUsage: prometheus.NewDesc(name("nodepools", "usage"),
			"The resources the NodePool's nodes have (its status.resources), by NodePool and resource type.", []string{"nodepool", "resource_type"}, nil),
		poolLimit: prometheus.NewDesc(name("nodepools", "limit"),
			"The NodePool's limits, by NodePool and resource type.", []string{"nodepool", "resource_type"}, nil),
		poolAllowed: prometheus.NewDesc(name("nodepools", "allowed_disruptions"),
			"How many more of the NodePool's nodes its budgets let start a disruption now, by NodePool and reason.", []string{"nodepool", "reason"}, nil),
		nodeAllocatable: prometheus.NewDesc(name("nodes", "allocatable"),
			"The allocatable resources of Millwright's Nodes.", nodeLabelNames, nil),
		nodePodRequests: prometheus.NewDesc(name("nodes", "total_pod_requests"),
			"The summed requests of the pods bound to Millwright's Nodes (terminal pods excluded).", nodeLabelNames, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *ClusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.poolUsage, c.poolLimit, c.poolAllowed, c.nodeAllocatable, c.nodePodRequests} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A cache that cannot be read
// leaves its series out of this scrape.
func (c *ClusterCollector) Collect(ch chan<- prometheus.Metric) {
	nodes, err := c.view.Nodes()
	if err != nil {
		return
	}
	byPool := map[string][]corev1.Node{}
	ours := map[string]*corev1.Node{}
	for _, node := range nodes {
		if node.Labels[activities.NodeClaimLabel] == "" {
			continue
		}
		ours[node.Name] = node
		if pool := node.Labels[apisv1.LabelNodePool]; pool != "" {
			byPool[pool] = append(byPool[pool], *node)
		}
	}
	if pools, err := c.view.NodePools(); err == nil {
		for _, pool := range pools {
			c.collectPool(ch, pool, byPool[pool.Name])
		}
	}
	requests := map[string]corev1.ResourceList{}
	if pods, err := c.view.Pods(); err == nil {
		for _, pod := range pods {
			if ours[pod.Spec.NodeName] == nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
				continue
			}
			sum := requests[pod.Spec.NodeName]
			if sum == nil {
				sum = corev1.ResourceList{}
				requests[pod.Spec.NodeName] = sum
			}
			for _, container := range pod.Spec.Containers {
				for name, q := range container.Resources.Requests {
					total := sum[name]
					total.Add(q)
					sum[name] = total
				}
			}
		}
	}
	for _, node := range ours {
		labels := func(resourceType corev1.ResourceName) []string {
			return []string{node.Name, node.Labels[apisv1.LabelNodePool], node.Labels[corev1.LabelTopologyZone],
				node.Labels[apisv1.LabelCapacityType], node.Labels[corev1.LabelInstanceTypeStable], resourceTypeLabel(resourceType)}
		}
		for name, q := range node.Status.Allocatable {
			ch <- prometheus.MustNewConstMetric(c.nodeAllocatable, prometheus.GaugeValue, quantityValue(q), labels(name)...)
		}
		for name, q := range requests[node.Name] {
			ch <- prometheus.MustNewConstMetric(c.nodePodRequests, prometheus.GaugeValue, quantityValue(q), labels(name)...)
		}
	}
}

func (c *ClusterCollector) collectPool(ch chan<- prometheus.Metric, pool *apisv1.NodePool, nodes []corev1.Node) {
	for name, q := range pool.Status.Resources {
		ch <- prometheus.MustNewConstMetric(c.poolUsage, prometheus.GaugeValue, quantityValue(q), pool.Name, resourceTypeLabel(name))
	}
	for name, q := range pool.Spec.Limits {
		ch <- prometheus.MustNewConstMetric(c.poolLimit, prometheus.GaugeValue, quantityValue(q), pool.Name, resourceTypeLabel(name))
	}
	defaulted := pool.DeepCopy()
	defaulted.SetDefaults()
	now := c.clock.Now()
	for _, reason := range disruptionReasons {
		allowed, err := kube.AllowedDisruptions(defaulted, nodes, string(reason), now)
		if err != nil {
			continue // an unreadable budget allows nothing; the pool's status says why
		}
		ch <- prometheus.MustNewConstMetric(c.poolAllowed, prometheus.GaugeValue, float64(allowed), pool.Name, strings.ToLower(string(reason)))
	}
}

// resourceTypeLabel is a resource name as Karpenter labels it (cpu, memory,
// pods, nvidia.com/gpu...).
func resourceTypeLabel(name corev1.ResourceName) string { return string(name) }

// quantityValue is q in base units: cores for CPU, bytes for memory.
func quantityValue(q resource.Quantity) float64 { return q.AsApproximateFloat64() }
