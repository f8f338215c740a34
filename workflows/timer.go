package workflows

import (
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"
)

// durableTimer is one named, cancellable durable timer with an absolute
// deadline, like samples-go's updatabletimer: start arms it (again), stop
// cancels it, addTo lets a selector wait for it. The name is the timer's
// summary in the UI and its name in QueryState.
type durableTimer struct {
	name     string
	deadline time.Time // zero when not pending
	future   workflow.Future
	cancel   workflow.CancelFunc
	// fired: it fired since the last takeFired.
	fired bool
}

func newDurableTimer(name string) *durableTimer { return &durableTimer{name: name} }

// start arms the timer until deadline on ctx. A pending timer must be
// stopped first (start does not cancel it: that would be a command).
func (t *durableTimer) start(ctx workflow.Context, deadline time.Time) {
	timerCtx, cancel := workflow.WithCancel(ctx)
	t.deadline = deadline
	t.future = workflow.NewTimerWithOptions(timerCtx, deadline.Sub(workflow.Now(ctx)), workflow.TimerOptions{Summary: t.name})
	t.cancel = cancel
}

// stop cancels a pending timer; stopping a timer that is not pending does
// nothing.
func (t *durableTimer) stop() {
	if t.cancel != nil {
		t.cancel()
	}
	t.clear()
}

func (t *durableTimer) clear() {
	t.deadline, t.future, t.cancel = time.Time{}, nil, nil
}

func (t *durableTimer) pending() bool { return t.future != nil }

// addTo adds a pending timer to selector. When it fires it is no longer
// pending, takeFired reports it once, and onFire (if any) runs in the
// selector's callback; a timer cancelled (or whose workflow was cancelled)
// ends without firing.
func (t *durableTimer) addTo(ctx workflow.Context, selector workflow.Selector, onFire func()) {
	if t.future == nil {
		return
	}
	selector.AddFuture(t.future, func(f workflow.Future) {
		t.clear()
		if f.Get(ctx, nil) == nil {
			t.fired = true
			if onFire != nil {
				onFire()
			}
		}
	})
}

// takeFired reports whether the timer fired since the last call.
func (t *durableTimer) takeFired() bool {
	fired := t.fired
	t.fired = false
	return fired
}

// pendingTimers lists the pending ones by name, for QueryState.
func pendingTimers(timers ...*durableTimer) []PendingTimer {
	var pending []PendingTimer
	for _, t := range timers {
		if t.pending() {
			pending = append(pending, PendingTimer{Name: t.name, FiresAt: t.deadline})
		}
	}
	slices.SortFunc(pending, func(a, b PendingTimer) int { return strings.Compare(a.Name, b.Name) })
	return pending
}
