package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/millwright/millwright/model/apis/migrate"
)

// newMigrateCommand rewrites a Karpenter manifest into Millwright's API.
func newMigrateCommand() *cobra.Command {
	var drop bool
	cmd := &cobra.Command{
		Use:   "migrate [FILE|-]",
		Short: "Rewrite a Karpenter v1 NodePool/EC2NodeClass manifest to millwright.dev/v1",
		Long: "Reads a Karpenter manifest (karpenter.sh/v1 NodePool, karpenter.k8s.aws/v1 EC2NodeClass,\n" +
			"multi-document YAML; FILE, or stdin for - or no argument) and prints it as millwright.dev/v1\n" +
			"on stdout: API groups, the karpenter.sh/discovery selector tag and the KarpenterNodeRole-\n" +
			"role prefix renamed, requirement keys Millwright honours under Karpenter's names kept,\n" +
			"comments and order preserved. What changed and what Millwright does not support go to\n" +
			"stderr. Unsupported fields are kept, so the API server refuses them naming the field,\n" +
			"and the exit status is 1; --drop-unsupported removes them instead (exit status 0).",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, in := "-", cmd.InOrStdin()
			if len(args) == 1 && args[0] != "-" {
				name = args[0]
				f, err := os.Open(name)
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			manifest, err := io.ReadAll(in)
			if err != nil {
				return fmt.Errorf("reading %s: %w", name, err)
			}
			result, err := migrate.Migrate(manifest, migrate.Options{DropUnsupported: drop})
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if _, err := cmd.OutOrStdout().Write(result.Manifest); err != nil {
				return err
			}
			for _, c := range result.Changes {
				fmt.Fprintln(cmd.ErrOrStderr(), c.String())
			}
			if unsupported := result.Unsupported(); len(unsupported) > 0 && !drop {
				return fmt.Errorf("%s: %d unsupported field(s) or value(s) (listed above); fix them, or pass --drop-unsupported", name, len(unsupported))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&drop, "drop-unsupported", false, "remove fields Millwright does not support instead of keeping them (and failing)")
	return cmd
}
