package watch

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/millwright/millwright/workflows"
)

// Disruption addresses one cluster's disruption workflow, starting it when
// it is not running (SignalWithStart), like Provisioner.
type Disruption struct {
	Signaler  Signaler
	Cluster   string
	TaskQueue string
	// Input is what a newly started disruption workflow gets.
	Input workflows.DisruptionInput
}

// Signal delivers one signal to the disruption workflow, starting it if
// needed.
func (d Disruption) Signal(ctx context.Context, name string, arg any) error {
	input := d.Input
	input.Cluster = d.Cluster
	id := workflows.DisruptionWorkflowID(d.Cluster)
	_, err := d.Signaler.SignalWithStartWorkflow(ctx, id, name, arg,
		client.StartWorkflowOptions{ID: id, TaskQueue: d.TaskQueue}, workflows.DisruptionWorkflowType, input)
	return err
}

// triggerInterval is the least time between two triggers: a burst of pod
// deletions wakes the disruption workflow once, not once per pod.
const triggerInterval = time.Second

// Trigger wakes the disruption workflow when the watchers see something
// that may make nodes disruptable (a pod gone, a Node added, a pool or class
// edited). Poke never blocks; Run sends at most one SignalDisruptionTrigger
// per triggerInterval, carrying the latest reason.
type Trigger struct {
	disruption Disruption
	logger     *zap.Logger
	poked      chan struct{}
	mu         sync.Mutex
	reason     string
}

// NewTrigger returns a Trigger for d.
func NewTrigger(d Disruption, logger *zap.Logger) *Trigger {
	return &Trigger{disruption: d, logger: logger, poked: make(chan struct{}, 1)}
}

// Poke asks for a disruption pass soon; safe on a nil Trigger.
func (t *Trigger) Poke(reason string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.reason = reason
	t.mu.Unlock()
	select {
	case t.poked <- struct{}{}:
	default:
	}
}

// Run sends the triggers until ctx ends; a failed signal is retried at the
// next poke or interval.
func (t *Trigger) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.poked:
		}
		t.mu.Lock()
		reason := t.reason
		t.mu.Unlock()
		if err := t.disruption.Signal(ctx, workflows.SignalDisruptionTrigger, workflows.DisruptionTrigger{Reason: reason}); err != nil && ctx.Err() == nil {
			t.logger.Warn("waking the disruption workflow failed; will retry", zap.Error(err))
			t.Poke(reason)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(triggerInterval):
		}
	}
}
