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
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		c, err := a.sdk()
		if err != nil {
			return view{}, err
		}
		info, err := c.Get(cmd.Context(), args[0])
		if err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		return a.sandboxView(info), nil
	})
}
