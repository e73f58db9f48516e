package osbcli

import (
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// codeCommand is `osb code`: running code in interpreter contexts of a
// code-interpreter sandbox.
func (a *app) codeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "code",
		Short: "Run code in stateful interpreter contexts (Python, JavaScript, Bash ...)",
		Long: `Runs code in the interpreter contexts of a sandbox made from a code-interpreter
image (opensandbox/code-interpreter:latest). A context keeps its state (variables,
imports) between runs; without --context, code runs in the language's default
context. See docs/code-interpreter.md.`,
	}
	cmd.AddCommand(a.codeRunCommand(), a.codeInterruptCommand(), a.codeContextCommand())
	return cmd
}

// codeInterpreter connects to sandbox id and wraps it for /code calls.
func (a *app) codeInterpreter(cmd *cobra.Command, id string) (*sandbox.CodeInterpreter, error) {
	sb, err := a.connect(cmd.Context(), id)
	if err != nil {
		return nil, notFoundHint(err, id)
	}
	return sandbox.NewCodeInterpreter(sb), nil
}

// ansiEscape matches the colour sequences IPython puts in tracebacks.
var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

// writeCodeError prints a code error the way an interpreter would: the
// traceback, then "ename: evalue" when the traceback does not end with it.
// Colour is kept only when color is set.
func writeCodeError(w io.Writer, e sandbox.StreamError, color bool) {
	clean := func(s string) string {
		if color {
			return s
		}
		return ansiEscape.ReplaceAllString(s, "")
	}
	summary := strings.TrimPrefix(e.Name+": "+e.Value, ": ")
	last := ""
	for _, line := range e.Traceback {
		text := strings.TrimRight(clean(line), "\n")
		fmt.Fprintln(w, text)
		if text != "" {
			last = text
		}
	}
	if !strings.Contains(last, summary) {
		fmt.Fprintln(w, summary)
	}
}
