package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/millwright/millwright/local/awsemu"
)

// defaultEmulatorEndpoint is where `starter dev` serves the emulator.
const defaultEmulatorEndpoint = "http://127.0.0.1:4566"

// newSimCommand is `starter sim`: inject faults into the local EC2/SQS
// emulator and look at what it holds, through its admin API.
func newSimCommand() *cobra.Command {
	var endpoint string
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Drive the local EC2/SQS emulator: interruptions, capacity and throttling faults, state",
		Long: `Drive the EC2/SQS emulator that "starter dev" runs, through its admin API.

Instances can be named by instance id (i-…) or by Node name (ip-10-0-x-y.ec2.internal).
The endpoint defaults to $AWS_ENDPOINT_URL (as "starter dev" exports it), else ` + defaultEmulatorEndpoint + `.`,
	}
	def := os.Getenv("AWS_ENDPOINT_URL")
	if def == "" {
		def = defaultEmulatorEndpoint
	}
	cmd.PersistentFlags().StringVar(&endpoint, "endpoint", def, "emulator base URL")
	client := func() *awsemu.AdminClient { return awsemu.NewAdminClient(endpoint, nil) }

	cmd.AddCommand(
		newSimStateCommand(client),
		newSimFaultsCommand(client),
		newSimThrottleCommand(client),
		newSimICECommand(client),
		newSimInterruptCommand(client),
		newSimRebalanceCommand(client),
		newSimScheduledChangeCommand(client),
		newSimEventsCommand(client),
	)
	return cmd
}

type adminClientFunc func() *awsemu.AdminClient

func newSimStateCommand(client adminClientFunc) *cobra.Command {
	var asJSON, liveOnly bool
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Show the emulated account: instances (with their Nodes), fleets, queues, faults",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := client().State(cmd.Context())
			if err != nil {
				return err
			}
			if liveOnly {
				st.Instances = st.LiveInstances()
			}
			if asJSON {
				return writeIndentedJSON(cmd.OutOrStdout(), st)
			}
			return printState(cmd.OutOrStdout(), st)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the full state as JSON")
	cmd.Flags().BoolVar(&liveOnly, "live", false, "only instances that are not terminated")
	return cmd
}

func printState(out io.Writer, st *awsemu.State) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "INSTANCE\tSTATE\tTYPE\tZONE\tCAPACITY\tNODE\tREGISTERED\tAGE")
	for _, i := range st.Instances {
		registered := "no"
		switch {
		case i.NodeDeleted:
			registered = "deleted"
		case i.NodeRegistered:
			registered = "yes"
		case i.NodeRegistrationError != "":
			registered = "error: " + i.NodeRegistrationError
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", i.ID, i.State, i.InstanceType, i.Zone, i.CapacityType,
			dash(i.NodeName), registered, st.Now.Sub(i.LaunchTime).Truncate(time.Second))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%d instance(s), %d live; %d fleet(s); %d launch template(s)\n",
		len(st.Instances), len(st.LiveInstances()), len(st.Fleets), len(st.LaunchTemplates))
	for _, q := range st.Queues {
		fmt.Fprintf(out, "queue %s: %d visible, %d in flight, %d delayed\n", q.Name, q.Visible, q.InFlight, q.Delayed)
	}
	printFaults(out, &st.Faults)
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printFaults(out io.Writer, f *awsemu.Faults) {
	if f.Throttle == nil && len(f.Capacity) == 0 {
		fmt.Fprintln(out, "no faults injected")
		return
	}
	if t := f.Throttle; t != nil {
		scope := "all EC2 actions"
		if len(t.Actions) > 0 {
			scope = strings.Join(t.Actions, ", ")
		}
		if t.EveryN > 0 {
			fmt.Fprintf(out, "throttling every %d call(s) of %s\n", t.EveryN, scope)
		} else {
			fmt.Fprintf(out, "throttling %.0f%% of calls of %s (seed %d)\n", t.Rate*100, scope, t.Seed)
		}
	}
	for _, c := range f.Capacity {
		fmt.Fprintf(out, "insufficient capacity: type %s, zone %s, capacity type %s\n", anyIfEmpty(c.InstanceType), anyIfEmpty(c.Zone), anyIfEmpty(c.CapacityType))
	}
}

func anyIfEmpty(s string) string {
	if s == "" {
		return "any"
	}
	return s
}

func writeIndentedJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newSimFaultsCommand(client adminClientFunc) *cobra.Command {
	return &cobra.Command{
		Use:   "faults",
		Short: "Show the injected faults",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := client().Faults(cmd.Context())
			if err != nil {
				return err
			}
			printFaults(cmd.OutOrStdout(), f)
			return nil
		},
	}
}

func newSimThrottleCommand(client adminClientFunc) *cobra.Command {
	var fault awsemu.ThrottleFault
	var off bool
	cmd := &cobra.Command{
		Use:   "throttle",
		Short: "Make EC2 calls fail with RequestLimitExceeded (--rate or --every), or stop (--off)",
		Example: `  starter sim throttle --rate 0.3 --seed 7
  starter sim throttle --every 2 --action CreateFleet
  starter sim throttle --off`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := client()
			if off {
				if err := c.ClearThrottle(cmd.Context()); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), "throttling off")
				return nil
			}
			if fault.Rate == 0 && fault.EveryN == 0 {
				return fmt.Errorf("give --rate (0..1], --every N, or --off")
			}
			if err := c.SetThrottle(cmd.Context(), fault); err != nil {
				return err
			}
			return showFaults(cmd, c)
		},
	}
	cmd.Flags().Float64Var(&fault.Rate, "rate", 0, "fraction of calls throttled, drawn from a generator seeded with --seed")
	cmd.Flags().Int64Var(&fault.Seed, "seed", 1, "seed for --rate, so a run is repeatable")
	cmd.Flags().IntVar(&fault.EveryN, "every", 0, "throttle every Nth call instead of at a rate")
	cmd.Flags().StringSliceVar(&fault.Actions, "action", nil, "EC2 actions to throttle (repeatable; default all)")
	cmd.Flags().BoolVar(&off, "off", false, "remove the throttling fault")
	return cmd
}

func showFaults(cmd *cobra.Command, c *awsemu.AdminClient) error {
	f, err := c.Faults(cmd.Context())
	if err != nil {
		return err
	}
	printFaults(cmd.OutOrStdout(), f)
	return nil
}

func newSimICECommand(client adminClientFunc) *cobra.Command {
	var fault awsemu.CapacityFault
	var remove, clear bool
	cmd := &cobra.Command{
		Use:   "ice",
		Short: "Exhaust capacity (InsufficientInstanceCapacity) for a type, zone and capacity type; empty means any",
		Example: `  starter sim ice --type m5.large --zone us-east-1a --capacity-type spot
  starter sim ice --type m5.large --remove
  starter sim ice --clear`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := client()
			var err error
			switch {
			case clear:
				err = c.ClearCapacityFaults(cmd.Context())
			case remove:
				err = c.RemoveCapacityFault(cmd.Context(), fault)
			case fault == (awsemu.CapacityFault{}):
				return fmt.Errorf("give at least one of --type, --zone, --capacity-type (or --clear): exhausting every pool is surely a mistake")
			default:
				err = c.AddCapacityFault(cmd.Context(), fault)
			}
			if err != nil {
				return err
			}
			return showFaults(cmd, c)
		},
	}
	cmd.Flags().StringVar(&fault.InstanceType, "type", "", "instance type (default any)")
	cmd.Flags().StringVar(&fault.Zone, "zone", "", "availability zone (default any)")
	cmd.Flags().StringVar(&fault.CapacityType, "capacity-type", "", "spot or on-demand (default any)")
	cmd.Flags().BoolVar(&remove, "remove", false, "remove this exact fault instead of adding it")
	cmd.Flags().BoolVar(&clear, "clear", false, "remove every capacity fault")
	return cmd
}

// resolveInstance accepts an instance id or the Node name of its instance.
func resolveInstance(ctx context.Context, c *awsemu.AdminClient, nameOrID string) (string, error) {
	if strings.HasPrefix(nameOrID, "i-") {
		return nameOrID, nil
	}
	st, err := c.State(ctx)
	if err != nil {
		return "", err
	}
	for _, i := range st.Instances {
		if i.PrivateDNSName == nameOrID || i.NodeName == nameOrID {
			return i.ID, nil
		}
	}
	return "", fmt.Errorf("no instance has the Node name %q (give an instance id i-… or a Node name)", nameOrID)
}

func newSimInterruptCommand(client adminClientFunc) *cobra.Command {
	var after time.Duration
	cmd := &cobra.Command{
		Use:   "interrupt INSTANCE",
		Short: "Send a spot interruption warning to the event queue and terminate the spot instance after --after",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := client()
			id, err := resolveInstance(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			out, err := c.InterruptSpot(cmd.Context(), id, after)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sent %q for %s; it terminates at %s\n", out.Event.DetailType, id, out.TerminateAt.Format(time.RFC3339))
			return nil
		},
	}
	cmd.Flags().DurationVar(&after, "after", 0, "time until termination (default the emulator's, 2m)")
	return cmd
}

func newSimRebalanceCommand(client adminClientFunc) *cobra.Command {
	return &cobra.Command{
		Use:   "rebalance INSTANCE",
		Short: "Send an EC2 Instance Rebalance Recommendation for a spot instance",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := client()
			id, err := resolveInstance(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			ev, err := c.RecommendRebalance(cmd.Context(), id)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sent %q for %s\n", ev.DetailType, id)
			return nil
		},
	}
}

func newSimScheduledChangeCommand(client adminClientFunc) *cobra.Command {
	var code string
	var startIn time.Duration
	cmd := &cobra.Command{
		Use:   "scheduled-change INSTANCE",
		Short: "Send an AWS Health scheduled-change event (instance retirement by default) for an instance",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := client()
			id, err := resolveInstance(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			ev, err := c.ScheduleChange(cmd.Context(), id, awsemu.ScheduledChange{EventTypeCode: code, StartIn: awsemu.Duration(startIn)})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sent %q for %s\n", ev.DetailType, id)
			return nil
		},
	}
	cmd.Flags().StringVar(&code, "event-type-code", "", "AWS Health event type code (default AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED)")
	cmd.Flags().DurationVar(&startIn, "start-in", 0, "when the change starts (default 24h)")
	return cmd
}

func newSimEventsCommand(client adminClientFunc) *cobra.Command {
	var cfg awsemu.EventConfig
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Show or set where events go (--queue) and whether state changes are sent (--state-changes)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := client()
			current, err := c.EventConfig(cmd.Context())
			if err != nil {
				return err
			}
			changed := false
			if cmd.Flags().Changed("queue") {
				current.Queue, changed = cfg.Queue, true
			}
			if cmd.Flags().Changed("state-changes") {
				current.StateChangeNotifications, changed = cfg.StateChangeNotifications, true
			}
			if changed {
				if err := c.ConfigureEvents(cmd.Context(), *current); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "event queue: %s\nstate-change notifications: %v\n", dash(current.Queue), current.StateChangeNotifications)
			return nil
		},
	}
	cmd.Flags().StringVar(&cfg.Queue, "queue", "", "SQS queue that receives events (created if missing)")
	cmd.Flags().BoolVar(&cfg.StateChangeNotifications, "state-changes", false, "send an event on every instance state change")
	return cmd
}
