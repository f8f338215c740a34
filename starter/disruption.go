package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/worker/connect"
	"github.com/millwright/millwright/workflows"
)

// disruptionOptions are the flags of `starter disruption …`.
type disruptionOptions struct {
	connection connect.Temporal
	cluster    string
	reason     string
	requester  string
	timeout    time.Duration
}

// newDisruptionCommand builds `starter disruption plan|pause|resume`.
func newDisruptionCommand() *cobra.Command {
	var options disruptionOptions
	command := &cobra.Command{
		Use:   "disruption plan|pause|resume",
		Short: "Show what the cluster's disruption workflow would do, or pause and resume it",
	}
	command.PersistentFlags().StringVar(&options.cluster, "cluster-name", os.Getenv("MILLWRIGHT_CLUSTER_NAME"), "the cluster whose disruption workflow to address (required) [$MILLWRIGHT_CLUSTER_NAME]")
	command.PersistentFlags().DurationVar(&options.timeout, "timeout", defaultOperateTimeout, "give up waiting for the workflow's answer after this long")
	options.connection.BindFlags(command.PersistentFlags())
	plan := &cobra.Command{
		Use:   "plan",
		Short: "Dry run: the commands the last pass decided, the running commands, and every node's verdict",
		Args:  cobra.NoArgs,
		RunE: func(command *cobra.Command, _ []string) error {
			return runDisruptionPlan(command.Context(), command.OutOrStdout(), options)
		},
	}
	pause := &cobra.Command{
		Use:   "pause --reason TEXT",
		Short: "Start no new disruption command (running ones finish)",
		Args:  cobra.NoArgs,
		RunE: func(command *cobra.Command, _ []string) error {
			return runDisruptionPause(command.Context(), command.OutOrStdout(), options, true)
		},
	}
	pause.Flags().StringVar(&options.reason, "reason", "", "why; shown by `starter disruption plan`")
	resume := &cobra.Command{
		Use:   "resume",
		Short: "Resume disruption",
		Args:  cobra.NoArgs,
		RunE: func(command *cobra.Command, _ []string) error {
			return runDisruptionPause(command.Context(), command.OutOrStdout(), options, false)
		},
	}
	for _, sub := range []*cobra.Command{pause, resume} {
		sub.Flags().StringVar(&options.requester, "requester", defaultRequester(), "who asks")
	}
	command.AddCommand(plan, pause, resume)
	return command
}

// dialDisruption checks the flags and connects; the caller closes c and
// calls cancel.
func dialDisruption(ctx context.Context, options disruptionOptions) (context.Context, context.CancelFunc, client.Client, string, error) {
	if options.cluster == "" {
		return nil, nil, nil, "", errors.New("--cluster-name: required (or set $MILLWRIGHT_CLUSTER_NAME)")
	}
	ctx, cancel := operateContext(ctx, options.timeout)
	c, err := options.connection.Dial(ctx)
	if err != nil {
		cancel()
		return nil, nil, nil, "", err
	}
	return ctx, cancel, c, workflows.DisruptionWorkflowID(options.cluster), nil
}

func runDisruptionPlan(ctx context.Context, out io.Writer, options disruptionOptions) error {
	ctx, cancel, c, id, err := dialDisruption(ctx, options)
	if err != nil {
		return err
	}
	defer cancel()
	defer c.Close()
	value, err := c.QueryWorkflow(ctx, id, "", workflows.QueryDisruptionState)
	if err != nil {
		return temporalError("querying "+id+" (is a worker running for cluster "+options.cluster+"?)", err, options.connection)
	}
	var view workflows.DisruptionStateView
	if err := value.Get(&view); err != nil {
		return fmt.Errorf("decoding %s's state: %w", id, err)
	}
	printDisruptionPlan(out, view)
	return nil
}

func printDisruptionPlan(out io.Writer, view workflows.DisruptionStateView) {
	if view.Paused {
		fmt.Fprintf(out, "Disruption is PAUSED by %s: %s\n", view.PausedBy, view.PausedReason)
	}
	if pass := view.LastPass; pass != nil {
		fmt.Fprintf(out, "Last pass %s: %d node(s) considered, %d candidate(s), %d command(s)", pass.At.UTC().Format(time.RFC3339), pass.NodesConsidered, pass.Candidates, pass.Commands)
		if pass.Error != "" {
			fmt.Fprintf(out, ", error: %s", pass.Error)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out, "\nCommands that would run now:")
	if len(view.Decided) == 0 {
		fmt.Fprintln(out, "  (none)")
	}
	for _, command := range view.Decided {
		var candidates []string
		for _, candidate := range command.Candidates {
			candidates = append(candidates, candidate.NodeName)
		}
		fmt.Fprintf(out, "  %s %s [%s]: %s\n", command.Reason, command.Kind, strings.Join(candidates, " "), command.Message)
	}
	fmt.Fprintln(out, "\nRunning commands:")
	if len(view.Running) == 0 {
		fmt.Fprintln(out, "  (none)")
	}
	for _, running := range view.Running {
		stage := ""
		switch {
		case running.AdmitsAtCommit && running.Admitted:
			stage = ", admitted"
		case running.AdmitsAtCommit:
			stage = ", validating"
		}
		fmt.Fprintf(out, "  %s (%s%s, since %s): %s\n", running.ID, running.Reason, stage, running.Started.UTC().Format(time.RFC3339), running.Message)
	}
	if len(view.Budgets) > 0 {
		fmt.Fprintln(out, "\nBudgets (disruptions the last pass allowed new decisions; admitted commands' nodes are checked at admission):")
		for _, budget := range view.Budgets {
			fmt.Fprintf(out, "  %s: %d node(s), %d disrupting, allowed %v\n", budget.NodePool, budget.Nodes, budget.Disrupting, budget.Allowed)
		}
	}
	fmt.Fprintln(out, "\nNodes:")
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  NODE\tPOOL\tCANDIDATE\tEVENT\tWHY")
	for _, verdict := range view.Verdicts {
		why := verdict.Message
		if verdict.Outlier {
			why = strings.TrimSuffix("outlier, consolidated first and kept free of moved pods ("+activities.OutlierTaintKey+":PreferNoSchedule); "+why, "; ")
		}
		fmt.Fprintf(w, "  %s\t%s\t%v\t%s\t%s\n", verdict.NodeName, verdict.NodePool, verdict.Candidate, verdict.Event, why)
	}
	_ = w.Flush()
}

func runDisruptionPause(ctx context.Context, out io.Writer, options disruptionOptions, paused bool) error {
	ctx, cancel, c, id, err := dialDisruption(ctx, options)
	if err != nil {
		return err
	}
	defer cancel()
	defer c.Close()
	handle, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   id,
		UpdateName:   workflows.UpdatePauseDisruption,
		Args:         []any{workflows.PauseRequest{Paused: paused, Reason: options.reason, Requester: options.requester}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var view workflows.DisruptionStateView
	if err == nil {
		err = handle.Get(ctx, &view)
	}
	if err != nil {
		return temporalError("updating "+id, err, options.connection)
	}
	state := "resumed"
	if view.Paused {
		state = "paused"
	}
	fmt.Fprintf(out, "disruption of cluster %s is %s; %d command(s) running\n", options.cluster, state, len(view.Running))
	return nil
}
