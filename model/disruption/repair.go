package disruption

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// unhealthyOf is the repair finding for ni ("" when none): an initialized
// node whose Ready condition has been False or Unknown (or is missing) for
// longer than the toleration (Karpenter's node health repair policy).
func (c *computation) unhealthyOf(ni *nodeInfo) string {
	n := ni.node
	if !n.Initialized || n.Ready == corev1.ConditionTrue || n.Deleting {
		return ""
	}
	status := n.Ready
	if status == "" {
		status = corev1.ConditionUnknown
	}
	since := c.in.Now.Sub(n.ReadySince)
	if n.ReadySince.IsZero() || since < c.opts.RepairToleration {
		return ""
	}
	return fmt.Sprintf("Ready=%s for %s (toleration %s)", status, since.Round(time.Second), c.opts.RepairToleration)
}
