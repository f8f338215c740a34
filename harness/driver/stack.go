// Package driver runs Millwright's shipped binaries on the local stack for
// the long harnesses (the chaos suite, the scale benchmark): it builds the
// worker and the Temporal server command, starts the control plane and the
// EC2/SQS emulator in-process (local/stack), the Temporal server as its own
// process on a SQLite file, and N worker replicas on one task queue as the
// Helm chart deploys them; and it SIGKILLs and restarts any of them (or the
// kube-apiserver) on demand. It judges nothing: the harnesses do.
package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/millwright/millwright/activities/planning"
	"github.com/millwright/millwright/deploy/examples"
	"github.com/millwright/millwright/local/awsemu"
	"github.com/millwright/millwright/local/cluster"
	"github.com/millwright/millwright/local/stack"
	"github.com/millwright/millwright/local/stack/stacktest"
	"github.com/millwright/millwright/local/temporal"
)

// AWSRegion is the region the workers are configured with; the emulator
// serves us-east-1.
const AWSRegion = "us-east-1"

// workerReadyLine is what a worker logs once its informers synced and it
// polls (worker/run); temporalReadyLine is harness/cmd/temporal's.
const (
	workerReadyLine   = "Millwright worker started"
	temporalReadyLine = "temporal server ready"
)

// Options configure Start.
type Options struct {
	// StateDir holds the binaries, the Temporal database, the cluster and
	// every log (worker-N.log, temporal.log, stack.log). Required.
	StateDir string
	// Workers is the number of worker replicas (default 2, as the chart).
	Workers int
	// WorkerArgs are extra worker flags (e.g. --log-level).
	WorkerArgs []string
	// Emulator tunes the emulator's delays; the default is the tests' (one
	// second boots, shutdowns and Node deletions).
	Emulator *awsemu.Options
}

// Stack is the running stack: the in-process control plane and emulator,
// the Temporal server process and the worker processes, and clients.
type Stack struct {
	opts      Options
	Local     *stack.Stack
	Kube      kubernetes.Interface
	Dynamic   dynamic.Interface
	Temporal  client.Client
	Namespace string
	// TemporalAddr is the server's fixed frontend address (kept across
	// restarts).
	TemporalAddr string
	TemporalProc *Process
	Workers      []*Process
	// MetricsAddrs are the workers' /metrics addresses, by index.
	MetricsAddrs []string
	logger       *zap.Logger
}

// Start builds the binaries, brings everything up and applies the example
// EC2NodeClass "default". On an error nothing is left running.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	if opts.StateDir == "" {
		return nil, errors.New("driver: StateDir is required")
	}
	if opts.Workers == 0 {
		opts.Workers = 2
	}
	if err := os.MkdirAll(opts.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("driver: state dir: %w", err)
	}
	logger, err := stacktest.FileLogger(filepath.Join(opts.StateDir, "stack.log"))
	if err != nil {
		return nil, err
	}
	s := &Stack{opts: opts, logger: logger, Namespace: temporal.DefaultNamespace}
	defer func() {
		if err != nil {
			_ = s.Stop(context.WithoutCancel(ctx))
		}
	}()

	built := make(chan error, 1)
	var bins binaries
	go func() {
		var buildErr error
		bins, buildErr = build(filepath.Join(opts.StateDir, "bin"))
		built <- buildErr
	}()

	emulator := awsemu.Options{
		BootDelay: time.Second, ShutdownDelay: time.Second, NodeDeletionDelay: time.Second,
		NodeRegistrationRetry: time.Second,
	}
	if opts.Emulator != nil {
		emulator = *opts.Emulator
	}
	s.Local, err = stack.Start(ctx, stack.Options{
		StateDir:         opts.StateDir,
		ExternalTemporal: true,
		EmulatorAddr:     "127.0.0.1:0",
		Emulator:         emulator,
		Logger:           logger,
	})
	if err != nil {
		<-built
		return nil, err
	}
	s.Kube = s.Local.Clientset()
	if s.Dynamic, err = dynamic.NewForConfig(s.Local.Cluster.RESTConfig()); err != nil {
		<-built
		return nil, err
	}
	if err := <-built; err != nil {
		return nil, err
	}

	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s.TemporalAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s.TemporalProc = &Process{
		Name:      "temporal",
		Binary:    bins.temporal,
		Args:      []string{"--state-dir", filepath.Join(opts.StateDir, "temporal"), "--address", s.TemporalAddr, "--namespace", s.Namespace},
		Env:       os.Environ(),
		LogPath:   filepath.Join(opts.StateDir, "temporal-process.log"),
		ReadyLine: temporalReadyLine,
	}
	if err := s.TemporalProc.Start(ctx); err != nil {
		return nil, err
	}
	if s.Temporal, err = client.DialContext(ctx, client.Options{HostPort: s.TemporalAddr, Namespace: s.Namespace, Logger: quietSDKLogger{}}); err != nil {
		return nil, fmt.Errorf("driver: Temporal client: %w", err)
	}
	if err := stacktest.ApplyManifest(ctx, s.Dynamic, planning.EC2NodeClassResource, examples.NodeClass, nil); err != nil {
		return nil, fmt.Errorf("driver: applying the example EC2NodeClass: %w", err)
	}

	for i := range opts.Workers {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		metrics := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s.MetricsAddrs = append(s.MetricsAddrs, metrics)
		s.Workers = append(s.Workers, &Process{
			Name:      fmt.Sprintf("worker-%d", i),
			Binary:    bins.worker,
			Args:      append(s.workerArgs(metrics), opts.WorkerArgs...),
			Env:       WorkerEnviron(),
			LogPath:   filepath.Join(opts.StateDir, fmt.Sprintf("worker-%d.log", i)),
			ReadyLine: workerReadyLine,
		})
	}
	for _, w := range s.Workers {
		if err := w.Start(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// workerArgs are a worker's flags as a user would pass them to reach the
// stack.
func (s *Stack) workerArgs(metricsAddr string) []string {
	return []string{
		"--address", s.TemporalAddr,
		"--namespace", s.Namespace,
		"--cluster-name", s.Local.ClusterName(),
		"--kubeconfig", s.Local.Cluster.KubeconfigPath(),
		"--aws-region", AWSRegion,
		"--aws-endpoint", s.Local.EmulatorURL(),
		"--interruption-queue", s.Local.InterruptionQueueName(),
		"--log-level", "info",
		"--metrics-address", metricsAddr,
	}
}

// WorkerEnviron is this process's environment without anything that would
// point a worker elsewhere (a developer's AWS profile, KUBECONFIG,
// TEMPORAL_*, MILLWRIGHT_*), plus the emulator's static credentials: AWS
// SDKs read them from the environment, there is no flag.
func WorkerEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "AWS_") || strings.HasPrefix(name, "TEMPORAL_") ||
			strings.HasPrefix(name, "MILLWRIGHT_") || name == "KUBECONFIG" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "AWS_EC2_METADATA_DISABLED=true")
}

// Emulator is the in-process EC2/SQS emulator.
func (s *Stack) Emulator() *awsemu.Emulator { return s.Local.Emulator }

// StateDir is where the logs are.
func (s *Stack) StateDir() string { return s.opts.StateDir }

// WorkerByIdentity is the index of the worker whose Temporal identity
// ("<pid>@<host>@", the SDK's default, e.g. a pending activity's
// LastWorkerIdentity) this is, if it is one of ours and running.
func (s *Stack) WorkerByIdentity(identity string) (int, bool) {
	pidText, _, _ := strings.Cut(identity, "@")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid == 0 {
		return 0, false
	}
	for i, w := range s.Workers {
		if w.PID() == pid {
			return i, true
		}
	}
	return 0, false
}

// RestartTemporal SIGKILLs the Temporal server and starts it again on the
// same database and address.
func (s *Stack) RestartTemporal(ctx context.Context) error {
	if err := s.TemporalProc.Kill(); err != nil && !errors.Is(err, ErrNotRunning) {
		return err
	}
	return s.TemporalProc.Start(ctx)
}

// RestartAPIServer SIGKILLs the kube-apiserver and starts it again (etcd
// keeps the state); it returns once the apiserver is ready.
func (s *Stack) RestartAPIServer(ctx context.Context) error {
	return s.Local.Cluster.RestartComponent(ctx, cluster.ComponentKubeAPIServer)
}

// Stop stops the workers (SIGTERM, then SIGKILL), the Temporal server and
// the stack, and reports the first failure.
func (s *Stack) Stop(ctx context.Context) error {
	var errs []error
	for _, w := range s.Workers {
		errs = append(errs, w.Stop(30*time.Second))
	}
	if s.Temporal != nil {
		s.Temporal.Close()
	}
	if s.TemporalProc != nil {
		errs = append(errs, s.TemporalProc.Stop(30*time.Second))
	}
	if s.Local != nil {
		errs = append(errs, s.Local.Stop(ctx))
	}
	if s.logger != nil {
		_ = s.logger.Sync()
	}
	return errors.Join(errs...)
}

// binaries are the built commands.
type binaries struct{ worker, temporal string }

// build builds the worker and the Temporal server command of this checkout
// into dir.
func build(dir string) (binaries, error) {
	if err := buildCommands(dir, "./worker", "./harness/cmd/temporal"); err != nil {
		return binaries{}, err
	}
	return binaries{worker: filepath.Join(dir, "worker"), temporal: filepath.Join(dir, "temporal")}, nil
}

// buildCommands runs go build of packages (module-relative) into dir.
func buildCommands(dir string, packages ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", append([]string{"build", "-o", dir + string(filepath.Separator)}, packages...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", strings.Join(packages, " "), err, out)
	}
	return nil
}

// moduleRoot is the directory of this module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the Millwright module (go env GOMOD is empty)")
	}
	return filepath.Dir(gomod), nil
}

// freePort is a free port below the ephemeral range: the Temporal server
// is restarted on the same address, which must not be taken meanwhile by a
// client's source port (cluster.FreeLocalPorts says how).
func freePort() (int, error) {
	ports, err := cluster.FreeLocalPorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// quietSDKLogger drops the harness client's SDK logs (reconnects while the
// server restarts are expected).
type quietSDKLogger struct{}

func (quietSDKLogger) Debug(string, ...any) {}
func (quietSDKLogger) Info(string, ...any)  {}
func (quietSDKLogger) Warn(string, ...any)  {}
func (quietSDKLogger) Error(string, ...any) {}
