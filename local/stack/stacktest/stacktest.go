// Package stacktest holds the helpers of tests that run on the whole local
// stack (local/stack: embedded Temporal, a real control plane, the EC2/SQS
// emulator) with a Millwright worker in between: starting the stack and its
// clients for a TestMain, Kubernetes waits and watches (pods available, a
// Node's life, a Node gone), node-workflow lookups by visibility query and
// their state and history queries, the emulator's instances, and manifest
// application through the dynamic client. Everything takes its clients
// explicitly; the packages using it (worker/run's integration tests, the
// e2e suite) keep their own harness. Polling is
// local/cluster/clustertesting.Eventually.
package stacktest

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/millwright/millwright/activities/planning"
	"github.com/millwright/millwright/deploy/examples"
	"github.com/millwright/millwright/local/awsemu"
	"github.com/millwright/millwright/local/stack"
	"github.com/millwright/millwright/local/temporal"
)

// Env is a running local stack and clients of its parts.
type Env struct {
	Stack    *stack.Stack
	Kube     kubernetes.Interface
	Dynamic  dynamic.Interface
	Temporal client.Client
}

// Namespace is the Temporal namespace the stack's workflows run in.
func (e *Env) Namespace() string { return e.Stack.Temporal.Namespace() }

// StackOptions are the stack the tests run on: Temporal in memory, every
// server on a free port of 127.0.0.1 (other stacks run on the machine), and
// an emulator whose boots, shutdowns and Node deletions take a second, so a
// node's whole life fits in a test. The caller chooses UIAddr or DisableUI.
func StackOptions(stateDir string, logger *zap.Logger) stack.Options {
	return stack.Options{
		StateDir:     stateDir,
		Ephemeral:    true,
		TemporalAddr: "127.0.0.1:0",
		EmulatorAddr: "127.0.0.1:0",
		Emulator: awsemu.Options{
			BootDelay: time.Second, ShutdownDelay: time.Second, NodeDeletionDelay: time.Second,
			NodeRegistrationRetry: time.Second,
		},
		Logger: logger,
	}
}

// startAttempts bounds StartEnv's retries of a start whose free port was
// taken.
const startAttempts = 3

// StartEnv starts the stack (again, up to 3 times, when a free port
// Temporal picked was taken by another process before Temporal bound it:
// other stacks start on this machine at the same time), connects a dynamic
// and a Temporal client, and applies the example EC2NodeClass "default"
// every example NodePool refers to. On an error nothing is left running.
func StartEnv(ctx context.Context, options stack.Options) (_ *Env, err error) {
	env := &Env{}
	for attempt := 1; ; attempt++ {
		env.Stack, err = stack.Start(ctx, options)
		if err == nil || !temporal.IsPortInUse(err) || attempt == startAttempts {
			break
		}
		fmt.Fprintf(os.Stderr, "stacktest: %v; trying again\n", err)
	}
	if err != nil {
		return nil, fmt.Errorf("starting the local stack: %w", err)
	}
	defer func() {
		if err != nil {
			_ = env.Stop(context.Background())
		}
	}()
	env.Kube = env.Stack.Clientset()
	if env.Dynamic, err = dynamic.NewForConfig(env.Stack.Cluster.RESTConfig()); err != nil {
		return env, fmt.Errorf("dynamic client: %w", err)
	}
	if env.Temporal, err = env.Stack.Temporal.NewClient(ctx); err != nil {
		return env, fmt.Errorf("Temporal client: %w", err)
	}
	if err := ApplyManifest(ctx, env.Dynamic, planning.EC2NodeClassResource, examples.NodeClass, nil); err != nil {
		return env, fmt.Errorf("applying the example EC2NodeClass: %w", err)
	}
	return env, nil
}

// Stop closes the Temporal client and stops the stack.
func (e *Env) Stop(ctx context.Context) error {
	if e.Temporal != nil {
		e.Temporal.Close()
	}
	if err := e.Stack.Stop(ctx); err != nil {
		return fmt.Errorf("stopping the stack: %w", err)
	}
	return nil
}

// FileLogger is a zap logger writing human-readable lines (no stack
// traces) to path: the logs a failed run keeps for its post-mortem.
func FileLogger(path string) (*zap.Logger, error) {
	cfg := zap.NewDevelopmentConfig()
	cfg.OutputPaths = []string{path}
	cfg.ErrorOutputPaths = []string{path}
	cfg.DisableStacktrace = true
	cfg.Development = false
	return cfg.Build()
}
