package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/wait"
)

// ComponentKubeAPIServer is the kwokctl component name of the apiserver,
// for RestartComponent.
const ComponentKubeAPIServer = "kube-apiserver"

// ComponentKubeControllerManager is the kwokctl component name of the
// controller manager.
const ComponentKubeControllerManager = "kube-controller-manager"

// RestartComponent SIGKILLs one control-plane component of a cluster this
// process started (e.g. ComponentKubeAPIServer) and starts it again with
// the command line, working directory and environment kwokctl gave it,
// appending to the same log; etcd keeps the state, so clients see the
// apiserver vanish and come back. It returns once the new process runs and,
// for the apiserver, once /readyz answers (bounded by ctx). The chaos suite
// uses it.
func (c *Cluster) RestartComponent(ctx context.Context, component string) error {
	if !c.owned {
		return fmt.Errorf("restarting %s: the cluster was attached, not started by this process", component)
	}
	pidFile := filepath.Join(c.clusterDir(), "pids", component+".pid")
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		return fmt.Errorf("restarting %s: reading its pid file: %w", component, err)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(raw)))
	if err != nil || pid <= 0 {
		return fmt.Errorf("restarting %s: pid file %s holds %q", component, pidFile, raw)
	}
	argv, err := procStrings(pid, "cmdline")
	if err != nil || len(argv) == 0 {
		return fmt.Errorf("restarting %s: reading the command line of pid %d: %v", component, pid, err)
	}
	environ, err := procStrings(pid, "environ")
	if err != nil {
		return fmt.Errorf("restarting %s: reading the environment of pid %d: %w", component, pid, err)
	}
	dir, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return fmt.Errorf("restarting %s: reading the working directory of pid %d: %w", component, pid, err)
	}
	if err := killProcess(pid); err != nil {
		return fmt.Errorf("restarting %s: SIGKILL pid %d: %w", component, pid, err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return !processAlive(pid), nil
	}); err != nil {
		return fmt.Errorf("restarting %s: pid %d still alive after SIGKILL", component, pid)
	}

	logPath := filepath.Join(c.clusterDir(), "logs", component+".log")
	// A component that exits at once (a port taken meanwhile) is started
	// again, as a kubelet restarts a static pod.
	var lastErr error
	for attempt := 1; attempt <= restartAttempts; attempt++ {
		exited, err := c.startComponent(component, pidFile, logPath, argv, environ, dir, pid)
		if err != nil {
			return err
		}
		lastErr = c.waitComponentUp(ctx, component, exited)
		if !errors.Is(lastErr, errExitedEarly) || ctx.Err() != nil {
			break // up, or still running: never two of it
		}
		c.logger.Warn("restarted control-plane component did not come up; starting it again",
			zap.String("component", component), zap.Int("attempt", attempt), zap.Error(lastErr))
	}
	if lastErr != nil {
		return fmt.Errorf("restarting %s: %w; its log ends:\n%s", component, lastErr, logTail(logPath, 15))
	}
	// The other components must have lived through the outage.
	for _, pid := range c.componentPIDs() {
		if !processAlive(pid) {
			return fmt.Errorf("restarting %s: control-plane process %d died while it was down (see %s)", component, pid, filepath.Join(c.clusterDir(), "logs"))
		}
	}
	return nil
}

// errExitedEarly: the restarted component exited before it was up.
var errExitedEarly = errors.New("it exited before it was up")

// restartAttempts bounds how often RestartComponent starts a component
// that exits before it is up.
const restartAttempts = 3

// startComponent starts argv detached, appending to logPath, records its
// pid in pidFile, and returns a channel closed when it exits.
func (c *Cluster) startComponent(component, pidFile, logPath string, argv, environ []string, dir string, oldPID int) (<-chan struct{}, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("restarting %s: opening its log: %w", component, err)
	}
	defer logFile.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, environ
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Detached like kwokctl's own start: the cluster's teardown kills it
	// through the pid file, not through us.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("restarting %s: starting %s: %w", component, argv[0], err)
	}
	newPID := cmd.Process.Pid
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }() // reap it when it ends
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(newPID)), 0o644); err != nil {
		return nil, fmt.Errorf("restarting %s: writing its pid file: %w", component, err)
	}
	c.logger.Info("restarted control-plane component", zap.String("component", component), zap.Int("oldPid", oldPID), zap.Int("pid", newPID))
	return exited, nil
}

// waitComponentUp returns once the restarted component runs (the
// apiserver: answers /readyz), or why not: it exited, or ctx or two
// minutes ended first.
func (c *Cluster) waitComponentUp(ctx context.Context, component string, exited <-chan struct{}) error {
	if component != ComponentKubeAPIServer {
		select {
		case <-exited:
			return errExitedEarly
		case <-time.After(time.Second):
			return nil
		}
	}
	var readyErr error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, errExitedEarly
		default:
		}
		_, readyErr = c.clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return readyErr == nil, nil
	})
	if err != nil && readyErr != nil && wait.Interrupted(err) {
		return fmt.Errorf("not ready again: %w (last /readyz: %v)", err, readyErr)
	}
	return err
}

// logTail is the last n lines of the file at path (or why it cannot be
// read).
func logTail(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// procStrings reads a NUL-separated /proc/<pid>/<name> file (cmdline,
// environ).
func procStrings(pid int, name string) ([]string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, field := range bytes.Split(bytes.TrimRight(raw, "\x00"), []byte{0}) {
		out = append(out, string(field))
	}
	return out, nil
}
