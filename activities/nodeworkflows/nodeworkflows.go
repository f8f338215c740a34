// Package nodeworkflows owns the StartNodeWorkflows activity: it starts one
// node lifecycle workflow per planned node through the Temporal client, with
// the node's pool and its Launching phase as search attributes and its
// launch reason in the memo from the first moment, so `starter nodes` and
// the Temporal UI show it before its first workflow task runs.
//
// Starting is idempotent: an id that is already in use (running or closed)
// is never started again, so a retried activity or a retried batch that
// derived the same node claim names never doubles a launch. The package only
// starts workflows; it does not signal, query or terminate them, and it
// depends on package workflows only for the names workflows and the UI
// agree on (search attributes, phase, memo keys).
package nodeworkflows

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/workflows"
)

// InvalidStartErrorType fails a StartNodeWorkflows request that can never
// succeed (a missing workflow type or task queue, an unusable launch spec).
// Not retryable: the same request would fail again.
const InvalidStartErrorType = "InvalidNodeWorkflowStart"

// IsInvalidStart reports whether err is an InvalidStartErrorType error.
func IsInvalidStart(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == InvalidStartErrorType
}

// Starter implements the StartNodeWorkflows activity. Safe for concurrent
// use.
type Starter struct {
	client client.Client
	log    *zap.Logger
}

// New returns a Starter that starts workflows with c (in c's namespace).
// A nil logger logs nothing.
func New(c client.Client, logger *zap.Logger) (*Starter, error) {
	if c == nil {
		return nil, errors.New("node workflow starter: Temporal client is nil")
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Starter{client: c, log: logger.Named("nodeworkflows")}, nil
}

// maxConcurrentStarts bounds the starts one StartNodeWorkflows call has in
// flight: a batch of 50 nodes starts in a few round trips instead of 100
// sequential ones, without flooding the frontend.
const maxConcurrentStarts = 16

// StartNodeWorkflows starts one workflow of req.WorkflowType on
// req.TaskQueue per entry, up to maxConcurrentStarts at a time, with the
// entry's spec as its only argument; Started and AlreadyExisted list the ids
// in request order. An id already in use, by a running or a closed
// workflow, is reported in AlreadyExisted and not started: it is looked up
// first, and the start itself uses WorkflowIDConflictPolicy USE_EXISTING and
// WorkflowIDReusePolicy REJECT_DUPLICATE, so even a start racing another
// worker's never creates a second run. (In that race both workers may report
// the id as Started; the workflows treat both outcomes alike.) An error
// returns the first failure; any entry may have started by then, and a
// retry reports those as AlreadyExisted.
func (s *Starter) StartNodeWorkflows(ctx context.Context, req activities.StartNodeWorkflowsRequest) (activities.StartNodeWorkflowsResponse, error) {
	var resp activities.StartNodeWorkflowsResponse
	if err := validateRequest(req); err != nil {
		return resp, err
	}
	existed := make([]bool, len(req.Nodes))
	group, groupCtx := errgroup.WithContext(ctx)
	group.SetLimit(maxConcurrentStarts)
	for i, node := range req.Nodes {
		group.Go(func() error {
			var err error
			existed[i], err = s.startUnlessExists(groupCtx, req, node)
			return err
		})
	}
	if err := group.Wait(); err != nil {
		return resp, err
	}
	for i, node := range req.Nodes {
		if existed[i] {
			s.log.Debug("Node workflow already exists", zap.String("workflowID", node.WorkflowID))
			resp.AlreadyExisted = append(resp.AlreadyExisted, node.WorkflowID)
			continue
		}
		s.log.Info("Started node workflow", zap.String("workflowID", node.WorkflowID),
			zap.String("nodePool", node.Spec.NodePool), zap.Int("pods", len(node.Spec.PodKeys)))
		resp.Started = append(resp.Started, node.WorkflowID)
	}
	return resp, nil
}

// startUnlessExists starts node's workflow unless its id is in use; existed
// tells which.
func (s *Starter) startUnlessExists(ctx context.Context, req activities.StartNodeWorkflowsRequest, node activities.NodeWorkflowStart) (existed bool, err error) {
	existed, err = s.exists(ctx, node.WorkflowID)
	if err != nil || existed {
		return existed, err
	}
	return s.start(ctx, req, node)
}

func validateRequest(req activities.StartNodeWorkflowsRequest) error {
	invalid := func(format string, args ...any) error {
		return temporal.NewNonRetryableApplicationError("start node workflows: "+fmt.Sprintf(format, args...), InvalidStartErrorType, nil)
	}
	switch {
	case req.WorkflowType == "":
		return invalid("workflowType is empty")
	case req.TaskQueue == "":
		return invalid("taskQueue is empty")
	}
	seen := map[string]bool{}
	for i, node := range req.Nodes {
		switch {
		case node.WorkflowID == "":
			return invalid("nodes[%d].workflowID is empty", i)
		case seen[node.WorkflowID]:
			return invalid("nodes[%d].workflowID %q is repeated", i, node.WorkflowID)
		}
		seen[node.WorkflowID] = true
		if err := node.Spec.Validate(); err != nil {
			return invalid("nodes[%d].spec: %v", i, err)
		}
	}
	return nil
}

// exists reports whether any run (open or closed) has the workflow id.
func (s *Starter) exists(ctx context.Context, workflowID string) (bool, error) {
	_, err := s.client.DescribeWorkflowExecution(ctx, workflowID, "")
	var notFound *serviceerror.NotFound
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &notFound):
		return false, nil
	}
	return false, fmt.Errorf("describe workflow %s: %w", workflowID, err)
}

// start starts one node workflow; existed is true when the server refused
// because the id is taken.
func (s *Starter) start(ctx context.Context, req activities.StartNodeWorkflowsRequest, node activities.NodeWorkflowStart) (existed bool, err error) {
	spec := node.Spec
	options := client.StartWorkflowOptions{
		ID:                                       node.WorkflowID,
		TaskQueue:                                req.TaskQueue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.NodePoolAttribute.ValueSet(spec.NodePool),
			workflows.PhaseAttribute.ValueSet(string(workflows.PhaseLaunching)),
		),
		Memo:          map[string]any{workflows.MemoLaunchReason: spec.LaunchReason},
		StaticSummary: fmt.Sprintf("Node %s of NodePool %s for %d pod(s)", spec.NodeClaimName, spec.NodePool, len(spec.PodKeys)),
	}
	_, err = s.client.ExecuteWorkflow(ctx, options, req.WorkflowType, spec)
	var alreadyStarted *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &alreadyStarted):
		return true, nil
	}
	return false, fmt.Errorf("start workflow %s: %w", node.WorkflowID, err)
}
