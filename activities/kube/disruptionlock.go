package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
// per decision, so the acquire/release is written here on the same object.
const (
	// disruptionLeaseDuration is how long a holder that died mid-decision
	// keeps the others waiting.
	disruptionLeaseDuration = 15 * time.Second
	// disruptionLockRetry is how often a waiting decision looks again.
	disruptionLockRetry = 100 * time.Millisecond
	// disruptionLockWait bounds the wait; the activity's retry policy takes
	// it from there.
	disruptionLockWait = 30 * time.Second
)

// disruptionLeaseName names pool's Lease, hashing names that would not fit.
func disruptionLeaseName(pool string) string {
	const prefix = "millwright-disruption-"
	if len(prefix)+len(pool) <= 253 {
		return prefix + pool
	}
	sum := sha256.Sum256([]byte(pool))
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

// lockPool takes pool's disruption Lease and returns its release. The Lease
// is created on first use; a Lease whose holder stopped renewing it for
// disruptionLeaseDuration is taken over.
func (a *Activities) lockPool(ctx context.Context, pool string) (func(), error) {
	name := disruptionLeaseName(pool)
	holder := "millwright-" + uuid.NewString()
	started := a.clock.Now()
	lastHolder := ""
	for {
		acquired, current, err := a.tryLease(ctx, name, holder)
		if err != nil {
			return nil, fmt.Errorf("NodePool %s: disruption Lease %s/%s: %w", pool, a.leaseNamespace, name, err)
		}
		if acquired {
			return func() { a.releaseLease(name, holder) }, nil
		}
		lastHolder = current
		if waited := a.clock.Since(started); waited >= disruptionLockWait {
			return nil, &DisruptionLockTimeoutError{NodePool: pool, Lease: a.leaseNamespace + "/" + name, Holder: lastHolder, Waited: waited}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
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
	if current := ptr.Deref(lease.Spec.HolderIdentity, ""); current != "" && !a.leaseExpired(lease) {
		return false, current, nil
	}
	lease.Spec = spec
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return false, "", nil
	}
	return err == nil, "", err
}

func (a *Activities) leaseExpired(lease *coordinationv1.Lease) bool {
	if lease.Spec.RenewTime == nil {
		return true
	}
	duration := time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 0)) * time.Second
	return a.clock.Now().After(lease.Spec.RenewTime.Add(duration))
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
