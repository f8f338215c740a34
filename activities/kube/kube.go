package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/activities/events"
)

// Defaults for Config's optional fields.
const (
	DefaultPollInterval = 2 * time.Second
	// DefaultDrainConfirmation: a healthy kube-scheduler sees a cordon
	// within milliseconds; the second look is for one whose cache lagged
	// (after a kube-apiserver restart in the chaos suite it bound a pod to
	// a Node that had just looked empty), and after such trouble it comes
	// a poll interval later, as it always did before. The wait is short
	// otherwise because an empty Node in it still holds its pool's budget:
	// at a poll interval (2 s) it was 2 s of every 2.5 s one-node round of
	// a scale-down.
	DefaultDrainConfirmation    = 500 * time.Millisecond
	DefaultEvictionRetryInitial = time.Second
	DefaultEvictionRetryMax     = 30 * time.Second
)

// Config is what the Kubernetes activities need.
type Config struct {
	// Clientset reads and writes Nodes, Pods and Evictions. Required.
	Clientset kubernetes.Interface
	// Dynamic reads NodePools (millwright.dev/v1), which have no typed
	// clientset. Required: AllowDisruption needs it.
	Dynamic dynamic.Interface
	// Clock decides deadlines, budget windows and poll ticks. Default: the
	// real clock.
	Clock clock.WithTicker
	// Logger receives one line per change the activities make to the
	// cluster. Default: no logging.
	Logger *zap.Logger
	// PollInterval is how often a waiting activity re-checks the cluster
	// (and heartbeats). Default DefaultPollInterval.
	PollInterval time.Duration
	// DrainConfirmation is how long after a drain first finds its Node
	// empty it looks again before it reports the Node drained (the second
	// look catches a pod bound by a scheduler that had not seen the
	// cordon yet). Default DefaultDrainConfirmation; at most PollInterval.
	// Within a minute of the API server breaking a watch or failing a
	// read, the second look comes a whole PollInterval later instead.
	DrainConfirmation time.Duration
	// EvictionRetryInitial and EvictionRetryMax bound the jittered
	// exponential backoff between evictions of one pod refused by a
	// PodDisruptionBudget. Defaults DefaultEvictionRetryInitial and
	// DefaultEvictionRetryMax.
	EvictionRetryInitial time.Duration
	EvictionRetryMax     time.Duration
	// LeaseNamespace holds the per-NodePool Leases that serialise
	// disruption decisions (the worker's own namespace in a cluster).
	// Default DefaultLeaseNamespace.
	LeaseNamespace string
	// Events publishes the node lifecycle's Kubernetes events. Default:
	// events.Discard.
	Events events.Recorder
	// Identity names this worker in the Leases it holds (the pod name in
	// a cluster). Default: the host name.
	Identity string
	// NodeClaims, when set, is a synced cache of NodeClaims (the worker's
	// shared informer) that UpsertNodeClaim reads instead of the API
	// server. Its writes are guarded by the copy's resourceVersion, so a
	// stale copy costs a Conflict and a live read, never a lost write.
	// Default: every UpsertNodeClaim reads the NodeClaim live.
	NodeClaims cache.GenericLister
}

// InvalidConfigError names the Config field that makes it unusable.
type InvalidConfigError struct {
	Field  string
	Reason string
}

func (e *InvalidConfigError) Error() string {
	return fmt.Sprintf("kube activities config: %s: %s", e.Field, e.Reason)
}

// IsInvalidConfig reports whether err is an InvalidConfigError.
func IsInvalidConfig(err error) bool {
	var target *InvalidConfigError
	return errors.As(err, &target)
}

// Activities implements the Kubernetes activities of activities.NodeActivities:
// WaitForRegistration, RegisterNode, WaitForInitialization, AllowDisruption,
// Drain and DeleteNode. It is safe for concurrent use by many activity
// executions; Close stops its Node cache.
type Activities struct {
	clientset            kubernetes.Interface
	dynamic              dynamic.Interface
	clock                clock.WithTicker
	logger               *zap.Logger
	pollInterval         time.Duration
	drainConfirmation    time.Duration
	evictionRetryInitial time.Duration
	evictionRetryMax     time.Duration
	leaseNamespace       string
	events               events.Recorder
	identity             string
	nodeClaims           cache.GenericLister
	leases               leaseObservations
	// apiTroubleAt is when (UnixNano of clock) the API server last broke
	// the Node watch or failed a drain's read; 0 never.
	apiTroubleAt atomic.Int64

	// nodes is a shared Node informer indexed by spec.providerID. It is
	// started on first use, so a worker that never runs a waiting activity
	// never watches Nodes, and every waiting activity of the process shares
	// one watch instead of listing all Nodes on each poll.
	nodes     cache.SharedIndexInformer
	startOnce sync.Once
	// registrations wakes WaitForRegistration on the Node's arrival.
	registrations registrationWaiters
	stop          chan struct{}
	stopOnce      sync.Once
}

// New checks cfg and returns the activities. Nothing talks to the API server
// until an activity runs.
func New(cfg Config) (*Activities, error) {
	if cfg.Clientset == nil {
		return nil, &InvalidConfigError{Field: "Clientset", Reason: "required"}
	}
	if cfg.Dynamic == nil {
		return nil, &InvalidConfigError{Field: "Dynamic", Reason: "required: NodePools are read through the dynamic client"}
	}
	if cfg.PollInterval < 0 {
		return nil, &InvalidConfigError{Field: "PollInterval", Reason: fmt.Sprintf("%s is negative", cfg.PollInterval)}
	}
	if cfg.DrainConfirmation < 0 {
		return nil, &InvalidConfigError{Field: "DrainConfirmation", Reason: fmt.Sprintf("%s is negative", cfg.DrainConfirmation)}
	}
	if cfg.EvictionRetryInitial < 0 || cfg.EvictionRetryMax < 0 {
		return nil, &InvalidConfigError{Field: "EvictionRetryInitial/EvictionRetryMax", Reason: "must not be negative"}
	}
	a := &Activities{
		clientset:            cfg.Clientset,
		dynamic:              cfg.Dynamic,
		clock:                cfg.Clock,
		logger:               cfg.Logger,
		pollInterval:         cfg.PollInterval,
		drainConfirmation:    cfg.DrainConfirmation,
		evictionRetryInitial: cfg.EvictionRetryInitial,
		evictionRetryMax:     cfg.EvictionRetryMax,
		leaseNamespace:       cfg.LeaseNamespace,
		events:               cfg.Events,
		identity:             cfg.Identity,
		nodeClaims:           cfg.NodeClaims,
		stop:                 make(chan struct{}),
	}
	if a.identity == "" {
		a.identity, _ = os.Hostname()
	}
	if a.identity == "" {
		a.identity = "millwright"
	}
	if a.clock == nil {
		a.clock = clock.RealClock{}
	}
	if a.logger == nil {
		a.logger = zap.NewNop()
	}
	if a.events == nil {
		a.events = events.Discard
	}
	if a.leaseNamespace == "" {
		a.leaseNamespace = DefaultLeaseNamespace
	}
	if a.pollInterval == 0 {
		a.pollInterval = DefaultPollInterval
	}
	if a.drainConfirmation == 0 {
		a.drainConfirmation = DefaultDrainConfirmation
	}
	a.drainConfirmation = min(a.drainConfirmation, a.pollInterval)
	if a.evictionRetryInitial == 0 {
		a.evictionRetryInitial = DefaultEvictionRetryInitial
	}
	if a.evictionRetryMax == 0 {
		a.evictionRetryMax = DefaultEvictionRetryMax
	}
	if a.evictionRetryMax < a.evictionRetryInitial {
		return nil, &InvalidConfigError{Field: "EvictionRetryMax", Reason: fmt.Sprintf("%s is below EvictionRetryInitial %s", a.evictionRetryMax, a.evictionRetryInitial)}
	}

	factory := informers.NewSharedInformerFactoryWithOptions(cfg.Clientset, 0, informers.WithTransform(trimNode))
	a.nodes = factory.Core().V1().Nodes().Informer()
	if err := a.nodes.AddIndexers(cache.Indexers{providerIDIndex: indexByProviderID}); err != nil {
		return nil, fmt.Errorf("kube activities: index Nodes by providerID: %w", err)
	}
	if _, err := a.nodes.AddEventHandler(a.registrations.handler()); err != nil {
		return nil, fmt.Errorf("kube activities: watch Node arrivals: %w", err)
	}
	if err := a.nodes.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		a.noteAPIServerTrouble()
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return nil, fmt.Errorf("kube activities: watch errors of the Node cache: %w", err)
	}
	return a, nil
}

// apiServerTroubleMemory is how long a broken watch or failed read makes
// the API server count as recently troubled: long enough for the other
// clients' caches (kube-scheduler's) to have caught up after a restart.
const apiServerTroubleMemory = time.Minute

// noteAPIServerTrouble records that the API server just broke a watch or
// failed a read.
func (a *Activities) noteAPIServerTrouble() { a.apiTroubleAt.Store(a.clock.Now().UnixNano()) }

// apiServerTroubled reports trouble within apiServerTroubleMemory: then
// other clients' caches may be stale too (kube-scheduler's, after a
// kube-apiserver restart, bound a pod to a Node cordoned seconds before).
func (a *Activities) apiServerTroubled() bool {
	at := a.apiTroubleAt.Load()
	return at != 0 && a.clock.Since(time.Unix(0, at)) < apiServerTroubleMemory
}

// Close stops the Node cache. Activities must not run after Close.
func (a *Activities) Close() {
	a.stopOnce.Do(func() { close(a.stop) })
}

// cacheSyncPollInterval is how often nodeCache checks whether the informer
// has synced.
const cacheSyncPollInterval = 100 * time.Millisecond

// providerIDIndex indexes the Node cache by spec.providerID, which the API
// server cannot select on (it is not a field selector for Nodes).
const providerIDIndex = "spec.providerID"

func indexByProviderID(obj any) ([]string, error) {
	node, ok := obj.(*corev1.Node)
	if !ok || node.Spec.ProviderID == "" {
		return nil, nil
	}
	return []string{node.Spec.ProviderID}, nil
}

// trimNode drops what the activities never read from cached Nodes: managed
// fields and the image list are most of a Node's size on a busy cluster.
func trimNode(obj any) (any, error) {
	if node, ok := obj.(*corev1.Node); ok {
		node.ManagedFields = nil
		node.Status.Images = nil
	}
	return obj, nil
}

// nodeCache starts the shared Node informer on first use and waits,
// heartbeating, until it has synced (or ctx ends: a worker without RBAC for
// Nodes never syncs, and the activity's heartbeat timeout would otherwise
// hide why).
func (a *Activities) nodeCache(ctx context.Context) (cache.Indexer, error) {
	// The informer lives as long as the activities, not as long as the
	// activity that happened to start it.
	a.startOnce.Do(func() { go a.nodes.RunWithContext(wait.ContextForChannel(a.stop)) })
	// A short real-time poll: this is a start-up wait, not a deadline.
	err := wait.PollUntilContextCancel(ctx, cacheSyncPollInterval, true, func(ctx context.Context) (bool, error) {
		if a.nodes.HasSynced() {
			return true, nil
		}
		heartbeat(ctx, "waiting for the Node cache to sync")
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("node cache did not sync: %w", err)
	}
	return a.nodes.GetIndexer(), nil
}

// cachedNode returns the cached Node called name, or nil.
func cachedNode(indexer cache.Indexer, name string) (*corev1.Node, error) {
	obj, exists, err := indexer.GetByKey(name)
	if err != nil || !exists {
		return nil, err
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		return nil, fmt.Errorf("node cache holds a %T under %q", obj, name)
	}
	return node, nil
}

// heartbeat records details when ctx belongs to a Temporal activity; the
// methods may also be called outside one (tools, the starter CLI).
func heartbeat(ctx context.Context, details ...any) {
	if activity.IsActivity(ctx) {
		activity.RecordHeartbeat(ctx, details...)
	}
}

// pollUntil calls check now and then every PollInterval of the injected
// clock until it reports done, fails, or ctx ends.
func (a *Activities) pollUntil(ctx context.Context, check func(ctx context.Context) (done bool, err error)) error {
	return a.pollUntilWoken(ctx, nil, check)
}

// pollUntilWoken is pollUntil that also checks at once when wake closes.
func (a *Activities) pollUntilWoken(ctx context.Context, wake <-chan struct{}, check func(ctx context.Context) (done bool, err error)) error {
	ticker := a.clock.NewTicker(a.pollInterval)
	defer ticker.Stop()
	for {
		done, err := check(ctx)
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ticker.C():
		case <-wake:
			wake = nil // closed: once is enough
		}
	}
}

// passed reports whether a set deadline is at or before now.
func passed(deadline, now time.Time) bool {
	return !deadline.IsZero() && !now.Before(deadline)
}
