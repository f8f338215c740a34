package disruption_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/millwright/millwright/model/disruption"
	"github.com/millwright/millwright/model/packer"
)

// checkAdmissions re-decides each of r's commands as an admission does (Only its
// candidates, Validation), with the pass's other commands under way —
// those decided before it held, those decided after it held with their
// pods put (Node.DecidedAfter) — and fails on a decision the admission no
// longer takes whole. On mixed-600 (run 53) a multi-node consolidation of
// 3 nodes was decided and invalidated every 20 s for two minutes, the
// admission's binary search trying the first 2 alone (which cannot go)
// and never all 3; and (run 58) whole passes of commands were invalidated
// together, each admission counting the later commands' pods first.
func checkAdmissions(t *testing.T, in disruption.Input, r disruption.Result) {
	for k, cmd := range r.Commands {
		var only []string
		for _, c := range cmd.Candidates {
			only = append(only, c.ClaimName)
		}
		again := in
		again.Only, again.Validation = only, true
		// The pass's other commands are under way by the admission.
		again.Nodes = slices.Clone(in.Nodes)
		for j, other := range r.Commands {
			if j == k {
				continue
			}
			for _, c := range other.Candidates {
				for i := range again.Nodes {
					if again.Nodes[i].ClaimName == c.ClaimName {
						again.Nodes[i].Disrupting = true
						if j > k {
							again.Nodes[i].Uncharged, again.Nodes[i].DecidedAfter = true, true
						}
					}
				}
			}
		}
		fresh := disruption.Compute(again)
		held := freshHolds(cmd, fresh.Commands)
		// Every decision must survive its admission on the same cluster.
		if !held {
			var why []string
			for _, v := range fresh.Verdicts {
				if slices.Contains(only, v.ClaimName) {
					why = append(why, v.NodeName+": "+v.Message)
				}
			}
			var freshMessages []string
			for _, f := range fresh.Commands {
				freshMessages = append(freshMessages, f.Message)
			}
			t.Errorf("%q is not held by its admission, which decides %q; its candidates: %s", cmd.Message, freshMessages, strings.Join(why, "; "))
		}
	}
}

// freshHolds is the rule workflows.freshHolds applies to an admission's
// fresh decision, on the model's types: every candidate taken for the same
// reason; a delete needs no new node; a replace by one node needs at most
// one (a split is not compared).
func freshHolds(cmd disruption.Command, fresh []disruption.Command) bool {
	mine := map[string]bool{}
	for _, c := range cmd.Candidates {
		mine[c.ClaimName] = true
	}
	taken := map[string]bool{}
	var now []packer.NodePlan
	for _, f := range fresh {
		if f.Reason != cmd.Reason {
			continue
		}
		overlaps := false
		for _, c := range f.Candidates {
			taken[c.ClaimName] = true
			overlaps = overlaps || mine[c.ClaimName]
		}
		if overlaps {
			now = append(now, f.Replacements...)
		}
	}
	for claim := range mine {
		if !taken[claim] {
			return false
		}
	}
	switch want := len(cmd.Replacements); {
	case want == 0:
		return len(now) == 0
	case want > 1 || len(now) == 0:
		return true
	case len(now) > 1:
		return false
	}
	// One replacement either way: its offerings still offered are
	// launched, or the fresh one when none is.
	return true
}
