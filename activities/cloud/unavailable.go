package cloud

import (
	"sort"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/activities"
)

// maxUnavailableOfferings bounds the cache; far more than the offerings a
// region has for the types one cluster uses.
const maxUnavailableOfferings = 100_000

// UnavailableOfferings remembers offerings (instance type, zone, capacity
// type) that EC2 reported as out of capacity, for
// activities.UnavailableOfferingTTL, on the injected clock. It is shared by
// the launcher (which records) and the instance type provider (which marks
// those offerings unavailable for the planner). Safe for concurrent use.
type UnavailableOfferings struct {
	clock clock.PassiveClock
	ttl   time.Duration
	cache *cache.LRUExpireCache
	log   *zap.Logger

	// rejections counts each offering's recent launch rejections, for the
	// backoff; forgotten after rejectionMemory without one.
	rejections *cache.LRUExpireCache
}

// Backoff of offerings EC2 rejects for a reason other than capacity: the
// first rejection keeps the offering out for RejectionBackoff, each one
// within rejectionMemory of the last doubles it, up to MaxRejectionBackoff.
const (
	RejectionBackoff    = time.Minute
	MaxRejectionBackoff = 30 * time.Minute
	rejectionMemory     = 2 * MaxRejectionBackoff
)

// NewUnavailableOfferings returns an empty cache with the contract's TTL.
func NewUnavailableOfferings(clk clock.PassiveClock, log *zap.Logger) *UnavailableOfferings {
	if log == nil {
		log = zap.NewNop()
	}
	return &UnavailableOfferings{
		clock: clk,
		ttl:   activities.UnavailableOfferingTTL,
		cache: cache.NewLRUExpireCacheWithClock(maxUnavailableOfferings, clk),
		log:   log,

		rejections: cache.NewLRUExpireCacheWithClock(maxUnavailableOfferings, clk),
	}
}

// MarkRejected records that EC2 rejected launching key for a reason other
// than capacity (code): the offering is unavailable for a backoff that
// doubles with each rejection in a row. It returns until when, and the
// backoff. A longer unavailability already recorded is kept.
func (u *UnavailableOfferings) MarkRejected(key activities.OfferingKey, code string) (until time.Time, backoff time.Duration) {
	rejections := 1
	if previous, ok := u.rejections.Get(key); ok {
		rejections = previous.(int) + 1
	}
	u.rejections.Add(key, rejections, rejectionMemory)
	backoff = rejectionBackoff(rejections)
	now := u.clock.Now()
	until = now.Add(backoff)
	if current, ok := u.cache.Get(key); ok && current.(time.Time).After(until) {
		until = current.(time.Time)
	}
	u.cache.Add(key, until, until.Sub(now))
	u.log.Debug("offering rejected",
		zap.String("instanceType", key.InstanceType), zap.String("zone", key.Zone),
		zap.String("capacityType", key.CapacityType), zap.String("code", code),
		zap.Int("rejections", rejections), zap.Time("until", until))
	return until, backoff
}

// rejectionBackoff is the backoff after n rejections in a row.
func rejectionBackoff(n int) time.Duration {
	backoff := RejectionBackoff
	for i := 1; i < n && backoff < MaxRejectionBackoff; i++ {
		backoff *= 2
	}
	return min(backoff, MaxRejectionBackoff)
}

// MarkUnavailable records key as out of capacity from now for the TTL; a
// repeated report extends it.
func (u *UnavailableOfferings) MarkUnavailable(key activities.OfferingKey, reason string) {
	until := u.clock.Now().Add(u.ttl)
	u.cache.Add(key, until, u.ttl)
	u.log.Debug("offering unavailable",
		zap.String("instanceType", key.InstanceType), zap.String("zone", key.Zone),
		zap.String("capacityType", key.CapacityType), zap.String("reason", reason), zap.Time("until", until))
}

// IsUnavailable reports whether key is currently remembered as out of
// capacity.
func (u *UnavailableOfferings) IsUnavailable(key activities.OfferingKey) bool {
	_, ok := u.cache.Get(key)
	return ok
}

// List returns the offerings currently unavailable, with when each becomes
// available again, sorted by key.
func (u *UnavailableOfferings) List() []activities.UnavailableOffering {
	var out []activities.UnavailableOffering
	for _, k := range u.cache.Keys() {
		key := k.(activities.OfferingKey)
		v, ok := u.cache.Get(key)
		if !ok {
			continue
		}
		out = append(out, activities.UnavailableOffering{OfferingKey: key, Until: v.(time.Time)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
