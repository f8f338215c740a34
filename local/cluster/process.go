package cluster

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// processAlive reports whether pid names a live process. A zombie counts as dead:
// kwokctl forks the components and exits, so once killed they wait for init to
// reap them, and a container's init may never do so.
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		// No procfs (macOS): signal 0 succeeding is the best answer available.
		return !errors.Is(err, os.ErrNotExist) || !procfsMounted()
	}
	// The state follows the parenthesised command name, which may itself hold ')'.
	rest := string(stat)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	fields := strings.Fields(rest)
	return len(fields) == 0 || (fields[0] != "Z" && fields[0] != "X")
}

func procfsMounted() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

func killProcess(pid int) error {
	return syscall.Kill(pid, syscall.SIGKILL)
}
