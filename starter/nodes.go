package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/worker/connect"
	"github.com/millwright/millwright/workflows"
)

// Output formats of the commands that read node workflows.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// defaultOperateTimeout bounds a whole `nodes`, `describe` or `drain` call,
// dialing included, so an unreachable server or a missing worker ends in an
// error instead of a hang.
const defaultOperateTimeout = 30 * time.Second

// nodesOptions are the flags of `starter nodes`.
type nodesOptions struct {
	connection connect.Temporal
	cluster    string
	pool       string
	phase      string
	all        bool
	output     string
	timeout    time.Duration
	clock      clock.PassiveClock
}

// newNodesCommand builds `starter nodes`: node workflows found through the
// visibility store by their search attributes.
func newNodesCommand() *cobra.Command {
	options := nodesOptions{clock: clock.RealClock{}}
	command := &cobra.Command{
		Use:   "nodes",
		Short: "List node workflows (running ones unless --all) with phase, type, zone, capacity type and age",
		Long: `Lists node workflows from Temporal's visibility store, filtered on
Millwright's search attributes. Visibility is eventually consistent: a phase
change shows up here within about a second.`,
		Args: cobra.NoArgs,
		RunE: func(command *cobra.Command, _ []string) error {
			return runNodes(command.Context(), command.OutOrStdout(), command.ErrOrStderr(), options)
		},
	}
	options.connection.BindFlags(command.Flags())
	bindClusterFlag(command, &options.cluster, "only node workflows of this cluster")
	command.Flags().StringVar(&options.pool, "pool", "", "only nodes of this NodePool")
	command.Flags().StringVar(&options.phase, "phase", "", "only nodes in this phase ("+phaseList()+")")
	command.Flags().BoolVar(&options.all, "all", false, "include closed node workflows (terminated nodes)")
	bindOutputFlag(command, &options.output)
	command.Flags().DurationVar(&options.timeout, "timeout", defaultOperateTimeout, "give up after this long")
	return command
}

func bindClusterFlag(command *cobra.Command, cluster *string, usage string) {
	command.Flags().StringVar(cluster, "cluster-name", os.Getenv("MILLWRIGHT_CLUSTER_NAME"), usage+" [$MILLWRIGHT_CLUSTER_NAME]")
}

func bindOutputFlag(command *cobra.Command, output *string) {
	command.Flags().StringVarP(output, "output", "o", outputTable, "output format: table or json")
}

func checkOutputFlag(output string) error {
	if output != outputTable && output != outputJSON {
		return fmt.Errorf("--output %q: want table or json", output)
	}
	return nil
}

// nodeRow is one node workflow as the visibility store lists it.
type nodeRow struct {
	WorkflowID        string     `json:"workflowID"`
	RunID             string     `json:"runID"`
	Cluster           string     `json:"cluster"`
	NodeClaim         string     `json:"nodeClaim"`
	Node              string     `json:"node,omitempty"`
	Phase             string     `json:"phase,omitempty"`
	Pool              string     `json:"pool,omitempty"`
	InstanceType      string     `json:"instanceType,omitempty"`
	Zone              string     `json:"zone,omitempty"`
	CapacityType      string     `json:"capacityType,omitempty"`
	InstanceID        string     `json:"instanceID,omitempty"`
	TerminationReason string     `json:"terminationReason,omitempty"`
	Status            string     `json:"status"`
	TaskQueue         string     `json:"taskQueue,omitempty"`
	StartTime         time.Time  `json:"startTime"`
	CloseTime         *time.Time `json:"closeTime,omitempty"`
}

func (r nodeRow) running() bool {
	return r.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING.String()
}

func runNodes(ctx context.Context, out, errOut io.Writer, options nodesOptions) error {
	if err := checkOutputFlag(options.output); err != nil {
		return err
	}
	query, err := nodesQuery(options.cluster, options.pool, options.phase, options.all)
	if err != nil {
		return err
	}
	ctx, cancel := operateContext(ctx, options.timeout)
	defer cancel()
	c, err := options.connection.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()

	rows, err := listNodeWorkflows(ctx, c, query, options.connection)
	if err != nil {
		return err
	}
	if options.output == outputJSON {
		return writeJSON(out, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintf(errOut, "no node workflows match: %s\n", query)
		return nil
	}
	return writeNodesTable(out, rows, options.clock.Now())
}

func operateContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if ctx == nil {
		ctx = context.Background()
	}
	if timeout <= 0 {
		timeout = defaultOperateTimeout
	}
	return context.WithTimeout(ctx, timeout)
}

// nodesQuery is the visibility query of `starter nodes`. Every value is a
// Kubernetes name or a phase, which never contain quotes; one that does is
// refused rather than escaped, since visibility query escaping differs
// between stores.
func nodesQuery(cluster, pool, phase string, all bool) (string, error) {
	clauses := []string{fmt.Sprintf("WorkflowType = '%s'", workflows.NodeWorkflowType)}
	if cluster != "" {
		if err := checkQueryValue("--cluster-name", cluster); err != nil {
			return "", err
		}
		clauses = append(clauses, fmt.Sprintf("WorkflowId STARTS_WITH '%s'", workflows.NodeWorkflowID(cluster, "")))
	}
	if pool != "" {
		if err := checkQueryValue("--pool", pool); err != nil {
			return "", err
		}
		clauses = append(clauses, fmt.Sprintf("%s = '%s'", workflows.NodePoolAttribute.GetName(), pool))
	}
	if phase != "" {
		canonical, err := parsePhase(phase)
		if err != nil {
			return "", err
		}
		clauses = append(clauses, fmt.Sprintf("%s = '%s'", workflows.PhaseAttribute.GetName(), canonical))
	}
	if !all {
		clauses = append(clauses, "ExecutionStatus = 'Running'")
	}
	return strings.Join(clauses, " AND "), nil
}

func checkQueryValue(flag, value string) error {
	if strings.ContainsAny(value, `'"\`) {
		return fmt.Errorf("%s %q: must not contain quotes or backslashes", flag, value)
	}
	return nil
}

var allPhases = []workflows.Phase{
	workflows.PhaseLaunching, workflows.PhaseRegistering, workflows.PhaseInitializing, workflows.PhaseReady,
	workflows.PhaseDraining, workflows.PhaseTerminating, workflows.PhaseTerminated,
}

func phaseList() string {
	names := make([]string, len(allPhases))
	for i, p := range allPhases {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

// parsePhase accepts a phase in any case, so `--phase ready` works.
func parsePhase(text string) (workflows.Phase, error) {
	for _, p := range allPhases {
		if strings.EqualFold(string(p), text) {
			return p, nil
		}
	}
	return "", fmt.Errorf("--phase %q: want one of %s", text, phaseList())
}

// maxListedNodes bounds how many executions one listing reads, so a
// namespace with a long retention cannot make the CLI page forever.
const maxListedNodes = 10000

// listNodeWorkflows pages through the visibility query. The same workflow
// id can appear once per run (continue-as-new closes one run and opens the
// next), so only the newest run of each id is kept.
func listNodeWorkflows(ctx context.Context, c client.Client, query string, connection connect.Temporal) ([]nodeRow, error) {
	var rows []nodeRow
	seen := map[string]int{}
	var token []byte
	for {
		response, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace:     connection.Namespace,
			Query:         query,
			NextPageToken: token,
			PageSize:      1000,
		})
		if err != nil {
			return nil, temporalError(fmt.Sprintf("listing node workflows (%s)", query), err, connection)
		}
		for _, execution := range response.GetExecutions() {
			row, ok := nodeRowFrom(execution)
			if !ok {
				continue
			}
			if i, dup := seen[row.WorkflowID]; dup {
				if row.StartTime.After(rows[i].StartTime) {
					rows[i] = row
				}
				continue
			}
			seen[row.WorkflowID] = len(rows)
			rows = append(rows, row)
		}
		token = response.GetNextPageToken()
		if len(token) == 0 || len(rows) >= maxListedNodes {
			break
		}
	}
	slices.SortFunc(rows, func(a, b nodeRow) int {
		if c := strings.Compare(a.Cluster, b.Cluster); c != 0 {
			return c
		}
		if c := strings.Compare(a.Pool, b.Pool); c != 0 {
			return c
		}
		return strings.Compare(a.NodeClaim, b.NodeClaim)
	})
	return rows, nil
}

// nodeRowFrom reads a listed execution; executions whose id is not a node
// workflow id are skipped.
func nodeRowFrom(execution *workflowpb.WorkflowExecutionInfo) (nodeRow, bool) {
	cluster, claim, err := workflows.ParseNodeWorkflowID(execution.GetExecution().GetWorkflowId())
	if err != nil {
		return nodeRow{}, false
	}
	attributes := execution.GetSearchAttributes()
	row := nodeRow{
		WorkflowID:        execution.GetExecution().GetWorkflowId(),
		RunID:             execution.GetExecution().GetRunId(),
		Cluster:           cluster,
		NodeClaim:         claim,
		Node:              keyword(attributes, workflows.NodeNameAttribute.GetName()),
		Phase:             keyword(attributes, workflows.PhaseAttribute.GetName()),
		Pool:              keyword(attributes, workflows.NodePoolAttribute.GetName()),
		InstanceType:      keyword(attributes, workflows.InstanceTypeAttribute.GetName()),
		Zone:              keyword(attributes, workflows.ZoneAttribute.GetName()),
		CapacityType:      keyword(attributes, workflows.CapacityTypeAttribute.GetName()),
		InstanceID:        keyword(attributes, workflows.InstanceIDAttribute.GetName()),
		TerminationReason: keyword(attributes, workflows.TerminationReasonAttribute.GetName()),
		Status:            execution.GetStatus().String(),
		TaskQueue:         execution.GetTaskQueue(),
		StartTime:         execution.GetStartTime().AsTime(),
	}
	if execution.GetCloseTime() != nil {
		closed := execution.GetCloseTime().AsTime()
		row.CloseTime = &closed
	}
	return row, true
}

// keyword decodes one Keyword search attribute; a missing or undecodable
// one reads as empty (a node that has not launched has no instance type).
func keyword(attributes *commonpb.SearchAttributes, name string) string {
	payload, ok := attributes.GetIndexedFields()[name]
	if !ok {
		return ""
	}
	var value string
	if err := converter.GetDefaultDataConverter().FromPayload(payload, &value); err != nil {
		return ""
	}
	return value
}

func writeNodesTable(out io.Writer, rows []nodeRow, now time.Time) error {
	table := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	// A namespace shared by several clusters lists claims that only their
	// cluster tells apart.
	clusters := map[string]bool{}
	for _, row := range rows {
		clusters[row.Cluster] = true
	}
	withCluster := len(clusters) > 1
	if withCluster {
		fmt.Fprint(table, "CLUSTER\t")
	}
	fmt.Fprintln(table, "NODE CLAIM\tNODE\tPHASE\tPOOL\tTYPE\tZONE\tCAPACITY\tINSTANCE\tAGE")
	for _, row := range rows {
		if withCluster {
			fmt.Fprintf(table, "%s\t", row.Cluster)
		}
		phase := row.Phase
		if !row.running() {
			// A closed workflow's last phase may be stale (it failed or was
			// terminated from outside); say how it closed.
			phase = fmt.Sprintf("%s (%s)", orNone(phase), strings.ToLower(strings.TrimPrefix(row.Status, "WORKFLOW_EXECUTION_STATUS_")))
		}
		fmt.Fprintf(table, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.NodeClaim, orNone(row.Node), phase, orNone(row.Pool),
			orNone(row.InstanceType), orNone(row.Zone), orNone(row.CapacityType), orNone(row.InstanceID), age(row.StartTime, now))
	}
	return table.Flush()
}

func orNone(value string) string {
	if value == "" {
		return "<none>"
	}
	return value
}

// age reads like kubectl's AGE column.
func age(since, now time.Time) string {
	if since.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(since))
}

func writeJSON(out io.Writer, value any) error {
	encoder := json.NewEncoder(out)
	encoder.SetIndent("", "  ")
	return encoder.Encode(value)
}

// temporalError names what failed and, for the causes an operator can fix,
// how: a server that does not answer, a missing namespace, search
// attributes not registered.
func temporalError(what string, err error, connection connect.Temporal) error {
	var namespaceNotFound *serviceerror.NamespaceNotFound
	var invalid *serviceerror.InvalidArgument
	var unavailable *serviceerror.Unavailable
	switch {
	case errors.As(err, &namespaceNotFound):
		return fmt.Errorf("%s: namespace %s does not exist on Temporal at %s (create it with `starter setup --create-namespace`): %w",
			what, connection.Namespace, connection.Address, err)
	case errors.As(err, &invalid) && strings.Contains(err.Error(), "Millwright"):
		return fmt.Errorf("%s: namespace %s lacks Millwright's search attributes (run `starter setup`): %w", what, connection.Namespace, err)
	case errors.As(err, &unavailable):
		return fmt.Errorf("%s: Temporal unreachable at %s: %w", what, connection.Address, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: no answer from Temporal at %s in time: %w", what, connection.Address, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
