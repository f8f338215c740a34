package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// DefaultLeaseNamespace holds the disruption Leases when Config names none:
// the namespace the worker runs in, as the Helm chart passes it, or this.
const DefaultLeaseNamespace = "default"

// Disruption decisions of one NodePool are serialised by a coordination.k8s.io
// Lease, because workers (and the activities within one) decide in parallel
// and a budget is a count over the whole pool: two nodes reading "0 of 1
// disrupted" at once must not both go. client-go's leaderelection package
// keeps a Lease for a long-lived leader; this is a short critical section
// per decision, so the acquire/renew/release is written here on the same
// object, with leaderelection's rules: the holder renews while it holds,
// and a waiter judges expiry on its own clock, by how long it has seen the
// record unchanged (never by comparing the holder's renewTime with its own
// clock, which a skewed clock would get wrong).
const (
	// disruptionLeaseDuration is how long a holder that died mid-decision
	// keeps the others waiting.
	disruptionLeaseDuration = 15 * time.Second
	// disruptionLeaseRenew is how often a holder renews.
	disruptionLeaseRenew = disruptionLeaseDuration / 3
	// disruptionLockRetry is how often a waiting decision looks again.
	disruptionLockRetry = 100 * time.Millisecond
	// disruptionLockWait bounds the wait; the activity's retry policy takes
	// it from there.
	disruptionLockWait = 30 * time.Second
)

// disruptionLeaseName names pool's Lease.
func disruptionLeaseName(pool string) string {
	return LeaseName("millwright-disruption-", pool)
}

// LeaseName is prefix+key, with key hashed when the name would not fit in
// an object name (253 characters).
func LeaseName(prefix, key string) string {
	if len(prefix)+len(key) <= 253 {
		return prefix + key
	}
	sum := sha256.Sum256([]byte(key))
	return prefix + hex.EncodeToString(sum[:16])
}

// DisruptionLockTimeoutError: another decision of the pool held its Lease
// for the whole wait.
type DisruptionLockTimeoutError struct {
	NodePool, Lease, Holder string
	Waited                  time.Duration
}

func (e *DisruptionLockTimeoutError) Error() string {
	return fmt.Sprintf("NodePool %s: disruption Lease %s held by %s for %s", e.NodePool, e.Lease, e.Holder, e.Waited)
}

// leaseObservation is what this process last saw of a Lease: its
// resourceVersion (every renewal changes it) and when, on this process's
// clock, it changed.
type leaseObservation struct {
	resourceVersion string
	at              time.Time
}

// leaseObservations are kept per Lease name for the process's life (one per
// NodePool).
type leaseObservations struct {
	mu   sync.Mutex
	seen map[string]leaseObservation
}

// expired reports whether lease's holder has not renewed it for its
// duration as this process saw it: the first sight of a record, or of a
// change, starts the count.
func (o *leaseObservations) expired(lease *coordinationv1.Lease, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = map[string]leaseObservation{}
	}
	seen, ok := o.seen[lease.Name]
	if !ok || seen.resourceVersion != lease.ResourceVersion {
		o.seen[lease.Name] = leaseObservation{resourceVersion: lease.ResourceVersion, at: now}
		return false
	}
	duration := time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 0)) * time.Second
	return now.Sub(seen.at) > duration
}

// lockPool takes pool's disruption Lease and renews it until release is
// called. The returned context ends when the Lease is released or lost (a
// renewal found another holder), so work done under it stops. The Lease is
// created on first use; one whose holder stopped renewing it for its
// duration, as this process saw it, is taken over.
func (a *Activities) lockPool(ctx context.Context, pool string) (context.Context, func(), error) {
	name := disruptionLeaseName(pool)
	holder := a.identity + "-" + uuid.NewString()[:8]
	started := a.clock.Now()
	lastHolder := ""
	for {
		acquired, current, err := a.tryLease(ctx, name, holder)
		if err != nil {
			return nil, nil, fmt.Errorf("NodePool %s: disruption Lease %s/%s: %w", pool, a.leaseNamespace, name, err)
		}
		if acquired {
			held, release := a.holdLease(ctx, name, holder)
			return held, release, nil
		}
		if current != "" {
			lastHolder = current
		}
		if waited := a.clock.Since(started); waited >= disruptionLockWait {
			return nil, nil, &DisruptionLockTimeoutError{NodePool: pool, Lease: a.leaseNamespace + "/" + name, Holder: lastHolder, Waited: waited}
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-a.clock.After(disruptionLockRetry):
		}
	}
}

// tryLease makes one attempt; it reports the current holder when the Lease
// is taken. Conflicts (another decider wrote first) are not errors.
func (a *Activities) tryLease(ctx context.Context, name, holder string) (bool, string, error) {
	leases := a.clientset.CoordinationV1().Leases(a.leaseNamespace)
	now := metav1.NewMicroTime(a.clock.Now())
	spec := coordinationv1.LeaseSpec{
		HolderIdentity:       &holder,
		LeaseDurationSeconds: ptr.To(int32(disruptionLeaseDuration / time.Second)),
		AcquireTime:          &now,
		RenewTime:            &now,
	}
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return false, "", nil
		}
		return err == nil, "", err
	}
	if err != nil {
		return false, "", err
	}
	if current := ptr.Deref(lease.Spec.HolderIdentity, ""); current != "" && !a.leases.expired(lease, a.clock.Now()) {
		return false, current, nil
	}
	spec.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
	lease.Spec = spec
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return false, "", nil
	}
	return err == nil, "", err
}

// holdLease renews the held Lease every disruptionLeaseRenew until the
// returned release is called; the context ends at release or when a
// renewal finds the Lease lost.
func (a *Activities) holdLease(ctx context.Context, name, holder string) (context.Context, func()) {
	held, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		ticker := a.clock.NewTicker(disruptionLeaseRenew)
		defer ticker.Stop()
		for {
			select {
			case <-held.Done():
				return
			case <-ticker.C():
			}
			if err := a.renewLease(held, name, holder); err != nil {
				if held.Err() == nil {
					a.logger.Warn("Lost a disruption Lease while deciding; the decision stops", zap.String("lease", name), zap.Error(err))
				}
				cancel()
				return
			}
		}
	}()
	return held, func() {
		cancel()
		<-stopped
		a.releaseLease(name, holder)
	}
}

// renewLease moves the Lease's renewTime to now if holder still holds it.
func (a *Activities) renewLease(ctx context.Context, name, holder string) error {
	leases := a.clientset.CoordinationV1().Leases(a.leaseNamespace)
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if current := ptr.Deref(lease.Spec.HolderIdentity, ""); current != holder {
		return fmt.Errorf("held by %q now", current)
	}
	lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(a.clock.Now()))
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

// releaseLease clears the holder if it is still holder. Failing to release
// costs the next decision at most disruptionLeaseDuration, so errors are
// only logged.
func (a *Activities) releaseLease(name, holder string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leases := a.clientset.CoordinationV1().Leases(a.leaseNamespace)
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil || ptr.Deref(lease.Spec.HolderIdentity, "") != holder {
		return
	}
	lease.Spec.HolderIdentity = nil
	lease.Spec.RenewTime = nil
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		a.logger.Debug("releasing a disruption Lease failed; it expires on its own", zap.Error(err))
	}
}
