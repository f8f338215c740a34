package nodeworkflows

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/workflows"
)

// ReserveNodes sends workflows.UpdateReserve to each node workflow of req,
// up to maxConcurrentStarts at a time (one after the other, a 10-node
// command waited 0.7–1.4 s for its reservations in a 5,000-pod
// scale-down), and answers in req's order. A validator's rejection, or a
// node workflow that is not running, is a refusal; other errors end the
// call (the activity's retry asks again: the update id is the command's,
// so a node that accepted answers the same).
func (s *Starter) ReserveNodes(ctx context.Context, req activities.ReserveNodesRequest) (activities.ReserveNodesResponse, error) {
	var resp activities.ReserveNodesResponse
	if req.CommandID == "" {
		return resp, temporal.NewNonRetryableApplicationError("reserve nodes: commandID is empty", InvalidStartErrorType, nil)
	}
	whys := make([]string, len(req.WorkflowIDs))
	refused := make([]bool, len(req.WorkflowIDs))
	group, groupCtx := errgroup.WithContext(ctx)
	group.SetLimit(maxConcurrentStarts)
	for i, id := range req.WorkflowIDs {
		group.Go(func() error {
			var err error
			whys[i], refused[i], err = s.reserve(groupCtx, req, id)
			return err
		})
	}
	if err := group.Wait(); err != nil {
		return resp, err
	}
	for i, id := range req.WorkflowIDs {
		if refused[i] {
			resp.Refused = append(resp.Refused, activities.NodeRefusal{WorkflowID: id, Why: whys[i]})
			continue
		}
		resp.Accepted = append(resp.Accepted, id)
	}
	return resp, nil
}

// reserve asks one node workflow to hold its node for req's command and
// says whether, and why, it refused.
func (s *Starter) reserve(ctx context.Context, req activities.ReserveNodesRequest, id string) (why string, refused bool, err error) {
	handle, err := s.client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		UpdateID:     req.CommandID + "/reserve",
		WorkflowID:   id,
		UpdateName:   workflows.UpdateReserve,
		Args:         []any{workflows.ReserveRequest{CommandID: req.CommandID, Reason: req.Reason, Message: req.Message}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var result workflows.ReserveResult
	if err == nil {
		err = handle.Get(ctx, &result)
	}
	if why, refused := refusal(err); refused {
		s.log.Info("Node workflow refused the reservation", zap.String("workflowID", id), zap.String("command", req.CommandID), zap.String("why", why))
		return why, true, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reserve %s for %s: %w", id, req.CommandID, err)
	}
	return "", false, nil
}

// refusal tells an answer (the validator rejected, the workflow is gone)
// from a failure to ask.
func refusal(err error) (string, bool) {
	var (
		appErr   *temporal.ApplicationError
		notFound *serviceerror.NotFound
	)
	switch {
	case err == nil:
		return "", false
	case errors.As(err, &appErr):
		return appErr.Error(), true
	case errors.As(err, &notFound):
		return "node workflow is not running", true
	}
	return "", false
}

// AdmitCommand sends workflows.UpdateAdmitCommand to the disruption
// workflow and waits for its answer. The update id is the command's and
// the attempt's, so a retry of this activity is answered by the same
// update; a rejection by the update's validator (the workflow runs no such
// command) is an answer, not an error.
func (s *Starter) AdmitCommand(ctx context.Context, req activities.AdmitCommandRequest) (activities.AdmitCommandResponse, error) {
	var resp activities.AdmitCommandResponse
	if req.CommandID == "" || req.DisruptionWorkflowID == "" {
		return resp, temporal.NewNonRetryableApplicationError("admit command: commandID or disruptionWorkflowID is empty", InvalidStartErrorType, nil)
	}
	handle, err := s.client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		UpdateID:     fmt.Sprintf("%s/admit/%d", req.CommandID, req.Attempt),
		WorkflowID:   req.DisruptionWorkflowID,
		UpdateName:   workflows.UpdateAdmitCommand,
		Args:         []any{req},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = handle.Get(ctx, &resp)
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		s.log.Info("Disruption workflow refused the admission", zap.String("command", req.CommandID), zap.String("why", appErr.Error()))
		return activities.AdmitCommandResponse{Why: appErr.Error()}, nil
	}
	if err != nil {
		// Not running (a worker restarts it) or unreachable: ask again.
		return resp, fmt.Errorf("admit %s: %w", req.CommandID, err)
	}
	return resp, nil
}
