package osbcli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) fileMvCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "mv <sandbox-id> <source> <destination>",
		Short:   "Move or rename a file or directory",
		Example: `  osb file mv 3f2c9a1e-... /tmp/draft.txt /tmp/final.txt`,
		Args:    exactArgs(3, "<sandbox-id> <source> <destination>"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			sb, err := a.connect(ctx, args[0])
			if err != nil {
				return notFoundHint(err, args[0])
			}
			if err := sb.Move(ctx, sandbox.RenameFileItem{Src: args[1], Dest: args[2]}); err != nil {
				return fmt.Errorf("move %s to %s: %w", args[1], args[2], err)
			}
			return nil
		},
	}
}
