// Command kube-tools builds the local control-plane binaries (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubectl, kwok, kwokctl) into their cache
// directory if they are missing or stale, then prints that directory. CI runs it
// (through local/tools/build.sh) so tests never pay for the build inside a timeout.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/millwright/millwright/local/cluster"
)

func main() {
	binDir := flag.String("bin-dir", "", "directory for the binaries (default $"+cluster.EnvToolsDir+" or the user cache dir)")
	sourceDir := flag.String("source", "", "the local/tools directory (default: found from the working directory)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tools, err := cluster.EnsureTools(ctx, cluster.ToolsOptions{BinDir: *binDir, SourceDir: *sourceDir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube-tools:", err)
		os.Exit(1)
	}
	fmt.Println(tools.BinDir)
}
