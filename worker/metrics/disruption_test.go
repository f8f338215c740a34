package metrics

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/millwright/millwright/activities"
	modeldisruption "github.com/millwright/millwright/model/disruption"
)

// disruptionAnswer answers ComputeCommands and MarkDisruption.
type disruptionAnswer struct {
	scriptedActivities
	compute activities.ComputeCommandsResponse
	mark    activities.MarkDisruptionResponse
}

func (d *disruptionAnswer) ComputeCommands(context.Context, activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
	return d.compute, nil
}

func (d *disruptionAnswer) ReserveNodes(context.Context, activities.ReserveNodesRequest) (activities.ReserveNodesResponse, error) {
	return activities.ReserveNodesResponse{}, nil
}

func (d *disruptionAnswer) AdmitCommand(context.Context, activities.AdmitCommandRequest) (activities.AdmitCommandResponse, error) {
	return activities.AdmitCommandResponse{Admitted: true}, nil
}

func (d *disruptionAnswer) MarkOutliers(_ context.Context, req activities.MarkOutliersRequest) (activities.MarkOutliersResponse, error) {
	return activities.MarkOutliersResponse{Marked: req.NodeNames}, nil
}

func (d *disruptionAnswer) MarkDisruption(context.Context, activities.MarkDisruptionRequest) (activities.MarkDisruptionResponse, error) {
	return d.mark, nil
}

// TestDisruptionDecisionsEligibleNodesAndFailures: a pass counts its
// commands by decision, reason and consolidation type and sets the eligible
// nodes; a command's validation counts nothing; a rollback that untainted
// its candidates is a failure.
func TestDisruptionDecisionsEligibleNodesAndFailures(t *testing.T) {
	m, _ := newTestMetrics(t)
	inner := &disruptionAnswer{scriptedActivities: *newScripted()}
	inner.compute = activities.ComputeCommandsResponse{
		Commands: []activities.DisruptionCommand{
			{Reason: modeldisruption.ReasonEmpty, Kind: modeldisruption.KindDelete, Candidates: make([]activities.DisruptionCandidate, 3)},
			{Reason: modeldisruption.ReasonUnderutilized, Kind: modeldisruption.KindReplace, Candidates: make([]activities.DisruptionCandidate, 2)},
			{Reason: modeldisruption.ReasonUnderutilized, Kind: modeldisruption.KindDelete, Candidates: make([]activities.DisruptionCandidate, 1)},
		},
		Verdicts: []activities.DisruptionVerdict{{Candidate: true}, {Candidate: true, Drifted: "AMI ami-a → ami-b"}, {Candidate: false}},
	}
	instrumented := Instrument(inner, m, inner.clock)
	for _, validation := range []bool{false, true} {
		if _, err := instrumented.ComputeCommands(context.Background(), activities.ComputeCommandsRequest{Validation: validation}); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []struct {
		decision, reason, kind string
	}{{"delete", "empty", "empty"}, {"replace", "underutilized", "multi"}, {"delete", "underutilized", "single"}} {
		if got := testutil.ToFloat64(m.disruptionDecisions.WithLabelValues(want.decision, want.reason, want.kind)); got != 1 {
			t.Errorf("decisions_total%v = %v, want 1 (the validation not counted)", want, got)
		}
	}
	if got := testutil.ToFloat64(m.disruptionEligible.WithLabelValues("underutilized")); got != 2 {
		t.Errorf("eligible_nodes{underutilized} = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.disruptionEligible.WithLabelValues("drifted")); got != 1 {
		t.Errorf("eligible_nodes{drifted} = %v, want 1", got)
	}

	commands := InstrumentCommands(inner, m)
	inner.mark = activities.MarkDisruptionResponse{Changed: []string{"n1"}}
	rollback := activities.MarkDisruptionRequest{NodeNames: []string{"n1", "n2"}, Reason: "Underutilized", Replacing: true}
	if _, err := commands.MarkDisruption(context.Background(), rollback); err != nil {
		t.Fatal(err)
	}
	inner.mark = activities.MarkDisruptionResponse{} // the retry finds nothing to untaint
	if _, err := commands.MarkDisruption(context.Background(), rollback); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.disruptionFailures.WithLabelValues("replace", "underutilized", "multi")); got != 1 {
		t.Errorf("queue_failures_total = %v, want 1", got)
	}
}
