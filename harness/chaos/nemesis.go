package chaos

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/harness/driver"
	"github.com/millwright/millwright/local/awsemu"
	"github.com/millwright/millwright/local/stack/stacktest"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/workflows"
)

// Fault kinds, as the history and the report name them.
const (
	FaultKillBefore = "kill-worker-before-side-effect"
	FaultKillAfter  = "kill-worker-after-side-effect"
	// FaultKillAfterMissed: a kill triggered by a side effect seen after
	// the activity had already completed (still a worker kill).
	FaultKillAfterMissed  = "kill-worker-after-side-effect-too-late"
	FaultKillRandom       = "kill-worker-random"
	FaultTemporalRestart  = "temporal-restart"
	FaultAPIServerRestart = "kube-apiserver-restart"
	FaultThrottle         = "ec2-throttle"
	FaultICE              = "ec2-insufficient-capacity"
	Fault5xx              = "ec2-5xx"
	FaultLatency          = "ec2-latency"
	FaultLostResponse     = "ec2-lost-response"
	FaultSpotStorm        = "spot-storm"
)

// sweepActivities are the activities the systematic sweep kills a worker
// around, each twice: before and after its side effect.
var sweepActivities = []string{
	activities.LaunchActivity,
	activities.WaitForRegistrationActivity,
	activities.RegisterNodeActivity,
	activities.WaitForInitializationActivity,
	activities.AllowDisruptionActivity,
	activities.DrainActivity,
	activities.TerminateInstanceActivity,
	activities.WaitForInstanceTerminatedActivity,
	activities.DeleteNodeActivity,
	activities.PlanActivity,
	activities.StartNodeWorkflowsActivity,
}

// ec2SideEffects are the EC2 calls that are an activity's side effect: the
// emulator holds them before applying (latency) or after (held response),
// so the kill lands exactly on one side.
var ec2SideEffects = map[string]string{
	activities.LaunchActivity:            "CreateFleet",
	activities.TerminateInstanceActivity: "TerminateInstances",
}

// lateAfter is how long Plan (which only reads: it has no side effect)
// must have been running before its "after" kill. Every other activity's
// "after" kill is triggered by its side effect: EC2 calls are held by the
// emulator, Node changes are watched (nodeEffects), the rest are probed
// (laterEffects).
const lateAfter = 1500 * time.Millisecond

// nemesis injects faults from a seeded generator and records each one.
type nemesis struct {
	s       *driver.Stack
	rng     *rand.Rand
	seed    int64
	history *History
	// sweepTimeout bounds the sweep's look for each activity's kill.
	sweepTimeout time.Duration
	// restarts are the pending worker restarts (kills are followed by one).
	restarts sync.WaitGroup
	// stormUntil: the PDB checker does not blame Millwright for pods a spot
	// storm's terminations took until then.
	mu         sync.Mutex
	stormUntil time.Time
	// faults counts the faults injected by kind.
	faults map[string]int
	// restarting are the workers killed whose restart is pending.
	restarting map[int]bool
	sweepDone  bool
	// order and next walk every random kind once before drawing.
	order []string
	next  int
}

// everyKindInjected reports whether the sweep is over and each random
// fault kind was injected at least once.
func (n *nemesis) everyKindInjected() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sweepDone && n.order != nil && n.next >= len(n.order)
}

func newNemesis(s *driver.Stack, seed int64, history *History, sweepTimeout time.Duration) *nemesis {
	return &nemesis{s: s, rng: rand.New(rand.NewSource(seed)), seed: seed, history: history, sweepTimeout: sweepTimeout,
		faults: map[string]int{}, restarting: map[int]bool{}}
}

func (n *nemesis) record(kind string, fields ...any) {
	n.mu.Lock()
	n.faults[kind]++
	n.mu.Unlock()
	n.history.Record(KindFault, kind, fields...)
}

// Faults are the faults injected so far, by kind.
func (n *nemesis) Faults() map[string]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]int{}
	for k, v := range n.faults {
		out[k] = v
	}
	return out
}

// involuntaryUntil is when the last spot storm's effects end.
func (n *nemesis) involuntaryUntil() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stormUntil
}

// sweep kills a worker before and after the side effect of every
// activity, one at a time, while the churn makes lifecycles.
func (n *nemesis) sweep(ctx context.Context) {
	for _, activity := range sweepActivities {
		for _, after := range []bool{false, true} {
			if ctx.Err() != nil {
				return
			}
			n.sweepOne(ctx, activity, after)
		}
	}
	n.mu.Lock()
	n.sweepDone = true
	n.mu.Unlock()
}

func (n *nemesis) sweepOne(ctx context.Context, activity string, after bool) {
	kind := FaultKillBefore
	if after {
		kind = FaultKillAfter
	}
	if effect, ok := nodeEffects[activity]; ok && after {
		if !n.killAfterNodeEffect(ctx, activity, effect, time.Now().Add(n.sweepTimeout)) {
			n.history.Record(KindObservation, "sweep-missed", "activity", activity, "after", after)
		}
		return
	}
	call, ec2 := ec2SideEffects[activity]
	if ec2 {
		fault := awsemu.CallFault{Kind: awsemu.CallFaultLatency, Actions: []string{call}, Rate: 1, Latency: awsemu.Duration(6 * time.Second)}
		if after {
			fault.Kind = awsemu.CallFaultHoldResponse
		}
		if err := n.s.Emulator().SetCallFaults([]awsemu.CallFault{fault}); err != nil {
			n.history.Record(KindObservation, "sweep-error", "activity", activity, "error", err)
			return
		}
		defer n.s.Emulator().ClearCallFaults()
	}
	deadline := time.Now().Add(n.sweepTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		probe, probed := laterEffects[activity]
		target, ok := n.findRunning(ctx, activity, after && !ec2 && !probed)
		if ok && after && probed {
			ok = n.awaitEffect(ctx, probe, target)
		}
		if ok && ec2 {
			held := awsemu.HeldBefore + call
			if after {
				held = awsemu.HeldAfter + call
			}
			ok = n.s.Emulator().HeldCalls()[held] > 0
		}
		if ok {
			worker, known := n.s.WorkerByIdentity(target.identity)
			if !known {
				time.Sleep(300 * time.Millisecond)
				continue
			}
			n.kill(worker, kind, "activity", activity, "workflow", target.workflowID, "attempt", target.attempt, "ec2Call", call)
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	n.history.Record(KindObservation, "sweep-missed", "activity", activity, "after", after)
}

// runningActivity is an activity attempt Temporal reports as started.
type runningActivity struct {
	workflowID string
	identity   string
	attempt    int32
	startedAt  time.Time
}

// findRunning looks for a started attempt of activity in the node
// workflows (or the provisioner) and returns it; late asks for one that
// has been running for lateAfter.
func (n *nemesis) findRunning(ctx context.Context, activity string, late bool) (runningActivity, bool) {
	ids := []string{workflows.ProvisionerWorkflowID(n.s.Local.ClusterName())}
	if activity != activities.PlanActivity && activity != activities.StartNodeWorkflowsActivity {
		open, err := stacktest.ListNodeWorkflows(ctx, n.s.Temporal, n.s.Namespace, stacktest.PoolQuery(poolName)+" AND ExecutionStatus = 'Running'")
		if err != nil {
			return runningActivity{}, false
		}
		ids = ids[:0]
		for _, wf := range open {
			ids = append(ids, wf.ID)
		}
		n.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	}
	for _, id := range ids {
		described, err := n.s.Temporal.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			continue
		}
		for _, p := range described.GetPendingActivities() {
			if p.GetActivityType().GetName() != activity || p.GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED {
				continue
			}
			if late && time.Since(p.GetLastStartedTime().AsTime()) < lateAfter {
				continue
			}
			return runningActivity{workflowID: id, identity: p.GetLastWorkerIdentity(), attempt: p.GetAttempt(), startedAt: p.GetLastStartedTime().AsTime()}, true
		}
	}
	return runningActivity{}, false
}

// kill SIGKILLs worker i and starts it again after a random pause.
func (n *nemesis) kill(i int, kind string, fields ...any) {
	w := n.s.Workers[i]
	pid := w.PID()
	if !n.killNow(i) {
		return
	}
	n.record(kind, append(fields, "worker", w.Name, "pid", pid)...)
	n.restartLater(i)
}

// killNow SIGKILLs worker i unless it is down already, and reports
// whether it did; restartLater must follow.
func (n *nemesis) killNow(i int) bool {
	n.mu.Lock()
	if n.restarting[i] {
		n.mu.Unlock()
		return false
	}
	n.restarting[i] = true
	n.mu.Unlock()
	if err := n.s.Workers[i].Kill(); err != nil {
		n.history.Record(KindObservation, "kill-error", "worker", n.s.Workers[i].Name, "error", err)
	}
	return true
}

// restartLater starts worker i again after a random pause of 1–5 s.
func (n *nemesis) restartLater(i int) {
	w := n.s.Workers[i]
	pause := time.Duration(1+n.rng.Intn(5)) * time.Second
	n.restarts.Add(1)
	go func() {
		defer n.restarts.Done()
		time.Sleep(pause)
		err := w.Start(context.Background())
		n.history.Record(KindHeal, "worker-started", "worker", w.Name, "pid", w.PID(), "after", pause.String(), "error", err)
		n.mu.Lock()
		delete(n.restarting, i)
		n.mu.Unlock()
	}()
}

// supervise starts again a worker that exited without being killed by the
// nemesis (as the Deployment's kubelet would), and records it.
func (n *nemesis) supervise(ctx context.Context) {
	for i, w := range n.s.Workers {
		n.mu.Lock()
		pending := n.restarting[i]
		n.mu.Unlock()
		if pending || w.Running() {
			continue
		}
		err := w.Start(ctx)
		n.history.Record(KindObservation, "worker-exited-and-restarted", "worker", w.Name, "pid", w.PID(), "error", err)
	}
}

// randomKinds are the random phase's faults; a kill is twice as likely.
var randomKinds = []string{FaultKillRandom, FaultTemporalRestart, FaultAPIServerRestart, FaultThrottle, FaultICE, Fault5xx, FaultLatency, FaultLostResponse, FaultSpotStorm, FaultKillRandom}

// randomFault injects one fault: every kind once first, in a seeded order,
// then drawn from the generator. Faults that last are lifted after their
// duration (in the background).
func (n *nemesis) randomFault(ctx context.Context) {
	n.mu.Lock()
	if n.order == nil {
		n.order = append([]string(nil), randomKinds[:len(randomKinds)-1]...)
		n.rng.Shuffle(len(n.order), func(i, j int) { n.order[i], n.order[j] = n.order[j], n.order[i] })
	}
	kind := randomKinds[n.rng.Intn(len(randomKinds))]
	if n.next < len(n.order) {
		kind = n.order[n.next]
		n.next++
	}
	n.mu.Unlock()
	emu := n.s.Emulator()
	lasting := time.Duration(8+n.rng.Intn(12)) * time.Second
	seed := n.rng.Int63()
	switch kind {
	case FaultKillRandom:
		n.kill(n.rng.Intn(len(n.s.Workers)), kind)
	case FaultTemporalRestart:
		started := time.Now()
		err := n.s.RestartTemporal(ctx)
		n.record(kind, "downFor", time.Since(started).Round(time.Millisecond).String(), "error", err)
	case FaultAPIServerRestart:
		started := time.Now()
		err := n.s.RestartAPIServer(ctx)
		n.record(kind, "downFor", time.Since(started).Round(time.Millisecond).String(), "error", err)
	case FaultThrottle:
		err := emu.SetThrottle(awsemu.ThrottleFault{Rate: 0.5, Seed: seed})
		n.record(kind, "for", lasting.String(), "error", err)
		n.later(lasting, kind, emu.ClearThrottle)
	case FaultICE:
		zone := []string{"us-east-1a", "us-east-1b", "us-east-1c"}[n.rng.Intn(3)]
		capacityType := []string{apisv1.CapacityTypeSpot, apisv1.CapacityTypeOnDemand}[n.rng.Intn(2)]
		offering := awsemu.CapacityFault{InstanceType: "m5.large", Zone: zone, CapacityType: capacityType}
		err := emu.AddCapacityFault(offering)
		n.record(kind, "offering", fmt.Sprintf("m5.large/%s/%s", zone, capacityType), "for", lasting.String(), "error", err)
		n.later(lasting, kind, func() { emu.RemoveCapacityFault(offering) })
	case Fault5xx, FaultLatency, FaultLostResponse:
		fault := map[string]awsemu.CallFault{
			Fault5xx:          {Kind: awsemu.CallFaultError, Rate: 0.3, Seed: seed},
			FaultLatency:      {Kind: awsemu.CallFaultLatency, Rate: 0.5, Seed: seed, Latency: awsemu.Duration(2 * time.Second)},
			FaultLostResponse: {Kind: awsemu.CallFaultLostResponse, Rate: 0.5, Seed: seed, Actions: []string{"CreateFleet", "TerminateInstances"}},
		}[kind]
		err := emu.SetCallFaults([]awsemu.CallFault{fault})
		n.record(kind, "fault", fault, "for", lasting.String(), "error", err)
		n.later(lasting, kind, emu.ClearCallFaults)
	case FaultSpotStorm:
		n.spotStorm()
	}
}

// later lifts a fault after d.
func (n *nemesis) later(d time.Duration, kind string, lift func()) {
	n.restarts.Add(1)
	go func() {
		defer n.restarts.Done()
		time.Sleep(d)
		lift()
		n.history.Record(KindHeal, kind)
	}()
}

// spotStorm interrupts 30% of the pool's running spot instances, each at a
// random moment within 10 s, with EC2's 2-minute warning.
func (n *nemesis) spotStorm() {
	var spot []awsemu.InstanceState
	for _, i := range n.s.Emulator().State().LiveInstances() {
		if i.Tags[apisv1.TagNodePool] == poolName && i.CapacityType == apisv1.CapacityTypeSpot && i.State == "running" && i.InterruptedAt == nil {
			spot = append(spot, i)
		}
	}
	n.rng.Shuffle(len(spot), func(a, b int) { spot[a], spot[b] = spot[b], spot[a] })
	victims := spot[:(len(spot)*3+9)/10]
	var ids []string
	for _, v := range victims {
		ids = append(ids, v.ID)
	}
	slices.Sort(ids)
	n.mu.Lock()
	n.stormUntil = time.Now().Add(10*time.Second + spotWarning + time.Minute)
	n.mu.Unlock()
	n.record(FaultSpotStorm, "spotInstances", len(spot), "interrupted", ids)
	for _, id := range ids {
		at := time.Duration(n.rng.Int63n(int64(10 * time.Second)))
		n.restarts.Add(1)
		go func() {
			defer n.restarts.Done()
			time.Sleep(at)
			_, err := n.s.Emulator().InterruptSpot(id, spotWarning)
			n.history.Record(KindObservation, "spot-interruption-sent", "instance", id, "error", err)
		}()
	}
}

// heal lifts every fault and waits until every worker and the Temporal
// server run again.
func (n *nemesis) heal(ctx context.Context) error {
	n.restarts.Wait()
	emu := n.s.Emulator()
	emu.ClearThrottle()
	emu.ClearCapacityFaults()
	emu.ClearCallFaults()
	if !n.s.TemporalProc.Running() {
		if err := n.s.TemporalProc.Start(ctx); err != nil {
			return err
		}
	}
	for _, w := range n.s.Workers {
		if !w.Running() {
			if err := w.Start(ctx); err != nil {
				return err
			}
		}
	}
	n.history.Record(KindHeal, "all")
	return nil
}

// drain asks the node workflow of node to drain it (the drain update, as
// `starter drain` sends it).
func drain(ctx context.Context, s *driver.Stack, node string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	found, err := stacktest.ListNodeWorkflows(ctx, s.Temporal, s.Namespace,
		fmt.Sprintf("%s = '%s' AND ExecutionStatus = 'Running'", workflows.NodeNameAttribute.GetName(), node))
	if err != nil {
		return err
	}
	if len(found) != 1 {
		return fmt.Errorf("%d running node workflows for Node %s", len(found), node)
	}
	handle, err := s.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: found[0].ID, UpdateName: workflows.UpdateDrain, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{workflows.DrainRequest{Reason: "chaos churn", Requester: "chaos"}},
	})
	if err != nil {
		return err
	}
	var result workflows.DrainResult
	return handle.Get(ctx, &result)
}

// spotWarning is EC2's notice before a spot interruption.
const spotWarning = 2 * time.Minute
