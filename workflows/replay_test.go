package workflows

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestReplayRecordedHistories replays the histories every release recorded
// on a real Temporal server (testdata/<release>/*.json.gz) against today's
// workflow code. A failure means a change would break workflows already
// running: put it behind changed(ctx, id) with an id in versions.go (the
// policy is in doc.go). Record a release's histories with:
//
//	go test -tags recordhistories -run TestRecordHistories ./workflows/ -args -release=vX.Y
func TestReplayRecordedHistories(t *testing.T) {
	releases, err := filepath.Glob(filepath.Join("testdata", "v*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(releases) == 0 {
		t.Fatal("no recorded releases under workflows/testdata; record them with `go test -tags recordhistories -run TestRecordHistories ./workflows/ -args -release=vX.Y`")
	}
	for _, release := range releases {
		files, err := filepath.Glob(filepath.Join(release, "*.json.gz"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Errorf("%s holds no recorded history", release)
		}
		for _, file := range files {
			name := filepath.Base(release) + "/" + strings.TrimSuffix(filepath.Base(file), ".json.gz")
			t.Run(name, func(t *testing.T) {
				replayer := worker.NewWorkflowReplayer()
				Register(replayer)
				history, err := client.HistoryFromJSON(gunzip(t, file), client.HistoryJSONOptions{})
				if err != nil {
					t.Fatalf("read %s: %v", file, err)
				}
				// The recorded workflow id and run id, not the replayer's
				// stand-ins: a command names its replacements after its id.
				started := history.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
				options := worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{
					ID: started.GetWorkflowId(), RunID: started.GetOriginalExecutionRunId(),
				}}
				if err := replayer.ReplayWorkflowHistoryWithOptions(nil, history, options); err != nil {
					t.Fatalf("replay %s: %v", file, err)
				}
			})
		}
	}
}

func gunzip(t *testing.T, file string) io.Reader {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	r, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return r
}
