package osbcli

import (
	"github.com/spf13/cobra"
)

func (a *app) fileSearchCommand() *cobra.Command {
	var pattern string
	cmd := &cobra.Command{
		Use:     "search <sandbox-id> <dir>",
		Short:   "Find files under a directory whose names match a glob",
		Example: `  osb file search 3f2c9a1e-... /work -p '*.py'`,
		Args:    exactArgs(2, "<sandbox-id> <dir>"),
	}
	cmd.Flags().StringVarP(&pattern, "pattern", "p", "", "glob pattern (required)")
	_ = cmd.MarkFlagRequired("pattern")
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		ctx := cmd.Context()
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		files, err := sb.Search(ctx, args[1], pattern)
		if err != nil {
			return view{}, err
		}
		return filesView(files), nil
	})
}
