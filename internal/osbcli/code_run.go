package osbcli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) codeRunCommand() *cobra.Command {
	var language, contextID, saveImages string
	cmd := &cobra.Command{
		Use:   "run <sandbox-id> [file|-]",
		Short: "Run code from a file or stdin, streaming its output; exit 1 when it raises",
		Long: `Runs code in a context of a code-interpreter sandbox. The code comes from the
file, or from stdin when the file is absent or "-". stdout and stderr are
streamed as they come; results are printed as text, images as
"[image/png, N bytes]" (or written to --save-images DIR). When the code raises,
its traceback and "ename: evalue" go to stderr and osb exits 1.

Without --context the code runs in the default context of --language, which
keeps its state between calls like any other context.

-o json and yaml print the finished run as one document: {sandboxId,
context_id, execution_count, stdout, stderr, results (MIME bundles, images
base64), error, execution_time}; a raise still exits 1.`,
		Example: `  echo '2 + 2' | osb code run 3f2c9a1e-...
  osb code run 3f2c9a1e-... analysis.py --save-images ./plots
  ctx=$(osb code context create 3f2c9a1e-... -l python)
  echo 'x = 41' | osb code run 3f2c9a1e-... --context "$ctx"
  echo 'x + 1'  | osb code run 3f2c9a1e-... --context "$ctx"      # 42
  echo 'console.log(1 + 1)' | osb code run 3f2c9a1e-... -l javascript`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usagef("want <sandbox-id> [file|-]; got %d argument(s)", len(args))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&language, "language", "l", "python", "language of the default context: python, javascript or bash (ignored with --context)")
	f.StringVarP(&contextID, "context", "c", "", "context id to run in (from osb code context create)")
	f.StringVar(&saveImages, "save-images", "", "write image results into this directory instead of summarising them")
	return a.streams(cmd, formatTable, func(cmd *cobra.Command, args []string, format string) error {
		code, err := a.readCode(args[1:])
		if err != nil {
			return err
		}
		if saveImages != "" {
			if err := os.MkdirAll(saveImages, 0o755); err != nil {
				return fmt.Errorf("--save-images: %w", err)
			}
		}
		ci, err := a.codeInterpreter(cmd, args[0])
		if err != nil {
			return err
		}
		var (
			ctxID = contextID
			count int
			nres  int
			werr  error
		)
		h := &sandbox.CodeHandlers{
			OnInit:           func(id string) { ctxID = id },
			OnExecutionCount: func(n int) { count = n },
			OnStdout:         func(l sandbox.OutputLine) { io.WriteString(a.io.out, l.Text) },
			OnStderr:         func(l sandbox.OutputLine) { io.WriteString(a.io.err, l.Text) },
			OnResult: func(r sandbox.Result) {
				nres++
				if err := a.printResult(r, saveImages, fmt.Sprintf("%s-%d-%d", safeName(ctxID), count, nres)); err != nil && werr == nil {
					werr = err
				}
			},
		}
		if structured(format) {
			// The output comes at the end, as one document.
			h.OnStdout, h.OnStderr = nil, nil
			h.OnResult = func(r sandbox.Result) {
				nres++
				if err := a.saveImage(r, saveImages, fmt.Sprintf("%s-%d-%d", safeName(ctxID), count, nres)); err != nil && werr == nil {
					werr = err
				}
			}
		}
		ex, err := ci.Run(cmd.Context(), code, sandbox.CodeRunOptions{ContextID: contextID, Language: language, Handlers: h})
		if err != nil {
			return err
		}
		if werr != nil {
			return werr
		}
		if structured(format) {
			if err := render(a.io.out, format, view{data: newCodeResult(args[0], ex)}); err != nil {
				return err
			}
			if ex.Error != nil {
				return exitCodeError(1)
			}
			return nil
		}
		if ex.Error != nil {
			writeCodeError(a.io.err, *ex.Error, a.settings.Color && a.stderrIsTerminal())
			return exitCodeError(1)
		}
		return nil
	})
}

// codeResult is a finished code run as json and yaml print it, in
// execd's names; results are the MIME bundles (images base64).
type codeResult struct {
	SandboxID      string               `json:"sandboxId"`
	ContextID      string               `json:"context_id"`
	ExecutionCount int                  `json:"execution_count,omitempty"`
	Stdout         string               `json:"stdout"`
	Stderr         string               `json:"stderr"`
	Results        []map[string]any     `json:"results"`
	Error          *sandbox.StreamError `json:"error,omitempty"`
	ExecutionTime  int64                `json:"execution_time,omitempty"` // milliseconds
}

func newCodeResult(sandboxID string, ex *sandbox.CodeExecution) codeResult {
	r := codeResult{
		SandboxID: sandboxID, ContextID: ex.ContextID, ExecutionCount: ex.ExecutionCount,
		Results: []map[string]any{}, Error: ex.Error, ExecutionTime: ex.Elapsed.Milliseconds(),
	}
	var out, errb strings.Builder
	for _, l := range ex.Stdout {
		out.WriteString(l.Text)
	}
	for _, l := range ex.Stderr {
		errb.WriteString(l.Text)
	}
	r.Stdout, r.Stderr = out.String(), errb.String()
	for _, res := range ex.Results {
		r.Results = append(r.Results, res.Data)
	}
	return r
}

// saveImage writes a PNG result into dir as name.png; without dir, or
// for other results, it does nothing.
func (a *app) saveImage(r sandbox.Result, dir, name string) error {
	png, ok := r.PNG()
	if !ok || dir == "" {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		return fmt.Errorf("save image: %w", err)
	}
	return nil
}

// readCode reads the code from the file named in args, or from stdin when
// there is none or it is "-".
func (a *app) readCode(args []string) (string, error) {
	var (
		b   []byte
		err error
	)
	if len(args) == 0 || args[0] == "-" {
		b, err = io.ReadAll(a.io.in)
		if err != nil {
			return "", fmt.Errorf("read code from stdin: %w", err)
		}
	} else if b, err = os.ReadFile(args[0]); err != nil {
		return "", fmt.Errorf("read code: %w", err)
	}
	if strings.TrimSpace(string(b)) == "" {
		return "", usagef("no code to run (empty input)")
	}
	return string(b), nil
}

// printResult prints one result: a PNG image as a summary line (or into
// dir as name.png), anything else as its text, or its MIME types when it
// has no text.
func (a *app) printResult(r sandbox.Result, dir, name string) error {
	if png, ok := r.PNG(); ok {
		if dir == "" {
			fmt.Fprintf(a.io.out, "[image/png, %d bytes]\n", len(png))
			return nil
		}
		path := filepath.Join(dir, name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			return fmt.Errorf("save image: %w", err)
		}
		fmt.Fprintf(a.io.out, "[image/png, %d bytes: %s]\n", len(png), path)
		return nil
	}
	if text := r.Text(); text != "" {
		fmt.Fprintln(a.io.out, strings.TrimSuffix(text, "\n"))
		return nil
	}
	if types := r.MIMETypes(); len(types) > 0 {
		fmt.Fprintf(a.io.out, "[%s]\n", strings.Join(types, ", "))
	}
	return nil
}

// safeName keeps a context id usable as a file name.
func safeName(s string) string {
	if s == "" {
		return "result"
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

func (a *app) codeInterruptCommand() *cobra.Command {
	return a.result(&cobra.Command{
		Use:     "interrupt <sandbox-id> <context-id>",
		Short:   "Interrupt the code running in a context (the context keeps its state)",
		Example: `  osb code interrupt 3f2c9a1e-... "$ctx" [-o json]`,
		Args:    exactArgs(2, "<sandbox-id> <context-id>"),
	}, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		ci, err := a.codeInterpreter(cmd, args[0])
		if err != nil {
			return view{}, err
		}
		if err := ci.Interrupt(cmd.Context(), args[1]); err != nil {
			return view{}, err
		}
		return actionView(commandAction{SandboxID: args[0], ID: args[1], Status: "interrupted"}, args[1]), nil
	})
}
