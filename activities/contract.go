// Package activities owns the contract between Millwright's workflows and the
// world: the name of every activity, its request and response types, the
// typed errors an activity may return, and the interfaces an implementation
// (EC2 through aws-sdk-go-v2, Kubernetes through client-go, Temporal through
// its client) must satisfy.
//
// Workflows call activities by name (workflow.ExecuteActivity(ctx,
// activities.LaunchActivity, req)), so they compile and are tested without an
// implementation; an implementation is registered under the same names with
// Register. Every activity here must be idempotent and safe to retry: the
// workflow's retry policies assume it.
//
// This package must not import package workflows (workflows imports it).
package activities

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
)

// Activity names. They are part of every recorded workflow history, so they
// never change once released.
const (
	// Node lifecycle.
	LaunchActivity                    = "Launch"
	WaitForRegistrationActivity       = "WaitForRegistration"
	RegisterNodeActivity              = "RegisterNode"
	WaitForInitializationActivity     = "WaitForInitialization"
	AllowDisruptionActivity           = "AllowDisruption"
	DrainActivity                     = "Drain"
	TerminateInstanceActivity         = "TerminateInstance"
	WaitForInstanceTerminatedActivity = "WaitForInstanceTerminated"
	DeleteNodeActivity                = "DeleteNode"
	UpsertNodeClaimActivity           = "UpsertNodeClaim"

	// Provisioning.
	PlanActivity               = "Plan"
	StartNodeWorkflowsActivity = "StartNodeWorkflows"

	// Disruption.
	ComputeCommandsActivity = "ComputeCommands"
)

// NodeActivities are the activities one node's lifecycle workflow runs, in
// the order it runs them.
type NodeActivities interface {
	// Launch resolves the NodeClass, ensures a launch template and creates
	// one instance with CreateFleet (instant), using req.ClientToken so a
	// retried call after a success returns the same instance. It returns a
	// non-retryable InsufficientCapacity error naming the offerings that had
	// no capacity, InvalidNodeClass when the NodeClass cannot be used, and a
	// retryable Throttled error carrying a jittered retry delay.
	Launch(ctx context.Context, req LaunchRequest) (LaunchResponse, error)

	// WaitForRegistration heartbeats until a Node with req.ProviderID exists
	// or req.Deadline passes (then RegistrationTimeout).
	WaitForRegistration(ctx context.Context, req WaitForRegistrationRequest) (WaitForRegistrationResponse, error)

	// RegisterNode puts the termination finalizer, the pool's labels and the
	// node's taints on the Node and removes the unregistered taint.
	RegisterNode(ctx context.Context, req RegisterNodeRequest) (RegisterNodeResponse, error)

	// WaitForInitialization heartbeats until the Node is Ready, every startup
	// taint is gone and the requested extended resources are allocatable, or
	// req.Deadline passes (then InitializationTimeout).
	WaitForInitialization(ctx context.Context, req WaitForInitializationRequest) (WaitForInitializationResponse, error)

	// AllowDisruption tells whether a voluntary disruption of the node may
	// start now: the pool's disruption budgets and minNodes are checked
	// against live state.
	AllowDisruption(ctx context.Context, req AllowDisruptionRequest) (AllowDisruptionResponse, error)

	// Drain taints the node millwright.dev/disrupted:NoSchedule, cordons it
	// and evicts its pods in order (non-critical, non-critical DaemonSet,
	// critical), respecting PodDisruptionBudgets and do-not-disrupt for
	// voluntary drains until req.Deadline, after which pods are deleted. It
	// heartbeats DrainProgress and resumes from it when retried.
	Drain(ctx context.Context, req DrainRequest) (DrainResponse, error)

	// TerminateInstance terminates the instance; terminating an already
	// terminated or unknown instance succeeds. Without an instance id it
	// terminates every live instance tagged for the node claim.
	TerminateInstance(ctx context.Context, req TerminateInstanceRequest) (TerminateInstanceResponse, error)

	// WaitForInstanceTerminated heartbeats until the instance is
	// shutting-down or terminated.
	WaitForInstanceTerminated(ctx context.Context, req WaitForInstanceTerminatedRequest) (WaitForInstanceTerminatedResponse, error)

	// DeleteNode deletes the Node (found by name, or by provider ID when the
	// name is unknown) and removes the termination finalizer. A Node that is
	// already gone is success.
	DeleteNode(ctx context.Context, req DeleteNodeRequest) (DeleteNodeResponse, error)

	// UpsertNodeClaim mirrors the workflow's state, as of entering
	// req.Phase, on the node's NodeClaim (created, updated, deleted once
	// Terminated) and publishes the transition's events; it reports the
	// transition only the first time, so a retry counts nothing twice.
	UpsertNodeClaim(ctx context.Context, req UpsertNodeClaimRequest) (UpsertNodeClaimResponse, error)
}

// ProvisionerActivities are the activities the per-cluster provisioning
// workflow runs for each batch.
type ProvisionerActivities interface {
	// Plan reads live state (pending pods, nodes, DaemonSets, NodePools,
	// NodeClasses, instance types with offerings and prices) plus the
	// in-flight nodes the workflow reports, calls the packer and returns the
	// new node plans, including the nodes needed to satisfy each pool's
	// minNodes. It never launches anything.
	Plan(ctx context.Context, req PlanRequest) (PlanResponse, error)

	// StartNodeWorkflows starts one node workflow per entry with
	// WorkflowIDConflictPolicy USE_EXISTING and WorkflowIDReusePolicy
	// REJECT_DUPLICATE, so a retried call (or a retried batch that derived the
	// same ids) never starts a second workflow for the same node claim.
	StartNodeWorkflows(ctx context.Context, req StartNodeWorkflowsRequest) (StartNodeWorkflowsResponse, error)
}

// DisruptionActivities are what the per-cluster disruption workflow asks.
type DisruptionActivities interface {
	// ComputeCommands reads live state (Nodes and their pods, pending pods,
	// PodDisruptionBudgets, NodePools, EC2NodeClasses with their resolved
	// status, instance types with offerings and prices) plus what the
	// request carries, and returns the disruption commands to run now
	// (model/disruption.Compute) with a verdict per node. It only reads,
	// so a retry is harmless.
	ComputeCommands(ctx context.Context, req ComputeCommandsRequest) (ComputeCommandsResponse, error)
}

// Activities is everything a Millwright worker registers.
type Activities interface {
	NodeActivities
	ProvisionerActivities
	DisruptionActivities
}

// Register registers every activity of impl under its contract name, so the
// names the workflows call and the names the worker serves cannot drift.
func Register(registry worker.ActivityRegistry, impl Activities) {
	register := func(fn any, name string) {
		registry.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	register(impl.Launch, LaunchActivity)
	register(impl.WaitForRegistration, WaitForRegistrationActivity)
	register(impl.RegisterNode, RegisterNodeActivity)
	register(impl.WaitForInitialization, WaitForInitializationActivity)
	register(impl.AllowDisruption, AllowDisruptionActivity)
	register(impl.Drain, DrainActivity)
	register(impl.TerminateInstance, TerminateInstanceActivity)
	register(impl.WaitForInstanceTerminated, WaitForInstanceTerminatedActivity)
	register(impl.DeleteNode, DeleteNodeActivity)
	register(impl.UpsertNodeClaim, UpsertNodeClaimActivity)
	register(impl.Plan, PlanActivity)
	register(impl.StartNodeWorkflows, StartNodeWorkflowsActivity)
	register(impl.ComputeCommands, ComputeCommandsActivity)
}
