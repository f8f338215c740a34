package workflows

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/millwright/millwright/activities"
	modeldisruption "github.com/millwright/millwright/model/disruption"
)

// deletion is consolidation() as a delete of the same candidates.
func deletion() activities.DisruptionCommand {
	cmd := consolidation()
	cmd.Kind, cmd.Replacements = modeldisruption.KindDelete, nil
	cmd.Message = "Underutilized: 2 nodes deleted, their pods fit on other nodes"
	return cmd
}

// withOptions is cmd with its replacements' options set to options.
func withOptions(cmd activities.DisruptionCommand, options ...activities.InstanceTypeOption) activities.DisruptionCommand {
	cmd.Replacements = slices.Clone(cmd.Replacements)
	for i := range cmd.Replacements {
		cmd.Replacements[i].InstanceTypeOptions = options
	}
	return cmd
}

// offeringsOf renders specs' options as "type/zone/capacity" lists.
func offeringsOf(specs []activities.NodeLaunchSpec) []string {
	var out []string
	for _, spec := range specs {
		var keys []string
		for _, option := range spec.InstanceTypeOptions {
			for _, o := range option.Offerings {
				keys = append(keys, option.Name+"/"+o.Zone+"/"+o.CapacityType)
			}
		}
		out = append(out, strings.Join(keys, " "))
	}
	return out
}

// TestFreshHolds: the rule a command's validation (and admission) applies
// to the fresh decision, after Karpenter's validation.go: the candidates
// still taken for the same reason, as many new nodes as before (none for
// a delete), and replacements narrowed to the offerings still offered.
func TestFreshHolds(t *testing.T) {
	spotA := offering("us-east-1a", activities.CapacityTypeSpot, 0.04)
	spotB := offering("us-east-1b", activities.CapacityTypeSpot, 0.05)
	onDemandA := offering("us-east-1a", activities.CapacityTypeOnDemand, 0.192)
	large := instanceOption("m5.large", spotA, spotB)
	xlarge := instanceOption("m5.xlarge", onDemandA)
	other := consolidation()
	other.Candidates = []activities.DisruptionCandidate{{NodeClaimName: "default-cccc", NodeName: "ip-10-0-0-3", NodePool: "default"}}
	drifted := consolidation()
	drifted.Reason = modeldisruption.ReasonDrifted
	split := consolidation()
	split.Replacements = append(slices.Clone(split.Replacements), split.Replacements[0])

	cases := []struct {
		name  string
		cmd   activities.DisruptionCommand
		fresh []activities.DisruptionCommand
		// why is a substring of the refusal ("" when it holds); want the
		// offerings launched when it holds.
		why  string
		want []string
	}{
		{name: "a delete decided again holds", cmd: deletion(), fresh: []activities.DisruptionCommand{deletion()}},
		{
			// validation.go: "scheduling simulation produced new results".
			// Before changeReplacementsStillFit this held, and the pods
			// went Pending after the drain.
			name: "a delete whose pods now need a new node does not hold", cmd: deletion(),
			fresh: []activities.DisruptionCommand{consolidation()}, why: "now need 1 new node(s)",
		},
		{
			name: "a replace decided again launches what it decided", cmd: consolidation(),
			fresh: []activities.DisruptionCommand{consolidation()},
			want:  []string{"m5.large/us-east-1a/spot m5.large/us-east-1b/spot m5.xlarge/us-east-1a/on-demand"},
		},
		{
			// Unlike validation.go ("we were expecting a new node but
			// don't need it"): the pods still fit, see freshHolds.
			name: "a replace whose pods now fit without a new node still holds", cmd: consolidation(),
			fresh: []activities.DisruptionCommand{deletion()},
			want:  []string{"m5.large/us-east-1a/spot m5.large/us-east-1b/spot m5.xlarge/us-east-1a/on-demand"},
		},
		{
			name: "a replace whose pods now need two new nodes does not hold", cmd: consolidation(),
			fresh: []activities.DisruptionCommand{split}, why: "now need 2 new nodes, not one",
		},
		{
			// A fresh split partitions the pods anew (other types, other
			// counts): the command's nodes are not matched one by one.
			name: "a split holds whatever the fresh split launches", cmd: split,
			fresh: []activities.DisruptionCommand{withOptions(consolidation(), xlarge)},
			want: []string{"m5.large/us-east-1a/spot m5.large/us-east-1b/spot m5.xlarge/us-east-1a/on-demand",
				"m5.large/us-east-1a/spot m5.large/us-east-1b/spot m5.xlarge/us-east-1a/on-demand"},
		},
		{
			// The pods grew: the small type no longer fits, the larger does.
			name: "a replacement keeps only the offerings still offered", cmd: consolidation(),
			fresh: []activities.DisruptionCommand{withOptions(consolidation(), xlarge, instanceOption("m5.2xlarge", onDemandA))},
			want:  []string{"m5.xlarge/us-east-1a/on-demand"},
		},
		{
			// A volume (or spread) now holds the pods in us-east-1b.
			name: "a replacement keeps only the zones still offered", cmd: consolidation(),
			fresh: []activities.DisruptionCommand{withOptions(consolidation(), instanceOption("m5.large", spotB))},
			want:  []string{"m5.large/us-east-1b/spot"},
		},
		{
			// Unlike validation.go ("cheaper instance types not
			// available"): the fresh replacement passed the same rules.
			name: "a replacement none of whose types is still offered launches the fresh one", cmd: withOptions(consolidation(), large),
			fresh: []activities.DisruptionCommand{withOptions(consolidation(), xlarge)},
			want:  []string{"m5.xlarge/us-east-1a/on-demand"},
		},
		{
			name: "a candidate no longer taken does not hold", cmd: consolidation(),
			fresh: []activities.DisruptionCommand{other}, why: "default-aaaa is not Underutilized any more",
		},
		{
			name: "a candidate taken for another reason does not hold", cmd: consolidation(),
			fresh: []activities.DisruptionCommand{drifted}, why: "is not Underutilized any more",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			narrowed, why := freshHolds(tc.cmd, tc.fresh)
			if tc.why == "" {
				if why != "" {
					t.Fatalf("refused (%s), want it to hold", why)
				}
				if got := offeringsOf(narrowed); !slices.Equal(got, tc.want) {
					t.Errorf("launches %q, want %q", got, tc.want)
				}
				return
			}
			if !strings.Contains(why, tc.why) {
				t.Fatalf("why %q, want it to contain %q", why, tc.why)
			}
		})
	}
}

// TestValidatedCommandLaunchesWhatStillFits: the fresh decision offers
// only the larger type now; the command launches its replacement with
// that type alone, and says so in its decisions. A delete whose pods now
// need a new node is invalidated instead of draining.
func TestValidatedCommandLaunchesWhatStillFits(t *testing.T) {
	t.Run("narrowed", func(t *testing.T) {
		h := newHarness(t, testCommandID)
		cmd := consolidation()
		fresh := withOptions(consolidation(), instanceOption("m5.xlarge", offering("us-east-1a", activities.CapacityTypeOnDemand, 0.192)))
		commandWorld{decision: []activities.DisruptionCommand{fresh}}.register(h)
		if got := launchedOfferings(t, h, cmd, false); !slices.Equal(got, []string{"m5.xlarge/us-east-1a/on-demand"}) {
			t.Errorf("launched with %q, want the offering that still fits", got)
		}
	})
	t.Run("a delete that now needs a new node", func(t *testing.T) {
		h := newHarness(t, testCommandID)
		commandWorld{decision: []activities.DisruptionCommand{consolidation()}}.register(h)
		sent := captureSignals(h)
		outcome := runCommand(t, h, deletion())
		if outcome.Result != CommandInvalidated || !strings.Contains(outcome.Detail, "now need 1 new node(s)") {
			t.Fatalf("outcome %+v, want Invalidated: the pods now need a new node", outcome)
		}
		if n := len(sent.named(SignalDisruptionCommit)); n != 0 {
			t.Errorf("%d candidate(s) committed to drain", n)
		}
	})
}

// TestAdmittedCommandLaunchesTheAdmissionsReplacements: an admission whose fresh decision
// offers fewer offerings answers with the narrowed replacements, and the
// command launches those.
func TestAdmittedCommandLaunchesTheAdmissionsReplacements(t *testing.T) {
	h := newHarness(t, testCommandID)
	cmd := consolidation()
	narrowed := withOptions(cmd, instanceOption("m5.large", offering("us-east-1b", activities.CapacityTypeSpot, 0.05))).Replacements
	commandWorld{}.register(h)
	admissionWorld(h, activities.AdmitCommandResponse{Admitted: true, Replacements: narrowed})
	if got := launchedOfferings(t, h, cmd, true); !slices.Equal(got, []string{"m5.large/us-east-1b/spot"}) {
		t.Errorf("launched with %q, want the admission's narrowed offerings", got)
	}
}

// TestAdmissionAnswersWithTheNarrowedReplacements: the disruption
// workflow admits a command whose fresh decision offers fewer offerings,
// and answers with its replacements narrowed to them.
func TestAdmissionAnswersWithTheNarrowedReplacements(t *testing.T) {
	xlarge := instanceOption("m5.xlarge", offering("us-east-1a", activities.CapacityTypeOnDemand, 0.192))
	answer := admitOnce(t, activities.ComputeCommandsResponse{Commands: []activities.DisruptionCommand{withOptions(consolidation(), xlarge)},
		Budgets: []activities.DisruptionBudget{{NodePool: "default", Allowed: map[modeldisruption.Reason]int{modeldisruption.ReasonUnderutilized: 5}}}})
	if !answer.Admitted {
		t.Fatalf("admission answered %+v, want admitted", answer)
	}
	if got := offeringsOf(answer.Replacements); !slices.Equal(got, []string{"m5.xlarge/us-east-1a/on-demand"}) {
		t.Errorf("admission's replacements %q, want the command's narrowed to the offering that still fits", got)
	}
}

// launchedOfferings runs cmd to success (its replacement Ready at 1 min,
// its candidates gone at 2 and 3 min; admission: it asks to be admitted)
// and returns the offerings its one replacement was launched with.
func launchedOfferings(t *testing.T, h *harness, cmd activities.DisruptionCommand, admission bool) []string {
	t.Helper()
	captureSignals(h)
	nodeEvent(h, time.Minute, NodeClaimName("default", testCommandID, 0, 0), NodeEventReady)
	nodeEvent(h, 2*time.Minute, "default-aaaa", NodeEventTerminated)
	nodeEvent(h, 3*time.Minute, "default-bbbb", NodeEventTerminated)
	if outcome := executeCommand(t, h, cmd, admission); outcome.Result != CommandSucceeded {
		t.Fatalf("outcome %+v, want Succeeded", outcome)
	}
	starts := h.rec.calls(activities.StartNodeWorkflowsActivity)
	if len(starts) != 1 {
		t.Fatalf("replacements started %d time(s), want once", len(starts))
	}
	return offeringsOf([]activities.NodeLaunchSpec{starts[0].(*activities.StartNodeWorkflowsRequest).Nodes[0].Spec})
}
