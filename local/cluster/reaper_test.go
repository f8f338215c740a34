package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A cluster's owner killed without Stop (a test binary at its timeout, a
// benchmark interrupted by hand) must not leave its control plane
// running: the reaper ends every process a pid file names once the owner
// is gone, and only then.
func TestReaperEndsTheComponentsOnceTheirOwnerExits(t *testing.T) {
	pidDir := t.TempDir()
	owner := startSleeper(t, false)
	// Detached, as kwokctl's binary runtime starts the components.
	components := []*exec.Cmd{startSleeper(t, true), startSleeper(t, true)}
	ended := make([]chan struct{}, len(components))
	for i, c := range components {
		name := filepath.Join(pidDir, "component-"+strconv.Itoa(i)+".pid")
		if err := os.WriteFile(name, []byte(strconv.Itoa(c.Process.Pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ended[i] = make(chan struct{})
		go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(c, ended[i])
	}
	reaper, err := startReaper(owner.Process.Pid, pidDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reaper.Kill() })

	for i := range components {
		select {
		case <-ended[i]:
			t.Fatalf("component %d ended while its owner still runs", i)
		default:
		}
	}
	_ = owner.Process.Kill()
	_ = owner.Wait() // reaped, so that `kill -0` sees it gone
	for i := range components {
		select {
		case <-ended[i]:
		case <-time.After(30 * time.Second):
			t.Fatalf("component %d (pid %d) still runs 30 s after its owner exited", i, components[i].Process.Pid)
		}
	}
}

// startSleeper starts a process that runs until it is killed, ended with
// the test at the latest.
func startSleeper(t *testing.T, detached bool) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if detached {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd
}
