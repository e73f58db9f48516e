package osbcli

import (
	"github.com/spf13/cobra"
)

func (a *app) sandboxGetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "get <sandbox-id>",
		Short:   "Show one sandbox",
		Example: `  osb sandbox get 3f2c9a1e-...  -o yaml`,
		Args:    exactArgs(1, "<sandbox-id>"),
	}
	out := outputFlag(cmd, formatTable, formatJSON, formatYAML, formatRaw)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := a.sdk()
		if err != nil {
			return err
		}
		info, err := c.Get(cmd.Context(), args[0])
		if err != nil {
			return notFoundHint(err, args[0])
		}
		return render(a.io.out, *out, a.sandboxView(info))
	}
	return cmd
}
