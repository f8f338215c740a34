// Package temporaltesting gives a test package one real, in-memory Temporal
// server (package local/temporal) on free ports, started from TestMain and
// shared by the package's tests. It only starts and stops that server; tests
// bring their own workers.
//
//	var env *temporaltesting.Env
//
//	func TestMain(m *testing.M) {
//		temporaltesting.Main(m, &env, temporal.Options{SearchAttributes: workflows.SearchAttributeTypes()})
//	}
//
// Tests then use env.Client (or env.Server.NewClient), env.Server.Namespace()
// and a task queue of their own, so tests in one package do not steal each
// other's tasks.
package temporaltesting

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/millwright/millwright/local/temporal"
)

// StartTimeout bounds starting the server and registering its namespace and
// search attributes.
const StartTimeout = 2 * time.Minute

// Env is a running test server and a client for its namespace.
type Env struct {
	Server *temporal.Server
	Client client.Client
}

// Start runs an ephemeral server on free 127.0.0.1 ports. The options are
// used as given except: Ephemeral is forced on, the frontend gets a free port,
// and the UI stays off unless options.UIAddr is set (use "127.0.0.1:0").
// Logs are dropped unless options.Logger is set. Call Close when done.
func Start(ctx context.Context, options temporal.Options) (*Env, error) {
	options.Ephemeral = true
	options.FrontendAddr = "127.0.0.1:0"
	options.DisableUI = options.UIAddr == ""
	server, err := temporal.Start(ctx, options)
	if err != nil {
		return nil, err
	}
	c, err := server.NewClient(ctx)
	if err != nil {
		_ = server.Stop()
		return nil, err
	}
	return &Env{Server: server, Client: c}, nil
}

// Close closes the client and stops the server.
func (e *Env) Close() error {
	e.Client.Close()
	return e.Server.Stop()
}

// Main is a whole TestMain: it starts the server into *env, runs the
// package's tests, stops the server and exits with the tests' status.
func Main(m *testing.M, env **Env, options temporal.Options) {
	os.Exit(run(m, env, options))
}

func run(m *testing.M, env **Env, options temporal.Options) int {
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	started, err := Start(ctx, options)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "temporaltesting: starting the embedded Temporal server:", err)
		return 1
	}
	*env = started
	code := m.Run()
	if err := started.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "temporaltesting: stopping the embedded Temporal server:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
