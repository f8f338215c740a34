package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
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

	// The pods may reach the provisioner in more than one batch, so the
	// counts are patterns.
	wantInOrder := []*regexp.Regexp{
		regexp.MustCompile(`Waiting to batch additional pods`),
		regexp.MustCompile(`Found [1-9][0-9]* provisionable pods`),
		regexp.MustCompile(`Computed packing for [1-9][0-9]* pod\(s\) with instance type option\(s\) \[m5\.`),
		regexp.MustCompile(`Launched instance: i-[0-9a-f]+, type: m5\.[a-z0-9]+, zone: us-east-1[ab], hostname: ip-`),
		regexp.MustCompile(`All 10 pods Running`),
		regexp.MustCompile(`\$ kubectl get pods -o wide`),
		regexp.MustCompile(`\$ kubectl delete deployment inflate`),
		regexp.MustCompile(`Triggering termination after 30s for empty node`),
		regexp.MustCompile(`Cordoned node`),
		regexp.MustCompile(`Deleted node`),
		regexp.MustCompile(`no instance left running in the emulator`),
		regexp.MustCompile(`Node workflows in the Temporal UI: http://127\.0\.0\.1:[0-9]+/namespaces/default/workflows\?query=`),
		regexp.MustCompile(`Demo finished in `),
	}
	text := out.String()
	at := 0
	for _, want := range wantInOrder {
		loc := want.FindStringIndex(text[at:])
		if loc == nil {
			t.Fatalf("output lacks %q after offset %d (or it came out of order)", want, at)
		}
		at += loc[1]
	}
	// The countdown's line may come before the deletion: a node that
	// initialized before its pods bound is empty from then, and when its
	// pods come and go within the second over which pod events are summed
	// into one pods-changed signal, the node workflow never hears of them
	// (seen in CI, as in e2e's TestWalkthrough). The disruption workflow
	// still counts consolidateAfter from the last pod event.
	launched := regexp.MustCompile(`Launched instance: i-`).FindStringIndex(text)
	if launched == nil || !strings.Contains(text[launched[1]:], "Added TTL to empty node") {
		t.Error(`output lacks "Added TTL to empty node" after the first launch`)
	}
	if strings.Contains(text, "DEMO FAILED") {
		t.Error("output reports a failed step")
	}
}

// TestDemoReportsFailedStep makes step 3 time out (the pods cannot run
// before a simulated instance has booted) and checks that the failure names
// the step, dumps the state that explains it and still stops the stack.
func TestDemoReportsFailedStep(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out syncBuffer
	opts := demoTestOptions(t.TempDir())
	opts.bootDelay = time.Minute
	opts.demoTimeouts = demoTimeouts{pods: 2 * time.Second}

	err := runDev(ctx, opts, &out)
	text := out.String()
	t.Logf("output:\n%s", text)
	var stepErr *DemoStepError
	if !errors.As(err, &stepErr) || !IsDemoStepError(err) {
		t.Fatalf("runDev = %v, want a *DemoStepError", err)
	}
	if !strings.HasPrefix(stepErr.Step, "3.") {
		t.Errorf("failed step %q, want step 3 (waiting for the pods)", stepErr.Step)
	}
	for _, want := range []string{
		"DEMO FAILED: demo step \"3.",
		"--- state at the failure ---",
		"pod inflate-",
		"node workflows (",
		"--- end of state ---",
		"Stopped; nothing left running.",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
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
