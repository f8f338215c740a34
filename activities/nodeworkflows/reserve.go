package nodeworkflows

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/workflows"
)

// ReserveNodes sends workflows.UpdateReserve to each node workflow of req, in
// order, and waits for each answer. A validator's rejection, or a node
// workflow that is not running, is a refusal; other errors end the call
// (the activity's retry asks again: the update id is the command's, so a
// node that accepted answers the same).
func (s *Starter) ReserveNodes(ctx context.Context, req activities.ReserveNodesRequest) (activities.ReserveNodesResponse, error) {
	var resp activities.ReserveNodesResponse
	if req.CommandID == "" {
		return resp, temporal.NewNonRetryableApplicationError("reserve nodes: commandID is empty", InvalidStartErrorType, nil)
	}
	for _, id := range req.WorkflowIDs {
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
			resp.Refused = append(resp.Refused, activities.NodeRefusal{WorkflowID: id, Why: why})
			continue
		}
		if err != nil {
			return resp, fmt.Errorf("reserve %s for %s: %w", id, req.CommandID, err)
		}
		resp.Accepted = append(resp.Accepted, id)
	}
	return resp, nil
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
