package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/millwright/millwright/worker/connect"
	"github.com/millwright/millwright/worker/run"
	"github.com/millwright/millwright/workflows"
)

// startReason is the reconcile reason the provisioner records for a start
// from the CLI.
const startReason = "started by starter"

// startOptions are the flags of `starter start`.
type startOptions struct {
	connection connect.Temporal
	cluster    string
	taskQueue  string
	batchIdle  time.Duration
	batchMax   time.Duration
	timeout    time.Duration
}

// newStartCommand builds `starter start`: brings up a cluster's
// provisioning workflow. Workers also start it on their first signal; this
// is for starting it ahead of any pending pod (so minNodes are honoured at
// once) and for checking it runs.
func newStartCommand() *cobra.Command {
	var options startOptions
	command := &cobra.Command{
		Use:   "start --cluster-name NAME",
		Short: "Start the cluster's provisioning workflow (or report it already runs) and ask it to reconcile",
		Long: `Sends the provisioning workflow of the cluster a reconcile signal with
SignalWithStart: a running provisioner just plans once more; a missing one is
started first with the batch windows given here. Safe to run again.`,
		Args: cobra.NoArgs,
		RunE: func(command *cobra.Command, _ []string) error {
			return runStart(command.Context(), command.OutOrStdout(), options)
		},
	}
	options.connection.BindFlags(command.Flags())
	bindClusterFlag(command, &options.cluster, "name of the cluster to provision for (required)")
	command.Flags().StringVar(&options.taskQueue, "task-queue", connect.EnvOr("MILLWRIGHT_TASK_QUEUE", run.DefaultTaskQueue), "task queue Millwright's workers poll [$MILLWRIGHT_TASK_QUEUE]")
	command.Flags().DurationVar(&options.batchIdle, "batch-idle-duration", workflows.DefaultIdleWindow, "close a batch of pending pods after this long without new ones (new provisioner only)")
	command.Flags().DurationVar(&options.batchMax, "batch-max-duration", workflows.DefaultMaxWindow, "close a batch of pending pods after this long in all (new provisioner only)")
	command.Flags().DurationVar(&options.timeout, "timeout", defaultOperateTimeout, "give up after this long")
	return command
}

func runStart(ctx context.Context, out io.Writer, options startOptions) error {
	if options.cluster == "" {
		return errors.New("--cluster-name: required (or set MILLWRIGHT_CLUSTER_NAME)")
	}
	if options.taskQueue == "" {
		return errors.New("--task-queue: must not be empty")
	}
	input := workflows.ProvisionerInput{Cluster: options.cluster, IdleWindow: options.batchIdle, MaxWindow: options.batchMax}
	if err := input.Validate(); err != nil {
		return fmt.Errorf("--batch-idle-duration/--batch-max-duration: %w", err)
	}
	ctx, cancel := operateContext(ctx, options.timeout)
	defer cancel()
	c, err := options.connection.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()

	id := workflows.ProvisionerWorkflowID(options.cluster)
	before, err := runningExecution(ctx, c, id)
	if err != nil {
		return temporalError("looking up workflow "+id, err, options.connection)
	}
	started, err := c.SignalWithStartWorkflow(ctx, id, workflows.SignalReconcile, workflows.ReconcileRequest{Reason: startReason},
		client.StartWorkflowOptions{ID: id, TaskQueue: options.taskQueue}, workflows.ProvisionerWorkflowType, input)
	if err != nil {
		return temporalError("starting provisioner "+id, err, options.connection)
	}
	// SignalWithStart only starts when no run is open; the same run id as
	// before means the signal went to the provisioner already running.
	if before != nil && before.runID == started.GetRunID() {
		fmt.Fprintf(out, "provisioner %s already running (run %s, task queue %s); asked it to reconcile\n", id, before.runID, before.taskQueue)
		if before.taskQueue != options.taskQueue {
			fmt.Fprintf(out, "note: it runs on task queue %s, not %s; its settings are unchanged\n", before.taskQueue, options.taskQueue)
		}
		return nil
	}
	fmt.Fprintf(out, "provisioner %s started (run %s) on task queue %s, namespace %s, Temporal %s\n",
		id, started.GetRunID(), options.taskQueue, options.connection.Namespace, options.connection.Address)
	return nil
}

type openExecution struct {
	runID     string
	taskQueue string
}

// runningExecution describes the open run of id, or nil when there is none.
func runningExecution(ctx context.Context, c client.Client, id string) (*openExecution, error) {
	response, err := c.DescribeWorkflowExecution(ctx, id, "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	info := response.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil, nil
	}
	return &openExecution{runID: info.GetExecution().GetRunId(), taskQueue: info.GetTaskQueue()}, nil
}
