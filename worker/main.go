// Command worker is a Millwright worker: it runs the provisioning and node
// workflows and their activities on a Temporal task queue, watches the
// cluster's pods, Nodes and NodePools, and polls the interruption queue.
// Several workers may run against the same task queue (they are stateless:
// Temporal holds every lifecycle).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/kube"
	"github.com/millwright/millwright/model/disruption"
	"github.com/millwright/millwright/worker/connect"
	"github.com/millwright/millwright/worker/garbagecollection"
	"github.com/millwright/millwright/worker/metrics"
	"github.com/millwright/millwright/worker/run"
	"github.com/millwright/millwright/worker/status"
	"github.com/millwright/millwright/workflows"
)

type flags struct {
	temporal            connect.Temporal
	taskQueue           string
	clusterName         string
	kubeconfig          string
	clusterEndpoint     string
	awsRegion           string
	awsEndpoint         string
	pricing             bool
	interruptionQueue   string
	logLevel            string
	batchIdle           time.Duration
	batchMax            time.Duration
	registrationTimeout time.Duration
	metricsAddress      string
	leaseNamespace      string
	gcGrace             time.Duration
	repairToleration    time.Duration
	resolveInterval     time.Duration
	kubeQPS             float32
	kubeBurst           int
	// The anti-churn threshold of consolidation (DisruptionOptions).
	consolidationThreshold  int
	consolidationFraction   float64
	repackFraction          float64
	consolidationMinSavings float64
	consolidationSplit      bool
	skipSettling            bool
}

func main() {
	if err := newCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	f := flags{}
	cmd := &cobra.Command{
		Use:           "worker",
		Short:         "Run a Millwright worker: workflows, activities, cluster watchers and the interruption poller",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := durationFromEnv(cmd, "gc-grace", "MILLWRIGHT_GC_GRACE", &f.gcGrace); err != nil {
				return err
			}
			if err := durationFromEnv(cmd, "repair-toleration", "MILLWRIGHT_REPAIR_TOLERATION", &f.repairToleration); err != nil {
				return err
			}
			if err := durationFromEnv(cmd, "nodeclass-resolve-interval", "MILLWRIGHT_NODECLASS_RESOLVE_INTERVAL", &f.resolveInterval); err != nil {
				return err
			}
			if err := boolFromEnv(cmd, "consolidation-split", "MILLWRIGHT_CONSOLIDATION_SPLIT", &f.consolidationSplit); err != nil {
				return err
			}
			if err := boolFromEnv(cmd, "consolidation-skip-settling-destinations", "MILLWRIGHT_CONSOLIDATION_SKIP_SETTLING_DESTINATIONS", &f.skipSettling); err != nil {
				return err
			}
			if err := signedFromEnv(cmd, "consolidation-threshold", "MILLWRIGHT_CONSOLIDATION_THRESHOLD", &f.consolidationThreshold); err != nil {
				return err
			}
			if err := signedFromEnv(cmd, "consolidation-savings-fraction", "MILLWRIGHT_CONSOLIDATION_SAVINGS_FRACTION", &f.consolidationFraction); err != nil {
				return err
			}
			if err := signedFromEnv(cmd, "consolidation-repack-savings-fraction", "MILLWRIGHT_CONSOLIDATION_REPACK_SAVINGS_FRACTION", &f.repackFraction); err != nil {
				return err
			}
			if err := numberFromEnv(cmd, "kube-qps", "MILLWRIGHT_KUBE_QPS", &f.kubeQPS); err != nil {
				return err
			}
			if err := numberFromEnv(cmd, "kube-burst", "MILLWRIGHT_KUBE_BURST", &f.kubeBurst); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runWorker(ctx, f)
		},
	}
	fs := cmd.Flags()
	f.temporal.BindFlags(fs)
	fs.StringVar(&f.taskQueue, "task-queue", connect.EnvOr("MILLWRIGHT_TASK_QUEUE", run.DefaultTaskQueue), "Temporal task queue [$MILLWRIGHT_TASK_QUEUE]")
	fs.StringVar(&f.clusterName, "cluster-name", os.Getenv("MILLWRIGHT_CLUSTER_NAME"), "name of the cluster this worker provisions for [$MILLWRIGHT_CLUSTER_NAME]")
	fs.StringVar(&f.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file; empty means in-cluster [$KUBECONFIG]")
	fs.StringVar(&f.clusterEndpoint, "cluster-endpoint", os.Getenv("MILLWRIGHT_CLUSTER_ENDPOINT"), "API server URL nodes join (default: the kubeconfig's) [$MILLWRIGHT_CLUSTER_ENDPOINT]")
	fs.StringVar(&f.awsRegion, "aws-region", connect.EnvOr("AWS_REGION", os.Getenv("AWS_DEFAULT_REGION")), "AWS region [$AWS_REGION]")
	fs.StringVar(&f.awsEndpoint, "aws-endpoint", os.Getenv("AWS_ENDPOINT_URL"), "EC2/SQS endpoint override, e.g. the local emulator [$AWS_ENDPOINT_URL]")
	fs.BoolVar(&f.pricing, "pricing", os.Getenv("MILLWRIGHT_PRICING") == "true", "read on-demand prices from the AWS Pricing API (else the embedded catalog) [$MILLWRIGHT_PRICING=true]")
	fs.StringVar(&f.interruptionQueue, "interruption-queue", os.Getenv("MILLWRIGHT_INTERRUPTION_QUEUE"), "SQS queue (name or URL) of interruption events; empty disables [$MILLWRIGHT_INTERRUPTION_QUEUE]")
	fs.StringVar(&f.logLevel, "log-level", connect.EnvOr("MILLWRIGHT_LOG_LEVEL", "info"), "debug, info, warn or error [$MILLWRIGHT_LOG_LEVEL]")
	fs.DurationVar(&f.batchIdle, "batch-idle-duration", workflows.DefaultIdleWindow, "close a batch of pending pods after this long without new ones")
	fs.DurationVar(&f.batchMax, "batch-max-duration", workflows.DefaultMaxWindow, "close a batch of pending pods after this long in all")
	// LookupEnv, not EnvOr: an empty MILLWRIGHT_METRICS_ADDRESS disables.
	metricsAddress, set := os.LookupEnv("MILLWRIGHT_METRICS_ADDRESS")
	if !set {
		metricsAddress = metrics.DefaultAddress
	}
	fs.StringVar(&f.metricsAddress, "metrics-address", metricsAddress, "serve /metrics, /healthz and /readyz here; empty disables [$MILLWRIGHT_METRICS_ADDRESS]")
	fs.StringVar(&f.leaseNamespace, "lease-namespace", connect.EnvOr("POD_NAMESPACE", kube.DefaultLeaseNamespace), "namespace of the Leases that serialise each NodePool's disruption decisions; the worker's own namespace [$POD_NAMESPACE]")
	fs.DurationVar(&f.gcGrace, "gc-grace", garbagecollection.DefaultGrace,
		"terminate an instance tagged for the cluster that no node workflow runs this long after its launch [$MILLWRIGHT_GC_GRACE]")
	fs.DurationVar(&f.repairToleration, "repair-toleration", disruption.DefaultRepairToleration,
		"replace an initialized node whose Ready condition has been False or Unknown this long (at most 20% of a pool's nodes at once) [$MILLWRIGHT_REPAIR_TOLERATION]")
	fs.DurationVar(&f.resolveInterval, "nodeclass-resolve-interval", status.DefaultResolveInterval,
		"resolve an unchanged EC2NodeClass's AMIs, subnets and security groups again this often (drift follows what they resolve to) [$MILLWRIGHT_NODECLASS_RESOLVE_INTERVAL]")
	fs.Float32Var(&f.kubeQPS, "kube-qps", run.DefaultKubeQPS,
		"client-side rate limit (queries per second) shared by every Kubernetes call of this worker [$MILLWRIGHT_KUBE_QPS]")
	fs.IntVar(&f.kubeBurst, "kube-burst", run.DefaultKubeBurst,
		"burst above --kube-qps the Kubernetes clients may make [$MILLWRIGHT_KUBE_BURST]")
	fs.IntVar(&f.consolidationThreshold, "consolidation-threshold", disruption.DefaultConsolidationThreshold,
		"consolidation's anti-churn score k: a replacement must save at least 1/k of the pool's cost share per share of its disruption (Karpenter's Balanced, k=2); negative takes any saving. Read when the disruption workflow starts [$MILLWRIGHT_CONSOLIDATION_THRESHOLD]")
	fs.Float64Var(&f.consolidationFraction, "consolidation-savings-fraction", disruption.DefaultReplaceSavingsFraction,
		"a replacement that saves at least this fraction of its nodes' price is taken whatever the score (not in a Balanced pool); negative: the score alone decides. Read when the disruption workflow starts [$MILLWRIGHT_CONSOLIDATION_SAVINGS_FRACTION]")
	fs.Float64Var(&f.repackFraction, "consolidation-repack-savings-fraction", disruption.DefaultRepackSavingsFraction,
		"two nodes single-node consolidation keeps are repacked (replaced by the nodes a fresh plan of their pods needs) when that saves at least this fraction of their price, whatever the score (not in a Balanced pool); negative: the score alone decides. Read when the disruption workflow starts [$MILLWRIGHT_CONSOLIDATION_REPACK_SAVINGS_FRACTION]")
	fs.Float64Var(&f.consolidationMinSavings, "consolidation-min-savings", 0,
		"a replacement must also save at least this many $/h. Read when the disruption workflow starts")
	fs.BoolVar(&f.consolidationSplit, "consolidation-split", true,
		"replace an underutilized node that no single cheaper node can hold by several nodes that together cost less (Karpenter keeps it: \"Can't remove without creating N candidates\"), and two nodes single-node consolidation keeps by the nodes a fresh plan of their pods needs when they cost less; false gives Karpenter's behaviour. Read when the disruption workflow starts [$MILLWRIGHT_CONSOLIDATION_SPLIT]")
	fs.BoolVar(&f.skipSettling, "consolidation-skip-settling-destinations", false,
		"move no pods by consolidation onto a node still within its NodePool's consolidateAfter since its last pod event, as Karpenter since v1.14 (kubernetes-sigs/karpenter#3006); off by default, it slowed the consolidation benchmark's scale-down past its target (README). Read when the disruption workflow starts [$MILLWRIGHT_CONSOLIDATION_SKIP_SETTLING_DESTINATIONS]")
	fs.DurationVar(&f.registrationTimeout, "registration-timeout", 0, "terminate an instance whose Node has not registered after this long (default 15m)")
	return cmd
}

func runWorker(ctx context.Context, f flags) error {
	logger, err := NewLogger(f.logLevel)
	if err != nil {
		return err
	}
	defer logger.Sync() //nolint:errcheck // best effort on exit
	kubeConfig, err := kubernetesConfig(f.kubeconfig)
	if err != nil {
		return err
	}
	f.temporal.Logger = run.TemporalLogger(logger)
	// One registry for Millwright's collectors and the Temporal SDK's.
	registry := metrics.NewRegistry()
	workerMetrics, err := metrics.New(registry)
	if err != nil {
		return err
	}
	if f.metricsAddress != "" {
		handler, stopBridge := metrics.NewTemporalHandler(registry, logger.Named("temporal-metrics"))
		defer stopBridge.Close() //nolint:errcheck // stops a ticker; nothing to report
		f.temporal.MetricsHandler = handler
	}
	temporalClient, err := f.temporal.Dial(ctx)
	if err != nil {
		return err
	}
	defer temporalClient.Close()
	return run.Run(ctx, run.Config{
		Temporal:               temporalClient,
		Namespace:              f.temporal.Namespace,
		TaskQueue:              f.taskQueue,
		ClusterName:            f.clusterName,
		Kubernetes:             kubeConfig,
		ClusterEndpoint:        f.clusterEndpoint,
		AWSRegion:              f.awsRegion,
		AWSEndpoint:            f.awsEndpoint,
		Pricing:                f.pricing,
		InterruptionQueue:      f.interruptionQueue,
		Provisioner:            workflows.ProvisionerInput{IdleWindow: f.batchIdle, MaxWindow: f.batchMax},
		RegistrationTimeout:    f.registrationTimeout,
		LeaseNamespace:         f.leaseNamespace,
		GarbageCollectionGrace: f.gcGrace,
		Disruption: workflows.DisruptionInput{Options: activities.DisruptionOptions{
			RepairToleration: f.repairToleration, ConsolidationThreshold: f.consolidationThreshold,
			ReplaceSavingsFraction: f.consolidationFraction, RepackSavingsFraction: f.repackFraction,
			MinSavingsPerHour: f.consolidationMinSavings, BatchMaxDuration: f.batchMax,
			DisableSplit: !f.consolidationSplit, SkipSettlingDestinations: f.skipSettling,
		}},
		NodeClassResolveInterval: f.resolveInterval,
		KubeQPS:                  f.kubeQPS,
		KubeBurst:                f.kubeBurst,
		Identity:                 os.Getenv("POD_NAME"),
		MetricsAddress:           f.metricsAddress,
		Metrics:                  workerMetrics,
		Logger:                   logger,
	})
}

// durationFromEnv sets *d from $env unless the flag was given.
func durationFromEnv(cmd *cobra.Command, flag, env string, d *time.Duration) error {
	text, set := os.LookupEnv(env)
	if !set || cmd.Flags().Changed(flag) {
		return nil
	}
	parsed, err := time.ParseDuration(text)
	if err != nil {
		return fmt.Errorf("$%s %q: want a duration such as 5m: %w", env, text, err)
	}
	*d = parsed
	return nil
}

// boolFromEnv sets *b from $env unless the flag was given.
func boolFromEnv(cmd *cobra.Command, flag, env string, b *bool) error {
	text, set := os.LookupEnv(env)
	if !set || cmd.Flags().Changed(flag) {
		return nil
	}
	parsed, err := strconv.ParseBool(text)
	if err != nil {
		return fmt.Errorf("$%s %q: want true or false", env, text)
	}
	*b = parsed
	return nil
}

// numberFromEnv sets *n from $env unless the flag was given.
func numberFromEnv[N float32 | int](cmd *cobra.Command, flag, env string, n *N) error {
	return parseNumberEnv(cmd, flag, env, n, false)
}

// signedFromEnv is numberFromEnv for a setting where negative means off.
func signedFromEnv[N float64 | int](cmd *cobra.Command, flag, env string, n *N) error {
	return parseNumberEnv(cmd, flag, env, n, true)
}

func parseNumberEnv[N float32 | float64 | int](cmd *cobra.Command, flag, env string, n *N, signed bool) error {
	text, set := os.LookupEnv(env)
	if !set || cmd.Flags().Changed(flag) {
		return nil
	}
	var parsed N
	var err error
	switch p := any(&parsed).(type) {
	case *int:
		*p, err = strconv.Atoi(text)
	case *float32:
		var f float64
		f, err = strconv.ParseFloat(text, 32)
		*p = float32(f)
	case *float64:
		*p, err = strconv.ParseFloat(text, 64)
	}
	switch {
	case err != nil && signed:
		return fmt.Errorf("$%s %q: want a number", env, text)
	case err != nil || (parsed < 0 && !signed):
		return fmt.Errorf("$%s %q: want a non-negative number", env, text)
	}
	*n = parsed
	return nil
}

func kubernetesConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		config, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig and not running in a cluster: %w", err)
		}
		return config, nil
	}
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	return config, nil
}

// NewLogger builds the worker's zap logger at level.
func NewLogger(level string) (*zap.Logger, error) {
	parsed, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(parsed)
	cfg.Encoding = "console"
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	return cfg.Build()
}
