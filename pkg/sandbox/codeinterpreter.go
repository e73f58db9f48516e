package sandbox

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// DefaultCodeInterpreterImage is the image CreateCodeInterpreter uses when
// CreateOptions names neither an image nor a snapshot: Python 3 with
// ipykernel, numpy, pandas and matplotlib, Node.js, a JDK and Go. Build it
// with `bash images/build.sh code-interpreter`.
const DefaultCodeInterpreterImage = "opensandbox/code-interpreter:latest"

// DefaultCodeInterpreterEntrypoint is the entrypoint CreateCodeInterpreter
// uses when CreateOptions.Entrypoint is empty.
var DefaultCodeInterpreterEntrypoint = []string{"/opt/opensandbox/code-interpreter.sh"}

// defaultCodeInterpreterTimeout is the sandbox lifetime CreateCodeInterpreter
// asks for when CreateOptions.Timeout is zero.
const defaultCodeInterpreterTimeout = 15 * time.Minute

// defaultCodeLanguage is the language Run uses without a context id or a
// language.
const defaultCodeLanguage = "python"

// CodeInterpreter runs code in stateful interpreter contexts (Jupyter-style
// kernels) inside a sandbox, through execd's /code endpoints. It embeds the
// live Sandbox, so commands, files and lifecycle calls work on it as well.
// It is safe for concurrent use; runs in one context are serialised by the
// kernel.
type CodeInterpreter struct {
	*Sandbox
}

// NewCodeInterpreter wraps a sandbox handle whose image serves /code (such
// as DefaultCodeInterpreterImage).
func NewCodeInterpreter(sb *Sandbox) *CodeInterpreter { return &CodeInterpreter{Sandbox: sb} }

// CreateCodeInterpreter creates a sandbox for running code and waits until
// it is ready, like Create. Defaults differ from Create's: Image is
// DefaultCodeInterpreterImage (unless SnapshotID is set), Entrypoint is
// DefaultCodeInterpreterEntrypoint and Timeout is 15m.
func (c *Client) CreateCodeInterpreter(ctx context.Context, opts CreateOptions) (*CodeInterpreter, error) {
	if opts.Image == "" && opts.SnapshotID == "" {
		opts.Image = DefaultCodeInterpreterImage
	}
	if len(opts.Entrypoint) == 0 {
		opts.Entrypoint = slices.Clone(DefaultCodeInterpreterEntrypoint)
	}
	if opts.Timeout == 0 {
		opts.Timeout = defaultCodeInterpreterTimeout
	}
	sb, err := c.Create(ctx, opts)
	if err != nil {
		return nil, err
	}
	return NewCodeInterpreter(sb), nil
}

// CreateContext starts a new context (a fresh interpreter) for language
// ("python", "javascript", "typescript", "bash", "java" or "go" in
// DefaultCodeInterpreterImage), working in cwd ("" for execd's default),
// and returns it with its id once its interpreter has started.
func (ci *CodeInterpreter) CreateContext(ctx context.Context, language, cwd string) (CodeContext, error) {
	if language == "" {
		return CodeContext{}, errors.New("opensandbox: create code context: language is required")
	}
	cl := ci.execdCall(http.MethodPost, "/code/context")
	cl.body = CodeContext{Language: language, Cwd: cwd}
	var out CodeContext
	_, err := ci.c.do(ctx, cl, &out)
	return out, wrap(err, "create %s code context", language)
}

// GetContext returns context id; an unknown id is an *APIError for which
// IsNotFound is true.
func (ci *CodeInterpreter) GetContext(ctx context.Context, id string) (CodeContext, error) {
	var out CodeContext
	_, err := ci.c.do(ctx, ci.execdCall(http.MethodGet, "/code/contexts/"+url.PathEscape(id)), &out)
	return out, wrap(err, "get code context %s", id)
}

// ListContexts returns the contexts of language, or of every language when
// language is "". The slice is empty, not nil, when there are none.
func (ci *CodeInterpreter) ListContexts(ctx context.Context, language string) ([]CodeContext, error) {
	cl := ci.execdCall(http.MethodGet, "/code/contexts")
	if language != "" {
		cl.query = url.Values{"language": {language}}
	}
	var out []CodeContext
	if _, err := ci.c.do(ctx, cl, &out); err != nil {
		return nil, wrap(err, "list code contexts")
	}
	if out == nil {
		out = []CodeContext{}
	}
	return out, nil
}

// DeleteContext stops context id and frees its interpreter.
func (ci *CodeInterpreter) DeleteContext(ctx context.Context, id string) error {
	_, err := ci.c.do(ctx, ci.execdCall(http.MethodDelete, "/code/contexts/"+url.PathEscape(id)), nil)
	return wrap(err, "delete code context %s", id)
}

// DeleteContexts stops every context of language (required).
func (ci *CodeInterpreter) DeleteContexts(ctx context.Context, language string) error {
	if language == "" {
		return errors.New("opensandbox: delete code contexts: language is required")
	}
	cl := ci.execdCall(http.MethodDelete, "/code/contexts")
	cl.query = url.Values{"language": {language}}
	_, err := ci.c.do(ctx, cl, nil)
	return wrap(err, "delete %s code contexts", language)
}

// Interrupt interrupts the execution running in context contextID (a
// KeyboardInterrupt in Python); the run's stream then ends with an error
// and the context keeps its state.
func (ci *CodeInterpreter) Interrupt(ctx context.Context, contextID string) error {
	cl := ci.execdCall(http.MethodDelete, "/code")
	cl.query = url.Values{"id": {contextID}}
	_, err := ci.c.do(ctx, cl, nil)
	return wrap(err, "interrupt code context %s", contextID)
}

// CodeHandlers receive the events of a code run as they arrive, in order,
// on the goroutine that called Run. Nil fields are skipped.
type CodeHandlers struct {
	// OnInit receives the id of the context the code runs in.
	OnInit func(contextID string)
	// OnExecutionCount receives the cell number of the run in its context.
	OnExecutionCount func(int)
	// OnStdout and OnStderr receive output chunks as the interpreter
	// flushes them: raw text, not split into lines, newlines included.
	OnStdout, OnStderr func(OutputLine)
	// OnResult receives each rich result (the value of the last
	// expression, a displayed plot ...).
	OnResult func(Result)
	// OnError receives the error the code raised (or the kernel's death,
	// or an interrupt).
	OnError func(StreamError)
	// OnComplete receives execd's measure of the run time.
	OnComplete func(time.Duration)
}

// Result is one rich result of a run: its representations by MIME type, as
// a Jupyter kernel gives them, except that "text/plain" is under "text".
// Binary types such as "image/png" are base64 strings.
type Result struct {
	Data      map[string]any
	Timestamp time.Time
}

// Text returns the plain-text representation ("" when there is none).
func (r Result) Text() string {
	for _, k := range []string{"text", "text/plain"} {
		if s, ok := r.Data[k].(string); ok {
			return s
		}
	}
	return ""
}

// PNG returns the decoded "image/png" representation, and whether there
// was a valid one.
func (r Result) PNG() ([]byte, bool) {
	s, ok := r.Data["image/png"].(string)
	if !ok {
		return nil, false
	}
	s = strings.Map(func(c rune) rune {
		if c == '\n' || c == '\r' || c == ' ' || c == '\t' {
			return -1
		}
		return c
	}, s)
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, false
	}
	return b, true
}

// MIMETypes returns the MIME types the result holds, sorted; the "text"
// key is reported as "text/plain".
func (r Result) MIMETypes() []string {
	out := make([]string, 0, len(r.Data))
	for k := range r.Data {
		if k == "text" {
			k = "text/plain"
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// CodeRunOptions configure CodeInterpreter.Run. The zero value runs Python
// in the default Python context.
type CodeRunOptions struct {
	// ContextID runs the code in that context (see CreateContext); its
	// state carries over between runs.
	ContextID string
	// Language selects the language's default context when ContextID is
	// empty. Default "python".
	Language string
	// Handlers receive events as they arrive.
	Handlers *CodeHandlers
}

// CodeExecution is what a code run produced.
type CodeExecution struct {
	// ContextID is the context the code ran in.
	ContextID string
	// ExecutionCount is the cell number of the run in its context.
	ExecutionCount int
	// Stdout and Stderr hold the output chunks as they came (raw text,
	// newlines included).
	Stdout, Stderr []OutputLine
	// Results holds the rich results in order.
	Results []Result
	// Error is set when the code raised, was interrupted or killed its
	// interpreter.
	Error *StreamError
	// Elapsed is execd's measure of the run time.
	Elapsed time.Duration
}

// Text returns the text of the last result that has one, or else stdout
// (its chunks concatenated).
func (e *CodeExecution) Text() string {
	for i := len(e.Results) - 1; i >= 0; i-- {
		if t := e.Results[i].Text(); t != "" {
			return t
		}
	}
	return joinChunks(e.Stdout)
}

// StdoutText returns the stdout chunks concatenated.
func (e *CodeExecution) StdoutText() string { return joinChunks(e.Stdout) }

// StderrText returns the stderr chunks concatenated.
func (e *CodeExecution) StderrText() string { return joinChunks(e.Stderr) }

func joinChunks(ls []OutputLine) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.Text)
	}
	return b.String()
}

// Run runs code and streams its events into the returned CodeExecution and
// opts.Handlers. err reports only transport and API failures (an *APIError
// for a rejected request, e.g. an unknown context); code that raises is a
// nil err with CodeExecution.Error set. Cancelling ctx closes the stream
// and interrupts the context (best effort); Run then returns what was
// received so far and ctx's error.
func (ci *CodeInterpreter) Run(ctx context.Context, code string, opts CodeRunOptions) (*CodeExecution, error) {
	cc := &CodeContext{ID: opts.ContextID, Language: opts.Language}
	if cc.ID == "" && cc.Language == "" {
		cc.Language = defaultCodeLanguage
	}
	cl := ci.execdCall(http.MethodPost, "/code")
	cl.body = RunCodeRequest{Context: cc, Code: code}
	ex, err := ci.runCodeStream(ctx, cl, opts.Handlers)
	if err != nil && ctx.Err() != nil {
		id := opts.ContextID
		if ex != nil && ex.ContextID != "" {
			id = ex.ContextID
		}
		if id != "" {
			ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			ci.Interrupt(ictx, id)
			cancel()
		}
	}
	return ex, wrap(err, "run code")
}

// runCodeStream sends a /code call and decodes its events. The stream ends
// with execution_complete, or after an error event when the server closes
// it.
func (ci *CodeInterpreter) runCodeStream(ctx context.Context, cl *call, h *CodeHandlers) (*CodeExecution, error) {
	cl.stream = true
	cl.header.Set("Accept", "text/event-stream")
	resp, err := ci.c.send(ctx, cl)
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	if h == nil {
		h = &CodeHandlers{}
	}
	ex := &CodeExecution{}
	er := NewEventReader(resp.Body)
	for {
		ev, err := er.Next()
		if errors.Is(err, io.EOF) {
			if ex.Error != nil {
				return ex, nil
			}
			return ex, fmt.Errorf("code execution stream ended without completion: %w", io.ErrUnexpectedEOF)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ex, ctx.Err()
			}
			return ex, err
		}
		ts := time.UnixMilli(ev.Timestamp)
		switch ev.Type {
		case EventInit:
			ex.ContextID = ev.Text
			if h.OnInit != nil {
				h.OnInit(ev.Text)
			}
		case EventExecutionCount:
			ex.ExecutionCount = ev.ExecutionCount
			if h.OnExecutionCount != nil {
				h.OnExecutionCount(ev.ExecutionCount)
			}
		case EventStdout:
			l := OutputLine{Text: ev.Text, Timestamp: ts}
			ex.Stdout = append(ex.Stdout, l)
			if h.OnStdout != nil {
				h.OnStdout(l)
			}
		case EventStderr:
			l := OutputLine{Text: ev.Text, Timestamp: ts}
			ex.Stderr = append(ex.Stderr, l)
			if h.OnStderr != nil {
				h.OnStderr(l)
			}
		case EventResult:
			r := Result{Data: ev.Results, Timestamp: ts}
			if r.Data == nil {
				r.Data = map[string]any{}
			}
			ex.Results = append(ex.Results, r)
			if h.OnResult != nil {
				h.OnResult(r)
			}
		case EventError:
			se := StreamError{Name: "UnknownError"}
			if ev.Error != nil {
				se = *ev.Error
			}
			ex.Error = &se
			if h.OnError != nil {
				h.OnError(se)
			}
		case EventExecutionComplete:
			ex.Elapsed = time.Duration(ev.ExecutionTime) * time.Millisecond
			if h.OnComplete != nil {
				h.OnComplete(ex.Elapsed)
			}
			return ex, nil
		}
		// status, ping and unknown event types are ignored.
	}
}
