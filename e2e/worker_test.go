package e2e

// The worker as a real OS process: started from the built binary with the
// flags and environment a user would give it, its output appended to
// worker.log in the state dir, killed with SIGKILL and restarted by
// scenarios that test crash recovery.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/millwright/millwright/harness/driver"
)

// workerReadyLine is what the worker logs once its informers synced, its
// Temporal worker polls and its watchers run (worker/run).
const workerReadyLine = "Millwright worker started"

// workerStartTimeout bounds a start: informers sync and the Temporal worker
// begins polling within seconds, even on a loaded machine.
const workerStartTimeout = 90 * time.Second

// workerStopTimeout is how long a SIGTERM gets before SIGKILL.
const workerStopTimeout = 30 * time.Second

// workerProcess is the worker binary running against the suite's stack. At
// most one process runs at a time; every run appends to the same log file.
type workerProcess struct {
	suite   *e2eSuite
	logPath string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
	exitErr error         // cmd's exit status, once exited is closed
	runs    int
}

func newWorkerProcess(s *e2eSuite) *workerProcess {
	return &workerProcess{suite: s, logPath: filepath.Join(s.stateDir, "worker.log")}
}

// args are the worker's flags, as a user would pass them to reach the local
// stack (see starter dev's dev.env for the same settings as environment).
func (w *workerProcess) args() []string {
	s := w.suite.stack
	return []string{
		"--address", s.Temporal.FrontendAddr(),
		"--namespace", s.Temporal.Namespace(),
		"--cluster-name", s.ClusterName(),
		"--kubeconfig", s.Cluster.KubeconfigPath(),
		"--aws-region", awsRegion,
		"--aws-endpoint", s.EmulatorURL(),
		"--interruption-queue", s.InterruptionQueueName(),
		"--log-level", "info",
		// Not the default :8080: other stacks on the machine may hold it.
		"--metrics-address", "127.0.0.1:0",
	}
}

// environ is the test's environment without anything that would point the
// worker elsewhere, plus the emulator's static credentials (the harnesses'
// workers get the same).
func (w *workerProcess) environ() []string { return driver.WorkerEnviron() }

// launch starts a worker process and waits until it logs that it is ready.
// It fails if one is already running.
func (w *workerProcess) launch(ctx context.Context) error {
	w.mu.Lock()
	if w.cmd != nil {
		w.mu.Unlock()
		return errors.New("worker: already running (kill or stop it first)")
	}
	logFile, err := os.OpenFile(w.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		w.mu.Unlock()
		return fmt.Errorf("worker log: %w", err)
	}
	w.runs++
	from := fileSize(w.logPath)
	fmt.Fprintf(logFile, "===== e2e: worker run %d starting at %s =====\n", w.runs, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(w.suite.workerBinary, w.args()...)
	cmd.Env = w.environ()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, and killed if the test binary dies, so an
	// aborted run leaves no worker behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		w.mu.Unlock()
		return fmt.Errorf("worker: starting %s: %w", w.suite.workerBinary, err)
	}
	exited := make(chan struct{})
	w.cmd, w.exited = cmd, exited
	go func() {
		err := cmd.Wait()
		logFile.Close()
		w.mu.Lock()
		w.exitErr = err
		w.mu.Unlock()
		close(exited)
	}()
	w.mu.Unlock()

	deadline := time.Now().Add(workerStartTimeout)
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		if strings.Contains(w.logSince(from), workerReadyLine) {
			return nil
		}
		select {
		case <-exited:
			w.forget(cmd)
			return fmt.Errorf("worker exited before it was ready (%v); log:\n%s", w.exitError(), w.logSince(from))
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("worker not ready after %s (no %q line); log:\n%s", workerStartTimeout, workerReadyLine, w.logSince(from))
		}
	}
}

// start starts the worker (it must not be running) and waits until it is
// ready.
func (w *workerProcess) start(t testing.TB) {
	t.Helper()
	started := time.Now()
	if err := w.launch(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("worker started (run %d) in %s", w.runs, time.Since(started).Round(time.Millisecond))
}

// kill SIGKILLs the worker, as a crash or an OOM kill would, and waits until
// the process is gone. Temporal keeps every lifecycle; nothing runs them
// until the next start.
func (w *workerProcess) kill(t testing.TB) {
	t.Helper()
	w.mu.Lock()
	cmd, exited := w.cmd, w.exited
	w.mu.Unlock()
	if cmd == nil {
		t.Fatal("worker: kill: not running")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("worker: SIGKILL: %v", err)
	}
	<-exited
	w.forget(cmd)
	t.Logf("worker killed (run %d)", w.runs)
}

// restart kills the worker if it runs, then starts a new process.
func (w *workerProcess) restart(t testing.TB) {
	t.Helper()
	if w.running() {
		w.kill(t)
	}
	w.start(t)
}

// running reports whether a worker process is up (started and not exited).
func (w *workerProcess) running() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd == nil {
		return false
	}
	select {
	case <-w.exited:
		return false
	default:
		return true
	}
}

// stop ends the worker gracefully (SIGTERM, then SIGKILL after
// workerStopTimeout). Stopping a worker that is not running is a no-op.
func (w *workerProcess) stop() error {
	w.mu.Lock()
	cmd, exited := w.cmd, w.exited
	w.mu.Unlock()
	if cmd == nil {
		return nil
	}
	defer w.forget(cmd)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(workerStopTimeout):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		return fmt.Errorf("worker did not stop within %s of SIGTERM; killed", workerStopTimeout)
	}
	if err := w.exitError(); err != nil {
		return fmt.Errorf("worker exited with %w", err)
	}
	return nil
}

// forget clears the current process if it is cmd.
func (w *workerProcess) forget(cmd *exec.Cmd) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd == cmd {
		w.cmd = nil
	}
}

func (w *workerProcess) exitError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.exitErr
}

// logOffset is the current end of worker.log; pass it to waitLog or
// logSince to look only at what is logged from now on.
func (w *workerProcess) logOffset() int64 { return fileSize(w.logPath) }

// logSince is worker.log from offset on.
func (w *workerProcess) logSince(offset int64) string {
	f, err := os.Open(w.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		return ""
	}
	var b strings.Builder
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for scanner.Scan() {
		b.WriteString(scanner.Text())
		b.WriteByte('\n')
	}
	return b.String()
}

// logLine finds the first line of worker.log after offset that contains
// every one of substrings.
func (w *workerProcess) logLine(offset int64, substrings ...string) (string, bool) {
	for line := range strings.SplitSeq(w.logSince(offset), "\n") {
		if containsAll(line, substrings) {
			return line, true
		}
	}
	return "", false
}

// waitLog waits until the worker logs, after offset, a line containing
// every one of substrings, and returns that line.
func (w *workerProcess) waitLog(t testing.TB, offset int64, timeout time.Duration, substrings ...string) string {
	t.Helper()
	var line string
	poll(t, timeout, fmt.Sprintf("the worker to log a line with %q", substrings), func(context.Context) (bool, error) {
		var ok bool
		line, ok = w.logLine(offset, substrings...)
		return ok, nil
	})
	return line
}

func containsAll(s string, substrings []string) bool {
	for _, sub := range substrings {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// logTail is the last n lines of worker.log.
func (w *workerProcess) logTail(n int) string {
	lines := strings.Split(strings.TrimRight(w.logSince(0), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func fileSize(path string) int64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return info.Size()
}
