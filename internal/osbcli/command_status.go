package osbcli

import (
	"strconv"

	"github.com/spf13/cobra"
)

func (a *app) commandStatusCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "status <sandbox-id> <command-id>",
		Short:   "Show whether a background command runs, and its exit code",
		Example: `  osb command status 3f2c9a1e-... 1a2b3c -o json`,
		Args:    exactArgs(2, "<sandbox-id> <command-id>"),
	}
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		ctx := cmd.Context()
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		st, err := sb.CommandStatus(ctx, args[1])
		if err != nil {
			return view{}, err
		}
		return view{data: st, table: func(t *tableWriter) {
			t.row("ID", st.ID)
			t.row("COMMAND", dash(st.Content))
			t.row("RUNNING", strconv.FormatBool(st.Running))
			code := "-"
			if st.ExitCode != nil {
				code = strconv.Itoa(*st.ExitCode)
			}
			t.row("EXIT CODE", code)
			if st.Error != "" {
				t.row("ERROR", st.Error)
			}
			t.row("STARTED", fmtTime(&st.StartedAt))
			t.row("FINISHED", fmtTime(st.FinishedAt))
		}}, nil
	})
}
