package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

// reaperScript waits for the process that started the cluster to exit,
// then ends the components whose pid files are still there (SIGTERM, and
// SIGKILL 5 s later for any still running). kwokctl starts the components
// detached, so a test binary killed by a timeout or by hand, which runs no
// cleanup, left etcd, the apiserver, the controller manager, the scheduler
// and kwok running, loading the machine for every later measurement
// (session 23 found one a killed benchmark had left). The pid files are read
// only once the owner is gone, so the components ended are those running
// then, restarts included; after Stop, kwokctl has removed them and Stop
// has ended the reaper.
const reaperScript = `owner=$1; pids=$2
while kill -0 "$owner" 2>/dev/null; do sleep 1; done
ended=""
for f in "$pids"/*.pid; do
	[ -f "$f" ] || continue
	pid=$(cat "$f")
	kill "$pid" 2>/dev/null && ended="$ended $pid"
done
[ -n "$ended" ] || exit 0
sleep 5
for pid in $ended; do kill -9 "$pid" 2>/dev/null; done
exit 0`

// startReaper starts, in its own session so that it outlives owner and a
// terminal's signals to owner's group, a shell that ends the processes
// named by the *.pid files in pidDir once owner has exited.
func startReaper(owner int, pidDir string) (*os.Process, error) {
	cmd := exec.Command("/bin/sh", "-c", reaperScript, "millwright-cluster-reaper", strconv.Itoa(owner), filepath.Clean(pidDir))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	// Reaped here if it ends while owner runs (when Stop kills it).
	go func() { _ = cmd.Wait() }()
	return cmd.Process, nil
}
