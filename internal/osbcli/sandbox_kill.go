package osbcli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) sandboxKillCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "kill <sandbox-id>...",
		Aliases: []string{"rm", "delete"},
		Short:   "Delete sandboxes and everything in them",
		Example: `  osb sandbox kill 3f2c9a1e-... 9b7d0c44-...`,
		Args:    minArgs(1, "<sandbox-id>..."),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.sdk()
			if err != nil {
				return err
			}
			var errs []error
			for _, id := range args {
				if err := c.Kill(cmd.Context(), id); err != nil {
					errs = append(errs, notFoundHint(err, id))
					continue
				}
				fmt.Fprintln(a.io.out, id)
			}
			return errors.Join(errs...)
		},
	}
}
