package metrics

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/workflows"
)

// WorkflowCounter is the slice of client.Client that counts workflows in
// visibility.
type WorkflowCounter interface {
	CountWorkflow(ctx context.Context, request *workflowservice.CountWorkflowExecutionsRequest) (*workflowservice.CountWorkflowExecutionsResponse, error)
}

// DefaultVisibilityInterval is how often node workflows are counted by
// phase.
const DefaultVisibilityInterval = 30 * time.Second

// phasesCounted are the phases of running node workflows.
var phasesCounted = []workflows.Phase{
	workflows.PhaseLaunching, workflows.PhaseRegistering, workflows.PhaseInitializing, workflows.PhaseReady,
	workflows.PhaseDraining, workflows.PhaseTerminating, workflows.PhaseTerminated,
}

// NodeWorkflowQuery is the visibility query counting the running node
// workflows in phase.
func NodeWorkflowQuery(phase workflows.Phase) string {
	return fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND %s = '%s'",
		workflows.NodeWorkflowType, workflows.PhaseAttribute.GetName(), phase)
}

// CountNodeWorkflows sets millwright_node_workflows{phase} from one count
// query per phase. A phase whose count fails keeps its last value.
func (m *Metrics) CountNodeWorkflows(ctx context.Context, counter WorkflowCounter, namespace string) error {
	var firstErr error
	for _, phase := range phasesCounted {
		resp, err := counter.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
			Namespace: namespace, Query: NodeWorkflowQuery(phase),
		})
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("counting %s node workflows: %w", phase, err)
			}
			continue
		}
		m.NodeWorkflowsInPhase(string(phase), resp.GetCount())
	}
	return firstErr
}

// RunVisibility counts node workflows by phase now and every interval until
// ctx ends.
func (m *Metrics) RunVisibility(ctx context.Context, counter WorkflowCounter, namespace string, clk clock.WithTicker, interval time.Duration, logger *zap.Logger) {
	if interval <= 0 {
		interval = DefaultVisibilityInterval
	}
	ticker := clk.NewTicker(interval)
	defer ticker.Stop()
	for {
		if err := m.CountNodeWorkflows(ctx, counter, namespace); err != nil && ctx.Err() == nil {
			logger.Debug("counting node workflows by phase failed", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}
