package events

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// Component is the source component of every Millwright event.
const Component = "millwright"

// DefaultDedupeTimeout is how long an event with DedupeValues is not
// published again (Karpenter's default).
const DefaultDedupeTimeout = 2 * time.Minute

// Event is one Kubernetes Event to publish.
type Event struct {
	// InvolvedObject is what the event is about: a typed object (Pod, Node,
	// NodeClaim, NodePool), an unstructured one with apiVersion and kind, or
	// an ObjectReference (see the *Ref helpers).
	InvolvedObject runtime.Object
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type    string
	Reason  string
	Message string
	// DedupeValues, when set, make the event a no-op while an event with the
	// same reason and values was published less than DedupeTimeout ago.
	DedupeValues []string
	// DedupeTimeout overrides DefaultDedupeTimeout.
	DedupeTimeout time.Duration
	// RateLimiter, when set, drops the event when it has no token (e.g.
	// NominationRateLimiter: a batch of 1,000 pods does not write 1,000
	// events at once).
	RateLimiter flowcontrol.RateLimiter
}

func (e Event) dedupeKey() string {
	return strings.ToLower(e.Reason) + "/" + strings.Join(e.DedupeValues, "/")
}

// Recorder publishes events. Implementations are safe for concurrent use.
type Recorder interface {
	Publish(events ...Event)
}

// Discard publishes nothing: for callers that have no cluster to write to
// (tools, tests of unrelated behaviour).
var Discard Recorder = discard{}

type discard struct{}

func (discard) Publish(...Event) {}

// recorder deduplicates and rate-limits before client-go's recorder.
type recorder struct {
	rec    record.EventRecorder
	recent *utilcache.Expiring
}

// NewRecorder wraps rec (a broadcaster's recorder, or record.FakeRecorder in
// tests) with deduplication and rate limiting. clk times the dedupe window;
// nil is the real clock.
func NewRecorder(rec record.EventRecorder, clk clock.Clock) Recorder {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &recorder{rec: rec, recent: utilcache.NewExpiringWithClock(clk)}
}

func (r *recorder) Publish(events ...Event) {
	for _, e := range events {
		r.publish(e)
	}
}

func (r *recorder) publish(e Event) {
	if len(e.DedupeValues) > 0 {
		key := e.dedupeKey()
		if _, seen := r.recent.Get(key); seen {
			return
		}
		timeout := e.DedupeTimeout
		if timeout <= 0 {
			timeout = DefaultDedupeTimeout
		}
		r.recent.Set(key, struct{}{}, timeout)
	}
	if e.RateLimiter != nil && !e.RateLimiter.TryAccept() {
		return
	}
	r.rec.Event(e.InvolvedObject, e.Type, e.Reason, e.Message)
}

// Scheme knows the kinds events may be about: client-go's built-in types and
// millwright.dev/v1 (NodeClaim, NodePool, EC2NodeClass), so a typed object's
// reference carries its apiVersion and kind.
func Scheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	// Both only fail on a conflicting registration, which is a programming
	// error in this package.
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := apisv1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return scheme
}

// Broadcast starts a broadcaster writing events through client, with
// client-go's correlator (similar events aggregated, a per-object spam
// filter), and returns a deduplicating Recorder on it. The broadcaster stops
// when ctx ends; call the returned stop to flush and stop it sooner.
func Broadcast(ctx context.Context, client kubernetes.Interface, clk clock.Clock) (Recorder, func()) {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	rec := broadcaster.NewRecorder(Scheme(), corev1.EventSource{Component: Component})
	return NewRecorder(rec, clk), broadcaster.Shutdown
}
