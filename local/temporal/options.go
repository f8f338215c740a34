package temporal

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Defaults for the local stack; they match `temporal server start-dev` so that
// the `temporal` CLI and SDK defaults find the server without flags.
const (
	DefaultFrontendAddr       = "127.0.0.1:7233"
	DefaultUIAddr             = "127.0.0.1:8233"
	DefaultNamespace          = "default"
	DefaultNamespaceRetention = 24 * time.Hour
	// DefaultLogLevel keeps the server quiet: it logs several lines per second
	// at info level even when idle.
	DefaultLogLevel = "warn"

	// DatabaseFileName and LogFileName are the files Start keeps in StateDir.
	DatabaseFileName = "temporal.db"
	LogFileName      = "temporal.log"
)

// Options configure the embedded server. The zero value plus a StateDir is a
// usable local server on the default ports.
type Options struct {
	// StateDir holds the SQLite database (temporal.db, WAL mode) and, when no
	// Logger is given, the server log (temporal.log). Created if missing.
	// Required unless Ephemeral.
	StateDir string
	// Ephemeral keeps all state in memory: nothing survives Stop. StateDir is
	// then optional and only used for the log file.
	Ephemeral bool

	// FrontendAddr is the gRPC frontend host:port (default 127.0.0.1:7233);
	// port 0 picks a free port, see Server.FrontendAddr.
	FrontendAddr string
	// UIAddr is the Temporal UI host:port (default 127.0.0.1:8233); port 0
	// picks a free port, see Server.UIURL.
	UIAddr string
	// DisableUI runs the server without the web UI.
	DisableUI bool

	// Namespace is created if missing (default "default").
	Namespace string
	// NamespaceRetention is how long closed workflows are kept when the
	// namespace is created (default 24h). An existing namespace keeps its own.
	NamespaceRetention time.Duration
	// SearchAttributes are registered on Namespace on every start (also on an
	// existing database), and Start returns only once they can be used.
	SearchAttributes map[string]enumspb.IndexedValueType

	// Logger receives the server's logs. When nil, logs go to
	// StateDir/temporal.log, or nowhere if there is no StateDir.
	Logger *zap.Logger
	// LogLevel filters the server's logs: debug, info, warn (default), error.
	LogLevel string
}

// withDefaults returns a copy of o with defaults filled in, or an error naming
// the option that is wrong.
func (o Options) withDefaults() (Options, error) {
	if o.FrontendAddr == "" {
		o.FrontendAddr = DefaultFrontendAddr
	}
	if o.UIAddr == "" {
		o.UIAddr = DefaultUIAddr
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.NamespaceRetention == 0 {
		o.NamespaceRetention = DefaultNamespaceRetention
	}
	if o.NamespaceRetention < 0 {
		return o, fmt.Errorf("temporal option NamespaceRetention: must be positive, got %s", o.NamespaceRetention)
	}
	if o.LogLevel == "" {
		o.LogLevel = DefaultLogLevel
	}
	if _, err := zapcore.ParseLevel(o.LogLevel); err != nil {
		return o, fmt.Errorf("temporal option LogLevel: %w", err)
	}
	if !o.Ephemeral && o.StateDir == "" {
		return o, errors.New("temporal option StateDir: required unless Ephemeral is set")
	}
	if o.StateDir != "" {
		abs, err := filepath.Abs(o.StateDir)
		if err != nil {
			return o, fmt.Errorf("temporal option StateDir %q: %w", o.StateDir, err)
		}
		o.StateDir = abs
	}
	return o, nil
}

func (o Options) databaseFile() string { return filepath.Join(o.StateDir, DatabaseFileName) }
