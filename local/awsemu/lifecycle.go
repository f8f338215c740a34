package awsemu

import (
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/hex"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/millwright/millwright/model/catalog"
)

// Instance states and their EC2 codes.
const (
	statePending      = "pending"
	stateRunning      = "running"
	stateShuttingDown = "shutting-down"
	stateTerminated   = "terminated"
)

var stateCodes = map[string]int{statePending: 0, stateRunning: 16, stateShuttingDown: 32, stateTerminated: 48}

// instance is one emulated EC2 instance.
type instance struct {
	id              string
	reservationID   string
	spec            catalog.InstanceTypeSpec
	zone            zone
	subnet          *subnet
	capacityType    string
	imageID         string
	groupIDs        []string
	privateIP       string
	privateDNS      string
	launchTime      time.Time
	userData        string // base64, as EC2 stores it
	instanceProfile string
	clientToken     string
	fleetID         string
	template        *templateRef
	tags            map[string]string
	launchIndex     int

	state       string
	stateSince  time.Time
	stateReason *stateReason // why it is shutting down / terminated
	transition  string       // EC2's "reason" text for user-initiated changes

	// Node bookkeeping, as a kubelet and the cloud controller manager would.
	nodeName          string
	nodeRegistered    bool
	nodeRegisterError string
	nodeDeleted       bool

	interruptionAt time.Time // when a spot interruption warning was sent
}

type stateReason struct {
	code, message string
}

// Reasons EC2 gives for a termination.
var (
	reasonUserTerminated = stateReason{"Client.UserInitiatedShutdown", "Client.UserInitiatedShutdown: User initiated shutdown"}
	reasonSpotTerminated = stateReason{"Server.SpotInstanceTermination", "Server.SpotInstanceTermination: Spot instance termination"}
)

type templateRef struct {
	id, name, version string
}

func newInstanceID() string { return "i-" + randomHex(17) }

func newReservationID() string { return "r-" + randomHex(17) }

func newRequestID() string { return uuid.NewString() }

func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

func sortStrings(s []string) { sort.Strings(s) }

// dnsNameForIP is EC2's private DNS name in us-east-1 (ip-10-0-1-2.ec2.internal);
// other regions use <region>.compute.internal.
func (e *Emulator) dnsNameForIP(ip string) string {
	host := "ip-" + replaceDots(ip)
	if e.opts.Region == "us-east-1" {
		return host + ".ec2.internal"
	}
	return host + "." + e.opts.Region + ".compute.internal"
}

func replaceDots(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == '.' {
			b[i] = '-'
		}
	}
	return string(b)
}

// --- the schedule: state changes and Node work due at a time ---------------

type eventKind int

const (
	eventBoot              eventKind = iota // pending → running
	eventFinishTermination                  // shutting-down → terminated
	eventInterruption                       // spot interruption: begin termination
	eventRegisterNode                       // (re)try creating the Node
	eventDeleteNode                         // (re)try deleting the Node
)

type scheduledEvent struct {
	at         time.Time
	seq        uint64
	kind       eventKind
	instanceID string
}

// schedule is a min-heap on (at, seq): events due at the same time run in the
// order they were scheduled.
type schedule struct {
	events []scheduledEvent
	seq    uint64
}

func (s *schedule) Len() int { return len(s.events) }
func (s *schedule) Less(i, j int) bool {
	if !s.events[i].at.Equal(s.events[j].at) {
		return s.events[i].at.Before(s.events[j].at)
	}
	return s.events[i].seq < s.events[j].seq
}
func (s *schedule) Swap(i, j int) { s.events[i], s.events[j] = s.events[j], s.events[i] }
func (s *schedule) Push(x any)    { s.events = append(s.events, x.(scheduledEvent)) }
func (s *schedule) Pop() any {
	last := s.events[len(s.events)-1]
	s.events = s.events[:len(s.events)-1]
	return last
}

// scheduleLocked queues an event and wakes the loop. e.mu must be held.
func (e *Emulator) scheduleLocked(at time.Time, kind eventKind, instanceID string) {
	e.schedule.seq++
	heap.Push(&e.schedule, scheduledEvent{at: at, seq: e.schedule.seq, kind: kind, instanceID: instanceID})
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// effect is work that talks to the outside (the Kubernetes API) and so runs
// without e.mu held.
type effect struct {
	kind       eventKind // eventRegisterNode or eventDeleteNode
	instanceID string
}

// advance applies every state change due by now. Called at the start of each
// request and by the loop, so a fake clock needs no extra call to be seen by
// DescribeInstances.
func (e *Emulator) advance() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(e.clock.Now())
}

func (e *Emulator) advanceLocked(now time.Time) {
	for e.schedule.Len() > 0 && !e.schedule.events[0].at.After(now) {
		ev := heap.Pop(&e.schedule).(scheduledEvent)
		inst, ok := e.instances[ev.instanceID]
		if !ok {
			continue
		}
		switch ev.kind {
		case eventBoot:
			if inst.state == statePending {
				e.setStateLocked(inst, stateRunning, ev.at)
				e.effects = append(e.effects, effect{kind: eventRegisterNode, instanceID: inst.id})
			}
		case eventInterruption:
			if inst.state == statePending || inst.state == stateRunning {
				e.beginTerminationLocked(inst, ev.at, reasonSpotTerminated)
			}
		case eventFinishTermination:
			if inst.state == stateShuttingDown {
				e.setStateLocked(inst, stateTerminated, ev.at)
				if inst.nodeName != "" {
					e.scheduleLocked(ev.at.Add(e.opts.NodeDeletionDelay), eventDeleteNode, inst.id)
				}
			}
		case eventRegisterNode, eventDeleteNode:
			e.effects = append(e.effects, effect{kind: ev.kind, instanceID: inst.id})
		}
	}
}

// setStateLocked moves inst to state at time at and, when enabled, tells the
// event queue.
func (e *Emulator) setStateLocked(inst *instance, state string, at time.Time) {
	inst.state = state
	inst.stateSince = at
	if state == stateRunning {
		// A kubelet registers under the host name; remember it so that the
		// cloud controller manager's deletion knows which Node to remove.
		inst.nodeName = inst.privateDNS
	}
	if e.stateChanges {
		e.sendEventLocked(stateChangeEvent(e, inst, at))
	}
}

// beginTerminationLocked moves a live instance to shutting-down and schedules
// the rest of its termination.
func (e *Emulator) beginTerminationLocked(inst *instance, at time.Time, reason stateReason) {
	if inst.state == stateShuttingDown || inst.state == stateTerminated {
		return
	}
	inst.stateReason = &reason
	if reason == reasonUserTerminated {
		inst.transition = "User initiated (" + at.UTC().Format("2006-01-02 15:04:05 MST") + ")"
	}
	e.setStateLocked(inst, stateShuttingDown, at)
	e.scheduleLocked(at.Add(e.opts.ShutdownDelay), eventFinishTermination, inst.id)
}

// Reconcile applies every state change due by the clock's now and runs the
// Node registrations and deletions they cause, returning when they are done.
// The background loop does the same on its own; tests with a fake clock call
// Reconcile after stepping the clock to observe the outcome deterministically.
func (e *Emulator) Reconcile(ctx context.Context) {
	e.effectsMu.Lock()
	defer e.effectsMu.Unlock()
	e.mu.Lock()
	e.advanceLocked(e.clock.Now())
	pending := e.effects
	e.effects = nil
	e.mu.Unlock()
	e.runEffects(ctx, pending)
}

// maxConcurrentEffects bounds the Node calls in flight: each instance's
// kubelet registers its own Node, so many register at once, as in EC2.
const maxConcurrentEffects = 32

// runEffects runs each instance's effects in order, different instances'
// concurrently, and returns when all are done.
func (e *Emulator) runEffects(ctx context.Context, pending []effect) {
	var order []string
	byInstance := map[string][]effect{}
	for _, ef := range pending {
		if _, seen := byInstance[ef.instanceID]; !seen {
			order = append(order, ef.instanceID)
		}
		byInstance[ef.instanceID] = append(byInstance[ef.instanceID], ef)
	}
	slots := make(chan struct{}, maxConcurrentEffects)
	var wg sync.WaitGroup
	for _, id := range order {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			for _, ef := range byInstance[id] {
				e.runEffect(ctx, ef)
			}
		})
	}
	wg.Wait()
}

// loop waits for the next due event (on the injected clock) or a wake-up, and
// reconciles.
func (e *Emulator) loop() {
	defer close(e.stopped)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-e.stop
		cancel()
	}()
	for {
		e.Reconcile(ctx)

		e.mu.Lock()
		var wait time.Duration
		hasNext := e.schedule.Len() > 0
		if hasNext {
			wait = e.schedule.events[0].at.Sub(e.clock.Now())
		}
		pendingEffects := len(e.effects) > 0
		e.mu.Unlock()
		if pendingEffects || (hasNext && wait <= 0) {
			continue
		}

		var timerC <-chan time.Time
		if hasNext {
			t := e.clock.NewTimer(wait)
			timerC = t.C()
			select {
			case <-e.stop:
				t.Stop()
				return
			case <-e.wake:
			case <-timerC:
			}
			t.Stop()
			continue
		}
		select {
		case <-e.stop:
			return
		case <-e.wake:
		}
	}
}

// runEffect performs a Node registration or deletion for an instance; on
// failure it schedules a retry.
func (e *Emulator) runEffect(ctx context.Context, ef effect) {
	if e.opts.Registrar == nil {
		return
	}
	switch ef.kind {
	case eventRegisterNode:
		e.mu.Lock()
		inst, ok := e.instances[ef.instanceID]
		if !ok || inst.state != stateRunning || inst.nodeRegistered {
			e.mu.Unlock()
			return
		}
		node, err := e.nodeForInstanceLocked(inst)
		if err != nil {
			// A kubelet that cannot read its configuration never joins; the
			// product sees a registration timeout, as it would in EC2.
			inst.nodeRegisterError = err.Error()
			e.mu.Unlock()
			e.log.Warn("instance's userData prevents Node registration", zap.String("instance", inst.id), zap.Error(err))
			return
		}
		e.mu.Unlock()

		err = e.opts.Registrar.Register(ctx, node)

		e.mu.Lock()
		defer e.mu.Unlock()
		if err != nil {
			inst.nodeRegisterError = err.Error()
			e.log.Warn("registering Node failed; will retry", zap.String("node", node.Name), zap.Error(err))
			if ctx.Err() == nil {
				e.scheduleLocked(e.clock.Now().Add(e.opts.NodeRegistrationRetry), eventRegisterNode, inst.id)
			}
			return
		}
		inst.nodeRegistered = true
		inst.nodeRegisterError = ""
		e.log.Info("registered Node", zap.String("node", node.Name), zap.String("instance", inst.id))
	case eventDeleteNode:
		e.mu.Lock()
		inst, ok := e.instances[ef.instanceID]
		if !ok || inst.nodeName == "" || inst.nodeDeleted {
			e.mu.Unlock()
			return
		}
		name := inst.nodeName
		e.mu.Unlock()

		err := e.opts.Registrar.Deregister(ctx, name)

		e.mu.Lock()
		defer e.mu.Unlock()
		if err != nil {
			e.log.Warn("deleting Node failed; will retry", zap.String("node", name), zap.Error(err))
			if ctx.Err() == nil {
				e.scheduleLocked(e.clock.Now().Add(e.opts.NodeRegistrationRetry), eventDeleteNode, inst.id)
			}
			return
		}
		inst.nodeDeleted = true
		e.log.Info("deleted Node of terminated instance", zap.String("node", name), zap.String("instance", inst.id))
	}
}
