package osbcli

import (
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) fileRmCommand() *cobra.Command {
	return a.result(&cobra.Command{
		Use:     "rm <sandbox-id> <path>...",
		Aliases: []string{"delete"},
		Short:   "Delete files",
		Example: `  osb file rm 3f2c9a1e-... /tmp/a.txt /tmp/b.txt [-o json]`,
		Args:    minArgs(2, "<sandbox-id> <path>..."),
	}, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		ctx := cmd.Context()
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		if err := sb.Remove(ctx, args[1:]...); err != nil {
			return view{}, err
		}
		r := fileAction{SandboxID: args[0], Paths: args[1:], Status: "deleted"}
		return fileActionView(r, "deleted "+strings.Join(args[1:], " ")), nil
	})
}
