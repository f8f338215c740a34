package interruption

import (
	"context"
	"fmt"
	"strings"

	"go.temporal.io/api/workflowservice/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/workflows"
)

// instanceIndex indexes Nodes by the EC2 instance id in their provider ID.
const instanceIndex = "millwright.dev/instance-id"

// VisibilityLister is the slice of client.Client the finder uses.
type VisibilityLister interface {
	ListWorkflow(ctx context.Context, request *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error)
}

// Finder finds node workflows by instance: first through the Nodes the
// worker already watches (consistent, free), then through Temporal's
// visibility on the instance-id search attribute (covers instances whose
// Node has not registered yet).
type Finder struct {
	Cluster    string
	Nodes      cache.SharedIndexInformer
	Visibility VisibilityLister
	Namespace  string
}

// AddInstanceIndex adds the index the finder uses to a node informer; call
// before the informer starts.
func AddInstanceIndex(nodes cache.SharedIndexInformer) error {
	return nodes.AddIndexers(cache.Indexers{instanceIndex: func(obj any) ([]string, error) {
		node, ok := obj.(*corev1.Node)
		if !ok {
			return nil, nil
		}
		if id := InstanceIDFromProviderID(node.Spec.ProviderID); id != "" {
			return []string{id}, nil
		}
		return nil, nil
	}})
}

// InstanceIDFromProviderID extracts i-… from aws:///<zone>/<instance-id>.
func InstanceIDFromProviderID(providerID string) string {
	if !strings.HasPrefix(providerID, "aws://") {
		return ""
	}
	id := providerID[strings.LastIndex(providerID, "/")+1:]
	if !strings.HasPrefix(id, "i-") {
		return ""
	}
	return id
}

// NodeWorkflowForInstance implements NodeFinder.
func (f *Finder) NodeWorkflowForInstance(ctx context.Context, instanceID string) (string, error) {
	if f.Nodes != nil {
		objs, err := f.Nodes.GetIndexer().ByIndex(instanceIndex, instanceID)
		if err != nil {
			return "", err
		}
		for _, obj := range objs {
			if claim := obj.(*corev1.Node).Labels[activities.NodeClaimLabel]; claim != "" {
				return workflows.NodeWorkflowID(f.Cluster, claim), nil
			}
		}
	}
	if f.Visibility == nil {
		return "", nil
	}
	resp, err := f.Visibility.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: f.Namespace,
		PageSize:  1,
		Query: fmt.Sprintf(`%s = %q AND ExecutionStatus = "Running" AND WorkflowType = %q`,
			workflows.InstanceIDAttribute.GetName(), instanceID, workflows.NodeWorkflowType),
	})
	if err != nil {
		return "", fmt.Errorf("looking up instance %s in Temporal visibility: %w", instanceID, err)
	}
	for _, execution := range resp.GetExecutions() {
		return execution.GetExecution().GetWorkflowId(), nil
	}
	return "", nil
}
