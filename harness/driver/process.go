package driver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is one binary run as an OS process, again and again: every run
// appends its output to the same log file, Kill is a SIGKILL (a crash, an
// OOM kill), Start waits for the line that says the process is ready.
type Process struct {
	// Name says which process this is in errors and in the log's run
	// banners ("worker-1", "temporal").
	Name      string
	Binary    string
	Args      []string
	Env       []string
	LogPath   string
	ReadyLine string
	// StartTimeout bounds the wait for ReadyLine.
	StartTimeout time.Duration

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	runs   int
}

// ErrNotRunning is returned by Kill on a process that is not running.
var ErrNotRunning = errors.New("not running")

// Start runs the binary and waits for ReadyLine in its output; a process
// that exits first, or is not ready in StartTimeout, is an error (with the
// log's tail) and is killed.
func (p *Process) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.cmd != nil {
		p.mu.Unlock()
		return fmt.Errorf("%s: already running", p.Name)
	}
	logFile, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("%s: log: %w", p.Name, err)
	}
	p.runs++
	from := fileSize(p.LogPath)
	fmt.Fprintf(logFile, "===== harness: %s run %d starting at %s =====\n", p.Name, p.runs, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.Binary, p.Args...)
	cmd.Env = p.Env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, and killed when the harness dies, so an
	// aborted run leaves nothing behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		p.mu.Unlock()
		return fmt.Errorf("%s: starting %s: %w", p.Name, p.Binary, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited = cmd, exited
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	p.mu.Unlock()

	timeout := p.StartTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	deadline := time.Now().Add(timeout)
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		if bytes.Contains(readFrom(p.LogPath, from), []byte(p.ReadyLine)) {
			return nil
		}
		select {
		case <-exited:
			p.forget(cmd)
			return fmt.Errorf("%s exited before it was ready; log:\n%s", p.Name, tail(readFrom(p.LogPath, from), 30))
		case <-ctx.Done():
			_ = p.Kill()
			return ctx.Err()
		case <-ticker.C:
		}
		if time.Now().After(deadline) {
			_ = p.Kill()
			return fmt.Errorf("%s not ready after %s (no %q line); log:\n%s", p.Name, timeout, p.ReadyLine, tail(readFrom(p.LogPath, from), 30))
		}
	}
}

// Kill SIGKILLs the process and waits until it is gone.
func (p *Process) Kill() error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("%s: %w", p.Name, ErrNotRunning)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: SIGKILL: %w", p.Name, err)
	}
	<-exited
	p.forget(cmd)
	return nil
}

// Stop ends the process with SIGTERM, then SIGKILL after grace. Stopping a
// process that is not running does nothing.
func (p *Process) Stop(grace time.Duration) error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	defer p.forget(cmd)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return nil
	case <-time.After(grace):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		return fmt.Errorf("%s did not stop within %s of SIGTERM; killed", p.Name, grace)
	}
}

// PID is the running process's id, or 0.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	select {
	case <-p.exited:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// Running reports whether the process is up.
func (p *Process) Running() bool { return p.PID() != 0 }

// Runs is how many times the process was started.
func (p *Process) Runs() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runs
}

func (p *Process) forget(cmd *exec.Cmd) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == cmd {
		p.cmd = nil
	}
}

// Memory is a process's resident set from /proc: now and its peak.
type Memory struct {
	RSS, PeakRSS int64 // bytes
}

// MemoryOf reads /proc/<pid>/status (VmRSS, VmHWM).
func MemoryOf(pid int) (Memory, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	for line := range strings.SplitSeq(string(raw), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) == 0 {
			continue
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "VmRSS":
			m.RSS = kb * 1024
		case "VmHWM":
			m.PeakRSS = kb * 1024
		}
	}
	return m, nil
}

func fileSize(path string) int64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return info.Size()
}

func readFrom(path string, offset int64) []byte {
	raw, err := os.ReadFile(path)
	if err != nil || int64(len(raw)) < offset {
		return nil
	}
	return raw[offset:]
}

// Tail is the last n lines of a log file.
func Tail(path string, n int) string { return tail(readFrom(path, 0), n) }

func tail(raw []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
