package awsemu

import (
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"time"

	"github.com/millwright/millwright/local/awsemu/ec2query"
)

// Kinds of CallFault.
const (
	// CallFaultError answers 500 InternalError without applying the call.
	CallFaultError = "error"
	// CallFaultLatency waits Latency before applying the call.
	CallFaultLatency = "latency"
	// CallFaultLostResponse applies the call, then answers 500
	// InternalError: the caller cannot tell that it succeeded (a response
	// lost after a successful CreateFleet or TerminateInstances).
	CallFaultLostResponse = "lost-response"
	// CallFaultHoldResponse applies the call, then holds its response for
	// Latency: the window in which the side effect is done but its caller
	// does not know yet (the chaos suite kills the caller there).
	CallFaultHoldResponse = "hold-response"
)

// CallFault disturbs a fraction of the matching EC2 calls, drawn from a
// seeded generator so a run is repeatable. Several may be installed; the
// first that fires for a call applies.
type CallFault struct {
	Kind string `json:"kind"`
	// Actions limits the fault to these EC2 actions (empty: all).
	Actions []string `json:"actions,omitempty"`
	// Rate is the fraction of matching calls affected, (0, 1].
	Rate float64 `json:"rate"`
	Seed int64   `json:"seed,omitempty"`
	// Latency is the delay of latency and hold-response faults.
	Latency Duration `json:"latency,omitempty"`
}

func (c CallFault) validate() error {
	switch c.Kind {
	case CallFaultError, CallFaultLostResponse:
	case CallFaultLatency, CallFaultHoldResponse:
		if c.Latency <= 0 {
			return fmt.Errorf("kind %s needs a positive latency", c.Kind)
		}
	default:
		return fmt.Errorf("kind %q is not %s, %s, %s or %s", c.Kind, CallFaultError, CallFaultLatency, CallFaultLostResponse, CallFaultHoldResponse)
	}
	if c.Rate <= 0 || c.Rate > 1 {
		return fmt.Errorf("rate must be in (0, 1], got %v", c.Rate)
	}
	for _, a := range c.Actions {
		if _, ok := ec2Actions[a]; !ok {
			return fmt.Errorf("action %q is not an EC2 action the emulator serves", a)
		}
	}
	return nil
}

// installedCallFault is a CallFault with its generator.
type installedCallFault struct {
	CallFault
	rng *rand.Rand
}

// callFaultFor picks the fault that fires for this call, if any, and counts
// it.
func (f *faults) callFaultFor(action string) (CallFault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.callFaults {
		if len(c.Actions) > 0 && !contains(c.Actions, action) {
			continue
		}
		if c.rng.Float64() < c.Rate {
			if f.injected == nil {
				f.injected = map[string]int{}
			}
			f.injected[c.Kind+" "+action]++
			return c.CallFault, true
		}
	}
	return CallFault{}, false
}

func (f *faults) holding(action string, delta int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held == nil {
		f.held = map[string]int{}
	}
	f.held[action] += delta
}

// SetCallFaults replaces the installed call faults.
func (e *Emulator) SetCallFaults(faults []CallFault) error {
	installed := make([]installedCallFault, 0, len(faults))
	for i, c := range faults {
		if err := c.validate(); err != nil {
			return adminErrorf(http.StatusBadRequest, "call fault %d: %v", i, err)
		}
		installed = append(installed, installedCallFault{CallFault: c, rng: rand.New(rand.NewSource(c.Seed))})
	}
	e.faults.mu.Lock()
	defer e.faults.mu.Unlock()
	e.faults.callFaults = installed
	return nil
}

// ClearCallFaults removes every call fault.
func (e *Emulator) ClearCallFaults() {
	e.faults.mu.Lock()
	defer e.faults.mu.Unlock()
	e.faults.callFaults = nil
}

// Prefixes of HeldCalls' keys.
const (
	// HeldBefore + action: a latency fault holds the call before applying it.
	HeldBefore = "before "
	// HeldAfter + action: a hold-response fault holds the response of an
	// applied call.
	HeldAfter = "after "
)

// HeldCalls counts the calls latency and hold-response faults hold right
// now, by HeldBefore or HeldAfter + action.
func (e *Emulator) HeldCalls() map[string]int {
	e.faults.mu.Lock()
	defer e.faults.mu.Unlock()
	out := map[string]int{}
	for action, n := range e.faults.held {
		if n > 0 {
			out[action] = n
		}
	}
	return out
}

// serveFaulted runs an EC2 call under the call fault that fired for it.
// A call held by a latency fault whose caller went away meanwhile (ctx
// ended: the connection closed) is not applied, as a request that never
// reached EC2.
func (e *Emulator) serveFaulted(ctx context.Context, fault CallFault, w http.ResponseWriter, requestID string, action string, apply func() (any, error)) {
	switch fault.Kind {
	case CallFaultError:
		ec2query.WriteError(w, requestID, internalError())
		return
	case CallFaultLatency:
		e.faults.holding(HeldBefore+action, 1)
		time.Sleep(time.Duration(fault.Latency))
		e.faults.holding(HeldBefore+action, -1)
		if ctx.Err() != nil {
			return
		}
	}
	body, err := apply()
	switch {
	case fault.Kind == CallFaultLostResponse:
		ec2query.WriteError(w, requestID, internalError())
		return
	case fault.Kind == CallFaultHoldResponse:
		e.faults.holding(HeldAfter+action, 1)
		time.Sleep(time.Duration(fault.Latency))
		e.faults.holding(HeldAfter+action, -1)
	}
	if err != nil {
		ec2query.WriteError(w, requestID, ec2query.AsError(err))
		return
	}
	ec2query.WriteResponse(w, action, body)
}

func internalError() *ec2query.Error {
	return ec2query.Errorf(http.StatusInternalServerError, "InternalError", "An internal error has occurred.")
}
