// Command starter is Millwright's command-line tool: it plans offline
// (`plan`), brings up the local stack (`dev`), talks to the node workflows of
// a running installation (`start`, `nodes`, `describe`, `drain`) and prepares
// a Temporal namespace (`setup`). Each subcommand lives in its own file.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "starter",
		Short:         "Millwright's CLI: plan, run the local stack, and operate node workflows",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		// Subcommands are added here, one per file.
		newPlanCommand(),
		newSetupCommand(),
		newDevCommand(),
		newStartCommand(),
		newNodesCommand(),
		newDescribeCommand(),
		newDrainCommand(),
		newDisruptionCommand(),
		newSimCommand(),
		newMigrateCommand(),
	)
	return root
}

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
