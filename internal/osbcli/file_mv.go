package osbcli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) fileMvCommand() *cobra.Command {
	return a.result(&cobra.Command{
		Use:     "mv <sandbox-id> <source> <destination>",
		Aliases: []string{"move"},
		Short:   "Move or rename a file or directory",
		Example: `  osb file mv 3f2c9a1e-... /tmp/draft.txt /tmp/final.txt [-o json]`,
		Args:    exactArgs(3, "<sandbox-id> <source> <destination>"),
	}, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		ctx := cmd.Context()
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		if err := sb.Move(ctx, sandbox.RenameFileItem{Src: args[1], Dest: args[2]}); err != nil {
			return view{}, fmt.Errorf("move %s to %s: %w", args[1], args[2], err)
		}
		r := fileAction{SandboxID: args[0], Source: args[1], Destination: args[2], Status: "moved"}
		return fileActionView(r, "moved "+args[1]+" to "+args[2]), nil
	})
}
