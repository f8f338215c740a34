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
}

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
	}
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
