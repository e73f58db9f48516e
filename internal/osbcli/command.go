package osbcli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) commandCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "command",
		Aliases: []string{"cmd"},
		Short:   "Run commands in a sandbox",
	}
	cmd.AddCommand(
		a.commandRunCommand(),
		a.commandStatusCommand(),
		a.commandLogsCommand(),
		a.commandInterruptCommand(),
		a.commandSessionCommand(),
	)
	return cmd
}

// execCommand is upstream's `osb exec`: command run at the top level.
func (a *app) execCommand() *cobra.Command {
	cmd := a.commandRunCommand()
	cmd.Use = "exec <sandbox-id> -- <command>..."
	cmd.Short = "Run a command (shortcut for osb command run)"
	cmd.Example = `  osb exec 3f2c9a1e-... -- echo "hello world"
  osb exec 3f2c9a1e-... -o json -- python3 -c 'print(1+1)'`
	return cmd
}

// shellJoin turns the words after "--" into one shell command: a single
// word is used as is (it may hold pipes and quotes), several are quoted
// so that each reaches the program as one argument.
func shellJoin(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// streamHandlers writes output lines to stdout and stderr as they come.
func streamHandlers(stdout, stderr io.Writer, onInit func(string)) *sandbox.Handlers {
	return &sandbox.Handlers{
		OnInit:   onInit,
		OnStdout: func(l sandbox.OutputLine) { writeLine(stdout, l.Text) },
		OnStderr: func(l sandbox.OutputLine) { writeLine(stderr, l.Text) },
	}
}

// writeLine prints one output line; execd sends an empty line as "\n".
func writeLine(w io.Writer, text string) {
	if text == "\n" {
		text = ""
	}
	fmt.Fprintln(w, text)
}

// executionResult maps a finished execution to osb's exit: the remote
// exit code when the command ran, an error when it could not start.
func executionResult(ex *sandbox.Execution) error {
	if ex.Error == nil {
		return nil
	}
	if ex.ExitCode > 0 {
		return exitCodeError(ex.ExitCode)
	}
	reason := ex.Error.Value
	if len(ex.Error.Traceback) > 0 {
		reason = strings.Join(ex.Error.Traceback, "; ")
	}
	return fmt.Errorf("command failed: %s", reason)
}
