package osbcli

import (
	"github.com/spf13/cobra"
)

func (a *app) fileRmdirCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "rmdir <sandbox-id> <path>...",
		Short:   "Delete directories and everything in them",
		Example: `  osb file rmdir 3f2c9a1e-... /work/build`,
		Args:    minArgs(2, "<sandbox-id> <path>..."),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			sb, err := a.connect(ctx, args[0])
			if err != nil {
				return notFoundHint(err, args[0])
			}
			if err := sb.RemoveDirs(ctx, args[1:]...); err != nil {
				return err
			}
			return nil
		},
	}
}
