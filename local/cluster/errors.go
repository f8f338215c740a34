package cluster

import (
	"errors"
	"fmt"
)

// ToolsSourceNotFoundError says where the local/tools modules were looked for.
// Without them the binaries cannot be built (or their cache key computed).
type ToolsSourceNotFoundError struct {
	Searched []string
}

func (e *ToolsSourceNotFoundError) Error() string {
	return fmt.Sprintf("local/tools (the modules that build the Kubernetes binaries) not found; searched %v: "+
		"run from a Millwright checkout, set %s to its local/tools, or set %s to a directory holding prebuilt binaries",
		e.Searched, EnvToolsSource, EnvToolsDir)
}

// IsToolsSourceNotFound reports whether err is a ToolsSourceNotFoundError.
func IsToolsSourceNotFound(err error) bool {
	var target *ToolsSourceNotFoundError
	return errors.As(err, &target)
}

// ToolBuildError is a failed `go build` of one binary, with the tail of its output.
type ToolBuildError struct {
	Binary string
	Output string
	Err    error
}

func (e *ToolBuildError) Error() string {
	return fmt.Sprintf("building %s: %v\n%s", e.Binary, e.Err, e.Output)
}

func (e *ToolBuildError) Unwrap() error { return e.Err }

// IsToolBuild reports whether err is a ToolBuildError.
func IsToolBuild(err error) bool {
	var target *ToolBuildError
	return errors.As(err, &target)
}

// KwokctlError is a failed kwokctl invocation, with the tail of its log.
type KwokctlError struct {
	Command string
	LogPath string
	Output  string
	Err     error
}

func (e *KwokctlError) Error() string {
	return fmt.Sprintf("kwokctl %s: %v (full log: %s)\n%s", e.Command, e.Err, e.LogPath, e.Output)
}

func (e *KwokctlError) Unwrap() error { return e.Err }

// IsKwokctl reports whether err is a KwokctlError.
func IsKwokctl(err error) bool {
	var target *KwokctlError
	return errors.As(err, &target)
}

// NotReadyError says which readiness check the control plane failed to pass in time.
type NotReadyError struct {
	Check string
	Err   error
}

func (e *NotReadyError) Error() string {
	return fmt.Sprintf("control plane not ready: %s: %v", e.Check, e.Err)
}

func (e *NotReadyError) Unwrap() error { return e.Err }

// IsNotReady reports whether err is a NotReadyError.
func IsNotReady(err error) bool {
	var target *NotReadyError
	return errors.As(err, &target)
}

// ComponentExitedError is a control-plane component whose process ended
// while the cluster started, with the tail of its log (a port taken
// between FreeLocalPorts and the component's bind, a bad flag).
type ComponentExitedError struct {
	Component string
	PID       int
	LogTail   string
}

func (e *ComponentExitedError) Error() string {
	return fmt.Sprintf("%s (pid %d) exited; its log ends:\n%s", e.Component, e.PID, e.LogTail)
}

// IsComponentExited reports whether err is a ComponentExitedError.
func IsComponentExited(err error) bool {
	var target *ComponentExitedError
	return errors.As(err, &target)
}

// LeftoverProcessError lists control-plane processes or ports still alive after Stop.
type LeftoverProcessError struct {
	PIDs  []int
	Ports []int
}

func (e *LeftoverProcessError) Error() string {
	return fmt.Sprintf("control plane left running after kwokctl delete: pids %v, listening ports %v", e.PIDs, e.Ports)
}

// IsLeftoverProcess reports whether err is a LeftoverProcessError.
func IsLeftoverProcess(err error) bool {
	var target *LeftoverProcessError
	return errors.As(err, &target)
}

// InvalidOptionError names an Options field that cannot be used.
type InvalidOptionError struct {
	Field  string
	Reason string
}

func (e *InvalidOptionError) Error() string {
	return fmt.Sprintf("cluster option %s: %s", e.Field, e.Reason)
}

// IsInvalidOption reports whether err is an InvalidOptionError.
func IsInvalidOption(err error) bool {
	var target *InvalidOptionError
	return errors.As(err, &target)
}
