package awsemu

import (
	"fmt"
	"math/rand"
	"net/http"
	"sync"

	"github.com/millwright/millwright/local/awsemu/ec2query"
)

// ThrottleFault makes EC2 calls fail with RequestLimitExceeded (HTTP 503),
// either every Nth matching call or at a rate drawn from a seeded generator,
// so a run is repeatable.
type ThrottleFault struct {
	// Rate is the fraction of matching calls throttled, 0..1.
	Rate float64 `json:"rate,omitempty"`
	// Seed seeds the generator Rate draws from.
	Seed int64 `json:"seed,omitempty"`
	// EveryN throttles the Nth, 2Nth, … matching call (takes precedence over
	// Rate when set).
	EveryN int `json:"everyN,omitempty"`
	// Actions limits the fault to these EC2 actions (empty: all).
	Actions []string `json:"actions,omitempty"`
}

func (t ThrottleFault) validate() error {
	if t.EveryN < 0 {
		return fmt.Errorf("everyN must be positive, got %d", t.EveryN)
	}
	if t.EveryN == 0 && (t.Rate <= 0 || t.Rate > 1) {
		return fmt.Errorf("rate must be in (0, 1] when everyN is not set, got %v", t.Rate)
	}
	for _, a := range t.Actions {
		if _, ok := ec2Actions[a]; !ok {
			return fmt.Errorf("action %q is not an EC2 action the emulator serves", a)
		}
	}
	return nil
}

// CapacityFault makes a pool report InsufficientInstanceCapacity. Empty
// fields match anything, so {InstanceType: "m5.large"} exhausts m5.large in
// every zone for both capacity types.
type CapacityFault struct {
	InstanceType string `json:"instanceType,omitempty"`
	Zone         string `json:"zone,omitempty"`
	CapacityType string `json:"capacityType,omitempty"` // spot | on-demand
}

func (c CapacityFault) matches(instanceType, zoneName, capacityType string) bool {
	return (c.InstanceType == "" || c.InstanceType == instanceType) &&
		(c.Zone == "" || c.Zone == zoneName) &&
		(c.CapacityType == "" || c.CapacityType == capacityType)
}

// Faults is the set of injected faults.
type Faults struct {
	Throttle *ThrottleFault  `json:"throttle,omitempty"`
	Capacity []CapacityFault `json:"capacity,omitempty"`
	Calls    []CallFault     `json:"calls,omitempty"`
	// Injected counts the calls each call fault fired for, by "kind
	// action" (e.g. "lost-response CreateFleet"), since the emulator
	// started.
	Injected map[string]int `json:"injected,omitempty"`
}

// faults holds the injected faults behind its own lock: throttling is decided
// before a request touches the account.
type faults struct {
	mu         sync.Mutex
	throttle   *ThrottleFault
	rng        *rand.Rand
	calls      int
	capacity   []CapacityFault
	callFaults []installedCallFault
	injected   map[string]int
	held       map[string]int
}

// throttleCheck decides whether this call is throttled.
func (f *faults) throttleCheck(action string) *ec2query.Error {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.throttle
	if t == nil || (len(t.Actions) > 0 && !contains(t.Actions, action)) {
		return nil
	}
	f.calls++
	throttled := false
	if t.EveryN > 0 {
		throttled = f.calls%t.EveryN == 0
	} else {
		throttled = f.rng.Float64() < t.Rate
	}
	if !throttled {
		return nil
	}
	return ec2query.Errorf(http.StatusServiceUnavailable, "RequestLimitExceeded", "Request limit exceeded.")
}

func (f *faults) capacityExhausted(instanceType, zoneName, capacityType string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.capacity {
		if c.matches(instanceType, zoneName, capacityType) {
			return true
		}
	}
	return false
}

func (f *faults) snapshot() Faults {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := Faults{Capacity: append([]CapacityFault(nil), f.capacity...)}
	for _, c := range f.callFaults {
		out.Calls = append(out.Calls, c.CallFault)
	}
	if len(f.injected) > 0 {
		out.Injected = map[string]int{}
		for k, v := range f.injected {
			out.Injected[k] = v
		}
	}
	if f.throttle != nil {
		t := *f.throttle
		out.Throttle = &t
	}
	return out
}

// SetThrottle installs (replacing any) a throttling fault; the call counter
// and generator restart so the pattern is repeatable.
func (e *Emulator) SetThrottle(t ThrottleFault) error {
	if err := t.validate(); err != nil {
		return adminErrorf(http.StatusBadRequest, "throttle fault: %v", err)
	}
	e.faults.mu.Lock()
	defer e.faults.mu.Unlock()
	e.faults.throttle = &t
	e.faults.calls = 0
	e.faults.rng = rand.New(rand.NewSource(t.Seed))
	return nil
}

// ClearThrottle removes the throttling fault.
func (e *Emulator) ClearThrottle() {
	e.faults.mu.Lock()
	defer e.faults.mu.Unlock()
	e.faults.throttle = nil
}

// AddCapacityFault exhausts the matching pools until removed.
func (e *Emulator) AddCapacityFault(c CapacityFault) error {
	if c.CapacityType != "" && c.CapacityType != capacitySpot && c.CapacityType != capacityOnDemand {
		return adminErrorf(http.StatusBadRequest, "capacity fault: capacityType %q is not spot or on-demand", c.CapacityType)
	}
	if c.InstanceType != "" {
		if _, ok := e.opts.Catalog.Get(c.InstanceType); !ok {
			return adminErrorf(http.StatusBadRequest, "capacity fault: instance type %q is not in the catalog", c.InstanceType)
		}
	}
	if c.Zone != "" {
		if _, ok := e.world.zoneByName(c.Zone); !ok {
			return adminErrorf(http.StatusBadRequest, "capacity fault: zone %q is not one of the emulator's zones", c.Zone)
		}
	}
	e.faults.mu.Lock()
	defer e.faults.mu.Unlock()
	for _, existing := range e.faults.capacity {
		if existing == c {
			return nil
		}
	}
	e.faults.capacity = append(e.faults.capacity, c)
	return nil
}

// RemoveCapacityFault removes one capacity fault (exact match); it reports
// whether one was there.
func (e *Emulator) RemoveCapacityFault(c CapacityFault) bool {
	e.faults.mu.Lock()
	defer e.faults.mu.Unlock()
	for i, existing := range e.faults.capacity {
		if existing == c {
			e.faults.capacity = append(e.faults.capacity[:i], e.faults.capacity[i+1:]...)
			return true
		}
	}
	return false
}

// ClearCapacityFaults removes every capacity fault.
func (e *Emulator) ClearCapacityFaults() {
	e.faults.mu.Lock()
	defer e.faults.mu.Unlock()
	e.faults.capacity = nil
}

// Faults returns the injected faults.
func (e *Emulator) Faults() Faults { return e.faults.snapshot() }
