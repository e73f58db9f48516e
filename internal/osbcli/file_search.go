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
	out := outputFlag(cmd, formatTable, formatJSON, formatYAML, formatRaw)
	cmd.Flags().StringVarP(&pattern, "pattern", "p", "", "glob pattern (required)")
	_ = cmd.MarkFlagRequired("pattern")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return notFoundHint(err, args[0])
		}
		files, err := sb.Search(ctx, args[1], pattern)
		if err != nil {
			return err
		}
		return render(a.io.out, *out, filesView(files))
	}
	return cmd
}
