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
stops everything it started.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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

func runDev(ctx context.Context, opts devOptions, out io.Writer) error {
	logger := newConsoleLogger()
	defer logger.Sync() //nolint:errcheck // best effort on exit
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
	if !opts.noWorker {
		workerLogger, err := workerLogger(opts.logLevel)
		if err != nil {
			return err
		}
		temporalClient, err := s.Temporal.NewClientWithOptions(ctx, client.Options{Logger: run.TemporalLogger(workerLogger)})
		if err != nil {
			return fmt.Errorf("worker: Temporal client: %w", err)
		}
		defer temporalClient.Close()
		go func() {
			workerDone <- run.Run(ctx, run.Config{
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
		defer func() { <-workerDone }()
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
// the console.
func workerLogger(level string) (*zap.Logger, error) {
	parsed, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	cfg := zap.NewDevelopmentConfig()
	cfg.Level = zap.NewAtomicLevelAt(parsed)
	cfg.DisableStacktrace = true
	cfg.Development = false
	return cfg.Build()
}

func newConsoleLogger() *zap.Logger {
	cfg := zap.NewDevelopmentConfig()
	cfg.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
	cfg.DisableStacktrace = true
	logger, err := cfg.Build()
	if err != nil {
		return zap.NewNop()
	}
	return logger
}
