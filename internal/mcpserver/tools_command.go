package mcpserver

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// RunIn is the input of command_run.
type RunIn struct {
	SandboxID        string `json:"sandbox_id" jsonschema:"sandbox id"`
	Command          string `json:"command" jsonschema:"shell command line, run with bash -c (sh -c where the image has no bash)"`
	Background       bool   `json:"background,omitempty" jsonschema:"start the command and return at once with its execution_id instead of waiting"`
	WorkingDirectory string `json:"working_directory,omitempty" jsonschema:"directory to run in (default: the sandbox's working directory)"`
	TimeoutSeconds   int    `json:"timeout_seconds,omitempty" jsonschema:"kill the command after this many seconds (0 = no limit)"`
	ConnectIfMissing bool   `json:"connect_if_missing,omitempty" jsonschema:"connect to the sandbox first when this server is not connected to it yet"`
}

var runDefaults = map[string]any{"background": false}

func (in *RunIn) validate() error {
	if in.SandboxID == "" {
		return errMissing("sandbox_id")
	}
	if strings.TrimSpace(in.Command) == "" {
		return errMissing("command")
	}
	if in.TimeoutSeconds < 0 {
		return fmt.Errorf("timeout_seconds must not be negative, got %d", in.TimeoutSeconds)
	}
	return nil
}

// RunOut is the reply of command_run.
type RunOut struct {
	ExecutionID     string `json:"execution_id" jsonschema:"id of the execution, for command_interrupt"`
	Stdout          string `json:"stdout" jsonschema:"standard output (capped; a note marks what was cut)"`
	Stderr          string `json:"stderr" jsonschema:"standard error (capped; a note marks what was cut)"`
	ExitCode        *int   `json:"exit_code,omitempty" jsonschema:"exit status; absent for a background command"`
	Error           string `json:"error,omitempty" jsonschema:"why the command failed when that is more than its exit status (start failure, timeout, signal)"`
	Background      bool   `json:"background" jsonschema:"true: the command was started in the background and may still be running"`
	ElapsedMS       int64  `json:"elapsed_ms" jsonschema:"run time in milliseconds"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty" jsonschema:"part of stdout was cut"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty" jsonschema:"part of stderr was cut"`
}

// lineText is the text of one output line as it goes into the reply: the
// SDK hands over lines without their terminator.
func lineText(l sandbox.OutputLine) string { return l.Text + "\n" }

func (t *tools) commandRun(ctx context.Context, in RunIn) (RunOut, error) {
	if err := in.validate(); err != nil {
		return RunOut{}, err
	}
	sb, err := t.reg.get(ctx, in.SandboxID, in.ConnectIfMissing)
	if err != nil {
		return RunOut{}, err
	}
	stdout, stderr := newCappedText(t.cfg.OutputLimit), newCappedText(t.cfg.OutputLimit)
	ex, err := sb.Run(ctx, in.Command, sandbox.RunOptions{
		Cwd:           in.WorkingDirectory,
		Timeout:       seconds(in.TimeoutSeconds),
		Background:    in.Background,
		DiscardOutput: true,
		Handlers: &sandbox.Handlers{
			OnStdout: func(l sandbox.OutputLine) { stdout.WriteString(lineText(l)) },
			OnStderr: func(l sandbox.OutputLine) { stderr.WriteString(lineText(l)) },
		},
	})
	if err != nil {
		return RunOut{}, fmt.Errorf("run command in sandbox %s: %w", in.SandboxID, err)
	}
	out := RunOut{
		ExecutionID:     ex.ID,
		Stdout:          stdout.String(),
		Stderr:          stderr.String(),
		Background:      in.Background,
		ElapsedMS:       ex.Elapsed.Milliseconds(),
		StdoutTruncated: stdout.Truncated(),
		StderrTruncated: stderr.Truncated(),
	}
	if !in.Background {
		code := ex.ExitCode
		out.ExitCode = &code
		if e := ex.Error; e != nil && e.Value != strconv.Itoa(code) {
			out.Error = strings.TrimPrefix(e.Name+": "+e.Value, ": ")
		}
	}
	return out, nil
}

// InterruptIn is the input of command_interrupt.
type InterruptIn struct {
	SandboxID        string `json:"sandbox_id" jsonschema:"sandbox id"`
	ExecutionID      string `json:"execution_id" jsonschema:"execution_id returned by command_run"`
	ConnectIfMissing bool   `json:"connect_if_missing,omitempty" jsonschema:"connect to the sandbox first when this server is not connected to it yet"`
}

// InterruptOut is the reply of command_interrupt.
type InterruptOut struct {
	SandboxID   string `json:"sandbox_id" jsonschema:"sandbox id"`
	ExecutionID string `json:"execution_id" jsonschema:"the interrupted execution"`
	Interrupted bool   `json:"interrupted" jsonschema:"true: the command was sent an interrupt"`
}

func (t *tools) commandInterrupt(ctx context.Context, in InterruptIn) (InterruptOut, error) {
	if in.ExecutionID == "" {
		return InterruptOut{}, errMissing("execution_id")
	}
	sb, err := t.reg.get(ctx, in.SandboxID, in.ConnectIfMissing)
	if err != nil {
		return InterruptOut{}, err
	}
	if err := sb.Interrupt(ctx, in.ExecutionID); err != nil {
		return InterruptOut{}, fmt.Errorf("interrupt %s in sandbox %s: %w", in.ExecutionID, in.SandboxID, err)
	}
	return InterruptOut{SandboxID: in.SandboxID, ExecutionID: in.ExecutionID, Interrupted: true}, nil
}
