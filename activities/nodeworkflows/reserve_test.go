package nodeworkflows

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/workflows"
)

// reservable stands in for a node workflow: it answers UpdateReserve,
// refusing (in its validator, as the node workflow does) when told to.
func reservable(ctx workflow.Context, refuse bool) error {
	reserved := false
	err := workflow.SetUpdateHandlerWithOptions(ctx, workflows.UpdateReserve,
		func(workflow.Context, workflows.ReserveRequest) (workflows.ReserveResult, error) {
			reserved = true
			return workflows.ReserveResult{Accepted: true}, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(workflow.Context, workflows.ReserveRequest) error {
			if refuse {
				return errors.New("node is already Draining")
			}
			return nil
		}})
	if err != nil {
		return err
	}
	return workflow.Await(ctx, func() bool { return reserved && workflow.AllHandlersFinished(ctx) })
}

// TestReserveNodesAnswersInOrder: the reservations go out together, and the
// answer lists the accepted and the refused (by a validator, or not running)
// in the request's order.
func TestReserveNodesAnswersInOrder(t *testing.T) {
	queue := uniqueName("reserve")
	w := worker.New(env.Client, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(reservable, workflow.RegisterOptions{Name: "reservable"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	refuse := []bool{false, true, false, false, true, false}
	var ids, wantAccepted, wantRefused []string
	for i, r := range refuse {
		id := uniqueName("node-" + string(rune('a'+i)))
		if _, err := env.Client.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: id, TaskQueue: queue}, "reservable", r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		if r {
			wantRefused = append(wantRefused, id)
		} else {
			wantAccepted = append(wantAccepted, id)
		}
	}
	gone := uniqueName("node-gone")
	ids = append(ids[:3], append([]string{gone}, ids[3:]...)...)
	wantRefused = append(wantRefused[:1], append([]string{gone}, wantRefused[1:]...)...)

	resp, err := newStarter(t).ReserveNodes(t.Context(), activities.ReserveNodesRequest{CommandID: uniqueName("disruption/c1/command"), Reason: "Empty", WorkflowIDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.Accepted, wantAccepted) {
		t.Errorf("accepted %v, want %v", resp.Accepted, wantAccepted)
	}
	var refused []string
	for _, r := range resp.Refused {
		refused = append(refused, r.WorkflowID)
		if r.WorkflowID == gone && r.Why != "node workflow is not running" || r.WorkflowID != gone && !strings.Contains(r.Why, "already Draining") {
			t.Errorf("refusal %+v", r)
		}
	}
	if !slices.Equal(refused, wantRefused) {
		t.Errorf("refused %v, want %v", refused, wantRefused)
	}
}
