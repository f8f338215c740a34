package watch

import (
	"context"
	"errors"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/millwright/millwright/workflows"
)

// Signaler sends the watchers' signals. It is the slice of client.Client they
// use, so tests can count what would be sent.
type Signaler interface {
	SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error
	SignalWithStartWorkflow(ctx context.Context, workflowID, signalName string, signalArg any,
		options client.StartWorkflowOptions, workflow any, workflowArgs ...any) (client.WorkflowRun, error)
}

// Provisioner addresses one cluster's provisioning workflow, starting it when
// it is not running (SignalWithStart), so the first pending pod after an
// install or a crash brings it up.
type Provisioner struct {
	Signaler  Signaler
	Cluster   string
	TaskQueue string
	// Input is what a newly started provisioner gets (windows, intervals).
	Input workflows.ProvisionerInput
}

// Signal delivers one signal to the provisioner, starting it if needed.
func (p Provisioner) Signal(ctx context.Context, name string, arg any) error {
	input := p.Input
	input.Cluster = p.Cluster
	_, err := p.Signaler.SignalWithStartWorkflow(ctx, workflows.ProvisionerWorkflowID(p.Cluster), name, arg,
		client.StartWorkflowOptions{
			ID:        workflows.ProvisionerWorkflowID(p.Cluster),
			TaskQueue: p.TaskQueue,
		}, workflows.ProvisionerWorkflowType, input)
	return err
}

// signalNode signals a node workflow; a node whose workflow is gone (closed,
// or a Node Millwright does not own) is not an error.
func signalNode(ctx context.Context, s Signaler, cluster, nodeClaim, name string, arg any) error {
	err := s.SignalWorkflow(ctx, workflows.NodeWorkflowID(cluster, nodeClaim), "", name, arg)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return nil
	}
	return err
}
