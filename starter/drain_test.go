package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/workflows"
)

func TestDrainIsAcceptedOnceThenRejected(t *testing.T) {
	f := newOperateFixture(t)
	claim := "general-dddd"
	f.startNode(f.nodeSpec(claim))
	f.waitForPhase(claim, workflows.PhaseReady)

	out := f.run("drain", cannedNodeName(claim), "--reason", "kernel upgrade", "--requester", "alice")
	if !strings.Contains(out, "drain of "+claim+" accepted (node was Ready)") {
		t.Errorf("first drain: %s", out)
	}
	// The canned Drain activity blocks, so the node stays Draining.
	f.waitForPhase(claim, workflows.PhaseDraining)

	_, err := f.runErr("drain", claim, "--cluster-name", f.cluster, "--reason", "again", "--requester", "bob")
	if !IsDrainRejected(err) || !strings.Contains(err.Error(), "already Draining (Drained: kernel upgrade (by alice))") {
		t.Errorf("second drain: error = %v, want the validator's refusal", err)
	}

	described := f.run("describe", claim, "--cluster-name", f.cluster)
	for _, want := range []string{"Phase:       Draining", "Drained: kernel upgrade (by alice)", "voluntary: true"} {
		if !strings.Contains(described, want) {
			t.Errorf("describe after drain lacks %q:\n%s", want, described)
		}
	}

	// Once the drain finishes the node terminates and its workflow closes:
	// a drain is then refused before any update is sent.
	f.activities.releaseDrains()
	f.waitForPhase(claim, workflows.PhaseTerminated)
	f.waitUntil("workflow closed in visibility", func() (bool, string) {
		rows := f.listedNodes("--cluster-name", f.cluster)
		return len(rows) == 0, "still listed as running"
	})
	_, err = f.runErr("drain", claim, "--cluster-name", f.cluster, "--reason", "late")
	if !IsNodeClosed(err) || !strings.Contains(err.Error(), "has already ended (completed") {
		t.Errorf("drain of a terminated node: error = %v, want a NodeClosedError", err)
	}
	history := f.run("describe", claim, "--cluster-name", f.cluster)
	t.Logf("describe after termination:\n%s", history)
	if !strings.Contains(history, "Phase:       Terminated") || !strings.Contains(history, "Drained node "+cannedNodeName(claim)) {
		t.Errorf("describe of the terminated node:\n%s", history)
	}
}

// legacyNodeWorkflow stands for a node workflow started by an older worker
// that only knew the drain signal: it answers the state query and waits
// for the signal.
func legacyNodeWorkflow(ctx workflow.Context, spec activities.NodeLaunchSpec) (string, error) {
	var received workflows.DrainRequest
	phase := workflows.PhaseReady
	if err := workflow.SetQueryHandler(ctx, workflows.QueryState, func() (workflows.NodeStateView, error) {
		return workflows.NodeStateView{NodeClaimName: spec.NodeClaimName, NodePool: spec.NodePool, Phase: phase}, nil
	}); err != nil {
		return "", err
	}
	workflow.GetSignalChannel(ctx, workflows.SignalDrain).Receive(ctx, &received)
	phase = workflows.PhaseDraining
	return received.Reason + " by " + received.Requester, nil
}

func TestDrainFallsBackToTheSignalWithoutUpdateHandler(t *testing.T) {
	f := newOperateFixture(t)
	legacyQueue := f.taskQueue + "-legacy"
	w := worker.New(env.Client, legacyQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(legacyNodeWorkflow, workflow.RegisterOptions{Name: workflows.NodeWorkflowType})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	spec := f.nodeSpec("legacy-ffff")
	id := workflows.NodeWorkflowID(spec.Cluster, spec.NodeClaimName)
	run, err := env.Client.ExecuteWorkflow(f.ctx, client.StartWorkflowOptions{ID: id, TaskQueue: legacyQueue}, workflows.NodeWorkflowType, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.TerminateWorkflow(context.Background(), id, "", "test over") })

	out := f.run("drain", spec.NodeClaimName, "--cluster-name", f.cluster, "--reason", "old worker", "--requester", "carol")
	if !strings.Contains(out, "drain update not supported") || !strings.Contains(out, "sent the drain signal to "+id) {
		t.Errorf("drain of a workflow without the update: %s", out)
	}
	var result string
	if err := run.Get(f.ctx, &result); err != nil || result != "old worker by carol" {
		t.Errorf("legacy workflow returned %q, %v; want the drain signal's reason and requester", result, err)
	}
}

func TestDrainRequiresAReason(t *testing.T) {
	_, err := runStarterErr(t.Context(), "drain", "x", "--address", "127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "--reason: required") {
		t.Errorf("error = %v, want one naming --reason", err)
	}
}

func TestUpdateUnsupportedIsRecognised(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "unimplemented", err: serviceerror.NewUnimplemented("UpdateWorkflowExecution"), want: true},
		{name: "disabled on namespace", err: serviceerror.NewPermissionDenied("Workflow Update is disabled on this namespace.", ""), want: true},
		{name: "no handler", err: errors.New("unknown update drain. KnownUpdates=[]"), want: true},
		{name: "validator", err: errors.New("drain x refused: node is already Draining"), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isUpdateUnsupported(tt.err); got != tt.want {
				t.Errorf("isUpdateUnsupported(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
