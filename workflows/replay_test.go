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
)

// TestReplayRecordedHistories replays histories recorded on a real Temporal
// server (testdata/*.json.gz) against today's workflow code. A failure means
// a change would break workflows already running: version it with
// workflow.GetVersion instead. Record new histories after a deliberate,
// versioned change with:
//
//	go test -tags recordhistories -run TestRecordHistories ./workflows/
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories under workflows/testdata; record them with `go test -tags recordhistories -run TestRecordHistories ./workflows/`")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json.gz"), func(t *testing.T) {
			replayer := worker.NewWorkflowReplayer()
			Register(replayer)
			history, err := client.HistoryFromJSON(gunzip(t, file), client.HistoryJSONOptions{})
			if err != nil {
				t.Fatalf("read %s: %v", file, err)
			}
			if err := replayer.ReplayWorkflowHistory(nil, history); err != nil {
				t.Fatalf("replay %s: %v", file, err)
			}
		})
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
