package activities

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
)

// Activities of a disruption command workflow besides the node lifecycle's
// and the provisioner's (it starts replacements with StartNodeWorkflows).
const (
	ReserveNodesActivity   = "ReserveNodes"
	MarkDisruptionActivity = "MarkDisruption"
)

// DisruptionCommandActivities are what a disruption command runs to hold its
// candidates and mark them in the cluster.
type DisruptionCommandActivities interface {
	// ReserveNodes sends the reserve update to each node workflow and
	// reports which accepted and which refused (the validator's words, or
	// that the workflow is gone). Only transport errors are errors; the
	// update id is derived from the command, so a retry is answered by the
	// same update.
	ReserveNodes(ctx context.Context, req ReserveNodesRequest) (ReserveNodesResponse, error)
	// MarkDisruption taints the Nodes millwright.dev/disrupted:NoSchedule
	// (Disrupted) so nothing new schedules on them while the command's
	// replacements launch, or removes that taint (a rollback) from Nodes a
	// drain has not cordoned. A Node that is gone is skipped. Idempotent.
	MarkDisruption(ctx context.Context, req MarkDisruptionRequest) (MarkDisruptionResponse, error)
}

// ReserveNodesRequest asks node workflows to hold their nodes for a command.
type ReserveNodesRequest struct {
	CommandID string `json:"commandID"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
	// WorkflowIDs are the candidates' node workflows.
	WorkflowIDs []string `json:"workflowIDs"`
}

// ReserveNodesResponse says, per node workflow, whether it holds its node.
type ReserveNodesResponse struct {
	Accepted []string      `json:"accepted,omitempty"`
	Refused  []NodeRefusal `json:"refused,omitempty"`
}

// NodeRefusal is a node workflow that refused, and why.
type NodeRefusal struct {
	WorkflowID string `json:"workflowID"`
	Why        string `json:"why"`
}

// MarkDisruptionRequest taints (Disrupted) or untaints Nodes.
type MarkDisruptionRequest struct {
	NodeNames []string `json:"nodeNames"`
	Disrupted bool     `json:"disrupted"`
	// CommandID is who asks, for the log.
	CommandID string `json:"commandID"`
	// Message is the command's (for the DisruptionTerminating event on
	// each Node it taints); Replacing: it launches replacements first
	// (DisruptionLaunching too).
	Message   string `json:"message,omitempty"`
	Replacing bool   `json:"replacing,omitempty"`
	// Reason is the command's (Empty, Underutilized, …), for the metrics.
	Reason string `json:"reason,omitempty"`
}

// MarkDisruptionResponse lists the Nodes changed and those left alone.
type MarkDisruptionResponse struct {
	Changed []string `json:"changed,omitempty"`
	// Skipped are Nodes gone, or (untainting) cordoned by a drain.
	Skipped []string `json:"skipped,omitempty"`
}

// RegisterDisruptionCommands registers the command activities of impl
// under their contract names.
func RegisterDisruptionCommands(registry worker.ActivityRegistry, impl DisruptionCommandActivities) {
	registry.RegisterActivityWithOptions(impl.ReserveNodes, activity.RegisterOptions{Name: ReserveNodesActivity})
	registry.RegisterActivityWithOptions(impl.MarkDisruption, activity.RegisterOptions{Name: MarkDisruptionActivity})
}
