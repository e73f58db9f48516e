package osbcli

import (
	"github.com/spf13/cobra"
)

func (a *app) sandboxPauseCommand() *cobra.Command {
	return a.result(&cobra.Command{
		Use:     "pause <sandbox-id>",
		Short:   "Freeze every process of a sandbox",
		Example: `  osb sandbox pause 3f2c9a1e-... [-o json]`,
		Args:    exactArgs(1, "<sandbox-id>"),
	}, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		c, err := a.sdk()
		if err != nil {
			return view{}, err
		}
		if err := c.Pause(cmd.Context(), args[0]); err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		return actionView(actionResult{ID: args[0], Status: "paused"}, args[0]), nil
	})
}
