package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/millwright/millwright/local/temporal/namespacesetup"
	"github.com/millwright/millwright/worker/connect"
	"github.com/millwright/millwright/workflows"
)

// setupOptions are the flags of `starter setup`.
type setupOptions struct {
	connection      connect.Temporal
	createNamespace bool
	retention       time.Duration
	timeout         time.Duration
}

// newSetupCommand builds `starter setup`: prepares a Temporal namespace for
// Millwright on an external server. The embedded dev server does the same on
// its own at every start.
func newSetupCommand() *cobra.Command {
	var options setupOptions
	command := &cobra.Command{
		Use:   "setup",
		Short: "Register Millwright's search attributes (and optionally the namespace) on a Temporal server",
		Long: `Registers the custom search attributes Millwright's node workflows use
(` + attributeList() + `)
on the namespace, through the operator service. Safe to run again: existing
attributes with the right type are left alone; one with another type is an
error. With --create-namespace the namespace is registered first if missing.
Temporal Cloud does not let the operator service add attributes: use tcld or the
Cloud UI there (the error says which ones are missing).`,
		Args: cobra.NoArgs,
		RunE: func(command *cobra.Command, _ []string) error {
			return runSetup(command.Context(), command.OutOrStdout(), options)
		},
	}
	options.connection.BindFlags(command.Flags())
	command.Flags().BoolVar(&options.createNamespace, "create-namespace", false, "register the namespace if it does not exist")
	command.Flags().DurationVar(&options.retention, "retention", 72*time.Hour, "retention of closed workflows, for a namespace created by --create-namespace")
	command.Flags().DurationVar(&options.timeout, "timeout", 2*time.Minute, "give up if the server has not made the attributes usable by then")
	return command
}

func runSetup(ctx context.Context, out io.Writer, options setupOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, options.timeout)
	defer cancel()

	c, err := options.connection.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	namespace := options.connection.Namespace

	if options.createNamespace {
		created, err := namespacesetup.EnsureNamespace(ctx, c.WorkflowService(), namespace, options.retention)
		if err != nil {
			return err
		}
		if created {
			fmt.Fprintf(out, "namespace %s: registered (retention %s)\n", namespace, options.retention)
		} else {
			fmt.Fprintf(out, "namespace %s: already exists\n", namespace)
		}
	}

	wanted := workflows.SearchAttributeTypes()
	added, err := namespacesetup.EnsureSearchAttributes(ctx, c.OperatorService(), c.WorkflowService(), namespace, wanted)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(wanted)) {
		state := "already registered"
		if slices.Contains(added, name) {
			state = "added"
		}
		fmt.Fprintf(out, "search attribute %s (%s): %s\n", name, wanted[name], state)
	}
	fmt.Fprintf(out, "namespace %s on %s is ready for Millwright\n", namespace, options.connection.Address)
	return nil
}

func attributeList() string {
	return strings.Join(slices.Sorted(maps.Keys(workflows.SearchAttributeTypes())), ", ")
}
