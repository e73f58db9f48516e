package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Handlers receive the events of a command or session run as they arrive,
// in order, on the goroutine that called Run. Nil fields are skipped.
type Handlers struct {
	OnInit     func(id string)
	OnStdout   func(OutputLine)
	OnStderr   func(OutputLine)
	OnComplete func(elapsed time.Duration) // the run exited 0
	OnError    func(StreamError)           // the run failed (non-zero exit, start failure, timeout)
}

// OutputLine is one line of output, without its line terminator.
type OutputLine struct {
	Text      string
	Timestamp time.Time
}

// RunOptions configure Run. The zero value runs in execd's working
// directory with its environment, without a timeout, in the foreground.
type RunOptions struct {
	// Cwd is the working directory; "~" and "$VAR" are expanded.
	Cwd string
	// Env is added to the command's environment.
	Env map[string]string
	// Timeout kills the command's process group when it passes (the run then
	// fails with exit code 143 or 137); 0 means none.
	Timeout time.Duration
	// UID and GID run the command as that user (execd must be root); GID
	// needs UID.
	UID, GID *uint32
	// Background returns at once; the command keeps running. Read its
	// output with CommandLogs and its end with CommandStatus.
	Background bool
	// Handlers receive events as they arrive.
	Handlers *Handlers
	// DiscardOutput does not accumulate Stdout and Stderr in the Execution
	// (handlers still see every line).
	DiscardOutput bool
}

// Execution is the result of a command or session run.
type Execution struct {
	// ID is the command id (Run) or the session id (RunInSession).
	ID     string
	Stdout []OutputLine
	Stderr []OutputLine
	// ExitCode is 0 when the run completed, the error's evalue otherwise,
	// or -1 when that is not a number (e.g. the command could not start).
	ExitCode int
	// Error is set when the run failed: non-zero exit, start failure,
	// timeout or interrupt.
	Error *StreamError
	// Elapsed is execd's measure of the run time on success.
	Elapsed time.Duration
}

// Text returns the stdout lines joined with "\n".
func (e *Execution) Text() string {
	lines := make([]string, len(e.Stdout))
	for i, l := range e.Stdout {
		lines[i] = l.Text
	}
	return strings.Join(lines, "\n")
}

// Run runs command with the shell inside the sandbox and streams its events
// into the returned Execution and opts.Handlers. err reports only transport
// and API failures (an *APIError for a rejected request); a command that
// fails is a nil err with a non-zero Execution.ExitCode and Error.
// Cancelling ctx closes the stream, and execd then kills the command; Run
// then returns what was received so far and ctx's error.
func (s *Sandbox) Run(ctx context.Context, command string, opts RunOptions) (*Execution, error) {
	cl := s.execdCall(http.MethodPost, "/command")
	cl.body = RunCommandRequest{
		Command:    command,
		Cwd:        opts.Cwd,
		Background: opts.Background,
		Timeout:    opts.Timeout.Milliseconds(),
		UID:        opts.UID,
		GID:        opts.GID,
		Envs:       opts.Env,
	}
	ex, err := s.runStream(ctx, cl, opts.Handlers, opts.DiscardOutput)
	return ex, wrap(err, "run command")
}

// runStream sends a streaming call and decodes its execution events.
func (s *Sandbox) runStream(ctx context.Context, cl *call, h *Handlers, discard bool) (*Execution, error) {
	cl.stream = true
	cl.header.Set("Accept", "text/event-stream")
	resp, err := s.c.send(ctx, cl)
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	if h == nil {
		h = &Handlers{}
	}
	ex := &Execution{}
	er := NewEventReader(resp.Body)
	for {
		ev, err := er.Next()
		if errors.Is(err, io.EOF) {
			return ex, fmt.Errorf("execution stream ended without completion: %w", io.ErrUnexpectedEOF)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ex, ctx.Err()
			}
			return ex, err
		}
		switch ev.Type {
		case EventInit:
			ex.ID = ev.Text
			if h.OnInit != nil {
				h.OnInit(ev.Text)
			}
		case EventStdout, EventStderr:
			text := ev.Text
			if text == "\n" { // execd's form of an empty line
				text = ""
			}
			line := OutputLine{Text: text, Timestamp: time.UnixMilli(ev.Timestamp)}
			if ev.Type == EventStdout {
				if !discard {
					ex.Stdout = append(ex.Stdout, line)
				}
				if h.OnStdout != nil {
					h.OnStdout(line)
				}
			} else {
				if !discard {
					ex.Stderr = append(ex.Stderr, line)
				}
				if h.OnStderr != nil {
					h.OnStderr(line)
				}
			}
		case EventExecutionComplete:
			ex.ExitCode = 0
			ex.Elapsed = time.Duration(ev.ExecutionTime) * time.Millisecond
			if h.OnComplete != nil {
				h.OnComplete(ex.Elapsed)
			}
			return ex, nil
		case EventError:
			se := StreamError{Name: "UnknownError"}
			if ev.Error != nil {
				se = *ev.Error
			}
			ex.Error = &se
			ex.ExitCode = -1
			if n, err := strconv.Atoi(strings.TrimSpace(se.Value)); err == nil {
				ex.ExitCode = n
			}
			if h.OnError != nil {
				h.OnError(se)
			}
			return ex, nil
		}
		// ping and unknown event types are ignored.
	}
}

// CommandStatus returns the status of command id (foreground or
// background).
func (s *Sandbox) CommandStatus(ctx context.Context, id string) (CommandStatus, error) {
	var st CommandStatus
	_, err := s.c.do(ctx, s.execdCall(http.MethodGet, "/command/status/"+url.PathEscape(id)), &st)
	return st, wrap(err, "status of command %s", id)
}

// CommandLogs returns the combined output of command id from byte offset
// cursor (0 for the start; at most 4 MiB per call) and the cursor to pass
// next time.
func (s *Sandbox) CommandLogs(ctx context.Context, id string, cursor int64) (text string, next int64, err error) {
	cl := s.execdCall(http.MethodGet, "/command/"+url.PathEscape(id)+"/logs")
	cl.query = url.Values{"cursor": {strconv.FormatInt(cursor, 10)}}
	cl.header.Set("Accept", "text/plain")
	h, err := s.c.do(ctx, cl, &text)
	if err != nil {
		return "", cursor, wrap(err, "logs of command %s", id)
	}
	next = cursor + int64(len(text))
	if v := h.Get(CommandLogsCursorHeader); v != "" {
		if n, perr := strconv.ParseInt(v, 10, 64); perr == nil {
			next = n
		}
	}
	return text, next, nil
}

// Interrupt stops command id (SIGTERM to its process group, SIGKILL 3s
// later). A session id interrupts the session's current run. Interrupting a
// finished command succeeds.
func (s *Sandbox) Interrupt(ctx context.Context, id string) error {
	cl := s.execdCall(http.MethodDelete, "/command")
	cl.query = url.Values{"id": {id}}
	_, err := s.c.do(ctx, cl, nil)
	return wrap(err, "interrupt %s", id)
}
