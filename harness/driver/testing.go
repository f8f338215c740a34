package driver

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// StartForTest starts the stack for a harness test in a fresh state dir
// (named after prefix), which is kept — and its path logged — when the test
// fails or keep is set, and stops it all when the test ends.
func StartForTest(t *testing.T, prefix string, keep bool, opts Options) *Stack {
	t.Helper()
	stateDir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || keep {
			t.Logf("logs kept in %s", stateDir)
			return
		}
		_ = os.RemoveAll(stateDir)
	})
	opts.StateDir = stateDir
	began := time.Now()
	s, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	// Registered after the state dir's cleanup, so it runs first.
	t.Cleanup(func() {
		if t.Failed() || keep {
			// Deleting the cluster deletes its components' logs.
			if err := s.Local.Cluster.SaveLogs(filepath.Join(stateDir, "cluster-logs")); err != nil {
				t.Log(err)
			}
		}
		if err := s.Stop(context.Background()); err != nil {
			t.Log("stopping the stack:", err)
		}
	})
	t.Logf("stack up in %s: %d workers, Temporal pid %d on %s, state in %s",
		time.Since(began).Round(time.Second), len(s.Workers), s.TemporalProc.PID(), s.TemporalAddr, stateDir)
	return s
}
