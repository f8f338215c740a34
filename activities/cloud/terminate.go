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
// knows, succeeds with state "terminated".
func (p *Provider) TerminateInstance(ctx context.Context, req activities.TerminateInstanceRequest) (activities.TerminateInstanceResponse, error) {
	state, err := p.terminate(ctx, req.InstanceID)
	if err != nil {
		return activities.TerminateInstanceResponse{}, asActivityError(ctx, "terminate instance "+req.InstanceID, err)
	}
	p.log.Info("Terminated instance", zap.String("instance", req.InstanceID), zap.String("state", state))
	return activities.TerminateInstanceResponse{State: state}, nil
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
