package osbcli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) fileReplaceCommand() *cobra.Command {
	var old, repl string
	cmd := &cobra.Command{
		Use:     "replace <sandbox-id> <path>",
		Short:   "Replace every occurrence of a string in a file",
		Example: `  osb file replace 3f2c9a1e-... /etc/app.conf --old 'debug=false' --new 'debug=true'`,
		Args:    exactArgs(2, "<sandbox-id> <path>"),
	}
	cmd.Flags().StringVar(&old, "old", "", "text to replace (required)")
	cmd.Flags().StringVar(&repl, "new", "", "replacement text")
	_ = cmd.MarkFlagRequired("old")
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		ctx := cmd.Context()
		if old == "" {
			return view{}, usagef("--old must not be empty")
		}
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		n, err := sb.Replace(ctx, args[1], old, repl)
		if err != nil {
			return view{}, err
		}
		data := map[string]any{"sandboxId": args[0], "path": args[1], "replacedCount": n}
		return view{data: data, table: func(t *tableWriter) {
			t.row(fmt.Sprintf("%d replaced", n))
		}}, nil
	})
}
