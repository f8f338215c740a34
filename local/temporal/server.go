// Package temporal runs a real Temporal server inside the current process for
// the local stack (`starter dev`, the demo) and for integration tests: the
// frontend, history, matching and worker services of go.temporal.io/server on
// SQLite (a WAL-mode file under a state directory, or in memory), plus the real
// Temporal web UI. On every start it makes sure the namespace exists and that
// the application's custom search attributes are registered and usable.
//
// It owns only the embedded server's lifecycle. It knows nothing about
// Millwright's workflows: callers pass the search attributes in. Production
// points workers at an external Temporal instead (see starter setup).
package temporal

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	serverlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	temporalserver "go.temporal.io/server/temporal"
	"go.uber.org/multierr"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/millwright/millwright/local/temporal/namespacesetup"
)

const clusterName = "active"

// serverStopTimeout bounds Stop; the server's own per-service stop timeout is
// longer than we want a Ctrl-C to take.
const serverStopTimeout = 30 * time.Second

// Server is a running embedded Temporal server (and UI, unless disabled).
type Server struct {
	options      Options
	frontendAddr string
	uiURL        string

	logger     *zap.Logger
	closeLog   func() error
	temporal   temporalserver.Server
	ui         *uiServer
	stopOnce   sync.Once
	stopResult error
}

// Start brings up the server, makes sure the namespace and search attributes
// are in place, starts the UI, and returns once all of it answers. ctx bounds
// the waiting; the server itself keeps running until Stop.
//
// A listen address that is taken is reported as a PortInUseError before
// anything starts.
func Start(ctx context.Context, options Options) (*Server, error) {
	o, err := options.withDefaults()
	if err != nil {
		return nil, err
	}
	frontendHost, frontendPort, err := availableAddr("frontend", o.FrontendAddr)
	if err != nil {
		return nil, err
	}
	frontendAddr := net.JoinHostPort(frontendHost, strconv.Itoa(frontendPort))
	var uiAddr string
	if !o.DisableUI {
		uiHost, uiPort, err := availableAddr("UI", o.UIAddr)
		if err != nil {
			return nil, err
		}
		uiAddr = net.JoinHostPort(uiHost, strconv.Itoa(uiPort))
	}

	logger, closeLog, err := serverLogger(o)
	if err != nil {
		return nil, err
	}
	s := &Server{options: o, frontendAddr: frontendAddr, logger: logger, closeLog: closeLog}
	if err := s.start(ctx, frontendHost, frontendPort, uiAddr); err != nil {
		return nil, multierr.Append(err, s.Stop())
	}
	return s, nil
}

func (s *Server) start(ctx context.Context, frontendHost string, frontendPort int, uiAddr string) error {
	sqlConfig, err := s.prepareDatabase()
	if err != nil {
		return err
	}
	serverConfig, err := s.serverConfig(sqlConfig, frontendHost, frontendPort)
	if err != nil {
		return err
	}
	if s.temporal, err = s.newTemporalServer(serverConfig); err != nil {
		return fmt.Errorf("creating temporal server: %w", err)
	}
	if err := s.temporal.Start(); err != nil {
		return fmt.Errorf("starting temporal server on %s: %w", s.frontendAddr, err)
	}

	if err := s.registerSearchAttributes(ctx); err != nil {
		return err
	}

	if uiAddr != "" {
		if s.ui, err = startUI(ctx, uiAddr, s.frontendAddr, s.options.Namespace); err != nil {
			return err
		}
		s.uiURL = "http://" + uiAddr
	}
	return nil
}

// prepareDatabase creates the SQLite schema on first use of a state
// directory and makes sure the namespace exists, before the server starts (so
// the namespace is in every service's cache from the first moment).
func (s *Server) prepareDatabase() (*config.SQL, error) {
	o := s.options
	sqlConfig := &config.SQL{PluginName: sqliteplugin.PluginName}
	if o.Ephemeral {
		// A shared-cache in-memory database lives as long as a connection to it
		// does; the plugin keeps one open. The random name keeps several
		// ephemeral servers in one process (tests) apart.
		sqlConfig.DatabaseName = "millwright-" + strconv.FormatUint(rand.Uint64(), 36)
		sqlConfig.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
	} else {
		if err := os.MkdirAll(o.StateDir, 0o755); err != nil {
			return nil, fmt.Errorf("creating temporal state directory %s: %w", o.StateDir, err)
		}
		sqlConfig.DatabaseName = o.databaseFile()
		sqlConfig.ConnectAttributes = map[string]string{
			"mode": "rwc",
			// WAL lets readers proceed while the single writer commits, and
			// keeps the file consistent if the process is killed.
			"journal_mode": "wal",
			"synchronous":  "normal",
			// Services share one connection per file; wait rather than fail
			// if the file is briefly locked by a checkpoint.
			"busy_timeout": "5000",
		}
		if _, err := os.Stat(sqlConfig.DatabaseName); errors.Is(err, os.ErrNotExist) {
			if err := sqliteschema.SetupSchema(sqlConfig); err != nil {
				// Leave no half-initialised file behind: the next start would
				// take it for a complete database.
				_ = os.Remove(sqlConfig.DatabaseName)
				return nil, fmt.Errorf("creating temporal database schema in %s: %w", sqlConfig.DatabaseName, err)
			}
		} else if err != nil {
			return nil, fmt.Errorf("checking temporal database %s: %w", sqlConfig.DatabaseName, err)
		}
	}

	// Search attributes are deliberately not passed here: they are added
	// through the operator service on every start (see
	// registerSearchAttributes), which also covers existing databases, where
	// this call does nothing.
	namespace, err := sqliteschema.NewNamespaceConfig(clusterName, o.Namespace, false, nil)
	if err != nil {
		return nil, fmt.Errorf("preparing namespace %s: %w", o.Namespace, err)
	}
	namespace.Detail.Config.Retention = durationpb.New(o.NamespaceRetention)
	if err := sqliteschema.CreateNamespaces(sqlConfig, namespace); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", o.Namespace, err)
	}
	return sqlConfig, nil
}

func (s *Server) serverConfig(sqlConfig *config.SQL, frontendHost string, frontendPort int) (*config.Config, error) {
	var c config.Config
	c.Global.Membership.MaxJoinDuration = 30 * time.Second
	c.Global.Membership.BroadcastAddress = frontendHost
	// MILLWRIGHT_TEMPORAL_PPROF_PORT serves the server's pprof on localhost,
	// to profile it under a benchmark (make scale); off by default.
	if port, err := strconv.Atoi(os.Getenv("MILLWRIGHT_TEMPORAL_PPROF_PORT")); err == nil && port > 0 {
		c.Global.PProf = config.PProf{Port: port, Host: "127.0.0.1"}
	}

	const store = "sqlite-default"
	c.Persistence.DefaultStore = store
	c.Persistence.VisibilityStore = store
	c.Persistence.NumHistoryShards = 1
	c.Persistence.DataStores = map[string]config.DataStore{store: {SQL: sqlConfig}}

	c.ClusterMetadata = &cluster.Config{
		EnableGlobalNamespace:    false,
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             s.frontendAddr,
			},
		},
	}
	c.DCRedirectionPolicy.Policy = "noop"

	c.Services = map[string]config.Service{
		string(primitives.FrontendService): {RPC: config.RPC{GRPCPort: frontendPort, BindOnIP: frontendHost}},
	}
	// The other services only talk to each other; any free port will do.
	for _, service := range []primitives.ServiceName{primitives.HistoryService, primitives.MatchingService, primitives.WorkerService} {
		_, port, err := availableAddr(string(service), net.JoinHostPort(frontendHost, "0"))
		if err != nil {
			return nil, fmt.Errorf("picking a port for the temporal %s service: %w", service, err)
		}
		c.Services[string(service)] = config.Service{RPC: config.RPC{GRPCPort: port, BindOnIP: frontendHost}}
	}

	c.Archival.History.State = "disabled"
	c.Archival.Visibility.State = "disabled"
	c.NamespaceDefaults.Archival.History.State = "disabled"
	c.NamespaceDefaults.Archival.Visibility.State = "disabled"
	c.PublicClient.HostPort = s.frontendAddr
	return &c, nil
}

func (s *Server) newTemporalServer(c *config.Config) (temporalserver.Server, error) {
	logger := serverlog.NewZapLogger(s.logger)
	authorizer, err := authorization.GetAuthorizerFromConfig(&c.Global.Authorization)
	if err != nil {
		return nil, fmt.Errorf("creating authorizer: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&c.Global.Authorization, logger)
	if err != nil {
		return nil, fmt.Errorf("creating claim mapper: %w", err)
	}

	// Every service runs in this process, so membership is static: no
	// gossip ports, no join delay.
	hosts := make(map[primitives.ServiceName]static.Hosts, len(c.Services))
	for name, service := range c.Services {
		hosts[primitives.ServiceName(name)] = static.SingleLocalHost(net.JoinHostPort(service.RPC.BindOnIP, strconv.Itoa(service.RPC.GRPCPort)))
	}

	dynamic := dynamicconfig.StaticClient{
		// New search attributes become visible to validation at once instead
		// of after the cache's refresh period.
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
		// `starter nodes` and the UI list workflows often; the default
		// per-namespace visibility rate limit is tuned for clusters.
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                 8096,
	}

	return temporalserver.NewServer(
		temporalserver.WithConfig(c),
		temporalserver.ForServices(temporalserver.DefaultServices),
		temporalserver.WithStaticHosts(hosts),
		temporalserver.WithLogger(logger),
		temporalserver.WithAuthorizer(authorizer),
		temporalserver.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporalserver.WithDynamicConfigClient(dynamic),
	)
}

func (s *Server) registerSearchAttributes(ctx context.Context) error {
	c, err := s.NewClient(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := namespacesetup.EnsureSearchAttributes(ctx, c.OperatorService(), c.WorkflowService(), s.options.Namespace, s.options.SearchAttributes); err != nil {
		return fmt.Errorf("registering search attributes on the embedded temporal server: %w", err)
	}
	return nil
}

// FrontendAddr is the host:port of the gRPC frontend, for client.Options.HostPort.
func (s *Server) FrontendAddr() string { return s.frontendAddr }

// UIURL is the base URL of the web UI, or "" when the UI is disabled.
func (s *Server) UIURL() string { return s.uiURL }

// Namespace is the namespace Start prepared.
func (s *Server) Namespace() string { return s.options.Namespace }

// DatabaseFile is the SQLite file holding the server's state, or "" when ephemeral.
func (s *Server) DatabaseFile() string {
	if s.options.Ephemeral {
		return ""
	}
	return s.options.databaseFile()
}

// NewClient dials the server for its namespace. Its SDK logs go to the
// server's logger at the server's level. The caller closes it.
func (s *Server) NewClient(ctx context.Context) (client.Client, error) {
	return s.NewClientWithOptions(ctx, client.Options{})
}

// NewClientWithOptions is NewClient with extra SDK options (interceptors, data
// converter...). HostPort is always the server's; Namespace and Logger default
// to the server's.
func (s *Server) NewClientWithOptions(ctx context.Context, options client.Options) (client.Client, error) {
	options.HostPort = s.frontendAddr
	if options.Namespace == "" {
		options.Namespace = s.options.Namespace
	}
	if options.Logger == nil {
		options.Logger = serverlog.NewSdkLogger(serverlog.NewZapLogger(s.logger))
	}
	c, err := client.DialContext(ctx, options)
	if err != nil {
		return nil, fmt.Errorf("connecting to the embedded temporal server at %s: %w", s.frontendAddr, err)
	}
	return c, nil
}

// Stop shuts the UI and the server down and releases their ports. It is safe
// to call more than once. Clients and workers of the caller should be stopped
// first; the server does not wait for them.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		var errs error
		if s.ui != nil {
			errs = multierr.Append(errs, s.ui.stop())
		}
		if s.temporal != nil {
			errs = multierr.Append(errs, stopWithTimeout(s.temporal, serverStopTimeout))
		}
		if s.closeLog != nil {
			errs = multierr.Append(errs, s.closeLog())
		}
		s.stopResult = errs
	})
	return s.stopResult
}

func stopWithTimeout(server temporalserver.Server, timeout time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- server.Stop() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("stopping temporal server: %w", err)
		}
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("stopping temporal server: not stopped after %s", timeout)
	}
}
