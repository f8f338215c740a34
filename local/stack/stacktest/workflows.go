package stacktest

import (
	"context"
	"fmt"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/millwright/millwright/workflows"
)

// NodeWorkflow is a node workflow's latest run as Temporal's visibility
// lists it, with Millwright's search attributes.
type NodeWorkflow struct {
	ID     string
	RunID  string
	Status enumspb.WorkflowExecutionStatus
	// Search attributes (workflows/searchattributes.go); "" when unset.
	NodePool, Phase, NodeName, InstanceID, InstanceType, Zone, CapacityType, TerminationReason string
}

// NodeWorkflowOf reads a visibility record's id, status and Millwright
// search attributes.
func NodeWorkflowOf(info *workflowpb.WorkflowExecutionInfo) NodeWorkflow {
	fields := info.GetSearchAttributes().GetIndexedFields()
	keyword := func(name string) string {
		payload, ok := fields[name]
		if !ok {
			return ""
		}
		return decodeKeyword(payload)
	}
	return NodeWorkflow{
		ID:                info.GetExecution().GetWorkflowId(),
		RunID:             info.GetExecution().GetRunId(),
		Status:            info.GetStatus(),
		NodePool:          keyword(workflows.NodePoolAttribute.GetName()),
		Phase:             keyword(workflows.PhaseAttribute.GetName()),
		NodeName:          keyword(workflows.NodeNameAttribute.GetName()),
		InstanceID:        keyword(workflows.InstanceIDAttribute.GetName()),
		InstanceType:      keyword(workflows.InstanceTypeAttribute.GetName()),
		Zone:              keyword(workflows.ZoneAttribute.GetName()),
		CapacityType:      keyword(workflows.CapacityTypeAttribute.GetName()),
		TerminationReason: keyword(workflows.TerminationReasonAttribute.GetName()),
	}
}

func decodeKeyword(payload *commonpb.Payload) string {
	var value string
	if err := converter.GetDefaultDataConverter().FromPayload(payload, &value); err != nil {
		// A keyword list (never set by Millwright): show it raw.
		return string(payload.GetData())
	}
	return value
}

// PoolQuery is the visibility query of a NodePool's node workflows (by the
// MillwrightNodePool search attribute).
func PoolQuery(pool string) string {
	return fmt.Sprintf("%s = '%s'", workflows.NodePoolAttribute.GetName(), pool)
}

// ListNodeWorkflows lists the executions of namespace matching a
// visibility query (e.g. PoolQuery(pool)+" AND ExecutionStatus =
// 'Running'"), every page, the newest run of each workflow id only.
func ListNodeWorkflows(ctx context.Context, temporal client.Client, namespace, query string) ([]NodeWorkflow, error) {
	var out []NodeWorkflow
	seen := map[string]bool{}
	var token []byte
	for {
		resp, err := temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: namespace, Query: query, NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("listing workflows %q: %w", query, err)
		}
		for _, info := range resp.Executions {
			wf := NodeWorkflowOf(info)
			if seen[wf.ID] {
				// An older run (continue-as-new) of a workflow already listed.
				continue
			}
			seen[wf.ID] = true
			out = append(out, wf)
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return out, nil
		}
	}
}

// QueryState asks a node workflow for its state (the "state" query). A
// query needs a running worker: without one it waits until ctx ends.
func QueryState(ctx context.Context, temporal client.Client, workflowID string) (workflows.NodeStateView, error) {
	var state workflows.NodeStateView
	value, err := temporal.QueryWorkflow(ctx, workflowID, "", workflows.QueryState)
	if err != nil {
		return state, err
	}
	return state, value.Get(&state)
}

// QueryHistory asks a node workflow for its history (the "history" query:
// launch choice, decisions, termination).
func QueryHistory(ctx context.Context, temporal client.Client, workflowID string) (workflows.NodeHistoryView, error) {
	var history workflows.NodeHistoryView
	value, err := temporal.QueryWorkflow(ctx, workflowID, "", workflows.QueryHistory)
	if err != nil {
		return history, err
	}
	return history, value.Get(&history)
}

// QueryTimeout bounds the queries of StateOf, HistoryOf and
// WaitNodeWorkflowResult's failure message: a query needs a running worker,
// which a test may have killed.
const QueryTimeout = 20 * time.Second

// StateOf is QueryState bounded by QueryTimeout; a failed query fails the
// test.
func StateOf(t testing.TB, temporal client.Client, workflowID string) workflows.NodeStateView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), QueryTimeout)
	defer cancel()
	state, err := QueryState(ctx, temporal, workflowID)
	if err != nil {
		t.Fatalf("querying the state of %s: %v", workflowID, err)
	}
	return state
}

// HistoryOf is QueryHistory bounded by QueryTimeout; a failed query fails
// the test.
func HistoryOf(t testing.TB, temporal client.Client, workflowID string) workflows.NodeHistoryView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), QueryTimeout)
	defer cancel()
	history, err := QueryHistory(ctx, temporal, workflowID)
	if err != nil {
		t.Fatalf("querying the history of %s: %v", workflowID, err)
	}
	return history
}

// WaitNodeWorkflowResult waits for a node workflow's result (following
// continue-as-new to the last run); if it does not come within timeout
// the test fails with the workflow's phase.
func WaitNodeWorkflowResult(t testing.TB, temporal client.Client, workflowID string, timeout time.Duration) workflows.NodeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var result workflows.NodeResult
	if err := temporal.GetWorkflow(ctx, workflowID, "").Get(ctx, &result); err != nil {
		queryCtx, cancelQuery := context.WithTimeout(context.Background(), QueryTimeout)
		defer cancelQuery()
		state, _ := QueryState(queryCtx, temporal, workflowID)
		t.Fatalf("node workflow %s did not complete within %s: %v (phase %s)", workflowID, timeout, err, state.Phase)
	}
	return result
}
