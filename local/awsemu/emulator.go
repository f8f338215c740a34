package awsemu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/local/awsemu/ec2query"
	"github.com/millwright/millwright/local/awsemu/queues"
	"github.com/millwright/millwright/model/catalog"
)

// Options configures an Emulator. The zero value is usable: real clock, the
// catalog's region and its first three zones, no node registration.
type Options struct {
	// Clock drives every delay (boot, shutdown, node deletion, interruption)
	// and SQS visibility and long polls. Tests pass a fake clock.
	Clock clock.Clock
	// Catalog is the instance-type table; default catalog.Default().
	Catalog *catalog.Catalog
	// Region defaults to the catalog's region (us-east-1).
	Region string
	// Zones are the availability zones the account offers (one subnet each);
	// default the catalog's first three (us-east-1a, b, c).
	Zones []string
	// AccountID appears in ARNs, owner ids and queue URLs; default 123456789012.
	AccountID string
	// ClusterName names the subnets and the node security group; default
	// "millwright".
	ClusterName string
	// DiscoveryTags are put on the subnets and the node security group so
	// that selector terms find them; default {"millwright.dev/discovery": ClusterName}.
	DiscoveryTags map[string]string
	// KubernetesVersion names the served EKS AMIs (1.37).
	KubernetesVersion string
	// Roles are the IAM roles the account has (instance profiles can hold
	// only these); default MillwrightNodeRole-<ClusterName> and
	// MillwrightNodeRole-millwright (the role deploy/examples names, which
	// stacks with another cluster name apply too).
	Roles []string

	// BootDelay is pending → running (default 5s); the Node is registered
	// when the instance is running.
	BootDelay time.Duration
	// ShutdownDelay is shutting-down → terminated (default 5s).
	ShutdownDelay time.Duration
	// NodeDeletionDelay is how long after termination the Node is deleted, as
	// the cloud controller manager would (default 5s).
	NodeDeletionDelay time.Duration
	// SpotInterruptionDelay is how long after the warning an interrupted spot
	// instance is terminated (default 2 minutes, as in EC2).
	SpotInterruptionDelay time.Duration
	// TerminatedRetention is how long a terminated instance stays visible to
	// DescribeInstances (default 1h, as in EC2). State dumps keep it forever.
	TerminatedRetention time.Duration
	// NodeRegistrationRetry is the pause before retrying a failed Node
	// create or delete (default 5s).
	NodeRegistrationRetry time.Duration

	// EventQueue is the SQS queue that receives EventBridge-shaped events
	// (interruptions, rebalance, scheduled changes, state changes). It is
	// created on first use. Empty: events are dropped until configured.
	EventQueue string
	// StateChangeNotifications sends "EC2 Instance State-change Notification"
	// on every instance state change.
	StateChangeNotifications bool

	// Registrar creates and deletes Nodes; nil registers nothing.
	Registrar NodeRegistrar
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
}

func (o *Options) setDefaults() error {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Catalog == nil {
		c, err := catalog.Default()
		if err != nil {
			return err
		}
		o.Catalog = c
	}
	if o.Region == "" {
		o.Region = o.Catalog.Region
	}
	if len(o.Zones) == 0 {
		n := min(3, len(o.Catalog.Zones))
		o.Zones = append([]string(nil), o.Catalog.Zones[:n]...)
	}
	if o.AccountID == "" {
		o.AccountID = "123456789012"
	}
	if o.ClusterName == "" {
		o.ClusterName = "millwright"
	}
	if o.DiscoveryTags == nil {
		o.DiscoveryTags = map[string]string{"millwright.dev/discovery": o.ClusterName}
	}
	if o.Roles == nil {
		o.Roles = []string{"MillwrightNodeRole-" + o.ClusterName}
		if o.ClusterName != "millwright" {
			o.Roles = append(o.Roles, "MillwrightNodeRole-millwright")
		}
	}
	if o.KubernetesVersion == "" {
		o.KubernetesVersion = "1.37"
	}
	defaultDuration(&o.BootDelay, 5*time.Second)
	defaultDuration(&o.ShutdownDelay, 5*time.Second)
	defaultDuration(&o.NodeDeletionDelay, 5*time.Second)
	defaultDuration(&o.SpotInterruptionDelay, 2*time.Minute)
	defaultDuration(&o.TerminatedRetention, time.Hour)
	defaultDuration(&o.NodeRegistrationRetry, 5*time.Second)
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return nil
}

// defaultDuration fills a zero duration; a negative one means "no delay".
func defaultDuration(d *time.Duration, def time.Duration) {
	switch {
	case *d == 0:
		*d = def
	case *d < 0:
		*d = 0
	}
}

// Emulator is an in-memory EC2 + SQS account served over HTTP. One server
// answers both protocols: SQS calls carry `X-Amz-Target: AmazonSQS.*`,
// admin calls live under /_admin/, anything else is an EC2 Query call.
type Emulator struct {
	opts  Options
	clock clock.Clock
	log   *zap.Logger
	world *world
	sqs   *queues.Service
	iam   *iamState

	mu              sync.Mutex
	instances       map[string]*instance
	instanceOrder   []string // launch order, for stable listing and paging
	launchTemplates map[string]*launchTemplate
	templateOrder   []string
	fleets          map[string]*fleet
	fleetOrder      []string
	idempotency     map[string]*idempotentCall
	faults          faults
	eventQueue      string
	stateChanges    bool
	schedule        schedule
	effects         []effect

	// effectsMu serialises taking and running side effects (Node calls), so
	// Reconcile returns only after every effect due so far has run.
	effectsMu sync.Mutex
	wake      chan struct{}
	stop      chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once

	serveMu  sync.Mutex
	server   *http.Server
	listener net.Listener
}

// New builds an emulator and starts its background loop (which applies
// scheduled state changes and registers Nodes). Call Close to stop it.
func New(opts Options) (*Emulator, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	w, err := newWorld(opts, opts.Catalog, opts.Clock.Now())
	if err != nil {
		return nil, err
	}
	e := &Emulator{
		opts:            opts,
		clock:           opts.Clock,
		log:             opts.Logger,
		world:           w,
		iam:             newIAMState(opts, opts.Clock.Now()),
		sqs:             queues.New(queues.Options{Clock: opts.Clock, AccountID: opts.AccountID, Region: opts.Region}),
		instances:       map[string]*instance{},
		launchTemplates: map[string]*launchTemplate{},
		fleets:          map[string]*fleet{},
		idempotency:     map[string]*idempotentCall{},
		eventQueue:      opts.EventQueue,
		stateChanges:    opts.StateChangeNotifications,
		wake:            make(chan struct{}, 1),
		stop:            make(chan struct{}),
		stopped:         make(chan struct{}),
	}
	go e.loop()
	return e, nil
}

// SQS gives direct access to the emulated SQS (for tests and the admin API).
func (e *Emulator) SQS() *queues.Service { return e.sqs }

// Handler serves EC2, SQS and the admin API.
func (e *Emulator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(AdminPathPrefix, e.adminHandler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case queues.IsSQSRequest(r):
			e.sqs.ServeHTTP(w, r)
			return
		case isSSMRequest(r):
			e.serveSSM(w, r)
			return
		case isIAMRequest(r):
			e.serveIAM(w, r)
			return
		}
		e.serveEC2(w, r)
	})
	return mux
}

// Serve answers requests on l until Close. It returns at once; the URL is
// http://<l.Addr()>.
func (e *Emulator) Serve(l net.Listener) error {
	e.serveMu.Lock()
	defer e.serveMu.Unlock()
	if e.server != nil {
		return errors.New("awsemu: already serving")
	}
	e.listener = l
	e.server = &http.Server{Handler: e.Handler(), ReadHeaderTimeout: 10 * time.Second}
	srv := e.server
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.log.Error("awsemu server stopped", zap.Error(err))
		}
	}()
	return nil
}

// Start listens on addr (e.g. "127.0.0.1:0") and serves.
func (e *Emulator) Start(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("awsemu: listen on %s: %w", addr, err)
	}
	if err := e.Serve(l); err != nil {
		_ = l.Close()
		return err
	}
	return nil
}

// URL is the base endpoint SDK clients use (BaseEndpoint), or "" before
// Start/Serve.
func (e *Emulator) URL() string {
	e.serveMu.Lock()
	defer e.serveMu.Unlock()
	if e.listener == nil {
		return ""
	}
	return "http://" + e.listener.Addr().String()
}

// Close stops serving and the background loop. Instances are left as they
// are (the state stays readable); Nodes are not deleted.
func (e *Emulator) Close() error {
	var err error
	e.closeOnce.Do(func() {
		close(e.stop)
		<-e.stopped
		e.sqs.Close()
		e.serveMu.Lock()
		defer e.serveMu.Unlock()
		if e.server != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err = e.server.Shutdown(ctx)
			if err != nil {
				err = e.server.Close()
			}
		}
	})
	return err
}

// serveEC2 decodes an EC2 Query call, applies due state changes and faults,
// and dispatches it.
func (e *Emulator) serveEC2(w http.ResponseWriter, r *http.Request) {
	requestID := newRequestID()
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		ec2query.WriteError(w, requestID, ec2query.Errorf(http.StatusMethodNotAllowed, "InvalidAction", "EC2 calls are POST (or GET) with an Action"))
		return
	}
	req, err := ec2query.ParseRequest(r)
	if err != nil {
		ec2query.WriteError(w, requestID, ec2query.AsError(err))
		return
	}
	handler, ok := ec2Actions[req.Action]
	if !ok {
		ec2query.WriteError(w, requestID, ec2query.Errorf(http.StatusBadRequest, "InvalidAction",
			"The action %s is not valid for this web service (the emulator implements %s)", req.Action, strings.Join(ec2ActionNames(), ", ")))
		return
	}
	if fault := e.faults.throttleCheck(req.Action); fault != nil {
		ec2query.WriteError(w, requestID, fault)
		return
	}
	apply := func() (any, error) {
		e.advance()
		return handler(e, &ec2Call{Request: req, RequestID: requestID})
	}
	if fault, ok := e.faults.callFaultFor(req.Action); ok {
		e.serveFaulted(r.Context(), fault, w, requestID, req.Action, apply)
		return
	}
	body, err := apply()
	if err != nil {
		ec2query.WriteError(w, requestID, ec2query.AsError(err))
		return
	}
	ec2query.WriteResponse(w, req.Action, body)
}

// ec2Call is one EC2 request as handlers see it.
type ec2Call struct {
	*ec2query.Request
	RequestID string
}

type ec2Handler func(e *Emulator, c *ec2Call) (any, error)

// ec2Actions is filled by the handler files' init functions.
var ec2Actions = map[string]ec2Handler{}

func ec2ActionNames() []string {
	names := make([]string, 0, len(ec2Actions))
	for n := range ec2Actions {
		names = append(names, n)
	}
	sortStrings(names)
	return names
}
