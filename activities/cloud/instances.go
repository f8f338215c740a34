package cloud

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// ClusterInstance is an instance tagged for the cluster, as garbage
// collection sees it.
type ClusterInstance struct {
	ID    string
	State string
	// NodeClaim, NodePool and WorkflowID come from the instance's tags;
	// WorkflowID may be empty on instances launched before it was tagged.
	NodeClaim  string
	NodePool   string
	WorkflowID string
	LaunchTime time.Time
}

// Gone reports an instance that is terminated or on its way there.
func (i ClusterInstance) Gone() bool {
	return i.State == stateShuttingDown || i.State == stateTerminated
}

// ClusterInstances lists every instance tagged for the provider's cluster
// (TagCluster), in any state, paging through DescribeInstances. It only
// reads.
func (p *Provider) ClusterInstances(ctx context.Context) ([]ClusterInstance, error) {
	if p.cluster.Name == "" {
		return nil, fmt.Errorf("cluster instances: the provider has no cluster name")
	}
	input := &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + TagCluster), Values: []string{p.cluster.Name}},
	}}
	var out []ClusterInstance
	pages := ec2.NewDescribeInstancesPaginator(p.ec2, input)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, asActivityError(ctx, "list the cluster's instances", err)
		}
		for _, reservation := range page.Reservations {
			for _, inst := range reservation.Instances {
				out = append(out, clusterInstance(inst))
			}
		}
	}
	return out, nil
}

func clusterInstance(inst ec2types.Instance) ClusterInstance {
	ci := ClusterInstance{ID: aws.ToString(inst.InstanceId), LaunchTime: aws.ToTime(inst.LaunchTime)}
	if inst.State != nil {
		ci.State = string(inst.State.Name)
	}
	for _, tag := range inst.Tags {
		switch aws.ToString(tag.Key) {
		case apisv1.TagNodeClaim:
			ci.NodeClaim = aws.ToString(tag.Value)
		case apisv1.TagNodePool:
			ci.NodePool = aws.ToString(tag.Value)
		case TagWorkflowID:
			ci.WorkflowID = aws.ToString(tag.Value)
		}
	}
	return ci
}

// InstanceState is the state of one instance; an instance EC2 no longer
// knows is "terminated".
func (p *Provider) InstanceState(ctx context.Context, id string) (string, error) {
	state, err := p.instanceState(ctx, id)
	return state, asActivityError(ctx, "describe instance "+id, err)
}
