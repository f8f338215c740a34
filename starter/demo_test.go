package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/millwright/millwright/local/stack"
)

// syncBuffer is the demo's output as the test reads it: the worker and the
// demo write from different goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// demoTestOptions is `starter dev --ephemeral --demo --exit` on free ports
// with its state in dir.
func demoTestOptions(dir string) devOptions {
	return devOptions{
		stateDir:      dir,
		ephemeral:     true,
		clusterName:   "millwright",
		temporalAddr:  "127.0.0.1:0",
		uiAddr:        "127.0.0.1:0",
		emulatorAddr:  "127.0.0.1:0",
		bootDelay:     3 * time.Second,
		shutdownDelay: 3 * time.Second,
		logLevel:      "info",
		demo:          true,
		exit:          true,
	}
}

// TestDemo plays the whole walkthrough on a real local stack, as `make demo
// DEMO_FLAGS=--exit` does, and checks the story its output tells, in order.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack and plays a ~1 minute scenario")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var out syncBuffer
	var started *stack.Stack
	opts := demoTestOptions(t.TempDir())
	opts.stackStarted = func(s *stack.Stack) { started = s }

	begin := time.Now()
	err := runDev(ctx, opts, &out)
	t.Logf("runDev took %s; output:\n%s", time.Since(begin).Round(time.Millisecond), out.String())
	if err != nil {
		t.Fatalf("runDev: %v", err)
	}
	if started == nil {
		t.Fatal("the stack never started")
	}
	if live := started.Emulator.State().LiveInstances(); len(live) != 0 {
		t.Errorf("%d instance(s) left live after the demo: %+v", len(live), live)
	}

	wantInOrder := []string{
		"Waiting to batch additional pods",
		"provisionable pods",
		"Computed packing for ",
		"Launched instance: i-",
		"All 10 pods Running",
		"$ kubectl get pods -o wide",
		"$ kubectl delete deployment inflate",
		"Added TTL to empty node",
		"Triggering termination after 30s for empty node",
		"Cordoned node",
		"Deleted node",
		"no instance left running in the emulator",
		"Node workflows in the Temporal UI: http://127.0.0.1:",
		"Demo finished in ",
	}
	text := out.String()
	at := 0
	for _, want := range wantInOrder {
		i := strings.Index(text[at:], want)
		if i < 0 {
			t.Fatalf("output lacks %q after offset %d (or it came out of order)", want, at)
		}
		at += i + len(want)
	}
	if strings.Contains(text, "DEMO FAILED") {
		t.Error("output reports a failed step")
	}
}

func TestShellJoin(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "plain words", args: []string{"get", "pods", "-o", "wide"}, want: "get pods -o wide"},
		{name: "flag with equals", args: []string{"--requests=cpu=1"}, want: "--requests=cpu=1"},
		{name: "space", args: []string{"a b"}, want: "'a b'"},
		{name: "single quote", args: []string{"it's"}, want: `'it'\''s'`},
		{name: "empty", args: []string{""}, want: "''"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := shellJoin(tt.args); got != tt.want {
				t.Errorf("shellJoin(%q) = %s, want %s", tt.args, got, tt.want)
			}
		})
	}
}

func TestFieldDroppingCore(t *testing.T) {
	tests := []struct {
		name     string
		bound    []zap.Field
		line     []zap.Field
		wantKeys []string
	}{
		{name: "drops bound SDK fields", bound: []zap.Field{zap.String("RunID", "r"), zap.String("WorkflowID", "node/x")}, wantKeys: []string{"WorkflowID"}},
		{name: "drops line SDK fields", line: []zap.Field{zap.Int("Attempt", 1), zap.String("node", "n")}, wantKeys: []string{"node"}},
		{name: "keeps everything else", line: []zap.Field{zap.String("nodeClaim", "c"), zap.String("reason", "Empty")}, wantKeys: []string{"nodeClaim", "reason"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			observed, logs := observer.New(zap.InfoLevel)
			logger := zap.New(fieldDroppingCore{Core: observed, drop: sdkContextFields}).With(tt.bound...)
			logger.Info("line", tt.line...)
			entries := logs.All()
			if len(entries) != 1 {
				t.Fatalf("got %d entries, want 1", len(entries))
			}
			var keys []string
			for _, field := range entries[0].Context {
				keys = append(keys, field.Key)
			}
			if !slices.Equal(keys, tt.wantKeys) {
				t.Errorf("fields %v, want %v", keys, tt.wantKeys)
			}
		})
	}
}
