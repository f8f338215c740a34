// Package run owns one Millwright worker's life: it builds the clients
// (Temporal, Kubernetes, EC2, SQS), registers the workflows and activities on
// a Temporal worker, starts the informers and watchers that turn cluster
// changes into signals, the controllers that write NodePool and EC2NodeClass
// status (worker/status) and the SQS interruption poller, and stops them all
// when its context ends. The worker binary and `starter dev` both run it.
package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/cloud"
	"github.com/millwright/millwright/activities/events"
	"github.com/millwright/millwright/activities/kube"
	"github.com/millwright/millwright/activities/millwright"
	"github.com/millwright/millwright/activities/planning"
	"github.com/millwright/millwright/worker/garbagecollection"
	"github.com/millwright/millwright/worker/interruption"
	"github.com/millwright/millwright/worker/metrics"
	"github.com/millwright/millwright/worker/status"
	"github.com/millwright/millwright/worker/watch"
	"github.com/millwright/millwright/workflows"
)

// DefaultTaskQueue is where Millwright's workflows and activities run.
const DefaultTaskQueue = "millwright"

// Client-side rate limits of the worker's Kubernetes clients when Config
// leaves them zero: Karpenter's. client-go's own (5 QPS, burst 10) are
// shared by every activity, informer and controller of the process and
// throttled disruption decisions for seconds at a time.
const (
	DefaultKubeQPS   = 200
	DefaultKubeBurst = 300
)

// informerResync re-delivers every object periodically so a lost signal is
// eventually sent again.
const informerResync = 10 * time.Minute

// Config is everything a worker needs.
type Config struct {
	// Temporal is a connected client; Namespace is its namespace.
	Temporal  client.Client
	Namespace string
	// TaskQueue defaults to DefaultTaskQueue.
	TaskQueue string
	// ClusterName identifies the cluster in workflow ids, tags and discovery.
	ClusterName string
	// Kubernetes reaches the API server. Its QPS and Burst are replaced by
	// KubeQPS and KubeBurst.
	Kubernetes *rest.Config
	// KubeQPS and KubeBurst rate-limit every Kubernetes call of the worker;
	// zero: DefaultKubeQPS, DefaultKubeBurst.
	KubeQPS   float32
	KubeBurst int
	// Identity names this worker in the Leases it holds (the pod name);
	// default: the host name.
	Identity string
	// ClusterEndpoint and ClusterCA are what nodes join with (userData);
	// default: the Kubernetes config's host and CA.
	ClusterEndpoint string
	ClusterCA       []byte
	// ServiceCIDR of the cluster (default 10.96.0.0/12).
	ServiceCIDR string

	// AWSRegion and AWSEndpoint (the local emulator's URL, or empty for AWS).
	AWSRegion   string
	AWSEndpoint string
	// AWSCredentials replace the default credential chain when set.
	AWSCredentials aws.CredentialsProvider
	// Pricing turns on the Pricing API for on-demand prices.
	Pricing bool
	// InterruptionQueue is the SQS queue name or URL; empty disables the
	// poller.
	InterruptionQueue string

	// Provisioner tunes a newly started provisioning workflow.
	Provisioner workflows.ProvisionerInput
	// Disruption is what a newly started disruption workflow gets (poll
	// interval, validation delay, decision options); zero values take its
	// defaults.
	Disruption workflows.DisruptionInput
	// RegistrationTimeout overrides the default 15 minutes.
	RegistrationTimeout time.Duration
	// LeaseNamespace is where each NodePool's disruption Lease lives: the
	// worker's own namespace (the chart passes it). Default "default". The
	// garbage-collection Lease lives there too.
	LeaseNamespace string
	// GarbageCollectionGrace is how long after its launch an instance no
	// node workflow runs is terminated; GarbageCollectionInterval how often
	// garbage collection looks. Zero: garbagecollection's defaults (5m, 1m).
	GarbageCollectionGrace    time.Duration
	GarbageCollectionInterval time.Duration
	// NodeClassResolveInterval is how often an unchanged EC2NodeClass is
	// resolved again (a new AMI release, subnets tagged or untagged); zero
	// means status.DefaultResolveInterval (5m).
	NodeClassResolveInterval time.Duration

	// MetricsAddress is where /metrics, /healthz and /readyz are served
	// (e.g. ":8080"); empty serves nothing.
	MetricsAddress string
	// Metrics are recorded by the activities, the AWS clients and the
	// interruption poller. Default: collectors on a registry of their own
	// (nothing else reads it unless MetricsAddress serves it). The worker
	// binary passes the registry its Temporal client reports SDK metrics to.
	Metrics *metrics.Metrics

	Clock  clock.WithTicker
	Logger *zap.Logger
}

// Run runs the worker until ctx ends, then stops everything it started.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	logger := cfg.Logger
	// Served from the start, so liveness answers while informers sync;
	// readiness waits for them and the Temporal worker.
	readiness := &metrics.Readiness{}
	if cfg.MetricsAddress != "" {
		server, err := metrics.Listen(cfg.MetricsAddress, cfg.Metrics.Gatherer(), readiness)
		if err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		serveCtx, stopServing := context.WithCancel(ctx)
		served := make(chan struct{})
		go func() {
			defer close(served)
			if err := server.Serve(serveCtx); err != nil {
				logger.Error("the metrics server stopped", zap.Error(err))
			}
		}()
		// The server stops with ctx; Run returns only once it has shut
		// down, so its port is free again for a worker started after.
		defer func() {
			stopServing()
			<-served
		}()
		logger.Info("serving metrics and probes", zap.Stringer("address", server.Addr()))
	}
	kubeClient, err := kubernetes.NewForConfig(cfg.Kubernetes)
	if err != nil {
		return fmt.Errorf("worker: Kubernetes client: %w", err)
	}
	dynamicClient, err := dynamic.NewForConfig(cfg.Kubernetes)
	if err != nil {
		return fmt.Errorf("worker: Kubernetes dynamic client: %w", err)
	}
	kubeVersion := ""
	if info, err := kubeClient.Discovery().ServerVersion(); err == nil {
		kubeVersion = strings.TrimPrefix(info.Major, "v") + "." + strings.TrimSuffix(info.Minor, "+")
	} else {
		return fmt.Errorf("worker: reaching the Kubernetes API server at %s: %w", cfg.Kubernetes.Host, err)
	}

	factory := informers.NewSharedInformerFactory(kubeClient, informerResync)
	dynamicFactory := dynamicinformer.NewDynamicSharedInformerFactory(dynamicClient, informerResync)

	awsConfig := cloud.Config{
		Region: cfg.AWSRegion, Endpoint: cfg.AWSEndpoint, Credentials: cfg.AWSCredentials, Pricing: cfg.Pricing,
		APIOptions: cfg.Metrics.AWSAPIOptions(cfg.Clock),
	}
	ec2Client, err := cloud.NewEC2Client(ctx, awsConfig)
	if err != nil {
		return fmt.Errorf("worker: EC2 client: %w", err)
	}
	ssmClient, err := cloud.NewSSMClient(ctx, awsConfig)
	if err != nil {
		return fmt.Errorf("worker: SSM client: %w", err)
	}
	iamClient, err := cloud.NewIAMClient(ctx, awsConfig)
	if err != nil {
		return fmt.Errorf("worker: IAM client: %w", err)
	}
	// nil when pricing is off: the embedded catalog's on-demand prices apply.
	pricingClient, err := cloud.NewPricingClient(ctx, awsConfig)
	if err != nil {
		return fmt.Errorf("worker: Pricing client: %w", err)
	}
	// NodeClaims are served only once the CRD is installed (a cluster whose
	// CRDs predate it runs without them). When served, the activities read
	// them from the informer the NodeClaim watcher shares.
	nodeClaimsServed := servesNodeClaims(kubeClient)
	var nodeClaims cache.GenericLister
	if nodeClaimsServed {
		nodeClaims = dynamicFactory.ForResource(kube.NodeClaimResource).Lister()
	}
	// Events (deduplicated, rate limited, then aggregated by client-go's
	// correlator) from the activities and the watchers alike.
	recorder, stopEvents := events.Broadcast(ctx, kubeClient, cfg.Clock)
	defer stopEvents()
	acts, err := millwright.New(millwright.Config{
		Cluster: cloud.ClusterInfo{
			Name: cfg.ClusterName, Endpoint: cfg.ClusterEndpoint, CertificateAuthority: cfg.ClusterCA,
			ServiceCIDR: cfg.ServiceCIDR, KubernetesVersion: kubeVersion,
		},
		Region:              cfg.AWSRegion,
		Kubernetes:          kubeClient,
		Dynamic:             dynamicClient,
		State:               planning.NewInformerState(factory, dynamicFactory),
		EC2:                 ec2Client,
		SSM:                 ssmClient,
		IAM:                 iamClient,
		Pricing:             pricingClient,
		Temporal:            cfg.Temporal,
		Clock:               cfg.Clock,
		Logger:              logger,
		RegistrationTimeout: cfg.RegistrationTimeout,
		LeaseNamespace:      cfg.LeaseNamespace,
		Events:              recorder,
		Identity:            cfg.Identity,
		NodeClaims:          nodeClaims,
	})
	if err != nil {
		return fmt.Errorf("worker: activities: %w", err)
	}
	defer acts.Close()

	temporalWorker := sdkworker.New(cfg.Temporal, cfg.TaskQueue, workerOptions())
	workflows.Register(temporalWorker)
	activities.Register(temporalWorker, metrics.Instrument(acts, cfg.Metrics, cfg.Clock))
	activities.RegisterDisruptionCommands(temporalWorker, metrics.InstrumentCommands(acts, cfg.Metrics))

	provisioner := watch.Provisioner{Signaler: cfg.Temporal, Cluster: cfg.ClusterName, TaskQueue: cfg.TaskQueue, Input: cfg.Provisioner}
	podWatcher, err := watch.NewPodWatcher(factory, provisioner, cfg.Clock, logger.Named("pods"))
	if err != nil {
		return err
	}
	nodeWatcher, err := watch.NewNodeWatcher(factory, kubeClient, cfg.Temporal, cfg.ClusterName, logger.Named("nodes"))
	if err != nil {
		return err
	}
	poolWatcher, err := watch.NewPoolWatcher(dynamicFactory, provisioner, recorder, logger.Named("nodepools"))
	if err != nil {
		return err
	}
	disruption := watch.Disruption{Signaler: cfg.Temporal, Cluster: cfg.ClusterName, TaskQueue: cfg.TaskQueue, Input: cfg.Disruption}
	trigger := watch.NewTrigger(disruption, logger.Named("disruption"))
	podWatcher.Disruption, nodeWatcher.Disruption, poolWatcher.Disruption = trigger, trigger, trigger
	// NodeClaims: deleting one drains its node.
	var nodeClaimWatcher *watch.NodeClaimWatcher
	if nodeClaimsServed {
		nodeClaimWatcher, err = watch.NewNodeClaimWatcher(dynamicFactory, dynamicClient, cfg.Temporal, cfg.Temporal, cfg.ClusterName, logger.Named("nodeclaims"))
		if err != nil {
			return err
		}
	} else {
		logger.Warn("the API server does not serve millwright.dev/v1 nodeclaims (install deploy/crds): no NodeClaims are written or watched")
	}
	if err := watch.WatchPodStartup(factory, cfg.Metrics); err != nil {
		return err
	}
	if err := cfg.Metrics.RegisterCluster(newClusterView(factory, dynamicFactory), cfg.Clock); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	nodeInformer := factory.Core().V1().Nodes().Informer()
	if err := interruption.AddInstanceIndex(nodeInformer); err != nil {
		return err
	}
	statusOptions := status.Options{
		Informers: factory, DynamicInformers: dynamicFactory, Dynamic: dynamicClient,
		Resolver: acts.Cloud().NodeClasses, ResolveInterval: cfg.NodeClassResolveInterval, NodeClaims: nodeClaimWatcher != nil,
		Clock: cfg.Clock, Logger: logger,
	}
	if profiles := acts.Cloud().InstanceProfiles; profiles != nil {
		statusOptions.InstanceProfiles = profiles
	}
	statusControllers, err := status.New(statusOptions)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}

	collector, err := garbagecollection.New(garbagecollection.Options{
		Cluster: cfg.ClusterName, Namespace: cfg.Namespace, Instances: acts.Cloud(), Workflows: cfg.Temporal,
		Kubernetes: kubeClient, Nodes: factory.Core().V1().Nodes().Lister(), Recorder: recorder, Counter: cfg.Metrics,
		Grace: cfg.GarbageCollectionGrace, Interval: cfg.GarbageCollectionInterval, LeaseNamespace: cfg.LeaseNamespace,
		Identity: cfg.Identity, Clock: cfg.Clock, Logger: logger,
	})
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory.Start(runCtx.Done())
	dynamicFactory.Start(runCtx.Done())
	defer factory.Shutdown()
	for informerType, synced := range factory.WaitForCacheSync(runCtx.Done()) {
		if !synced && ctx.Err() == nil {
			return fmt.Errorf("worker: %v informer did not sync", informerType)
		}
	}
	for resource, synced := range dynamicFactory.WaitForCacheSync(runCtx.Done()) {
		if !synced && ctx.Err() == nil {
			return fmt.Errorf("worker: %s informer did not sync", resource.Resource)
		}
	}
	if ctx.Err() != nil {
		return nil // stopped while starting (SIGTERM, or a test that ended first)
	}

	if err := temporalWorker.Start(); err != nil {
		return fmt.Errorf("worker: starting the Temporal worker on task queue %q: %w", cfg.TaskQueue, err)
	}
	defer temporalWorker.Stop()

	done := make(chan struct{}, 10)
	goRun := func(f func(context.Context)) {
		go func() {
			defer func() { done <- struct{}{} }()
			f(runCtx)
		}()
	}
	goRun(podWatcher.Run)
	goRun(nodeWatcher.Run)
	goRun(poolWatcher.Run)
	goRun(statusControllers.Run)
	goRun(trigger.Run)
	goRun(func(ctx context.Context) {
		cfg.Metrics.RunVisibility(ctx, cfg.Temporal, cfg.Namespace, cfg.Clock, 0, logger.Named("visibility"))
	})
	goRun(collector.Run)
	running := 7
	if nodeClaimWatcher != nil {
		goRun(nodeClaimWatcher.Run)
		running++
	}
	if cfg.InterruptionQueue != "" {
		sqsClient, err := cloud.NewSQSClient(ctx, awsConfig)
		if err != nil {
			return fmt.Errorf("worker: SQS client: %w", err)
		}
		poller := &interruption.Poller{
			SQS: sqsClient, Queue: cfg.InterruptionQueue, Signaler: cfg.Temporal, Logger: logger.Named("interruption"),
			Recorder: cfg.Metrics,
			Finder:   &interruption.Finder{Cluster: cfg.ClusterName, Nodes: nodeInformer, Visibility: cfg.Temporal, Namespace: cfg.Namespace},
		}
		goRun(func(ctx context.Context) {
			if err := poller.Run(ctx); err != nil {
				logger.Error("the interruption poller stopped", zap.Error(err))
			}
		})
		running++
	}

	// A planning pass at start covers what happened while no worker ran:
	// pods that became pending, pools whose minNodes are not met.
	if err := provisioner.Signal(ctx, workflows.SignalReconcile, workflows.ReconcileRequest{Reason: "worker started"}); err != nil {
		logger.Warn("asking the provisioner for a planning pass failed", zap.Error(err))
	}
	// The disruption workflow is started (or found) at once, so a cluster
	// where nothing changes is still looked at.
	trigger.Poke("worker started")
	readiness.Set(true)
	logger.Info("Millwright worker started", zap.String("cluster", cfg.ClusterName), zap.String("taskQueue", cfg.TaskQueue),
		zap.String("namespace", cfg.Namespace), zap.Bool("interruptionQueue", cfg.InterruptionQueue != ""))

	<-ctx.Done()
	readiness.Set(false)
	cancel()
	for range running {
		<-done
	}
	logger.Info("Millwright worker stopped")
	return nil
}

func (cfg *Config) defaults() error {
	switch {
	case cfg.Temporal == nil:
		return errors.New("worker: a Temporal client is required")
	case cfg.Kubernetes == nil:
		return errors.New("worker: a Kubernetes configuration is required (--kubeconfig, or run in a cluster)")
	case cfg.ClusterName == "":
		return errors.New("worker: the cluster name is required (--cluster-name)")
	case cfg.AWSRegion == "":
		return errors.New("worker: the AWS region is required (--aws-region or AWS_REGION)")
	}
	if cfg.TaskQueue == "" {
		cfg.TaskQueue = DefaultTaskQueue
	}
	if cfg.KubeQPS == 0 {
		cfg.KubeQPS = DefaultKubeQPS
	}
	if cfg.KubeBurst == 0 {
		cfg.KubeBurst = DefaultKubeBurst
	}
	if cfg.ClusterEndpoint == "" {
		cfg.ClusterEndpoint = cfg.Kubernetes.Host
	}
	if cfg.ClusterCA == nil {
		ca, err := clusterCA(cfg.Kubernetes)
		if err != nil {
			return err
		}
		cfg.ClusterCA = ca
	}
	if cfg.ServiceCIDR == "" {
		cfg.ServiceCIDR = "10.96.0.0/12"
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Metrics == nil {
		m, err := metrics.New(metrics.NewRegistry())
		if err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		cfg.Metrics = m
	}
	limited := rest.CopyConfig(cfg.Kubernetes)
	limited.QPS, limited.Burst = cfg.KubeQPS, cfg.KubeBurst
	limited.Wrap(cfg.Metrics.KubeAPITransport(cfg.Clock))
	cfg.Kubernetes = limited
	return nil
}

// StaticCredentials are fixed credentials, for the local emulator.
func StaticCredentials(id, secret string) aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(id, secret, "")
}

// clusterCA is the CA bundle nodes trust the API server with. A kubeconfig
// usually names the CA by file (certificate-authority, as kwokctl and
// kubeadm write it) rather than inline, and client-go then leaves CAData
// empty; without this, userData would carry no CA and every launch fail.
func clusterCA(config *rest.Config) ([]byte, error) {
	if len(config.CAData) > 0 || config.CAFile == "" {
		return config.CAData, nil
	}
	ca, err := os.ReadFile(config.CAFile)
	if err != nil {
		return nil, fmt.Errorf("worker: reading the cluster CA (certificate-authority) %s: %w", config.CAFile, err)
	}
	return ca, nil
}

// Task pollers per worker. The SDK's default, 2 of each, caps what a worker
// takes from the task queue at 2 tasks per poll round trip: when a batch
// starts 50 node workflows, each needing several workflow tasks and
// activities before its CreateFleet, tasks wait in the queue for a poller.
const (
	workflowTaskPollers = 8
	activityTaskPollers = 8
)

// workerOptions are the Temporal worker's options.
func workerOptions() sdkworker.Options {
	return sdkworker.Options{
		MaxConcurrentWorkflowTaskPollers: workflowTaskPollers,
		MaxConcurrentActivityTaskPollers: activityTaskPollers,
	}
}
