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
// replace by one node needs at most one, which can still be one of the
// instance types it would launch. It returns the
// replacements to launch: the command's, each narrowed to the offerings
// the fresh decision still offers for it (those fit the pods as they are
// now, and save what is asked now); and why the command no longer holds
// ("" when it does).
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
		// first, so "none" is most often that difference, and refusing
		// it only sent the same decision round again.
		return slices.Clone(cmd.Replacements), ""
	}
	narrowed := make([]activities.NodeLaunchSpec, len(cmd.Replacements))
	used := make([]bool, len(now))
	for i, spec := range cmd.Replacements {
		best, bestCount := -1, 0
		var bestOptions []activities.InstanceTypeOption
		for j, other := range now {
			if used[j] || other.NodePool != spec.NodePool {
				continue
			}
			options := commonOfferings(spec.InstanceTypeOptions, other.InstanceTypeOptions)
			if n := offeringCount(options); n > bestCount {
				best, bestCount, bestOptions = j, n, options
			}
		}
		if best < 0 {
			return nil, fmt.Sprintf("no longer valid: cheaper instance types not available: none of %s is still offered for the candidates' pods",
				optionNames(spec.InstanceTypeOptions, 5))
		}
		used[best] = true
		spec.InstanceTypeOptions = bestOptions
		narrowed[i] = spec
	}
	return narrowed, ""
}

// commonOfferings keeps, of mine (in its order), the offerings also in
// fresh.
func commonOfferings(mine, fresh []activities.InstanceTypeOption) []activities.InstanceTypeOption {
	offered := map[activities.OfferingKey]bool{}
	for _, option := range fresh {
		for _, o := range option.Offerings {
			offered[activities.OfferingKey{InstanceType: option.Name, Zone: o.Zone, CapacityType: o.CapacityType}] = true
		}
	}
	var out []activities.InstanceTypeOption
	for _, option := range mine {
		kept := activities.InstanceTypeOption{Name: option.Name}
		for _, o := range option.Offerings {
			if offered[activities.OfferingKey{InstanceType: option.Name, Zone: o.Zone, CapacityType: o.CapacityType}] {
				kept.Offerings = append(kept.Offerings, o)
			}
		}
		if len(kept.Offerings) > 0 {
			out = append(out, kept)
		}
	}
	return out
}

func offeringCount(options []activities.InstanceTypeOption) int {
	n := 0
	for _, option := range options {
		n += len(option.Offerings)
	}
	return n
}

// narrowedText says how far freshHolds narrowed a command's replacements
// ("" when it did not).
func narrowedText(before, after []activities.NodeLaunchSpec) string {
	if len(after) != len(before) {
		return ""
	}
	var parts []string
	for i := range before {
		if b, a := offeringCount(before[i].InstanceTypeOptions), offeringCount(after[i].InstanceTypeOptions); a != b {
			parts = append(parts, fmt.Sprintf("%s: %d of %d offerings still fit", before[i].NodeClaimName, a, b))
		}
	}
	return strings.Join(parts, "; ")
}
