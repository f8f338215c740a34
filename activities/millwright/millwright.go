// Package millwright composes Millwright's activity implementations into the
// one value a worker registers (activities.Register): the EC2 activities of
// activities/cloud, the Kubernetes activities of activities/kube, the Plan
// activity of activities/planning and the StartNodeWorkflows activity of
// activities/nodeworkflows. It builds them from clients and configuration
// (New) or takes them ready-made (Compose), and adds nothing of its own but
// the EC2NodeClass reader the EC2 activities launch with.
//
// It must not hold activity logic: every method delegates to the part that
// owns it.
package millwright

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/cloud"
	"github.com/millwright/millwright/activities/events"
	"github.com/millwright/millwright/activities/kube"
	"github.com/millwright/millwright/activities/nodeworkflows"
	"github.com/millwright/millwright/activities/planning"
)

// Config is what New needs to build every activity.
type Config struct {
	// Cluster describes the cluster nodes join (name, API endpoint, CA,
	// service CIDR, Kubernetes version). Cluster.Name is required: it names
	// the cluster in launch specs and instance tags.
	Cluster cloud.ClusterInfo
	// Region is the cluster's AWS region. Required.
	Region string

	// Kubernetes and Dynamic reach the API server. Required.
	Kubernetes kubernetes.Interface
	Dynamic    dynamic.Interface
	// State is where planning reads the cluster: the worker passes
	// planning.NewInformerState over its informers. Default: a List per
	// kind and Plan (planning.NewAPIState).
	State planning.ClusterState

	// EC2 is the EC2 client (cloud.NewEC2Client). Required.
	EC2 cloud.EC2API
	// SSM reads ssmParameter AMI terms (cloud.NewSSMClient); nil refuses
	// them.
	SSM cloud.SSMAPI
	// IAM manages the instance profiles of classes with a role
	// (cloud.NewIAMClient); nil refuses spec.role.
	IAM cloud.IAMAPI
	// Pricing is the Pricing API client; nil uses the embedded catalog's
	// on-demand prices.
	Pricing cloud.PricingAPI

	// Temporal starts node workflows. Required.
	Temporal client.Client

	// Clock drives every deadline, poll and cache. Default: the real clock.
	Clock clock.WithTicker
	// Logger is shared by every part. Default: no logging.
	Logger *zap.Logger

	// LeaseNamespace holds the Leases that serialise each NodePool's
	// disruption decisions: the worker's own namespace. Default
	// kube.DefaultLeaseNamespace.
	LeaseNamespace string
	// Identity names this worker in the Leases it holds. Default: the
	// host name.
	Identity string

	// NodeClaims is the worker's synced NodeClaim cache, read by
	// UpsertNodeClaim instead of the API server (kube.Config.NodeClaims).
	// Default: NodeClaims are read live.
	NodeClaims cache.GenericLister

	// Events publishes the activities' Kubernetes events (events.Broadcast).
	// Default: events.Discard.
	Events events.Recorder

	// Optional tuning; zero values take each part's default.
	KubePollInterval        time.Duration
	TerminationPollInterval time.Duration
	RegistrationTimeout     time.Duration
}

// Activities is every activity a Millwright worker registers.
type Activities struct {
	cloud   *cloud.Provider
	kube    *kube.Activities
	planner *planning.Planner
	starter *nodeworkflows.Starter
}

// The contract's Activities, in full; this fails to compile when a
// signature drifts.
var (
	_ activities.Activities           = (*Activities)(nil)
	_ activities.DisruptionActivities = (*Activities)(nil)
)

// Compose puts ready-made parts together.
func Compose(cloudProvider *cloud.Provider, kubeActivities *kube.Activities, planner *planning.Planner, starter *nodeworkflows.Starter) (*Activities, error) {
	switch {
	case cloudProvider == nil:
		return nil, errors.New("millwright activities: cloud provider is nil")
	case kubeActivities == nil:
		return nil, errors.New("millwright activities: kube activities are nil")
	case planner == nil:
		return nil, errors.New("millwright activities: planner is nil")
	case starter == nil:
		return nil, errors.New("millwright activities: node workflow starter is nil")
	}
	return &Activities{cloud: cloudProvider, kube: kubeActivities, planner: planner, starter: starter}, nil
}

// New builds every part from cfg. Nothing talks to a server until an
// activity runs. Call Close when the worker stops.
func New(cfg Config) (*Activities, error) {
	switch {
	case cfg.Cluster.Name == "":
		return nil, errors.New("millwright activities: Cluster.Name is required")
	case cfg.Region == "":
		return nil, errors.New("millwright activities: Region is required")
	case cfg.Kubernetes == nil || cfg.Dynamic == nil:
		return nil, errors.New("millwright activities: Kubernetes and Dynamic clients are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.State == nil {
		cfg.State = planning.NewAPIState(cfg.Kubernetes, cfg.Dynamic)
	}
	provider, err := cloud.New(cloud.Options{
		EC2: cfg.EC2, SSM: cfg.SSM, IAM: cfg.IAM, Pricing: cfg.Pricing, Region: cfg.Region, Cluster: cfg.Cluster,
		NodeClasses: NewNodeClassReader(cfg.Dynamic), Clock: cfg.Clock, Logger: cfg.Logger,
		TerminationPollInterval: cfg.TerminationPollInterval, Events: cfg.Events,
	})
	if err != nil {
		return nil, fmt.Errorf("millwright activities: %w", err)
	}
	kubeActivities, err := kube.New(kube.Config{
		Clientset: cfg.Kubernetes, Dynamic: cfg.Dynamic, Clock: cfg.Clock, Logger: cfg.Logger,
		PollInterval: cfg.KubePollInterval, LeaseNamespace: cfg.LeaseNamespace, Events: cfg.Events, Identity: cfg.Identity,
		NodeClaims: cfg.NodeClaims,
	})
	if err != nil {
		return nil, fmt.Errorf("millwright activities: %w", err)
	}
	planner, err := planning.New(planning.Config{
		Cluster: cfg.Cluster.Name, State: cfg.State, InstanceTypes: provider,
		Clock: cfg.Clock, Logger: cfg.Logger, RegistrationTimeout: cfg.RegistrationTimeout, Events: cfg.Events,
	})
	if err != nil {
		kubeActivities.Close()
		return nil, fmt.Errorf("millwright activities: %w", err)
	}
	starter, err := nodeworkflows.New(cfg.Temporal, cfg.Logger)
	if err != nil {
		kubeActivities.Close()
		return nil, fmt.Errorf("millwright activities: %w", err)
	}
	return Compose(provider, kubeActivities, planner, starter)
}

// Close stops the caches the Kubernetes activities run. Activities must not
// run after Close.
func (a *Activities) Close() { a.kube.Close() }

// Cloud is the EC2 provider, for callers that read instance types or the
// unavailable offerings outside an activity (the starter's plan command).
func (a *Activities) Cloud() *cloud.Provider { return a.cloud }

// Planner is the Plan activity's implementation.
func (a *Activities) Planner() *planning.Planner { return a.planner }

// Launch: see activities.NodeActivities.
func (a *Activities) Launch(ctx context.Context, req activities.LaunchRequest) (activities.LaunchResponse, error) {
	return a.cloud.Launch(ctx, req)
}

// WaitForRegistration: see activities.NodeActivities.
func (a *Activities) WaitForRegistration(ctx context.Context, req activities.WaitForRegistrationRequest) (activities.WaitForRegistrationResponse, error) {
	return a.kube.WaitForRegistration(ctx, req)
}

// RegisterNode: see activities.NodeActivities.
func (a *Activities) RegisterNode(ctx context.Context, req activities.RegisterNodeRequest) (activities.RegisterNodeResponse, error) {
	return a.kube.RegisterNode(ctx, req)
}

// WaitForInitialization: see activities.NodeActivities.
func (a *Activities) WaitForInitialization(ctx context.Context, req activities.WaitForInitializationRequest) (activities.WaitForInitializationResponse, error) {
	return a.kube.WaitForInitialization(ctx, req)
}

// AllowDisruption: see activities.NodeActivities.
func (a *Activities) AllowDisruption(ctx context.Context, req activities.AllowDisruptionRequest) (activities.AllowDisruptionResponse, error) {
	return a.kube.AllowDisruption(ctx, req)
}

// Drain: see activities.NodeActivities.
func (a *Activities) Drain(ctx context.Context, req activities.DrainRequest) (activities.DrainResponse, error) {
	return a.kube.Drain(ctx, req)
}

// TerminateInstance: see activities.NodeActivities.
func (a *Activities) TerminateInstance(ctx context.Context, req activities.TerminateInstanceRequest) (activities.TerminateInstanceResponse, error) {
	return a.cloud.TerminateInstance(ctx, req)
}

// WaitForInstanceTerminated: see activities.NodeActivities.
func (a *Activities) WaitForInstanceTerminated(ctx context.Context, req activities.WaitForInstanceTerminatedRequest) (activities.WaitForInstanceTerminatedResponse, error) {
	return a.cloud.WaitForInstanceTerminated(ctx, req)
}

// DeleteNode: see activities.NodeActivities.
func (a *Activities) DeleteNode(ctx context.Context, req activities.DeleteNodeRequest) (activities.DeleteNodeResponse, error) {
	return a.kube.DeleteNode(ctx, req)
}

// UpsertNodeClaim: see activities.NodeActivities.
func (a *Activities) UpsertNodeClaim(ctx context.Context, req activities.UpsertNodeClaimRequest) (activities.UpsertNodeClaimResponse, error) {
	return a.kube.UpsertNodeClaim(ctx, req)
}

// Plan: see activities.ProvisionerActivities.
func (a *Activities) Plan(ctx context.Context, req activities.PlanRequest) (activities.PlanResponse, error) {
	return a.planner.Plan(ctx, req)
}

// ComputeCommands: see activities.DisruptionActivities.
func (a *Activities) ComputeCommands(ctx context.Context, req activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
	return a.planner.ComputeCommands(ctx, req)
}

// StartNodeWorkflows: see activities.ProvisionerActivities.
func (a *Activities) StartNodeWorkflows(ctx context.Context, req activities.StartNodeWorkflowsRequest) (activities.StartNodeWorkflowsResponse, error) {
	return a.starter.StartNodeWorkflows(ctx, req)
}

// ReserveNodes is the node workflow starter's (activities/nodeworkflows).
func (a *Activities) ReserveNodes(ctx context.Context, req activities.ReserveNodesRequest) (activities.ReserveNodesResponse, error) {
	return a.starter.ReserveNodes(ctx, req)
}

// AdmitCommand is the node workflow starter's (activities/nodeworkflows).
func (a *Activities) AdmitCommand(ctx context.Context, req activities.AdmitCommandRequest) (activities.AdmitCommandResponse, error) {
	return a.starter.AdmitCommand(ctx, req)
}

// MarkOutliers is the Kubernetes activities'.
func (a *Activities) MarkOutliers(ctx context.Context, req activities.MarkOutliersRequest) (activities.MarkOutliersResponse, error) {
	return a.kube.MarkOutliers(ctx, req)
}

// MarkDisruption is the Kubernetes activities'.
func (a *Activities) MarkDisruption(ctx context.Context, req activities.MarkDisruptionRequest) (activities.MarkDisruptionResponse, error) {
	return a.kube.MarkDisruption(ctx, req)
}
