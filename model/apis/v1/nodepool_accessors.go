package v1

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
)

// The accessors below read a NodePool as the controllers need it: defaults
// applied, durations parsed. They are meant for validated objects; where a
// value cannot be read anyway they fail towards doing nothing (no expiry, no
// consolidation, no disruption), because a misread timer must not remove
// nodes.

// ExpireAfterDuration is how long a node of the pool may live; never is
// true when expiry is off. Unset means DefaultExpireAfter.
func (np *NodePool) ExpireAfterDuration() (d time.Duration, never bool) {
	return durationOrNeverWithDefault(np.Spec.Template.Spec.ExpireAfter, DefaultExpireAfter)
}

// ConsolidateAfterDuration is how long a node must stay a consolidation
// candidate before it is consolidated; never is true when consolidation is
// off. Unset means DefaultConsolidateAfter.
func (np *NodePool) ConsolidateAfterDuration() (d time.Duration, never bool) {
	return durationOrNeverWithDefault(np.Spec.Disruption.ConsolidateAfter, DefaultConsolidateAfter)
}

func durationOrNeverWithDefault(v, def DurationOrNever) (time.Duration, bool) {
	if v == "" {
		v = def
	}
	d, never, err := v.Parse()
	if err != nil {
		return 0, true
	}
	return d, never
}

// TerminationGracePeriodDuration is the longest a node's drain may take; ok
// is false when unset (or unreadable), meaning wait for ever.
func (np *NodePool) TerminationGracePeriodDuration() (d time.Duration, ok bool) {
	tgp := np.Spec.Template.Spec.TerminationGracePeriod
	if tgp == nil {
		return 0, false
	}
	d, err := tgp.Parse()
	if err != nil {
		return 0, false
	}
	return d, true
}

// ConsolidationPolicyOrDefault is the pool's consolidation policy with the
// default applied.
func (np *NodePool) ConsolidationPolicyOrDefault() ConsolidationPolicy {
	if np.Spec.Disruption.ConsolidationPolicy == "" {
		return DefaultConsolidationPolicy
	}
	return np.Spec.Disruption.ConsolidationPolicy
}

// WeightOrZero is the pool's weight; an unset weight counts as 0.
func (np *NodePool) WeightOrZero() int32 {
	if np.Spec.Weight == nil {
		return 0
	}
	return *np.Spec.Weight
}

// MinNodesOrZero is the pool's warm minimum; unset means 0.
func (np *NodePool) MinNodesOrZero() int32 {
	if np.Spec.MinNodes == nil {
		return 0
	}
	return *np.Spec.MinNodes
}

// MaxNodes is limits.nodes; ok is false when the pool has no node-count
// limit.
func (np *NodePool) MaxNodes() (n int64, ok bool) {
	q, ok := np.Spec.Limits[ResourceNodes]
	if !ok {
		return 0, false
	}
	return q.Value(), true
}

// NodeClassName is the name of the referenced EC2NodeClass, or "" when the
// reference is missing.
func (np *NodePool) NodeClassName() string {
	if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil {
		return ref.Name
	}
	return ""
}

// ExceededBy lists, sorted, the resources whose usage is above the limit.
// Resources without a limit are unbounded.
func (l Limits) ExceededBy(usage corev1.ResourceList) []corev1.ResourceName {
	var over []corev1.ResourceName
	for name, used := range usage {
		if limit, ok := l[name]; ok && used.Cmp(limit) > 0 {
			over = append(over, name)
		}
	}
	slices.Sort(over)
	return over
}

// AllowedDisruptions is how many of the pool's numNodes nodes may be
// disrupted now for reason: the minimum over the active budgets that apply
// to the reason, or math.MaxInt32 when none does. A budget that cannot be
// read allows 0 and its error is returned (joined with the others).
func (np *NodePool) AllowedDisruptions(clk clock.PassiveClock, numNodes int, reason DisruptionReason) (int, error) {
	budgets := np.Spec.Disruption.Budgets
	if len(budgets) == 0 {
		budgets = []Budget{{Nodes: DefaultBudgetNodes}}
	}
	allowed := math.MaxInt32
	var errs []error
	now := clk.Now()
	for i := range budgets {
		b := &budgets[i]
		if len(b.Reasons) > 0 && !slices.Contains(b.Reasons, reason) {
			continue
		}
		n, err := b.AllowedDisruptions(now, numNodes)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.disruption.budgets[%d]: %w", i, err))
		}
		allowed = min(allowed, n)
	}
	return allowed, errors.Join(errs...)
}

// AllowedDisruptions is how many of numNodes nodes this budget lets be
// disrupted at now: math.MaxInt32 outside its window, else its count or its
// percentage of numNodes rounded up (as Kubernetes rounds a PDB's
// maxUnavailable). A budget that cannot be read allows 0.
func (b *Budget) AllowedDisruptions(now time.Time, numNodes int) (int, error) {
	active, err := b.IsActive(now)
	if err != nil {
		return 0, err
	}
	if !active {
		return math.MaxInt32, nil
	}
	nodes := b.Nodes
	if nodes == "" {
		nodes = DefaultBudgetNodes
	}
	value := intstr.FromString(nodes)
	if n, err := strconv.Atoi(nodes); err == nil {
		value = intstr.FromInt32(int32(min(n, math.MaxInt32)))
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&value, numNodes, true)
	if err != nil {
		return 0, fmt.Errorf("nodes %q: %w", nodes, err)
	}
	return n, nil
}

// IsActive reports whether now falls in the budget's window: always for a
// budget without a schedule, else when the last schedule hit (UTC) is less
// than duration ago, i.e. the window is [hit, hit+duration).
func (b *Budget) IsActive(now time.Time) (bool, error) {
	if b.Schedule == nil && b.Duration == nil {
		return true, nil
	}
	if b.Schedule == nil || b.Duration == nil {
		return false, errors.New("schedule and duration must be set together")
	}
	schedule, err := cron.ParseStandard("TZ=UTC " + *b.Schedule)
	if err != nil {
		return false, fmt.Errorf("schedule %q: %w", *b.Schedule, err)
	}
	window, err := b.Duration.Parse()
	if err != nil {
		return false, fmt.Errorf("duration: %w", err)
	}
	// The window is open iff some schedule hit lies in (now-window, now]:
	// the first hit after now-window must not be after now.
	now = now.UTC()
	return !schedule.Next(now.Add(-window)).After(now), nil
}
