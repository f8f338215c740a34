package main

import (
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/millwright/millwright/workflows"
)

func TestStartIsIdempotent(t *testing.T) {
	f := newOperateFixture(t)
	args := []string{"start", "--cluster-name", f.cluster, "--task-queue", f.taskQueue, "--batch-idle-duration", "2s", "--batch-max-duration", "20s"}
	first := f.run(args...)
	id := workflows.ProvisionerWorkflowID(f.cluster)
	t.Cleanup(func() { _ = env.Client.TerminateWorkflow(t.Context(), id, "", "test over") })
	if !strings.Contains(first, "provisioner "+id+" started") {
		t.Errorf("first start: %s", first)
	}
	described, err := env.Client.DescribeWorkflowExecution(f.ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	runID := described.GetWorkflowExecutionInfo().GetExecution().GetRunId()

	second := f.run(args...)
	if !strings.Contains(second, "already running (run "+runID) {
		t.Errorf("second start: %s", second)
	}
	other := f.run("start", "--cluster-name", f.cluster, "--task-queue", f.taskQueue+"-elsewhere")
	if !strings.Contains(other, "note: it runs on task queue "+f.taskQueue) {
		t.Errorf("start with another task queue: %s", other)
	}

	described, err = env.Client.DescribeWorkflowExecution(f.ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	info := described.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING || info.GetExecution().GetRunId() != runID {
		t.Errorf("provisioner after three starts: status %s run %s, want the first run still running", info.GetStatus(), info.GetExecution().GetRunId())
	}
}

func TestStartRejectsBadFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{args: []string{"start"}, wantErr: "--cluster-name: required"},
		{args: []string{"start", "--cluster-name", "c", "--batch-idle-duration", "1m", "--batch-max-duration", "10s"}, wantErr: "idleWindow 1m0s is longer than maxWindow 10s"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Setenv("MILLWRIGHT_CLUSTER_NAME", "")
			_, err := runStarterErr(t.Context(), append(tt.args, "--address", "127.0.0.1:1")...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
