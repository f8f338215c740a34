package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/millwright/millwright/worker/connect"
	"github.com/millwright/millwright/workflows"
)

// DrainRejectedError: the node workflow's validator refused the drain (the
// node is already leaving, or the request is malformed).
type DrainRejectedError struct {
	WorkflowID string
	Message    string
}

func (e *DrainRejectedError) Error() string {
	return fmt.Sprintf("drain rejected by %s: %s", e.WorkflowID, e.Message)
}

// IsDrainRejected reports whether err is (or wraps) a DrainRejectedError.
func IsDrainRejected(err error) bool {
	var target *DrainRejectedError
	return errors.As(err, &target)
}

// NodeClosedError: the node workflow has already ended, so nothing can
// drain it.
type NodeClosedError struct {
	WorkflowID string
	Status     string
}

func (e *NodeClosedError) Error() string {
	return fmt.Sprintf("node workflow %s has already ended (%s): the node is gone", e.WorkflowID, e.Status)
}

// IsNodeClosed reports whether err is (or wraps) a NodeClosedError.
func IsNodeClosed(err error) bool {
	var target *NodeClosedError
	return errors.As(err, &target)
}

// drainOptions are the flags of `starter drain`.
type drainOptions struct {
	connection connect.Temporal
	cluster    string
	reason     string
	requester  string
	timeout    time.Duration
}

// newDrainCommand builds `starter drain NODE --reason TEXT`.
func newDrainCommand() *cobra.Command {
	var options drainOptions
	command := &cobra.Command{
		Use:   "drain NODE --reason TEXT",
		Short: "Drain and terminate a node through its workflow's drain update",
		Long: `Asks the node's workflow to drain the Node (evicting its pods, respecting
PodDisruptionBudgets) and terminate its instance. The request is a workflow
update, so the answer says whether the workflow accepted it; it is refused when
the node is already on its way out. Against a server or workflow without
update support the drain signal is sent instead, which cannot answer.

NODE is a node claim name, a Node name, an EC2 instance id, or a workflow id.`,
		Args: cobra.ExactArgs(1),
		RunE: func(command *cobra.Command, args []string) error {
			return runDrain(command.Context(), command.OutOrStdout(), args[0], options)
		},
	}
	options.connection.BindFlags(command.Flags())
	bindClusterFlag(command, &options.cluster, "cluster the node belongs to (needed to find a node claim name quickly)")
	command.Flags().StringVar(&options.reason, "reason", "", "why the node is drained; recorded in its history (required)")
	command.Flags().StringVar(&options.requester, "requester", defaultRequester(), "who asks; recorded in the node's history")
	command.Flags().DurationVar(&options.timeout, "timeout", defaultOperateTimeout, "give up waiting for the workflow's answer after this long")
	return command
}

// defaultRequester names the person at the keyboard.
func defaultRequester() string {
	name := os.Getenv("USER")
	if current, err := user.Current(); err == nil && current.Username != "" {
		name = current.Username
	}
	if name == "" {
		return "starter"
	}
	return name + " (starter)"
}

func runDrain(ctx context.Context, out io.Writer, name string, options drainOptions) error {
	if strings.TrimSpace(options.reason) == "" {
		return errors.New("--reason: required (it is recorded in the node's history)")
	}
	ctx, cancel := operateContext(ctx, options.timeout)
	defer cancel()
	c, err := options.connection.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()

	row, err := resolveNode(ctx, c, options.connection, options.cluster, name)
	if err != nil {
		return err
	}
	if !row.running() {
		return &NodeClosedError{WorkflowID: row.WorkflowID, Status: closedStatus(row)}
	}
	request := workflows.DrainRequest{Reason: options.reason, Requester: options.requester}
	result, err := drainByUpdate(ctx, c, row, request)
	switch {
	case err == nil:
		fmt.Fprintf(out, "drain of %s accepted (node was %s); follow it with `starter describe %s`\n", row.NodeClaim, result.Phase, row.WorkflowID)
		return nil
	case isUpdateUnsupported(err):
		if signalErr := c.SignalWorkflow(ctx, row.WorkflowID, "", workflows.SignalDrain, request); signalErr != nil {
			return temporalError("sending the drain signal to "+row.WorkflowID, signalErr, options.connection)
		}
		fmt.Fprintf(out, "drain update not supported (%v); sent the drain signal to %s instead: it cannot answer, "+
			"so check `starter describe %s` to see whether it was applied\n", err, row.WorkflowID, row.WorkflowID)
		return nil
	case isWorkflowCompleted(err):
		return &NodeClosedError{WorkflowID: row.WorkflowID, Status: "completed while the drain was sent"}
	case IsDrainRejected(err):
		return err
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, new(*serviceerror.DeadlineExceeded)):
		return fmt.Errorf("drain of %s: no answer within %s; is a Millwright worker polling task queue %q? %w", row.WorkflowID, options.timeout, row.TaskQueue, err)
	default:
		return temporalError("drain of "+row.WorkflowID, err, options.connection)
	}
}

// drainByUpdate sends the drain update and waits for its result. The
// validator's refusal comes back as an application error: it becomes a
// DrainRejectedError carrying its message.
func drainByUpdate(ctx context.Context, c client.Client, row nodeRow, request workflows.DrainRequest) (workflows.DrainResult, error) {
	handle, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   row.WorkflowID,
		UpdateName:   workflows.UpdateDrain,
		Args:         []any{request},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var result workflows.DrainResult
	if err == nil {
		err = handle.Get(ctx, &result)
	}
	var application *temporal.ApplicationError
	if err != nil && errors.As(err, &application) && !isUpdateUnsupported(err) {
		return result, &DrainRejectedError{WorkflowID: row.WorkflowID, Message: application.Message()}
	}
	if err == nil && !result.Accepted {
		return result, &DrainRejectedError{WorkflowID: row.WorkflowID, Message: "the workflow answered without accepting"}
	}
	return result, err
}

// isUpdateUnsupported recognises the answers meaning "updates cannot be
// used here", the only case that falls back to the signal: a server without
// the update API (Unimplemented), a namespace with updates turned off
// (PermissionDenied naming updates), or a workflow run by an older worker
// without the drain update handler (the SDK rejects an unknown update).
func isUpdateUnsupported(err error) bool {
	var unimplemented *serviceerror.Unimplemented
	if errors.As(err, &unimplemented) {
		return true
	}
	var denied *serviceerror.PermissionDenied
	if errors.As(err, &denied) && strings.Contains(strings.ToLower(denied.Error()), "update") {
		return true
	}
	return strings.Contains(err.Error(), "unknown update "+workflows.UpdateDrain)
}

// isWorkflowCompleted recognises an update sent to a workflow that closed
// after it was resolved.
func isWorkflowCompleted(err error) bool {
	var notFound *serviceerror.NotFound
	return errors.As(err, &notFound) || strings.Contains(err.Error(), "workflow execution already completed")
}

func closedStatus(row nodeRow) string {
	status := strings.ToLower(strings.TrimPrefix(row.Status, "WORKFLOW_EXECUTION_STATUS_"))
	if row.Phase != "" {
		status += ", phase " + row.Phase
	}
	if row.TerminationReason != "" {
		status += ", reason " + row.TerminationReason
	}
	return status
}
