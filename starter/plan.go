package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/workload"
)

// newPlanCommand plans a workload file offline and prints the answer JSON.
func newPlanCommand() *cobra.Command {
	var path string
	var verify bool
	cmd := &cobra.Command{
		Use:   "plan --workload FILE",
		Short: "Plan the nodes for a workload file offline and print the answer JSON",
		Long: "Reads a workload file (instance types with offerings, NodePools, DaemonSet pods and pending\n" +
			"pods; see ../shared/benchmarks/WORKLOAD.md), packs the pods and prints the nodes to launch,\n" +
			"the unschedulable pods with reasons, the total price and the planning time as JSON on\n" +
			"stdout. A one-line summary goes to stderr.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return fmt.Errorf("--workload is required")
			}
			w, err := workload.Read(path)
			if err != nil {
				return err
			}
			in, err := w.PackerInput()
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			start := time.Now()
			result, err := packer.Pack(in)
			seconds := time.Since(start).Seconds()
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if verify {
				if err := packer.Verify(in, result); err != nil {
					return fmt.Errorf("%s: the plan fails verification: %w", path, err)
				}
			}
			answer := workload.NewAnswer(result, seconds)
			if err := answer.Write(cmd.OutOrStdout()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d pods -> %d nodes, $%.4f/h, %d unschedulable, %.3fs\n",
				w.Name, len(in.Pods), len(answer.Nodes), answer.TotalPrice, len(answer.Unschedulable), seconds)
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "workload", "", "workload file (JSON, see WORKLOAD.md)")
	cmd.Flags().BoolVar(&verify, "verify", false, "check the plan with the independent verifier before printing it")
	return cmd
}
