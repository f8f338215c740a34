package workflows

import (
	"fmt"
	"slices"
	"strings"

	"github.com/millwright/millwright/activities"
	modeldisruption "github.com/millwright/millwright/model/disruption"
)

// stillHolds compares a command with a fresh decision (before
// changeReplacementsStillFit; kept for the histories that took it). Its
// delete rule never fired: it counted the replacements of fresh commands
// of the command's own kind, and a fresh delete has none.
func stillHolds(cmd activities.DisruptionCommand, fresh []activities.DisruptionCommand) string {
	taken := map[string]bool{}
	replacements := 0
	for _, other := range fresh {
		if other.Reason != cmd.Reason {
			continue
		}
		for _, candidate := range other.Candidates {
			taken[candidate.NodeClaimName] = true
		}
		if other.Kind == cmd.Kind {
			replacements += len(other.Replacements)
		}
	}
	for _, candidate := range cmd.Candidates {
		if !taken[candidate.NodeClaimName] {
			return fmt.Sprintf("no longer valid: %s is not %s any more", candidate.NodeClaimName, cmd.Reason)
		}
	}
	if cmd.Kind == modeldisruption.KindDelete && replacements > 0 {
		return "no longer valid: the candidates' pods now need a replacement"
	}
	return ""
}

// freshHolds compares a command with a fresh decision, as Karpenter's
// validation re-simulates a command before it acts: every candidate is
// still taken for the same reason; a delete still needs no new node; a
// replace by one node needs at most one. It returns the replacements to
// launch — a single replacement narrowed to the offerings the fresh
// decision still offers for it (those fit the pods as they are now, and
// save what is asked now), or the fresh decision's own when it offers none
// of them — and why the command no longer holds ("" when it does).
//
// Karpenter refuses a replacement unless every instance type it would
// launch is still offered; narrowing instead keeps a command whose pods
// grew a little, and keeps the ones the fresh decision trims only by price
// (its score asks more as a pool shrinks), without launching a type the
// pods no longer fit.
func freshHolds(cmd activities.DisruptionCommand, fresh []activities.DisruptionCommand) ([]activities.NodeLaunchSpec, string) {
	mine := make(map[string]bool, len(cmd.Candidates))
	for _, candidate := range cmd.Candidates {
		mine[candidate.NodeClaimName] = true
	}
	taken := map[string]bool{}
	var now []activities.NodeLaunchSpec
	for _, other := range fresh {
		if other.Reason != cmd.Reason {
			continue
		}
		overlaps := false
		for _, candidate := range other.Candidates {
			taken[candidate.NodeClaimName] = true
			overlaps = overlaps || mine[candidate.NodeClaimName]
		}
		if overlaps {
			now = append(now, other.Replacements...)
		}
	}
	for _, candidate := range cmd.Candidates {
		if !taken[candidate.NodeClaimName] {
			return nil, fmt.Sprintf("no longer valid: %s is not %s any more", candidate.NodeClaimName, cmd.Reason)
		}
	}
	switch want := len(cmd.Replacements); {
	case want == 0 && len(now) > 0:
		return nil, fmt.Sprintf("no longer valid: the candidates' pods now need %d new node(s)", len(now))
	case want == 0:
		return nil, ""
	case want > 1:
		// A split (Millwright's own move): a fresh decision partitions
		// the pods anew, into other types and often another count, while
		// the command's nodes still hold them, so its replacements are
		// not compared one by one.
		return slices.Clone(cmd.Replacements), ""
	case len(now) > 1:
		return nil, fmt.Sprintf("no longer valid: the candidates' pods now need %d new nodes, not one", len(now))
	case len(now) == 0:
		// The pods need less than the command launches: it still holds
		// them all. Karpenter refuses (a cheaper decision is likely), but
		// it decides one command a pass; here an admission places the
		// pods of the commands admitted before it together with the
		// command's own, largest first, while the pass placed theirs
		// first, so "none" is most often that difference rather than a
		// change in the cluster (TestConsolidationSettles, which holds
		// every decision to its admission, met such a case).
		return slices.Clone(cmd.Replacements), ""
	}
	spec, replanned := cmd.Replacements[0], now[0]
	if common := commonOfferings(spec.InstanceTypeOptions, replanned.InstanceTypeOptions); len(common) > 0 && replanned.NodePool == spec.NodePool {
		spec.InstanceTypeOptions = common
		return []activities.NodeLaunchSpec{spec}, ""
	}
	// None of the command's offerings is offered any more (its pods grew
	// past them): the fresh replacement, which passed the same rules
	// against the same candidates (cheaper than them, the spot rules, the
	// score), is launched instead. Karpenter refuses ("cheaper instance
	// types not available") and decides again a pass later, after the
	// node's consolidateAfter if pods landed on it: on mixed-600 that
	// held back a node saving $1.01/h.
	return []activities.NodeLaunchSpec{replanned}, ""
}

// commonOfferings keeps, of mine (in its order), the offerings also in
// fresh.
func commonOfferings(mine, fresh []activities.InstanceTypeOption) []activities.InstanceTypeOption {
	offered := map[activities.OfferingKey]bool{}
	for _, key := range offeringKeys(fresh) {
		offered[key] = true
	}
	return keepOfferings(mine, func(key activities.OfferingKey) bool { return offered[key] })
}

// narrowedText says how freshHolds changed a command's replacements ("" when
// it did not).
func narrowedText(before, after []activities.NodeLaunchSpec) string {
	if len(after) != len(before) {
		return ""
	}
	var parts []string
	for i := range before {
		b, a := before[i].InstanceTypeOptions, after[i].InstanceTypeOptions
		switch {
		case countOfferings(commonOfferings(b, a)) == countOfferings(b) && countOfferings(b) == countOfferings(a):
		case len(commonOfferings(b, a)) == 0:
			parts = append(parts, fmt.Sprintf("replacement %d re-planned: %s instead of %s", i+1, optionNames(a, 5), optionNames(b, 5)))
		default:
			parts = append(parts, fmt.Sprintf("replacement %d: %d of %d offerings still fit", i+1, countOfferings(a), countOfferings(b)))
		}
	}
	return strings.Join(parts, "; ")
}
