package disruption

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// RepairPolicy says a Node whose condition Type has had Status for
// Toleration is unhealthy.
type RepairPolicy struct {
	Type       corev1.NodeConditionType
	Status     corev1.ConditionStatus
	Toleration time.Duration
}

// MonitoringRepairPolicies are the conditions the EKS node monitoring
// agent reports, with the tolerations Karpenter's AWS provider repairs
// them after (its RepairPolicies, besides Ready's).
var MonitoringRepairPolicies = []RepairPolicy{
	{Type: "AcceleratedHardwareReady", Status: corev1.ConditionFalse, Toleration: 10 * time.Minute},
	{Type: "StorageReady", Status: corev1.ConditionFalse, Toleration: 30 * time.Minute},
	{Type: "NetworkingReady", Status: corev1.ConditionFalse, Toleration: 30 * time.Minute},
	{Type: "KernelReady", Status: corev1.ConditionFalse, Toleration: 30 * time.Minute},
	{Type: "ContainerRuntimeReady", Status: corev1.ConditionFalse, Toleration: 30 * time.Minute},
}

// unhealthyOf is the repair finding for ni ("" when none): an initialized
// node whose Ready condition has been False or Unknown (or is missing) for
// longer than the toleration, or that has had a condition of
// MonitoringRepairPolicies for longer than its toleration (Karpenter's
// node health repair policies).
func (c *computation) unhealthyOf(ni *nodeInfo) string {
	n := ni.node
	if !n.Initialized || n.Deleting {
		return ""
	}
	if n.Ready != corev1.ConditionTrue {
		status := n.Ready
		if status == "" {
			status = corev1.ConditionUnknown
		}
		since := c.in.Now.Sub(n.ReadySince)
		if !n.ReadySince.IsZero() && since >= c.opts.RepairToleration {
			return fmt.Sprintf("Ready=%s for %s (toleration %s)", status, since.Round(time.Second), c.opts.RepairToleration)
		}
	}
	for _, p := range MonitoringRepairPolicies {
		cond := monitoringCondition(n, p)
		if cond == nil || cond.LastTransitionTime.IsZero() {
			continue
		}
		if since := c.in.Now.Sub(cond.LastTransitionTime.Time); since >= p.Toleration {
			return fmt.Sprintf("%s=%s for %s (toleration %s)", p.Type, p.Status, since.Round(time.Second), p.Toleration)
		}
	}
	return ""
}

// monitoringCondition is n's condition p matches (nil when none).
func monitoringCondition(n *Node, p RepairPolicy) *corev1.NodeCondition {
	for i := range n.Conditions {
		if c := &n.Conditions[i]; c.Type == p.Type && c.Status == p.Status {
			return c
		}
	}
	return nil
}

// unhealthyNow: n is counted unhealthy for repair's cap on a pool — its
// Ready condition is not True, or a monitoring condition says it is
// faulty (tolerated for now or not).
func unhealthyNow(n *Node) bool {
	if n.Ready != corev1.ConditionTrue {
		return true
	}
	for _, p := range MonitoringRepairPolicies {
		if monitoringCondition(n, p) != nil {
			return true
		}
	}
	return false
}
