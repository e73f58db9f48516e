package osbcli

import (
	"github.com/spf13/cobra"
)

func (a *app) fileRmCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "rm <sandbox-id> <path>...",
		Short:   "Delete files",
		Example: `  osb file rm 3f2c9a1e-... /tmp/a.txt /tmp/b.txt`,
		Args:    minArgs(2, "<sandbox-id> <path>..."),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			sb, err := a.connect(ctx, args[0])
			if err != nil {
				return notFoundHint(err, args[0])
			}
			if err := sb.Remove(ctx, args[1:]...); err != nil {
				return err
			}
			return nil
		},
	}
}
