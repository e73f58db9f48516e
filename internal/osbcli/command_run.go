package osbcli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) commandRunCommand() *cobra.Command {
	var (
		background bool
		workdir    string
		timeout    string
		env        []string
	)
	cmd := &cobra.Command{
		Use:   "run <sandbox-id> -- <command>...",
		Short: "Run a command, streaming its output; osb exits with its exit code",
		Long: `Runs a command in a sandbox. Its stdout and stderr are streamed to osb's stdout
and stderr as they come, and osb exits with the command's exit code.

One word after -- is a shell command line as is ('ls | wc -l'); several words
are quoted so each reaches the program as one argument.

-o json and yaml print the finished run as one document instead: {sandboxId,
id, exit_code, stdout, stderr, error, execution_time}; osb still exits with
the command's exit code. With -d they print {id, sandboxId}.`,
		Example: `  osb command run 3f2c9a1e-... -- ls -la /
  osb command run 3f2c9a1e-... -- 'cd /tmp && make test'
  osb command run -d 3f2c9a1e-... -- python3 -m http.server 8080   # prints the command id`,
		Args: minArgs(2, "<sandbox-id> -- <command>..."),
	}
	f := cmd.Flags()
	f.BoolVarP(&background, "background", "d", false, "start it in the background and print its id")
	f.StringVarP(&workdir, "workdir", "w", "", "working directory")
	f.StringVarP(&timeout, "timeout", "t", "0", "kill it after this long, seconds or a duration (0 = none)")
	f.StringArrayVarP(&env, "env", "e", nil, "environment variable KEY=VALUE (repeatable)")
	return a.streams(cmd, formatTable, func(cmd *cobra.Command, args []string, format string) error {
		ctx := cmd.Context()
		d, err := parseDurationFlag("timeout", timeout)
		if err != nil {
			return err
		}
		envs, err := parsePairs("env", env)
		if err != nil {
			return err
		}
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return notFoundHint(err, args[0])
		}
		command := shellJoin(args[1:])
		opts := sandbox.RunOptions{Cwd: workdir, Env: envs, Timeout: d, Background: background}
		collect := structured(format) && !background
		if !background && !collect {
			opts.Handlers = streamHandlers(a.io.out, a.io.err, nil)
			opts.DiscardOutput = true
		}
		ex, err := sb.Run(ctx, command, opts)
		if err != nil {
			return err
		}
		if background {
			data := map[string]string{"id": ex.ID, "sandboxId": args[0]}
			return render(a.io.out, format, view{data: data, table: func(t *tableWriter) { t.row(ex.ID) }})
		}
		if collect {
			if err := render(a.io.out, format, view{data: newRunResult(args[0], ex, false)}); err != nil {
				return err
			}
		}
		return executionResult(ex)
	})
}

// runResult is a finished foreground run as json and yaml print it:
// execd's names for the run, its whole output and exit code. osb still
// exits with the remote exit code.
type runResult struct {
	SandboxID     string               `json:"sandboxId"`
	ID            string               `json:"id,omitempty"`
	SessionID     string               `json:"session_id,omitempty"`
	ExitCode      int                  `json:"exit_code"`
	Stdout        string               `json:"stdout"`
	Stderr        string               `json:"stderr"`
	Error         *sandbox.StreamError `json:"error,omitempty"`
	ExecutionTime int64                `json:"execution_time,omitempty"` // milliseconds
}

func newRunResult(sandboxID string, ex *sandbox.Execution, session bool) runResult {
	r := runResult{
		SandboxID: sandboxID, ExitCode: ex.ExitCode, Error: ex.Error,
		Stdout: joinLines(ex.Stdout), Stderr: joinLines(ex.Stderr),
		ExecutionTime: ex.Elapsed.Milliseconds(),
	}
	if session {
		r.SessionID = ex.ID
	} else {
		r.ID = ex.ID
	}
	return r
}

// joinLines is the text streamHandlers would have printed.
func joinLines(lines []sandbox.OutputLine) string {
	var b strings.Builder
	for _, l := range lines {
		writeLine(&b, l.Text)
	}
	return b.String()
}
