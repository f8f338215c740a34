package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
)

// Activities of a disruption command workflow besides the node lifecycle's
// and the provisioner's (it starts replacements with StartNodeWorkflows).
const (
	ReserveNodesActivity   = "ReserveNodes"
	MarkDisruptionActivity = "MarkDisruption"
	AdmitCommandActivity   = "AdmitDisruptionCommand"
	// MarkOutliersActivity is the disruption workflow's, after a pass.
	MarkOutliersActivity = "MarkOutliers"
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
	// drain has not cordoned; with Candidate, the soft candidate taint
	// instead. A Node that is gone is skipped. Idempotent.
	MarkDisruption(ctx context.Context, req MarkDisruptionRequest) (MarkDisruptionResponse, error)
	// AdmitCommand asks the disruption workflow (its admit update) whether
	// a command that waited out its validation delay may commit now: the
	// decision must still hold and fit the budgets, judged against the
	// workflow's ledger of every other running command. Only transport
	// errors are errors; the update id is the command's and the attempt's,
	// so a retry of one attempt is answered by the same update.
	AdmitCommand(ctx context.Context, req AdmitCommandRequest) (AdmitCommandResponse, error)
	// MarkOutliers (the disruption workflow's, after a pass) taints the
	// Nodes named OutlierTaintKey:PreferNoSchedule and takes that taint
	// off every other Node. A Node that is gone is skipped. Idempotent.
	MarkOutliers(ctx context.Context, req MarkOutliersRequest) (MarkOutliersResponse, error)
}

// MarkOutliersRequest names every Node that should carry the outlier
// taint; no other Node should.
type MarkOutliersRequest struct {
	NodeNames []string `json:"nodeNames,omitempty"`
}

// MarkOutliersResponse lists the Nodes tainted and untainted.
type MarkOutliersResponse struct {
	Marked   []string `json:"marked,omitempty"`
	Unmarked []string `json:"unmarked,omitempty"`
}

// AdmitCommandRequest asks the disruption workflow to admit a command.
type AdmitCommandRequest struct {
	DisruptionWorkflowID string `json:"disruptionWorkflowID"`
	CommandID            string `json:"commandID"`
	// Attempt numbers the command's admission requests (a Busy answer is
	// asked again with the next).
	Attempt int               `json:"attempt"`
	Command DisruptionCommand `json:"command"`
}

// AdmitCommandResponse is the disruption workflow's answer. Admitted: the
// command holds and fits the budgets, and now counts as disrupting. Busy:
// it does not fit the budgets yet (nodes of commands already admitted are
// still going), so it may ask again. Otherwise Why says why the decision no
// longer holds.
type AdmitCommandResponse struct {
	Admitted bool   `json:"admitted,omitempty"`
	Busy     bool   `json:"busy,omitempty"`
	Why      string `json:"why,omitempty"`
	// Replacements, when set on an admission, replace the command's: the
	// same nodes with only the offerings that still fit their pods.
	Replacements []NodeLaunchSpec `json:"replacements,omitempty"`
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
	// Candidate: Disrupted adds (or removes) the soft candidate taint
	// (CandidateTaintKey, PreferNoSchedule) instead, on Nodes cordoned or
	// not, with no event.
	Candidate bool `json:"candidate,omitempty"`
}

// MarkDisruptionResponse lists the Nodes changed and those left alone.
type MarkDisruptionResponse struct {
	Changed []string `json:"changed,omitempty"`
	// Skipped are Nodes gone, or (untainting) cordoned by a drain.
	Skipped []string `json:"skipped,omitempty"`
	// DisruptedAt (disrupting only) is the worker's clock once every Node
	// named carried the disrupted taint: kube-scheduler places nothing new
	// on them from about then (DrainRequest.UnschedulableSince).
	DisruptedAt time.Time `json:"disruptedAt,omitzero"`
}

// RegisterDisruptionCommands registers the command activities of impl
// under their contract names.
func RegisterDisruptionCommands(registry worker.ActivityRegistry, impl DisruptionCommandActivities) {
	registry.RegisterActivityWithOptions(impl.ReserveNodes, activity.RegisterOptions{Name: ReserveNodesActivity})
	registry.RegisterActivityWithOptions(impl.MarkDisruption, activity.RegisterOptions{Name: MarkDisruptionActivity})
	registry.RegisterActivityWithOptions(impl.AdmitCommand, activity.RegisterOptions{Name: AdmitCommandActivity})
	registry.RegisterActivityWithOptions(impl.MarkOutliers, activity.RegisterOptions{Name: MarkOutliersActivity})
}
