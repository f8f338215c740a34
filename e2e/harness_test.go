package e2e

// The suite's life cycle: TestMain builds the binaries, starts one local
// stack and one worker process for the package, runs the scenarios, checks
// that nothing leaked, and stops everything.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/millwright/millwright/local/stack"
	"github.com/millwright/millwright/local/stack/stacktest"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/workflows"
)

// awsRegion is the region the worker is configured with; the emulator
// serves us-east-1.
const awsRegion = "us-east-1"

// leakCheckTimeout bounds how long TestMain waits, after the last scenario,
// for the nodes the scenarios left empty to be consolidated away.
const leakCheckTimeout = 4 * time.Minute

// e2eSuite is what every scenario shares: the stack, clients of its parts,
// the built binaries and the worker process. The package variable suite is
// nil under -short (every scenario skips).
type e2eSuite struct {
	// stateDir holds worker.log, the cluster's logs and the binaries; it is
	// kept when a test failed.
	stateDir string
	stack    *stack.Stack
	kube     kubernetes.Interface
	dynamic  dynamic.Interface
	temporal client.Client
	// workerBinary and starterBinary are the shipped commands, built by
	// TestMain from this checkout.
	workerBinary  string
	starterBinary string
	// worker is the running worker process (see worker_test.go).
	worker *workerProcess
}

var suite *e2eSuite

// keepState keeps the state dir (worker.log, stack.log, cluster logs) even
// when every test passed: go test ./e2e/ -args -e2e.keep
var keepState = flag.Bool("e2e.keep", false, "keep the state dir (logs) even when the tests pass")

// TestMain starts the stack and the worker, runs the scenarios, then checks
// for leaks. Under -short it only runs m (every scenario skips).
func TestMain(m *testing.M) {
	os.Exit(stacktest.Main(m, runSuite))
}

func runSuite(m *testing.M) (code int) {
	began := time.Now()
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "e2e: %s: %v\n", what, err)
		return 1
	}
	stateDir, err := os.MkdirTemp("", "millwright-e2e-")
	if err != nil {
		return fail("state dir", err)
	}
	defer func() {
		switch {
		case code != 0:
			fmt.Fprintf(os.Stderr, "e2e: FAILED; logs kept in %s (worker.log, stack.log, cluster/)\n", stateDir)
		case *keepState:
			fmt.Fprintf(os.Stderr, "e2e: logs kept in %s (worker.log, stack.log, cluster/)\n", stateDir)
		default:
			_ = os.RemoveAll(stateDir)
		}
	}()
	s := &e2eSuite{stateDir: stateDir}

	// The binaries build while the stack starts: both take tens of seconds
	// on a cold cache and neither needs the other.
	built := make(chan error, 1)
	go func() { built <- s.buildBinaries() }()

	stackLogger, err := stacktest.FileLogger(filepath.Join(stateDir, "stack.log"))
	if err != nil {
		return fail("stack logger", err)
	}
	defer stackLogger.Sync() //nolint:errcheck // best effort
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stackStarted := time.Now()
	options := stacktest.StackOptions(stateDir, stackLogger)
	// The UI stays on: the browser test drives it.
	options.UIAddr = "127.0.0.1:0"
	env, err := stacktest.StartEnv(ctx, options)
	if err != nil {
		<-built
		return fail("local stack", err)
	}
	defer func() {
		if err := env.Stop(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
		}
	}()
	s.stack, s.kube, s.dynamic, s.temporal = env.Stack, env.Kube, env.Dynamic, env.Temporal
	fmt.Fprintf(os.Stderr, "e2e: local stack up in %s (Temporal %s, UI %s, emulator %s)\n",
		time.Since(stackStarted).Round(time.Millisecond), s.stack.Temporal.FrontendAddr(), s.stack.Temporal.UIURL(), s.stack.EmulatorURL())
	if err := <-built; err != nil {
		return fail("building the binaries", err)
	}

	s.worker = newWorkerProcess(s)
	if err := s.worker.launch(ctx); err != nil {
		return fail("starting the worker", err)
	}
	defer func() {
		if err := s.worker.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping the worker:", err)
			code = 1
		}
	}()
	suite = s
	fmt.Fprintf(os.Stderr, "e2e: ready after %s; running the scenarios\n", time.Since(began).Round(time.Millisecond))

	code = m.Run()
	leakStarted := time.Now()
	if err := s.checkNothingLeaked(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: leak check:", err)
		fmt.Fprintln(os.Stderr, "e2e: worker log tail:\n"+s.worker.logTail(40))
		code = 1
	}
	fmt.Fprintf(os.Stderr, "e2e: leak check took %s; %s in all\n",
		time.Since(leakStarted).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	return code
}

// buildBinaries builds the worker and starter commands of this checkout into
// the state dir, as a user would with `go build`.
func (s *e2eSuite) buildBinaries() error {
	dir := filepath.Join(s.stateDir, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	started := time.Now()
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./worker", "./starter")
	cmd.Dir = ".." // the module root: e2e is a top-level folder
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./worker ./starter: %w\n%s", err, out)
	}
	s.workerBinary = filepath.Join(dir, "worker")
	s.starterBinary = filepath.Join(dir, "starter")
	fmt.Fprintf(os.Stderr, "e2e: built worker and starter in %s\n", time.Since(started).Round(time.Millisecond))
	return nil
}

// checkNothingLeaked waits until the scenarios left nothing behind: no live
// instance in the emulator, no Node, no running node workflow. Scenarios
// delete their namespaces, so their nodes are empty and their pools'
// consolidateAfter terminates them.
func (s *e2eSuite) checkNothingLeaked(ctx context.Context) error {
	var problems []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, leakCheckTimeout, true, func(ctx context.Context) (bool, error) {
		problems = problems[:0]
		for _, i := range s.stack.Emulator.State().LiveInstances() {
			problems = append(problems, fmt.Sprintf("instance %s %s (pool %s)", i.ID, i.State, i.Tags[apisv1.TagNodePool]))
		}
		nodes, err := s.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			problems = append(problems, "listing Nodes: "+err.Error())
		} else {
			for _, n := range nodes.Items {
				problems = append(problems, fmt.Sprintf("Node %s (pool %s)", n.Name, n.Labels[apisv1.LabelNodePool]))
			}
		}
		running, err := s.listWorkflows(ctx, fmt.Sprintf("%s IS NOT NULL AND ExecutionStatus = 'Running'", workflows.NodePoolAttribute.GetName()))
		if err != nil {
			problems = append(problems, "listing node workflows: "+err.Error())
		}
		for _, wf := range running {
			problems = append(problems, fmt.Sprintf("node workflow %s running (phase %s)", wf.ID, wf.Phase))
		}
		return len(problems) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("after %s: %s", leakCheckTimeout, strings.Join(problems, "; "))
	}
	return nil
}

// listWorkflows lists executions matching a visibility query, newest run
// per workflow id first.
func (s *e2eSuite) listWorkflows(ctx context.Context, query string) ([]nodeWorkflow, error) {
	return stacktest.ListNodeWorkflows(ctx, s.temporal, s.stack.Temporal.Namespace(), query)
}

// errNoStack is the skip reason of scenarios under -short.
var errNoStack = errors.New("needs the local stack (not with -short)")
