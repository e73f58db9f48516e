package osbcli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) commandInterruptCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "interrupt <sandbox-id> <command-id>",
		Short:   "Stop a running command",
		Example: `  osb command interrupt 3f2c9a1e-... 1a2b3c`,
		Args:    exactArgs(2, "<sandbox-id> <command-id>"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			sb, err := a.connect(ctx, args[0])
			if err != nil {
				return notFoundHint(err, args[0])
			}
			if err := sb.Interrupt(ctx, args[1]); err != nil {
				return err
			}
			fmt.Fprintln(a.io.out, args[1])
			return nil
		},
	}
}
