package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/worker/connect"
	"github.com/millwright/millwright/workflows"
)

// NodeNotFoundError: no node workflow answers to the name given.
type NodeNotFoundError struct {
	Name  string
	Where string
}

func (e *NodeNotFoundError) Error() string {
	return fmt.Sprintf("no such node %q: no node workflow has it as node claim, Node name, instance id or workflow id (%s)", e.Name, e.Where)
}

// IsNodeNotFound reports whether err is (or wraps) a NodeNotFoundError.
func IsNodeNotFound(err error) bool {
	var target *NodeNotFoundError
	return errors.As(err, &target)
}

// AmbiguousNodeError: the name matches node workflows of several clusters
// or several live nodes.
type AmbiguousNodeError struct {
	Name        string
	WorkflowIDs []string
}

func (e *AmbiguousNodeError) Error() string {
	return fmt.Sprintf("node %q is ambiguous: it matches workflows %s; pass --cluster-name or the workflow id",
		e.Name, strings.Join(e.WorkflowIDs, ", "))
}

// IsAmbiguousNode reports whether err is (or wraps) an AmbiguousNodeError.
func IsAmbiguousNode(err error) bool {
	var target *AmbiguousNodeError
	return errors.As(err, &target)
}

// describeOptions are the flags of `starter describe`.
type describeOptions struct {
	connection connect.Temporal
	cluster    string
	output     string
	timeout    time.Duration
	clock      clock.PassiveClock
}

// newDescribeCommand builds `starter describe NODE`.
func newDescribeCommand() *cobra.Command {
	options := describeOptions{clock: clock.RealClock{}}
	command := &cobra.Command{
		Use:   "describe NODE",
		Short: "Show a node workflow's state and why it was launched (and terminated)",
		Long: `Shows one node: its phase, instance, Node, pods, pending timers and deadlines
(the workflow's "state" query), and why it exists: the pods it was launched
for, the instance types considered, the one chosen and why the others were
not, and why it is being terminated (the "history" query).

NODE is a node claim name, a Node name, an EC2 instance id, or a workflow id
(node/<cluster>/<nodeclaim>). Queries are answered by a worker, so a worker
must be polling the node workflow's task queue.`,
		Args: cobra.ExactArgs(1),
		RunE: func(command *cobra.Command, args []string) error {
			return runDescribe(command.Context(), command.OutOrStdout(), args[0], options)
		},
	}
	options.connection.BindFlags(command.Flags())
	bindClusterFlag(command, &options.cluster, "cluster the node belongs to (needed to find a node claim name quickly)")
	bindOutputFlag(command, &options.output)
	command.Flags().DurationVar(&options.timeout, "timeout", defaultOperateTimeout, "give up after this long")
	return command
}

// nodeDescription is `starter describe -o json`.
type nodeDescription struct {
	Workflow nodeRow                   `json:"workflow"`
	State    workflows.NodeStateView   `json:"state"`
	History  workflows.NodeHistoryView `json:"history"`
}

func runDescribe(ctx context.Context, out io.Writer, name string, options describeOptions) error {
	if err := checkOutputFlag(options.output); err != nil {
		return err
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
	description := nodeDescription{Workflow: row}
	if err := queryNode(ctx, c, row, workflows.QueryState, &description.State, options.connection); err != nil {
		return err
	}
	if err := queryNode(ctx, c, row, workflows.QueryHistory, &description.History, options.connection); err != nil {
		return err
	}
	if options.output == outputJSON {
		return writeJSON(out, description)
	}
	writeDescription(out, description, options.clock.Now())
	return nil
}

// queryNode runs one query. A query is answered by a worker: when none
// polls the task queue the server waits, so the context's deadline ends it
// and the error says which task queue lacks a worker.
func queryNode(ctx context.Context, c client.Client, row nodeRow, query string, into any, connection connect.Temporal) error {
	// The latest run, not the listed one: a Ready node continues as new, and
	// its closed runs only know the past.
	value, err := c.QueryWorkflow(ctx, row.WorkflowID, "", query)
	if err != nil {
		what := fmt.Sprintf("querying %q of node workflow %s", query, row.WorkflowID)
		if errors.Is(err, context.DeadlineExceeded) || errors.As(err, new(*serviceerror.DeadlineExceeded)) {
			return fmt.Errorf("%s: no answer in time; is a Millwright worker polling task queue %q? %w", what, row.TaskQueue, err)
		}
		return temporalError(what, err, connection)
	}
	if err := value.Get(into); err != nil {
		return fmt.Errorf("decoding %q of node workflow %s: %w", query, row.WorkflowID, err)
	}
	return nil
}

// resolveNode finds the node workflow NODE names: a workflow id, a node
// claim name (directly when the cluster is known), a Node name or an
// instance id (through their search attributes). Several matches are
// narrowed to the running one; otherwise they are reported.
func resolveNode(ctx context.Context, c client.Client, connection connect.Temporal, cluster, name string) (nodeRow, error) {
	if name == "" {
		return nodeRow{}, errors.New("NODE: empty")
	}
	if strings.HasPrefix(name, "node/") {
		if _, _, err := workflows.ParseNodeWorkflowID(name); err != nil {
			return nodeRow{}, err
		}
		return describeNodeWorkflow(ctx, c, connection, name, name)
	}
	if err := checkQueryValue("NODE", name); err != nil {
		return nodeRow{}, err
	}
	if cluster != "" {
		if err := checkQueryValue("--cluster-name", cluster); err != nil {
			return nodeRow{}, err
		}
		// The direct lookup is consistent; visibility may lag a fresh node.
		row, err := describeNodeWorkflow(ctx, c, connection, workflows.NodeWorkflowID(cluster, name), name)
		if err == nil {
			return row, nil
		}
		if !IsNodeNotFound(err) {
			return nodeRow{}, err
		}
	}

	byAttributes := fmt.Sprintf("WorkflowType = '%s' AND (%s = '%s' OR %s = '%s')", workflows.NodeWorkflowType,
		workflows.NodeNameAttribute.GetName(), name, workflows.InstanceIDAttribute.GetName(), name)
	if cluster != "" {
		byAttributes += fmt.Sprintf(" AND WorkflowId STARTS_WITH '%s'", workflows.NodeWorkflowID(cluster, ""))
	}
	rows, err := listNodeWorkflows(ctx, c, byAttributes, connection)
	if err != nil {
		return nodeRow{}, err
	}
	if len(rows) == 0 && cluster == "" {
		// A node claim name without its cluster: the id ends with it, and
		// visibility cannot match a suffix, so scan the node workflows.
		all, err := listNodeWorkflows(ctx, c, fmt.Sprintf("WorkflowType = '%s'", workflows.NodeWorkflowType), connection)
		if err != nil {
			return nodeRow{}, err
		}
		for _, row := range all {
			if row.NodeClaim == name {
				rows = append(rows, row)
			}
		}
	}
	where := fmt.Sprintf("namespace %s on %s", connection.Namespace, connection.Address)
	if cluster != "" {
		where = "cluster " + cluster + ", " + where
	}
	return pickNode(name, rows, where)
}

// pickNode chooses among matches: the only one, else the only running one.
func pickNode(name string, rows []nodeRow, where string) (nodeRow, error) {
	switch len(rows) {
	case 0:
		return nodeRow{}, &NodeNotFoundError{Name: name, Where: where}
	case 1:
		return rows[0], nil
	}
	running := slices.DeleteFunc(slices.Clone(rows), func(r nodeRow) bool { return !r.running() })
	if len(running) == 1 {
		return running[0], nil
	}
	candidates := rows
	if len(running) > 1 {
		candidates = running
	}
	ids := make([]string, len(candidates))
	for i, row := range candidates {
		ids[i] = row.WorkflowID
	}
	return nodeRow{}, &AmbiguousNodeError{Name: name, WorkflowIDs: ids}
}

// describeNodeWorkflow reads one node workflow's latest run directly.
func describeNodeWorkflow(ctx context.Context, c client.Client, connection connect.Temporal, workflowID, name string) (nodeRow, error) {
	response, err := c.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			return nodeRow{}, &NodeNotFoundError{Name: name, Where: fmt.Sprintf("no workflow %s in namespace %s on %s", workflowID, connection.Namespace, connection.Address)}
		}
		return nodeRow{}, temporalError("describing workflow "+workflowID, err, connection)
	}
	info := response.GetWorkflowExecutionInfo()
	if info.GetType().GetName() != workflows.NodeWorkflowType {
		return nodeRow{}, fmt.Errorf("workflow %s is a %s, not a %s", workflowID, info.GetType().GetName(), workflows.NodeWorkflowType)
	}
	row, ok := nodeRowFrom(info)
	if !ok {
		return nodeRow{}, fmt.Errorf("workflow %s: not a node workflow id", workflowID)
	}
	return row, nil
}

func writeDescription(out io.Writer, d nodeDescription, now time.Time) {
	state, history := d.State, d.History
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	status := strings.ToLower(strings.TrimPrefix(d.Workflow.Status, "WORKFLOW_EXECUTION_STATUS_"))
	p("Node claim:  %s", state.NodeClaimName)
	p("Workflow:    %s (%s, task queue %s)", d.Workflow.WorkflowID, status, orNone(d.Workflow.TaskQueue))
	p("Cluster:     %s", d.Workflow.Cluster)
	p("Pool:        %s", state.NodePool)
	p("Phase:       %s", state.Phase)
	p("Node:        %s", orNone(state.NodeName))
	if inst := state.Instance; inst != nil {
		p("Instance:    %s: %s in %s, %s, $%.4f/h", inst.InstanceID, inst.InstanceType, inst.Zone, inst.CapacityType, inst.PricePerHour)
		if inst.ProviderID != "" {
			p("Provider ID: %s", inst.ProviderID)
		}
	} else {
		p("Instance:    <none yet>")
	}
	p("Pods:        %d (not counting DaemonSet pods)", state.NonDaemonSetPods)
	p("Created:     %s (%s ago)", formatTime(state.CreatedAt), age(state.CreatedAt, now))
	if drift := state.Drift; drift != nil {
		p("Drifted:     %s (%s)", drift.Message, drift.Kind)
	}

	deadlines := []struct {
		name string
		at   time.Time
	}{
		{"expires (expireAfter)", state.ExpiresAt},
		{"empty, consolidated (consolidateAfter)", state.EmptyTTLAt},
		{"registration deadline", state.RegistrationDeadline},
		{"drain deadline", state.DrainDeadline},
	}
	p("Deadlines:")
	anyDeadline := false
	for _, deadline := range deadlines {
		if !deadline.at.IsZero() {
			p("  %-40s %s (%s)", deadline.name, formatTime(deadline.at), relative(deadline.at, now))
			anyDeadline = true
		}
	}
	if !anyDeadline {
		p("  none")
	}
	p("Timers:")
	if len(state.Timers) == 0 {
		p("  none")
	}
	for _, timer := range state.Timers {
		p("  %-40s fires %s (%s)", timer.Name, formatTime(timer.FiresAt), relative(timer.FiresAt, now))
	}

	p("")
	p("Why launched:")
	if history.Launch.Summary != "" {
		p("  %s", history.Launch.Summary)
	}
	if len(history.Launch.PodKeys) > 0 {
		p("  For pods: %s", strings.Join(history.Launch.PodKeys, ", "))
	}
	writeOptions(p, history.Launch)

	p("")
	p("Why terminated:")
	switch t := history.Termination; {
	case t == nil:
		p("  not terminating")
	default:
		p("  %s", describeTermination(*t))
		p("  requested %s; voluntary: %t", formatTime(t.RequestedAt), t.Voluntary)
		if !t.Deadline.IsZero() {
			p("  must be done by %s", formatTime(t.Deadline))
		}
	}
	if len(history.Interruptions) > 0 {
		p("")
		p("Interruptions:")
		for _, event := range history.Interruptions {
			line := fmt.Sprintf("  %s %s (event %s)", formatTime(event.EventTime), event.Kind, event.EventID)
			if event.Detail != "" {
				line += ": " + event.Detail
			}
			if !event.Deadline.IsZero() {
				line += ", instance gone by " + formatTime(event.Deadline)
			}
			p("%s", line)
		}
	}
	p("")
	p("Decisions:")
	if history.DroppedDecisions > 0 {
		p("  (%d earlier decision(s) dropped)", history.DroppedDecisions)
	}
	for _, decision := range history.Decisions {
		p("  %s  %-12s  %s", formatTime(decision.At), decision.Phase, decision.Message)
	}
}

// writeOptions says, for every instance type considered, whether it was
// chosen, given up on (and why), or never tried because a cheaper one
// worked (options are cheapest first).
func writeOptions(p func(string, ...any), launch workflows.LaunchRecord) {
	if len(launch.OptionsConsidered) == 0 {
		return
	}
	p("  Options considered, cheapest first:")
	chosenSeen := false
	for _, option := range launch.OptionsConsidered {
		var verdicts []string
		if chosen := launch.Chosen; chosen != nil && chosen.InstanceType == option {
			verdicts = append(verdicts, fmt.Sprintf("CHOSEN: %s %s at $%.4f/h", chosen.Zone, chosen.CapacityType, chosen.PricePerHour))
			chosenSeen = true
		}
		for _, rejected := range launch.Rejected {
			if rejected.InstanceType == option {
				verdicts = append(verdicts, fmt.Sprintf("rejected %s/%s: %s", rejected.Zone, rejected.CapacityType, rejected.Reason))
			}
		}
		if len(verdicts) == 0 {
			switch {
			case launch.Chosen == nil:
				verdicts = append(verdicts, "not tried yet")
			case chosenSeen:
				verdicts = append(verdicts, "not needed: a cheaper option launched")
			default:
				verdicts = append(verdicts, "not chosen")
			}
		}
		p("    %-20s %s", option, strings.Join(verdicts, "; "))
	}
	if launch.Chosen == nil {
		p("  Chosen: nothing launched yet")
	}
}

func describeTermination(t workflows.Termination) string {
	text := string(t.Reason)
	if t.Detail != "" {
		text += ": " + t.Detail
	}
	if t.Requester != "" {
		text += " (by " + t.Requester + ")"
	}
	return text
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "<never>"
	}
	return t.UTC().Format(time.RFC3339)
}

// relative says "in 5m" or "3m ago".
func relative(t, now time.Time) string {
	if t.After(now) {
		return "in " + age(now, t)
	}
	return age(t, now) + " ago"
}
