package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/millwright/millwright/local/awsemu"
	"github.com/millwright/millwright/local/stack"
	"github.com/millwright/millwright/worker/run"
)

// devOptions are `starter dev`'s flags.
type devOptions struct {
	stateDir      string
	ephemeral     bool
	clusterName   string
	temporalAddr  string
	uiAddr        string
	emulatorAddr  string
	bootDelay     time.Duration
	shutdownDelay time.Duration
	noWorker      bool
	logLevel      string
	// demo plays the walkthrough (demo.go) once the stack and worker are
	// up; exit then stops everything instead of running until Ctrl-C.
	demo bool
	exit bool
	// demoTimeouts bound the demo's waits (tests shorten them).
	demoTimeouts demoTimeouts
	// stackStarted, when set, is told about the stack once it is up (tests
	// check the emulator's instances through it).
	stackStarted func(*stack.Stack)
}

func newDevCommand() *cobra.Command {
	opts := devOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the local stack: embedded Temporal + UI, a real control plane (kwok), the EC2/SQS emulator",
		Long: `dev starts everything Millwright needs on this machine, with no cloud account
and no Docker: a real Temporal server with its web UI, a real Kubernetes control
plane (etcd, kube-apiserver, controller-manager, scheduler) whose kubelets kwok
plays, and an EC2/SQS emulator that the AWS SDK reaches through endpoint
configuration. It prints where each part listens and runs until Ctrl-C, then
stops everything it started.

--demo then plays the walkthrough with the real kubectl: it applies the
example EC2NodeClass and NodePool, scales a deployment to 10 pods, waits for
them to run on launched nodes, deletes it and waits for the empty nodes to be
terminated, interleaved with the worker's log. --exit ends after it (scripts,
CI); without it the stack keeps running until Ctrl-C.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.exit && !opts.demo {
				return fmt.Errorf("--exit ends after the demo's scenario: it needs --demo")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runDev(ctx, opts, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.stateDir, "state-dir", defaultStateDir(), "directory for Temporal's database, the cluster's files and logs")
	f.BoolVar(&opts.ephemeral, "ephemeral", false, "keep Temporal's state in memory")
	f.StringVar(&opts.clusterName, "cluster-name", "millwright", "name of the local cluster")
	f.StringVar(&opts.temporalAddr, "temporal-address", "127.0.0.1:7233", "Temporal frontend address")
	f.StringVar(&opts.uiAddr, "ui-address", "127.0.0.1:8233", "Temporal UI address")
	f.StringVar(&opts.emulatorAddr, "emulator-address", "127.0.0.1:4566", "EC2/SQS emulator address")
	f.DurationVar(&opts.bootDelay, "boot-delay", 3*time.Second, "how long a simulated instance takes to boot")
	f.DurationVar(&opts.shutdownDelay, "shutdown-delay", 3*time.Second, "how long a simulated instance takes to shut down")
	f.BoolVar(&opts.noWorker, "no-worker", false, "do not run a Millwright worker in this process (run ./worker yourself)")
	f.StringVar(&opts.logLevel, "log-level", "info", "the worker's log level: debug, info, warn, error")
	f.BoolVar(&opts.demo, "demo", false, "play the walkthrough (examples applied, inflate scaled to 10 and deleted) once everything is up")
	f.BoolVar(&opts.exit, "exit", false, "with --demo: stop everything after the walkthrough instead of running until Ctrl-C")
	return cmd
}

func defaultStateDir() string {
	if dir := os.Getenv("MILLWRIGHT_STATE_DIR"); dir != "" {
		return dir
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".millwright", "dev")
	}
	return filepath.Join(os.TempDir(), "millwright-dev")
}

// runDev runs the stack (and worker, and demo) writing everything — its own
// lines, the loggers', kubectl's — to out, so the walkthrough reads in order.
func runDev(ctx context.Context, opts devOptions, out io.Writer) error {
	out = &lockedWriter{w: out}
	logger := newConsoleLogger(out, opts.demo)
	defer logger.Sync() //nolint:errcheck // best effort on exit
	started := time.Now()
	fmt.Fprintln(out, "Starting the local stack (the first run builds the control-plane binaries; that takes several minutes)...")
	s, err := stack.Start(ctx, stack.Options{
		StateDir:     opts.stateDir,
		Ephemeral:    opts.ephemeral,
		ClusterName:  opts.clusterName,
		TemporalAddr: opts.temporalAddr,
		UIAddr:       opts.uiAddr,
		EmulatorAddr: opts.emulatorAddr,
		Emulator:     awsemu.Options{BootDelay: opts.bootDelay, ShutdownDelay: opts.shutdownDelay},
		Logger:       logger,
	})
	if err != nil {
		return err
	}
	if opts.stackStarted != nil {
		opts.stackStarted(s)
	}
	defer func() {
		fmt.Fprintln(out, "Stopping the local stack...")
		if err := s.Stop(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintln(out, "stop:", err)
			return
		}
		fmt.Fprintln(out, "Stopped; nothing left running.")
	}()

	envFile := filepath.Join(opts.stateDir, "env.sh")
	if err := writeDevEnv(envFile, s); err != nil {
		return err
	}
	workerDone := make(chan error, 1)
	var temporalClient client.Client
	if !opts.noWorker {
		workerLogger, err := workerLogger(opts.logLevel, out, opts.demo)
		if err != nil {
			return err
		}
		temporalClient, err = s.Temporal.NewClientWithOptions(ctx, client.Options{Logger: run.TemporalLogger(workerLogger)})
		if err != nil {
			return fmt.Errorf("worker: Temporal client: %w", err)
		}
		defer temporalClient.Close()
		// The worker stops when runDev returns, not only on Ctrl-C: --exit
		// returns with the caller's context still live.
		workerCtx, stopWorker := context.WithCancel(ctx)
		go func() {
			workerDone <- run.Run(workerCtx, run.Config{
				Temporal:          temporalClient,
				Namespace:         s.Temporal.Namespace(),
				ClusterName:       s.ClusterName(),
				Kubernetes:        s.Cluster.RESTConfig(),
				AWSRegion:         "us-east-1",
				AWSEndpoint:       s.EmulatorURL(),
				AWSCredentials:    run.StaticCredentials("local", "local"),
				InterruptionQueue: s.InterruptionQueueName(),
				Logger:            workerLogger,
			})
		}()
		defer func() {
			stopWorker()
			<-workerDone
		}()
	}
	fmt.Fprintf(out, `
Millwright local stack is up.
  Temporal frontend:  %s (namespace %s)
  Temporal UI:        %s
  Kubernetes:         export KUBECONFIG=%s
  kubectl:            %s
  EC2/SQS endpoint:   %s (interruption queue %q)

In another shell:   source %s
Ctrl-C stops everything.
`, s.Temporal.FrontendAddr(), s.Temporal.Namespace(), s.Temporal.UIURL(), s.Cluster.KubeconfigPath(),
		s.Cluster.KubectlPath(), s.EmulatorURL(), s.InterruptionQueueName(), envFile)
	if opts.demo {
		fmt.Fprintf(out, "Stack up in %s; playing the walkthrough.\n", time.Since(started).Round(100*time.Millisecond))
		demoClient := temporalClient
		if demoClient == nil {
			// --no-worker: the demo still lists node workflows.
			if demoClient, err = s.Temporal.NewClient(ctx); err != nil {
				return fmt.Errorf("demo: Temporal client: %w", err)
			}
			defer demoClient.Close()
		}
		if err := runDemo(ctx, s, demoClient, opts.stateDir, opts.demoTimeouts, out); err != nil {
			return err
		}
		if opts.exit || ctx.Err() != nil {
			fmt.Fprintf(out, "Whole run (stack start and walkthrough) took %s.\n", time.Since(started).Round(100*time.Millisecond))
			return nil
		}
		fmt.Fprintln(out, "\nThe stack keeps running: try the commands above in another shell. Ctrl-C stops everything.")
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-workerDone:
		workerDone <- nil // let the deferred wait return
		if err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		return nil
	}
}

// writeDevEnv writes the exports that point kubectl, the AWS SDKs and the
// Temporal CLI at the local stack.
func writeDevEnv(path string, s *stack.Stack) error {
	content := fmt.Sprintf(`# Written by starter dev: points kubectl, AWS SDKs and Temporal tools at the local stack.
export KUBECONFIG=%q
export PATH=%q:"$PATH"
export AWS_ENDPOINT_URL=%q
export AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=local
export AWS_SECRET_ACCESS_KEY=local
export TEMPORAL_ADDRESS=%q
export TEMPORAL_NAMESPACE=%q
export MILLWRIGHT_CLUSTER_NAME=%q
export MILLWRIGHT_INTERRUPTION_QUEUE=%q
`, s.Cluster.KubeconfigPath(), filepath.Dir(s.Cluster.KubectlPath()), s.EmulatorURL(),
		s.Temporal.FrontendAddr(), s.Temporal.Namespace(), s.ClusterName(), s.InterruptionQueueName())
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// workerLogger logs the worker's lines (the ones the walkthrough shows) to
// out. In the demo the lines are trimmed for reading (see consoleCore).
func workerLogger(level string, out io.Writer, demo bool) (*zap.Logger, error) {
	parsed, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return zap.New(consoleCore(zap.NewDevelopmentEncoderConfig(), out, parsed, demo)), nil
}

// newConsoleLogger logs the stack's lifecycle lines to out, levels coloured.
func newConsoleLogger(out io.Writer, demo bool) *zap.Logger {
	cfg := zap.NewDevelopmentEncoderConfig()
	cfg.EncodeLevel = zapcore.CapitalColorLevelEncoder
	return zap.New(consoleCore(cfg, out, zap.DebugLevel, demo))
}

// sdkContextFields are the fields the Temporal SDK adds to every workflow and
// activity log line. The demo drops them (keeping WorkflowID, which names
// the node) so its lines read like the seeds' walkthrough; they stay in
// plain `starter dev` and in the Temporal UI.
var sdkContextFields = map[string]bool{
	"Namespace": true, "TaskQueue": true, "WorkerID": true, "RunID": true, "Attempt": true, "WorkflowType": true,
	"ActivityID": true, "ActivityType": true,
}

// consoleCore writes console lines to out; for the demo with a short
// timestamp and without the SDK's context fields.
func consoleCore(cfg zapcore.EncoderConfig, out io.Writer, level zapcore.LevelEnabler, demo bool) zapcore.Core {
	if demo {
		cfg.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
	}
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(cfg), zapcore.AddSync(out), level)
	if demo {
		return fieldDroppingCore{Core: core, drop: sdkContextFields}
	}
	return core
}

// fieldDroppingCore leaves out the fields named in drop, both those bound
// with With and those of each line. (zap has no field filter of its own.)
type fieldDroppingCore struct {
	zapcore.Core
	drop map[string]bool
}

func (c fieldDroppingCore) keep(fields []zapcore.Field) []zapcore.Field {
	kept := make([]zapcore.Field, 0, len(fields))
	for _, field := range fields {
		if !c.drop[field.Key] {
			kept = append(kept, field)
		}
	}
	return kept
}

func (c fieldDroppingCore) With(fields []zapcore.Field) zapcore.Core {
	return fieldDroppingCore{Core: c.Core.With(c.keep(fields)), drop: c.drop}
}

func (c fieldDroppingCore) Check(entry zapcore.Entry, checked *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(entry.Level) {
		return checked.AddCore(entry, c)
	}
	return checked
}

func (c fieldDroppingCore) Write(entry zapcore.Entry, fields []zapcore.Field) error {
	return c.Core.Write(entry, c.keep(fields))
}
