package osbcli

import "github.com/spf13/cobra"

func (a *app) egressGetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "get <sandbox-id>",
		Short:   "Show the egress policy in force",
		Example: "  osb egress get 3f2c9a1e-...\n  osb egress get 3f2c9a1e-... -o json",
		Args:    exactArgs(1, "<sandbox-id>"),
	}
	out := outputFlag(cmd, formatTable, formatJSON, formatYAML, formatRaw)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := a.sdk()
		if err != nil {
			return err
		}
		st, err := c.Egress(args[0]).GetPolicy(cmd.Context())
		if err != nil {
			return egressHint(err, args[0])
		}
		return render(a.io.out, *out, policyView(st))
	}
	return cmd
}
