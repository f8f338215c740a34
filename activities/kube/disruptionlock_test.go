package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/millwright/millwright/local/cluster/clustertesting"
)

// heldLease creates pool's Lease held by holder, renewed at renewTime as the
// holder's clock read it.
func heldLease(t *testing.T, pool, holder string, renewTime time.Time) string {
	t.Helper()
	name := disruptionLeaseName(pool)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: &holder, LeaseDurationSeconds: ptr.To(int32(disruptionLeaseDuration / time.Second)),
			AcquireTime: ptr.To(metav1.NewMicroTime(renewTime)), RenewTime: ptr.To(metav1.NewMicroTime(renewTime)),
		},
	}
	leases := testClientset.CoordinationV1().Leases(DefaultLeaseNamespace)
	if _, err := leases.Create(t.Context(), lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = leases.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

func renewAs(t *testing.T, name string, at time.Time) {
	t.Helper()
	leases := testClientset.CoordinationV1().Leases(DefaultLeaseNamespace)
	lease, err := leases.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(at))
	if _, err := leases.Update(t.Context(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Regression (issue 10, defect 6): expiry was judged by comparing the
// holder's renewTime with the waiter's clock, so a waiter whose clock ran
// ahead (or a holder whose clock lagged) took a Lease its holder was
// renewing. Now, as in client-go's leaderelection, a waiter counts the
// Lease's duration on its own clock from the last change it saw.
func TestDisruptionLeaseExpiryIsJudgedOnTheWaitersClock(t *testing.T) {
	cases := []struct {
		name string
		// renewedAfter renews the Lease (as its holder) this long after
		// the first look; zero never renews.
		renewedAfter time.Duration
		wantTaken    bool
	}{
		{name: "a Lease unchanged for its duration is taken over", wantTaken: true},
		{name: "a Lease its holder renews is not, whatever its renewTime says", renewedAfter: 10 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
			h := newHarness(t, withClock(clock))
			// The holder's clock is an hour behind: its renewTime always
			// looks expired to the waiter.
			holderClock := clock.Now().Add(-time.Hour)
			name := heldLease(t, clustertesting.UniqueName("skew"), "other-worker", holderClock)

			if taken, holder, err := h.activities.tryLease(t.Context(), name, "me"); err != nil || taken || holder != "other-worker" {
				t.Fatalf("first look: taken %v, holder %q, err %v; want held by other-worker", taken, holder, err)
			}
			if tc.renewedAfter > 0 {
				clock.Step(tc.renewedAfter)
				renewAs(t, name, holderClock.Add(tc.renewedAfter))
				if taken, _, err := h.activities.tryLease(t.Context(), name, "me"); err != nil || taken {
					t.Fatalf("after the renewal: taken %v, err %v", taken, err)
				}
			}
			clock.Step(disruptionLeaseDuration + time.Second - tc.renewedAfter)
			taken, _, err := h.activities.tryLease(t.Context(), name, "me")
			if err != nil {
				t.Fatal(err)
			}
			if taken != tc.wantTaken {
				t.Errorf("%s after the first look: taken %v, want %v", disruptionLeaseDuration+time.Second, taken, tc.wantTaken)
			}
		})
	}
}

// Regression (issue 10, defect 6): the Lease was never renewed, so a
// decision longer than 15 s let a second one in; and waiters logged its
// holder as "".
func TestDisruptionLeaseIsRenewedWhileHeldAndNamesItsHolder(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	h := newHarness(t, withClock(clock))
	h.activities.identity = "worker-a"
	pool := clustertesting.UniqueName("renew")
	held, release, err := h.activities.lockPool(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	leases := testClientset.CoordinationV1().Leases(DefaultLeaseNamespace)
	t.Cleanup(func() { _ = leases.Delete(context.Background(), disruptionLeaseName(pool), metav1.DeleteOptions{}) })
	read := func() *coordinationv1.Lease {
		lease, err := leases.Get(t.Context(), disruptionLeaseName(pool), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return lease
	}
	first := read()
	if holder := ptr.Deref(first.Spec.HolderIdentity, ""); !strings.HasPrefix(holder, "worker-a-") {
		t.Errorf("holder %q, want the worker's identity worker-a-…", holder)
	}

	for i := 1; i <= 3; i++ {
		clock.Step(disruptionLeaseRenew)
		want := clock.Now()
		clustertesting.Eventually(t, 10*time.Second, "the Lease renewed", func(context.Context) (bool, error) {
			return read().Spec.RenewTime.Time.Equal(want), nil
		})
	}
	if held.Err() != nil {
		t.Errorf("the decision's context ended while the Lease was held: %v", held.Err())
	}

	// A second decider waits, and names the holder when it gives up.
	other := newHarness(t, withClock(clock))
	waited := make(chan error, 1)
	go func() {
		_, _, err := other.activities.lockPool(t.Context(), pool)
		waited <- err
	}()
	var lockErr error
	for i := 0; lockErr == nil; i++ {
		if i == 20 {
			t.Fatal("the second decider never gave up")
		}
		// Each step renews the Lease; the decider sees it change and
		// keeps waiting until its 30 s wait is over.
		clock.Step(disruptionLeaseRenew)
		want := clock.Now()
		clustertesting.Eventually(t, 10*time.Second, "the Lease renewed", func(context.Context) (bool, error) {
			return read().Spec.RenewTime.Time.Equal(want), nil
		})
		select {
		case lockErr = <-waited:
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !strings.Contains(lockErr.Error(), "held by worker-a-") {
		t.Errorf("second decider: %v, want a timeout naming the holder", lockErr)
	}

	release()
	if held.Err() == nil {
		t.Error("the decision's context still open after release")
	}
	if holder := read().Spec.HolderIdentity; holder != nil {
		t.Errorf("Lease still held by %s after release", *holder)
	}
}
