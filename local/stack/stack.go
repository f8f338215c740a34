// Package stack brings up Millwright's whole local stack in one call — the
// embedded Temporal server and UI, a real Kubernetes control plane run by
// kwokctl with Millwright's CRDs installed, and the EC2/SQS emulator wired to
// register Nodes in that cluster — and tears it all down again. `starter dev`,
// the demo and the integration and end-to-end tests start from here, so they
// all run the same stack.
//
// It only composes the parts in package local; it does not run a Millwright
// worker itself (callers start one against the endpoints it reports), so that
// tests can stop and restart workers while the stack keeps running.
package stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	"github.com/millwright/millwright/deploy/crds"
	"github.com/millwright/millwright/local/awsemu"
	"github.com/millwright/millwright/local/cluster"
	"github.com/millwright/millwright/local/temporal"
	"github.com/millwright/millwright/workflows"
)

// DefaultInterruptionQueue is the SQS queue the emulator sends EventBridge
// events to and the worker polls.
const DefaultInterruptionQueue = "millwright-interruptions"

// Options configure Start. The zero value plus a StateDir is `starter dev`'s
// default stack.
type Options struct {
	// StateDir holds the Temporal database (unless Ephemeral), the cluster's
	// work dir and the logs. Required.
	StateDir string
	// Ephemeral keeps Temporal's state in memory.
	Ephemeral bool
	// ClusterName names the kwok cluster and Millwright's cluster (tags,
	// discovery). Default "millwright".
	ClusterName string
	// TemporalAddr and UIAddr default to 127.0.0.1:7233 and :8233; port 0
	// picks a free port. DisableUI runs Temporal without its UI.
	TemporalAddr string
	UIAddr       string
	DisableUI    bool
	// ExternalTemporal leaves Temporal out: the caller runs the server
	// itself (the chaos harness runs it as a process it can SIGKILL and
	// restart on the same database); Stack.Temporal is then nil.
	ExternalTemporal bool
	// EmulatorAddr is where the EC2/SQS emulator listens (default
	// 127.0.0.1:0, a free port).
	EmulatorAddr string
	// Emulator tunes the emulator (delays, zones); Registrar, ClusterName and
	// EventQueue are set by Start.
	Emulator awsemu.Options
	// Logger receives lifecycle lines (default: no-op).
	Logger *zap.Logger
}

// Stack is a running local stack.
type Stack struct {
	opts     Options
	logger   *zap.Logger
	Temporal *temporal.Server
	Cluster  *cluster.Cluster
	Emulator *awsemu.Emulator
}

// Start brings the stack up in dependency order; on any failure it stops what
// it had started and returns an error naming the part that failed.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	if opts.StateDir == "" {
		return nil, errors.New("local stack: StateDir is required")
	}
	if opts.ClusterName == "" {
		opts.ClusterName = cluster.DefaultName
	}
	if opts.EmulatorAddr == "" {
		opts.EmulatorAddr = "127.0.0.1:0"
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if err := os.MkdirAll(opts.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("local stack: state dir: %w", err)
	}
	s := &Stack{opts: opts, logger: opts.Logger}
	defer func() {
		if err != nil {
			s.Stop(context.WithoutCancel(ctx))
		}
	}()

	if !opts.ExternalTemporal {
		s.logger.Info("starting Temporal")
		s.Temporal, err = temporal.Start(ctx, temporal.Options{
			StateDir:         filepath.Join(opts.StateDir, "temporal"),
			Ephemeral:        opts.Ephemeral,
			FrontendAddr:     opts.TemporalAddr,
			UIAddr:           opts.UIAddr,
			DisableUI:        opts.DisableUI,
			SearchAttributes: workflows.SearchAttributeTypes(),
		})
		if err != nil {
			return nil, fmt.Errorf("local stack: Temporal: %w", err)
		}
	}

	s.logger.Info("starting the Kubernetes control plane")
	s.Cluster, err = cluster.Start(ctx, cluster.Options{
		Name:    opts.ClusterName,
		WorkDir: filepath.Join(opts.StateDir, "cluster"),
		Logger:  s.logger,
	})
	if err != nil {
		return nil, fmt.Errorf("local stack: Kubernetes control plane: %w", err)
	}
	if err := crds.Install(ctx, s.Cluster.RESTConfig()); err != nil {
		return nil, fmt.Errorf("local stack: %w", err)
	}

	s.logger.Info("starting the EC2/SQS emulator")
	emuOpts := opts.Emulator
	emuOpts.ClusterName = opts.ClusterName
	if emuOpts.EventQueue == "" {
		emuOpts.EventQueue = DefaultInterruptionQueue
	}
	if emuOpts.Logger == nil {
		emuOpts.Logger = s.logger.Named("emulator")
	}
	emuOpts.Registrar, err = awsemu.NewKubernetesRegistrar(s.Cluster.RESTConfig())
	if err != nil {
		return nil, fmt.Errorf("local stack: emulator node registrar: %w", err)
	}
	s.Emulator, err = awsemu.New(emuOpts)
	if err != nil {
		return nil, fmt.Errorf("local stack: emulator: %w", err)
	}
	if err := s.Emulator.Start(opts.EmulatorAddr); err != nil {
		return nil, fmt.Errorf("local stack: emulator: %w", err)
	}
	// Create the interruption queue now, not on the first event: a worker
	// looks the queue up when it starts. (In AWS the queue comes from
	// CloudFormation, deploy/iam.)
	if err := s.Emulator.ConfigureEvents(awsemu.EventConfig{Queue: emuOpts.EventQueue, StateChangeNotifications: emuOpts.StateChangeNotifications}); err != nil {
		return nil, fmt.Errorf("local stack: emulator: %w", err)
	}
	return s, nil
}

// ClusterName is the cluster's name as tags and discovery selectors use it.
func (s *Stack) ClusterName() string { return s.opts.ClusterName }

// EmulatorURL is the endpoint the EC2 and SQS SDK clients use.
func (s *Stack) EmulatorURL() string { return s.Emulator.URL() }

// InterruptionQueueURL is the URL of the SQS queue the emulator sends events
// to, as GetQueueUrl would answer it.
func (s *Stack) InterruptionQueueName() string {
	if s.opts.Emulator.EventQueue != "" {
		return s.opts.Emulator.EventQueue
	}
	return DefaultInterruptionQueue
}

// Clientset is an admin client of the cluster.
func (s *Stack) Clientset() kubernetes.Interface { return s.Cluster.Clientset() }

// Stop stops every part that was started, in reverse order, and reports the
// first failure (it keeps stopping the rest regardless).
func (s *Stack) Stop(ctx context.Context) error {
	var errs []error
	if s.Emulator != nil {
		errs = append(errs, s.Emulator.Close())
	}
	if s.Cluster != nil {
		errs = append(errs, s.Cluster.Stop(ctx))
	}
	if s.Temporal != nil {
		errs = append(errs, s.Temporal.Stop())
	}
	return errors.Join(errs...)
}
