// Package garbagecollection removes what no node workflow owns any more, as
// Karpenter's NodeClaim garbage collection and its AWS provider's instance
// garbage collection do, keyed on node workflows instead of NodeClaims:
//
//   - an instance tagged for the cluster whose node workflow is not running
//     (terminated or reset from the Temporal UI, or gone) is terminated once
//     Grace has passed since its launch;
//   - a Node Millwright owns (node claim label or termination finalizer)
//     whose instance is terminated or unknown to EC2 and whose node workflow
//     is not running is deleted and its finalizer released, so `kubectl
//     delete node` does not hang on a finalizer nobody will remove.
//
// Each removal is logged, recorded as a Kubernetes event (GarbageCollected)
// and counted (millwright_garbage_collected_total).
//
// It is a controller inside the worker, not a Temporal workflow: it only
// compares the cloud and the cluster with Temporal's record of open
// workflows and repairs the difference, it has no lifecycle of its own to
// make durable, and a missed pass is simply redone by the next one, so a
// workflow's history would add cost and replay constraints for nothing.
// Running where the workflows' own state cannot help (a reset or terminated
// workflow) is the point. The chart runs two workers: only the holder of
// the cluster's garbage-collection Lease (client-go leader election)
// collects, and every removal first confirms, by the workflow id, that the
// workflow is not running, so a stale visibility listing or a second
// collector can never remove a live node. Terminating an instance and
// releasing a finalizer are idempotent.
//
// It must not decide anything a node workflow owns: it never touches an
// instance or Node whose workflow runs.
package garbagecollection

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/cloud"
	"github.com/millwright/millwright/activities/events"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/worker/interruption"
	"github.com/millwright/millwright/workflows"
)

// Defaults of Options.
const (
	// DefaultGrace is how long after its launch an instance without a
	// running node workflow is left alone: a workflow being started or
	// reset is visible well within it.
	DefaultGrace = 5 * time.Minute
	// DefaultInterval is how often the collector looks.
	DefaultInterval = time.Minute
)

// ReasonGarbageCollected is the reason of the collector's events.
const ReasonGarbageCollected = "GarbageCollected"

// Instances is the part of the EC2 provider (*cloud.Provider) the collector
// uses.
type Instances interface {
	ClusterInstances(ctx context.Context) ([]cloud.ClusterInstance, error)
	InstanceState(ctx context.Context, id string) (string, error)
	TerminateInstance(ctx context.Context, req activities.TerminateInstanceRequest) (activities.TerminateInstanceResponse, error)
}

// Workflows is the part of the Temporal client the collector uses.
type Workflows interface {
	ListWorkflow(ctx context.Context, request *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error)
	DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
}

// Counter counts removals by resource ("instance", "node");
// *metrics.Metrics implements it.
type Counter interface {
	GarbageCollected(resource string)
}

// Options configure a Collector.
type Options struct {
	// Cluster is the cluster's name (node workflow ids, instance tags).
	Cluster string
	// Namespace is the Temporal namespace of the node workflows.
	Namespace  string
	Instances  Instances
	Workflows  Workflows
	Kubernetes kubernetes.Interface
	// Nodes lists Nodes (the worker's informer).
	Nodes    corelisters.NodeLister
	Recorder events.Recorder
	Counter  Counter
	// Grace and Interval default to DefaultGrace and DefaultInterval.
	Grace, Interval time.Duration
	// LeaseNamespace holds the Lease that elects the one collecting
	// worker; Identity names this worker in it (default: a random one).
	LeaseNamespace, Identity string
	Clock                    clock.WithTicker
	Logger                   *zap.Logger
}

// Collector is the garbage collector of one cluster.
type Collector struct {
	opts Options
	log  *zap.Logger
}

// New checks opts and returns a Collector.
func New(opts Options) (*Collector, error) {
	switch {
	case opts.Cluster == "":
		return nil, errors.New("garbage collection: Cluster is required")
	case opts.Instances == nil || opts.Workflows == nil || opts.Kubernetes == nil || opts.Nodes == nil:
		return nil, errors.New("garbage collection: Instances, Workflows, Kubernetes and Nodes are required")
	case opts.Grace < 0:
		return nil, fmt.Errorf("garbage collection: Grace %s is negative", opts.Grace)
	}
	if opts.Grace == 0 {
		opts.Grace = DefaultGrace
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Recorder == nil {
		opts.Recorder = events.Discard
	}
	return &Collector{opts: opts, log: opts.Logger.Named("garbagecollection")}, nil
}

// Result is what one pass removed.
type Result struct {
	TerminatedInstances []string
	RemovedNodes        []string
}

// Collect makes one pass. It stops at the first error reading the world (a
// partial view must not look like missing instances); an error removing
// one thing is logged and the pass goes on.
func (c *Collector) Collect(ctx context.Context) (Result, error) {
	var result Result
	open, err := c.openWorkflows(ctx)
	if err != nil {
		return result, err
	}
	instances, err := c.opts.Instances.ClusterInstances(ctx)
	if err != nil {
		return result, fmt.Errorf("garbage collection: %w", err)
	}
	nodes, err := c.opts.Nodes.List(labels.Everything())
	if err != nil {
		return result, fmt.Errorf("garbage collection: list Nodes: %w", err)
	}
	nodeOfInstance := map[string]*corev1.Node{}
	for _, node := range nodes {
		if id := instanceIDOf(node); id != "" {
			nodeOfInstance[id] = node
		}
	}
	now := c.opts.Clock.Now()
	byID := make(map[string]cloud.ClusterInstance, len(instances))
	for _, inst := range instances {
		if !inst.Gone() && c.orphanInstance(ctx, inst, open, now) {
			if err := c.terminate(ctx, inst, nodeOfInstance[inst.ID]); err != nil {
				c.log.Error("Terminating an orphaned instance failed", zap.String("instance", inst.ID), zap.Error(err))
			} else {
				inst.State = "shutting-down"
				result.TerminatedInstances = append(result.TerminatedInstances, inst.ID)
			}
		}
		byID[inst.ID] = inst
	}
	for _, node := range nodes {
		if !c.owned(node) || !c.orphanNode(ctx, node, byID, open) {
			continue
		}
		if err := c.removeNode(ctx, node); err != nil {
			c.log.Error("Removing an orphaned Node failed", zap.String("node", node.Name), zap.Error(err))
			continue
		}
		result.RemovedNodes = append(result.RemovedNodes, node.Name)
	}
	return result, nil
}

// openWorkflows lists the ids of the cluster's running node workflows.
func (c *Collector) openWorkflows(ctx context.Context) (map[string]bool, error) {
	open := map[string]bool{}
	prefix := workflows.NodeWorkflowID(c.opts.Cluster, "")
	request := &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: c.opts.Namespace,
		PageSize:  1000,
		Query:     fmt.Sprintf(`WorkflowType = %q AND ExecutionStatus = "Running"`, workflows.NodeWorkflowType),
	}
	for {
		resp, err := c.opts.Workflows.ListWorkflow(ctx, request)
		if err != nil {
			return nil, fmt.Errorf("garbage collection: list running node workflows: %w", err)
		}
		for _, execution := range resp.GetExecutions() {
			if id := execution.GetExecution().GetWorkflowId(); strings.HasPrefix(id, prefix) {
				open[id] = true
			}
		}
		if len(resp.GetNextPageToken()) == 0 {
			return open, nil
		}
		request.NextPageToken = resp.GetNextPageToken()
	}
}

// workflowOf is the node workflow that owns a node claim.
func (c *Collector) workflowOf(workflowID, nodeClaim string) string {
	if workflowID != "" {
		return workflowID
	}
	if nodeClaim == "" {
		return ""
	}
	return workflows.NodeWorkflowID(c.opts.Cluster, nodeClaim)
}

// running reports whether the workflow runs, asking Temporal by id when the
// listing did not show it (visibility lags the workflows it lists). Errors
// count as running: nothing is removed on doubt.
func (c *Collector) running(ctx context.Context, workflowID string, open map[string]bool) bool {
	if workflowID == "" || open[workflowID] {
		return workflowID != ""
	}
	resp, err := c.opts.Workflows.DescribeWorkflowExecution(ctx, workflowID, "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return false
	case err != nil:
		c.log.Warn("Could not tell whether a node workflow runs; leaving its instance and Node alone", zap.String("workflowID", workflowID), zap.Error(err))
		return true
	}
	return resp.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// orphanInstance reports a live instance past its grace whose node
// workflow does not run. An instance without a node claim tag is not
// Millwright's to judge.
func (c *Collector) orphanInstance(ctx context.Context, inst cloud.ClusterInstance, open map[string]bool, now time.Time) bool {
	workflowID := c.workflowOf(inst.WorkflowID, inst.NodeClaim)
	if workflowID == "" || inst.LaunchTime.IsZero() || now.Sub(inst.LaunchTime) < c.opts.Grace {
		return false
	}
	return !c.running(ctx, workflowID, open)
}

func (c *Collector) terminate(ctx context.Context, inst cloud.ClusterInstance, node *corev1.Node) error {
	if _, err := c.opts.Instances.TerminateInstance(ctx, activities.TerminateInstanceRequest{InstanceID: inst.ID}); err != nil {
		return err
	}
	message := fmt.Sprintf("Terminated instance %s (node claim %s): no node workflow has run it for %s after its launch",
		inst.ID, inst.NodeClaim, c.opts.Grace)
	c.log.Info(message, zap.String("instance", inst.ID), zap.String("nodeClaim", inst.NodeClaim), zap.String("nodePool", inst.NodePool))
	c.event(node, inst.NodePool, message)
	c.count("instance")
	return nil
}

// owned reports a Node Millwright launched or still guards.
func (c *Collector) owned(node *corev1.Node) bool {
	return node.Labels[activities.NodeClaimLabel] != "" || slices.Contains(node.Finalizers, activities.TerminationFinalizer)
}

// orphanNode reports an owned Node whose instance is gone and whose node
// workflow does not run (a running one deletes its Node itself).
func (c *Collector) orphanNode(ctx context.Context, node *corev1.Node, instances map[string]cloud.ClusterInstance, open map[string]bool) bool {
	id := instanceIDOf(node)
	if id == "" {
		return false
	}
	if inst, known := instances[id]; known && !inst.Gone() {
		return false
	} else if !known {
		// Not tagged for the cluster, or too old for EC2 to list: ask.
		state, err := c.opts.Instances.InstanceState(ctx, id)
		if err != nil {
			c.log.Warn("Could not read a Node's instance; leaving the Node alone", zap.String("node", node.Name), zap.String("instance", id), zap.Error(err))
			return false
		}
		if state != "shutting-down" && state != "terminated" {
			return false
		}
	}
	claim := node.Labels[activities.NodeClaimLabel]
	return !c.running(ctx, c.workflowOf("", claim), open)
}

// removeNode releases the termination finalizer and deletes the Node.
func (c *Collector) removeNode(ctx context.Context, node *corev1.Node) error {
	nodes := c.opts.Kubernetes.CoreV1().Nodes()
	if i := slices.Index(node.Finalizers, activities.TerminationFinalizer); i >= 0 {
		// A JSON patch tested against the list read, so a finalizer
		// another controller added meanwhile is not dropped.
		patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/finalizers/%d","value":%q},{"op":"remove","path":"/metadata/finalizers/%d"}]`,
			i, activities.TerminationFinalizer, i)
		_, err := nodes.Patch(ctx, node.Name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("release the finalizer of Node %s: %w", node.Name, err)
		}
	}
	if node.DeletionTimestamp == nil {
		err := nodes.Delete(ctx, node.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &node.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Node %s: %w", node.Name, err)
		}
	}
	message := fmt.Sprintf("Removed Node %s: its instance %s is gone and no node workflow runs it", node.Name, instanceIDOf(node))
	c.log.Info(message, zap.String("node", node.Name))
	c.event(node, node.Labels[apisv1.LabelNodePool], message)
	c.count("node")
	return nil
}

// event records on the Node, else on the NodePool the instance was for.
func (c *Collector) event(node *corev1.Node, nodePool, message string) {
	var about runtime.Object
	switch {
	case node != nil:
		about = events.NodeRef(node.Name, node.UID)
	case nodePool != "":
		about = events.NodePoolRef(nodePool, "")
	default:
		return
	}
	c.opts.Recorder.Publish(events.Event{InvolvedObject: about, Type: corev1.EventTypeNormal, Reason: ReasonGarbageCollected, Message: message})
}

func (c *Collector) count(resource string) {
	if c.opts.Counter != nil {
		c.opts.Counter.GarbageCollected(resource)
	}
}

func instanceIDOf(node *corev1.Node) string {
	return interruption.InstanceIDFromProviderID(node.Spec.ProviderID)
}
