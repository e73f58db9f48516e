package osbcli

import (
	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) commandSessionCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Persistent bash sessions: state (cwd, variables) carries over between runs",
	}
	cmd.AddCommand(a.sessionCreateCommand(), a.sessionRunCommand(), a.sessionDeleteCommand())
	return cmd
}

func (a *app) sessionCreateCommand() *cobra.Command {
	var workdir string
	cmd := &cobra.Command{
		Use:     "create <sandbox-id>",
		Short:   "Start a bash session and print its id",
		Example: `  sid=$(osb command session create 3f2c9a1e-... -w /tmp)`,
		Args:    exactArgs(1, "<sandbox-id>"),
	}
	cmd.Flags().StringVarP(&workdir, "workdir", "w", "", "working directory of the session")
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		ctx := cmd.Context()
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		sid, err := sb.CreateSession(ctx, workdir)
		if err != nil {
			return view{}, err
		}
		data := map[string]string{"sandboxId": args[0], "session_id": sid}
		return view{data: data, table: func(t *tableWriter) { t.row(sid) }}, nil
	})
}

func (a *app) sessionRunCommand() *cobra.Command {
	var workdir, timeout string
	cmd := &cobra.Command{
		Use:   "run <sandbox-id> <session-id> -- <command>...",
		Short: "Run a command in a session, streaming its output",
		Long: `Runs a command in a session, streaming its stdout and stderr; osb exits with
its exit code. -o json and yaml print the finished run as one document
instead: {sandboxId, session_id, exit_code, stdout, stderr, error}.`,
		Example: `  osb command session run 3f2c9a1e-... $sid -- 'export X=1; cd /etc'
  osb command session run 3f2c9a1e-... $sid -- 'echo $X; pwd'`,
		Args: minArgs(3, "<sandbox-id> <session-id> -- <command>..."),
	}
	cmd.Flags().StringVarP(&workdir, "workdir", "w", "", "working directory for this command")
	cmd.Flags().StringVarP(&timeout, "timeout", "t", "0", "kill it after this long, seconds or a duration (0 = none)")
	return a.streams(cmd, formatTable, func(cmd *cobra.Command, args []string, format string) error {
		ctx := cmd.Context()
		d, err := parseDurationFlag("timeout", timeout)
		if err != nil {
			return err
		}
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return notFoundHint(err, args[0])
		}
		opts := sandbox.SessionRunOptions{Cwd: workdir, Timeout: d}
		if !structured(format) {
			opts.Handlers = streamHandlers(a.io.out, a.io.err, nil)
		}
		ex, err := sb.RunInSession(ctx, args[1], shellJoin(args[2:]), opts)
		if err != nil {
			return err
		}
		if structured(format) {
			if err := render(a.io.out, format, view{data: newRunResult(args[0], ex, true)}); err != nil {
				return err
			}
		}
		return executionResult(ex)
	})
}

func (a *app) sessionDeleteCommand() *cobra.Command {
	return a.result(&cobra.Command{
		Use:     "delete <sandbox-id> <session-id>",
		Short:   "End a session",
		Example: `  osb command session delete 3f2c9a1e-... $sid [-o json]`,
		Args:    exactArgs(2, "<sandbox-id> <session-id>"),
	}, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		ctx := cmd.Context()
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		if err := sb.DeleteSession(ctx, args[1]); err != nil {
			return view{}, err
		}
		data := map[string]string{"sandboxId": args[0], "session_id": args[1], "status": "deleted"}
		return actionView(data, args[1]), nil
	})
}
