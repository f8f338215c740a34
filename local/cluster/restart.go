package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/wait"
)

// ComponentKubeAPIServer is the kwokctl component name of the apiserver,
// for RestartComponent.
const ComponentKubeAPIServer = "kube-apiserver"

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
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("restarting %s: opening its log: %w", component, err)
	}
	defer logFile.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, environ
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Detached like kwokctl's own start: the cluster's teardown kills it
	// through the pid file, not through us.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("restarting %s: starting %s: %w", component, argv[0], err)
	}
	newPID := cmd.Process.Pid
	go func() { _ = cmd.Wait() }() // reap it when it ends
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(newPID)), 0o644); err != nil {
		return fmt.Errorf("restarting %s: writing its pid file: %w", component, err)
	}
	c.logger.Info("restarted control-plane component", zap.String("component", component), zap.Int("oldPid", pid), zap.Int("pid", newPID))
	if component != ComponentKubeAPIServer {
		return nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("restarting %s: not ready again: %w", component, err)
	}
	// The other components must have lived through the outage.
	for _, pid := range c.componentPIDs() {
		if !processAlive(pid) {
			return fmt.Errorf("restarting %s: control-plane process %d died while it was down (see %s)", component, pid, filepath.Join(c.clusterDir(), "logs"))
		}
	}
	return nil
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
