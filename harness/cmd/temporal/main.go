// Command temporal runs the local stack's Temporal server (local/temporal:
// the real server on a SQLite file) as its own process, with Millwright's
// search attributes registered, until SIGTERM or SIGINT. The chaos harness
// runs it so that it can SIGKILL the server and start it again on the same
// database and port; everything else embeds the server in-process.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/millwright/millwright/local/temporal"
	"github.com/millwright/millwright/workflows"
)

// ReadyLine is printed to stdout once the server answers and its
// namespace and search attributes are usable.
const ReadyLine = "temporal server ready"

func main() {
	stateDir := flag.String("state-dir", "", "directory of the SQLite database (temporal.db) and temporal.log (required)")
	address := flag.String("address", temporal.DefaultFrontendAddr, "frontend host:port")
	namespace := flag.String("namespace", temporal.DefaultNamespace, "namespace to create if missing")
	flag.Parse()
	if *stateDir == "" {
		fmt.Fprintln(os.Stderr, "error: --state-dir is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	server, err := temporal.Start(ctx, temporal.Options{
		StateDir:         *stateDir,
		FrontendAddr:     *address,
		Namespace:        *namespace,
		DisableUI:        true,
		SearchAttributes: workflows.SearchAttributeTypes(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	fmt.Printf("%s on %s (database %s)\n", ReadyLine, server.FrontendAddr(), server.DatabaseFile())
	<-ctx.Done()
	if err := server.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
