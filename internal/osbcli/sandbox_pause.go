package osbcli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) sandboxPauseCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "pause <sandbox-id>",
		Short:   "Freeze every process of a sandbox",
		Example: `  osb sandbox pause 3f2c9a1e-...`,
		Args:    exactArgs(1, "<sandbox-id>"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.sdk()
			if err != nil {
				return err
			}
			if err := c.Pause(cmd.Context(), args[0]); err != nil {
				return notFoundHint(err, args[0])
			}
			fmt.Fprintln(a.io.out, args[0])
			return nil
		},
	}
}
