package chaos

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/millwright/millwright/harness/driver"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

var (
	seedFlag       = flag.Int64("chaos.seed", 1, "seed of the nemesis and the churn")
	lifecyclesFlag = flag.Int("chaos.lifecycles", 100, "node lifecycles to complete before healing (make test: 100, make chaos: 1000)")
	maxReplicas    = flag.Int("chaos.replicas", 6, "largest size of each churn deployment (one node per pod)")
	runTimeout     = flag.Duration("chaos.timeout", 20*time.Minute, "bound of the faulty phase; fewer lifecycles by then fails the run")
	quiescence     = flag.Duration("chaos.quiescence", 30*time.Second, "how long the healed system must stay settled before the final check")
	historyFlag    = flag.String("chaos.history", "", "JSON-lines history (default chaos-history.jsonl in the state dir)")
	keepFlag       = flag.Bool("chaos.keep", false, "keep the state dir (logs, history) even when the run passes")
	sweepTimeout   = flag.Duration("chaos.sweep-timeout", 20*time.Second, "how long the sweep looks for each activity's kill before it records a miss")
)

// Bounds of the run's waits after the faulty phase.
const (
	settleTimeout  = 8 * time.Minute
	cleanupTimeout = 6 * time.Minute
	// churnEvery and faultEvery pace the churn and the random faults.
	churnEvery  = 1500 * time.Millisecond
	faultEvery  = 8 * time.Second
	sampleEvery = 3 * time.Second
)

func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack (not with -short)")
	}
	began := time.Now()
	s := driver.StartForTest(t, "millwright-chaos-", *keepFlag, driver.Options{})
	stateDir := s.StateDir()
	historyPath := *historyFlag
	if historyPath == "" {
		historyPath = filepath.Join(stateDir, "chaos-history.jsonl")
	}
	history, err := NewHistory(historyPath)
	if err != nil {
		t.Fatal(err)
	}
	defer history.Close()

	ctx := context.Background()
	t.Logf("seed %d, %d lifecycles", *seedFlag, *lifecyclesFlag)
	history.Record(KindPhase, "run", "seed", *seedFlag, "lifecycles", *lifecyclesFlag, "stateDir", stateDir)
	if err := setUpWorkload(ctx, s); err != nil {
		t.Fatal(err)
	}

	n := newNemesis(s, *seedFlag, history, *sweepTimeout)
	c := newChecker(s, history, n)
	churn := &churner{s: s, rng: rand.New(rand.NewSource(*seedFlag + 1)), history: history, maxReplicas: *maxReplicas}

	// The faulty phase: churn, sweep then random faults, samples, until
	// enough lifecycles completed.
	runStarted := time.Now()
	runCtx, stopRun := context.WithCancel(ctx)
	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		n.sweep(runCtx)
		history.Record(KindPhase, "sweep-done")
		for tick := time.NewTicker(faultEvery); ; {
			select {
			case <-runCtx.Done():
				tick.Stop()
				return
			case <-tick.C:
				n.randomFault(runCtx)
			}
		}
	}()
	pdbsSettled := false
	completed := 0
	churnTick, sampleTick := time.NewTicker(churnEvery), time.NewTicker(sampleEvery)
	// Until enough lifecycles completed and every fault was injected.
	for (completed < *lifecyclesFlag || !n.everyKindInjected()) && time.Since(runStarted) < *runTimeout {
		select {
		case <-churnTick.C:
			churn.step(ctx)
		case <-sampleTick.C:
			n.supervise(ctx)
			if !pdbsSettled {
				pdbsSettled = c.pdbDeploymentsAvailable(ctx)
			}
			c.sample(ctx, pdbsSettled)
			if got, err := lifecycles(ctx, s); err == nil {
				completed = got
			}
		}
	}
	churnTick.Stop()
	sampleTick.Stop()
	stopRun()
	<-sweepDone
	faultyFor := time.Since(runStarted)
	history.Record(KindPhase, "heal", "lifecycles", completed, "after", faultyFor.String())

	// Heal, keep a fixed workload, wait for quiescence, check.
	if err := n.heal(ctx); err != nil {
		t.Fatalf("healing: %v", err)
	}
	for _, name := range churnDeployments {
		if err := scale(ctx, s.Kube, name, 2); err != nil {
			t.Fatalf("scaling %s: %v", name, err)
		}
	}
	settleStarted := time.Now()
	var quietSince time.Time
	var why string
	for time.Since(settleStarted) < settleTimeout {
		quiet, reason := c.allQuiet(ctx)
		why = reason
		switch {
		case !quiet:
			quietSince = time.Time{}
		case quietSince.IsZero():
			quietSince = time.Now()
		case time.Since(quietSince) >= *quiescence:
			goto settled
		}
		c.sample(ctx, true)
		time.Sleep(time.Second)
	}
	history.Record(KindObservation, "not-settled", "why", why)
	t.Logf("not settled after %s: %s", settleTimeout, why)
settled:
	settledIn := time.Since(settleStarted)
	history.Record(KindPhase, "check", "settledIn", settledIn.String())
	if err := c.final(ctx); err != nil {
		t.Errorf("final check: %v", err)
	}
	if err := c.workflowTaskFailures(ctx); err != nil {
		t.Errorf("reading histories: %v", err)
	}

	// Clean up: every pod gone, so every node is empty; nothing may stay.
	cleanupStarted := time.Now()
	if err := s.Kube.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting namespace %s: %v", namespace, err)
	}
	var left []string
	_ = wait.PollUntilContextTimeout(ctx, time.Second, cleanupTimeout, true, func(context.Context) (bool, error) {
		left = left[:0]
		for _, i := range s.Emulator().State().LiveInstances() {
			if i.Tags[apisv1.TagNodePool] == poolName {
				left = append(left, i.ID)
			}
		}
		return len(left) == 0, nil
	})
	for _, id := range left {
		c.violate(InvariantInstancesLeftOver, id)
	}
	completed, _ = lifecycles(ctx, s)
	history.Record(KindPhase, "done", "lifecycles", completed, "counters", c.Counts(), "faults", n.Faults())

	report := reportOf(c.Counts(), n.Faults(), s.Emulator().Faults().Injected, completed, map[string]time.Duration{
		"faulty phase": faultyFor, "settle": settledIn, "cleanup": time.Since(cleanupStarted), "total": time.Since(began),
	})
	t.Log("\n" + report)
	fmt.Fprintln(os.Stderr, report)
	for _, inv := range Invariants {
		if subjects := c.Subjects(inv); len(subjects) > 0 {
			t.Errorf("%s: %d (%s)", inv, len(subjects), strings.Join(first(subjects, 5), "; "))
		}
	}
	for id, diagnosis := range c.Diagnoses() {
		t.Logf("%s: %s", id, diagnosis)
	}
	if completed < *lifecyclesFlag {
		t.Errorf("%d node lifecycles completed, want ≥ %d (faulty phase bounded by -chaos.timeout %s)", completed, *lifecyclesFlag, *runTimeout)
	}
	for _, w := range s.Workers {
		if t.Failed() {
			t.Logf("%s log tail:\n%s", w.Name, driver.Tail(w.LogPath, 20))
		}
	}
}

// reportOf prints each counter against the lifecycles and the faults by
// kind.
func reportOf(counters, faults, emulatorFaults map[string]int, lifecycles int, durations map[string]time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos: seed %d, %d node lifecycles completed\n", *seedFlag, lifecycles)
	for _, inv := range Invariants {
		fmt.Fprintf(&b, "  %-30s %d / %d lifecycles\n", inv, counters[inv], lifecycles)
	}
	fmt.Fprintln(&b, "faults injected by kind:")
	for _, k := range sortedKeys(faults) {
		fmt.Fprintf(&b, "  %-30s %d\n", k, faults[k])
	}
	fmt.Fprintln(&b, "EC2 calls faulted by the emulator:")
	for _, k := range sortedKeys(emulatorFaults) {
		fmt.Fprintf(&b, "  %-30s %d\n", k, emulatorFaults[k])
	}
	fmt.Fprintln(&b, "run time:")
	for _, k := range sortedKeys(durations) {
		fmt.Fprintf(&b, "  %-30s %s\n", k, durations[k].Round(time.Second))
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
