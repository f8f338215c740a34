package kube

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// AllowedDisruptions is how many more of pool's nodes may start a
// disruption for reason at now, by the same budgets AllowDisruption
// applies: the tightest active budget's allowance minus the nodes already
// being disrupted (never below 0); with no active budget, every node not
// yet being disrupted. pool must carry its defaults (SetDefaults). The
// metrics of NodePools (millwright_nodepools_allowed_disruptions) read it.
func AllowedDisruptions(pool *apisv1.NodePool, nodes []corev1.Node, reason string, now time.Time) (int, error) {
	disrupting := 0
	for i := range nodes {
		if beingDisrupted(&nodes[i], now) {
			disrupting++
		}
	}
	limit, err := disruptionLimit(pool, reason, len(nodes), now)
	if err != nil {
		return 0, err
	}
	allowed := len(nodes) - disrupting
	if limit != nil {
		allowed = limit.allowed - disrupting
	}
	return max(allowed, 0), nil
}
