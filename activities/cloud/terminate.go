package cloud

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/millwright/millwright/activities"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// InvalidInstanceIDErrorType: the instance id is malformed (a workflow bug);
// not retryable.
const InvalidInstanceIDErrorType = "InvalidInstanceID"

// Instance states as EC2 names them.
const (
	stateShuttingDown = string(ec2types.InstanceStateNameShuttingDown)
	stateTerminated   = string(ec2types.InstanceStateNameTerminated)
)

// TerminateInstance implements activities.NodeActivities.TerminateInstance.
// Terminating an instance that is already terminated, or that EC2 no longer
// knows, succeeds with state "terminated". A request without an instance id
// but with a node claim terminates the cluster's live instances tagged for
// that node claim (the tags every launch puts on its instance).
func (p *Provider) TerminateInstance(ctx context.Context, req activities.TerminateInstanceRequest) (activities.TerminateInstanceResponse, error) {
	if req.InstanceID == "" && req.NodeClaimName != "" {
		resp, err := p.terminateTaggedFor(ctx, req)
		if err != nil {
			return resp, asActivityError(ctx, "terminate the instances of node claim "+req.NodeClaimName, err)
		}
		return resp, nil
	}
	state, err := p.terminate(ctx, req.InstanceID)
	if err != nil {
		return activities.TerminateInstanceResponse{}, asActivityError(ctx, "terminate instance "+req.InstanceID, err)
	}
	p.log.Info("Terminated instance", zap.String("instance", req.InstanceID), zap.String("state", state))
	return activities.TerminateInstanceResponse{State: state}, nil
}

// terminateTaggedFor terminates every pending, running, stopping or stopped
// instance of req.Cluster tagged for req.NodeClaimName.
func (p *Provider) terminateTaggedFor(ctx context.Context, req activities.TerminateInstanceRequest) (activities.TerminateInstanceResponse, error) {
	if req.Cluster == "" {
		return activities.TerminateInstanceResponse{}, temporal.NewNonRetryableApplicationError(
			"terminate the instances of node claim "+req.NodeClaimName+": cluster is empty", InvalidInstanceIDErrorType, nil)
	}
	out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + TagCluster), Values: []string{req.Cluster}},
		{Name: aws.String("tag:" + apisv1.TagNodeClaim), Values: []string{req.NodeClaimName}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped"}},
	}})
	if err != nil {
		return activities.TerminateInstanceResponse{}, fmt.Errorf("DescribeInstances: %w", err)
	}
	resp := activities.TerminateInstanceResponse{State: stateTerminated}
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			id := aws.ToString(inst.InstanceId)
			state, err := p.terminate(ctx, id)
			if err != nil {
				return activities.TerminateInstanceResponse{}, err
			}
			zone := ""
			if inst.Placement != nil {
				zone = aws.ToString(inst.Placement.AvailabilityZone)
			}
			p.log.Info("Terminated instance of a launch whose outcome was unknown", zap.String("nodeClaim", req.NodeClaimName),
				zap.String("instance", id), zap.String("state", state))
			resp.Instances = append(resp.Instances, activities.TerminatedInstance{InstanceID: id, ProviderID: ProviderID(zone, id), Zone: zone, State: state})
		}
	}
	return resp, nil
}

func (p *Provider) terminate(ctx context.Context, id string) (string, error) {
	if id == "" {
		return "", temporal.NewNonRetryableApplicationError("terminate instance: instanceID is empty", InvalidInstanceIDErrorType, nil)
	}
	out, err := p.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	switch code := errorCode(err); {
	case code == errCodeInstanceNotFound:
		return stateTerminated, nil
	case code == errCodeInstanceMalformed:
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("terminate instance %q: malformed instance id", id), InvalidInstanceIDErrorType, err)
	case err != nil:
		return "", fmt.Errorf("TerminateInstances: %w", err)
	}
	for _, change := range out.TerminatingInstances {
		if aws.ToString(change.InstanceId) == id && change.CurrentState != nil {
			return string(change.CurrentState.Name), nil
		}
	}
	return stateShuttingDown, nil
}

// WaitForInstanceTerminated implements
// activities.NodeActivities.WaitForInstanceTerminated: it polls
// DescribeInstances every TerminationPollInterval (on the injected clock),
// heartbeating the state it saw, until the instance is shutting-down or
// terminated, or EC2 no longer knows it.
func (p *Provider) WaitForInstanceTerminated(ctx context.Context, req activities.WaitForInstanceTerminatedRequest) (activities.WaitForInstanceTerminatedResponse, error) {
	if req.InstanceID == "" {
		return activities.WaitForInstanceTerminatedResponse{},
			temporal.NewNonRetryableApplicationError("wait for instance terminated: instanceID is empty", InvalidInstanceIDErrorType, nil)
	}
	for {
		state, err := p.instanceState(ctx, req.InstanceID)
		switch {
		case err == nil && (state == stateShuttingDown || state == stateTerminated):
			return activities.WaitForInstanceTerminatedResponse{State: state}, nil
		case err == nil:
			heartbeat(ctx, state)
		case isThrottle(err):
			// Throttled polls are retried at the next tick rather than
			// failing a wait that may be long.
			p.log.Warn("DescribeInstances throttled while waiting for termination", zap.String("instance", req.InstanceID), zap.Error(err))
			heartbeat(ctx, "throttled")
		default:
			return activities.WaitForInstanceTerminatedResponse{}, asActivityError(ctx, "wait for instance "+req.InstanceID+" terminated", err)
		}
		timer := p.clock.NewTimer(p.pollInterval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return activities.WaitForInstanceTerminatedResponse{}, ctx.Err()
		case <-timer.C():
		}
	}
}

// instanceState returns the instance's state; an instance EC2 no longer
// knows is terminated.
func (p *Provider) instanceState(ctx context.Context, id string) (string, error) {
	out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if errorCode(err) == errCodeInstanceNotFound {
		return stateTerminated, nil
	}
	if errorCode(err) == errCodeInstanceMalformed {
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("instance %q: malformed instance id", id), InvalidInstanceIDErrorType, err)
	}
	if err != nil {
		return "", fmt.Errorf("DescribeInstances: %w", err)
	}
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			if aws.ToString(inst.InstanceId) == id && inst.State != nil {
				return string(inst.State.Name), nil
			}
		}
	}
	return stateTerminated, nil
}

func hasApplicationErrorType(err error, errorType string) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == errorType
}
