package driver

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/millwright/millwright/local/temporal"
)

// The Temporal server process is SIGKILLed and started again on its
// database and address: what the chaos suite does to it. A workflow started
// before the kill is still there after.
func TestTemporalProcessRestartsOnItsDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the Temporal server")
	}
	dir := t.TempDir()
	if err := buildCommands(dir, "./harness/cmd/temporal"); err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p := &Process{
		Name: "temporal", Binary: filepath.Join(dir, "temporal"),
		Args:    []string{"--state-dir", filepath.Join(dir, "state"), "--address", addr},
		Env:     os.Environ(),
		LogPath: filepath.Join(dir, "temporal.log"), ReadyLine: temporalReadyLine,
	}
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(10 * time.Second) })
	c, err := client.DialContext(ctx, client.Options{HostPort: addr, Namespace: temporal.DefaultNamespace, Logger: quietSDKLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "survives-a-kill", TaskQueue: "nobody-polls"}, "SomeWorkflow")
	if err != nil {
		t.Fatal(err)
	}

	pid := p.PID()
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.Running() {
		t.Fatal("still running after Kill")
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if p.PID() == pid || p.Runs() != 2 {
		t.Errorf("pid %d (was %d), %d runs; want a second process", p.PID(), pid, p.Runs())
	}
	described, err := c.DescribeWorkflowExecution(ctx, "survives-a-kill", "")
	if err != nil {
		t.Fatalf("the workflow started before the kill: %v", err)
	}
	if got := described.GetWorkflowExecutionInfo().GetExecution().GetRunId(); got != run.GetRunID() {
		t.Errorf("run %s after the restart, started %s", got, run.GetRunID())
	}
}

func TestWorkerByIdentity(t *testing.T) {
	s := &Stack{Workers: []*Process{{Name: "worker-0"}}}
	for _, identity := range []string{"", "abc@host@", "0@host@", "12345@host@"} {
		if i, ok := s.WorkerByIdentity(identity); ok {
			t.Errorf("identity %q matched worker %d; no worker runs", identity, i)
		}
	}
}
