package mcpserver

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// defaultCodeLanguage is the language of code_run and code_context_create
// when none is given.
const defaultCodeLanguage = "python"

// CodeRunIn is the input of code_run.
type CodeRunIn struct {
	SandboxID        string `json:"sandbox_id" jsonschema:"sandbox id (made from a code-interpreter image, e.g. opensandbox/code-interpreter:latest)"`
	Code             string `json:"code" jsonschema:"the code to run; state (variables, imports) carries over between runs in the same context"`
	Language         string `json:"language,omitempty" jsonschema:"python, javascript or bash; selects the language's default context when context_id is not given"`
	ContextID        string `json:"context_id,omitempty" jsonschema:"context to run in, from code_context_create or an earlier code_run (default: the language's default context)"`
	TimeoutSeconds   int    `json:"timeout_seconds,omitempty" jsonschema:"interrupt the code after this many seconds (0 = no limit); the context keeps its state"`
	ConnectIfMissing bool   `json:"connect_if_missing,omitempty" jsonschema:"connect to the sandbox first when this server is not connected to it yet"`
}

var codeRunDefaults = map[string]any{"language": defaultCodeLanguage, "connect_if_missing": false}

// CodeResultOut is one rich result of code_run.
type CodeResultOut struct {
	Text      string   `json:"text,omitempty" jsonschema:"plain-text form of the result (capped)"`
	MIMETypes []string `json:"mime_types" jsonschema:"MIME types the result has, e.g. text/plain, image/png, text/html"`
}

// CodeErrorOut is the error code_run's code raised.
type CodeErrorOut struct {
	Name      string   `json:"ename" jsonschema:"error name, e.g. NameError, KeyboardInterrupt, KernelDied"`
	Value     string   `json:"evalue" jsonschema:"error message"`
	Traceback []string `json:"traceback" jsonschema:"traceback lines, without colour codes"`
}

// CodeRunOut is the reply of code_run.
type CodeRunOut struct {
	ContextID       string          `json:"context_id" jsonschema:"the context the code ran in; pass it again to keep using its state"`
	ExecutionCount  int             `json:"execution_count" jsonschema:"cell number of this run in its context"`
	Stdout          string          `json:"stdout" jsonschema:"standard output (capped; a note marks what was cut)"`
	Stderr          string          `json:"stderr" jsonschema:"standard error (capped; a note marks what was cut)"`
	Results         []CodeResultOut `json:"results" jsonschema:"rich results in order: the value of the last expression, displayed figures ..."`
	Error           *CodeErrorOut   `json:"error,omitempty" jsonschema:"set when the code raised, was interrupted or killed its interpreter"`
	ElapsedMS       int64           `json:"elapsed_ms" jsonschema:"run time in milliseconds"`
	StdoutTruncated bool            `json:"stdout_truncated,omitempty" jsonschema:"part of stdout was cut"`
	StderrTruncated bool            `json:"stderr_truncated,omitempty" jsonschema:"part of stderr was cut"`
}

// ansiEscape matches the colour sequences IPython puts in tracebacks.
var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

func (t *tools) codeRun(ctx context.Context, in CodeRunIn) (CodeRunOut, error) {
	if strings.TrimSpace(in.Code) == "" {
		return CodeRunOut{}, errMissing("code")
	}
	if in.TimeoutSeconds < 0 {
		return CodeRunOut{}, fmt.Errorf("timeout_seconds must not be negative, got %d", in.TimeoutSeconds)
	}
	sb, err := t.reg.get(ctx, in.SandboxID, in.ConnectIfMissing)
	if err != nil {
		return CodeRunOut{}, err
	}
	ci := sandbox.NewCodeInterpreter(sb)
	language := in.Language
	if language == "" && in.ContextID == "" {
		language = defaultCodeLanguage
	}
	stdout, stderr := newCappedText(t.cfg.OutputLimit), newCappedText(t.cfg.OutputLimit)
	results := []CodeResultOut{}

	// The timeout interrupts the run in place (the stream then ends with
	// a KeyboardInterrupt), so the output so far is still returned.
	var (
		mu      sync.Mutex
		ctxID   = in.ContextID
		expired bool
	)
	if in.TimeoutSeconds > 0 {
		timer := time.AfterFunc(seconds(in.TimeoutSeconds), func() {
			mu.Lock()
			id := ctxID
			expired = true
			mu.Unlock()
			if id != "" {
				ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				defer cancel()
				ci.Interrupt(ictx, id)
			}
		})
		defer timer.Stop()
	}
	ex, err := ci.Run(ctx, in.Code, sandbox.CodeRunOptions{
		ContextID: in.ContextID,
		Language:  language,
		Handlers: &sandbox.CodeHandlers{
			OnInit: func(id string) {
				mu.Lock()
				ctxID = id
				late := expired
				mu.Unlock()
				if late { // the timeout fired before the id was known
					ci.Interrupt(ctx, id)
				}
			},
			OnStdout: func(l sandbox.OutputLine) { stdout.WriteString(l.Text) },
			OnStderr: func(l sandbox.OutputLine) { stderr.WriteString(l.Text) },
			OnResult: func(r sandbox.Result) {
				text := newCappedText(t.cfg.OutputLimit)
				text.WriteString(r.Text())
				results = append(results, CodeResultOut{Text: text.String(), MIMETypes: r.MIMETypes()})
			},
		},
	})
	if err != nil {
		return CodeRunOut{}, fmt.Errorf("run code in sandbox %s: %w", in.SandboxID, err)
	}
	out := CodeRunOut{
		ContextID:       ex.ContextID,
		ExecutionCount:  ex.ExecutionCount,
		Stdout:          stdout.String(),
		Stderr:          stderr.String(),
		Results:         results,
		ElapsedMS:       ex.Elapsed.Milliseconds(),
		StdoutTruncated: stdout.Truncated(),
		StderrTruncated: stderr.Truncated(),
	}
	if e := ex.Error; e != nil {
		tb := newCappedText(t.cfg.OutputLimit)
		for _, l := range e.Traceback {
			tb.WriteString(ansiEscape.ReplaceAllString(l, "") + "\n")
		}
		lines := strings.Split(strings.TrimSuffix(tb.String(), "\n"), "\n")
		if len(e.Traceback) == 0 {
			lines = []string{}
		}
		out.Error = &CodeErrorOut{Name: e.Name, Value: e.Value, Traceback: lines}
	}
	return out, nil
}

// CodeContextOut describes one interpreter context.
type CodeContextOut struct {
	ContextID string `json:"context_id" jsonschema:"context id, for code_run"`
	Language  string `json:"language" jsonschema:"language of the context"`
	Cwd       string `json:"cwd,omitempty" jsonschema:"working directory of the context"`
}

func contextOut(c sandbox.CodeContext) CodeContextOut {
	return CodeContextOut{ContextID: c.ID, Language: c.Language, Cwd: c.Cwd}
}

// CodeContextCreateIn is the input of code_context_create.
type CodeContextCreateIn struct {
	SandboxID        string `json:"sandbox_id" jsonschema:"sandbox id"`
	Language         string `json:"language,omitempty" jsonschema:"python, javascript or bash"`
	Cwd              string `json:"cwd,omitempty" jsonschema:"working directory of the context (default: the sandbox's)"`
	ConnectIfMissing bool   `json:"connect_if_missing,omitempty" jsonschema:"connect to the sandbox first when this server is not connected to it yet"`
}

var codeContextCreateDefaults = map[string]any{"language": defaultCodeLanguage}

// CodeContextCreateOut is the reply of code_context_create.
type CodeContextCreateOut struct {
	SandboxID string `json:"sandbox_id" jsonschema:"sandbox id"`
	ContextID string `json:"context_id" jsonschema:"id of the new context, for code_run"`
	Language  string `json:"language" jsonschema:"language of the context"`
	Cwd       string `json:"cwd,omitempty" jsonschema:"working directory of the context"`
}

func (t *tools) codeContextCreate(ctx context.Context, in CodeContextCreateIn) (CodeContextCreateOut, error) {
	sb, err := t.reg.get(ctx, in.SandboxID, in.ConnectIfMissing)
	if err != nil {
		return CodeContextCreateOut{}, err
	}
	lang := in.Language
	if lang == "" {
		lang = defaultCodeLanguage
	}
	cc, err := sandbox.NewCodeInterpreter(sb).CreateContext(ctx, lang, in.Cwd)
	if err != nil {
		return CodeContextCreateOut{}, fmt.Errorf("in sandbox %s: %w", in.SandboxID, err)
	}
	return CodeContextCreateOut{SandboxID: in.SandboxID, ContextID: cc.ID, Language: cc.Language, Cwd: cc.Cwd}, nil
}

// CodeContextListIn is the input of code_context_list.
type CodeContextListIn struct {
	SandboxID        string `json:"sandbox_id" jsonschema:"sandbox id"`
	Language         string `json:"language,omitempty" jsonschema:"only contexts of this language (default: all)"`
	ConnectIfMissing bool   `json:"connect_if_missing,omitempty" jsonschema:"connect to the sandbox first when this server is not connected to it yet"`
}

// CodeContextListOut is the reply of code_context_list.
type CodeContextListOut struct {
	SandboxID string           `json:"sandbox_id" jsonschema:"sandbox id"`
	Contexts  []CodeContextOut `json:"contexts" jsonschema:"the contexts"`
}

func (t *tools) codeContextList(ctx context.Context, in CodeContextListIn) (CodeContextListOut, error) {
	sb, err := t.reg.get(ctx, in.SandboxID, in.ConnectIfMissing)
	if err != nil {
		return CodeContextListOut{}, err
	}
	ctxs, err := sandbox.NewCodeInterpreter(sb).ListContexts(ctx, in.Language)
	if err != nil {
		return CodeContextListOut{}, fmt.Errorf("in sandbox %s: %w", in.SandboxID, err)
	}
	out := CodeContextListOut{SandboxID: in.SandboxID, Contexts: make([]CodeContextOut, 0, len(ctxs))}
	for _, c := range ctxs {
		out.Contexts = append(out.Contexts, contextOut(c))
	}
	return out, nil
}

// CodeContextDeleteIn is the input of code_context_delete.
type CodeContextDeleteIn struct {
	SandboxID        string `json:"sandbox_id" jsonschema:"sandbox id"`
	ContextID        string `json:"context_id,omitempty" jsonschema:"context to delete (give this or language)"`
	Language         string `json:"language,omitempty" jsonschema:"delete every context of this language (give this or context_id)"`
	ConnectIfMissing bool   `json:"connect_if_missing,omitempty" jsonschema:"connect to the sandbox first when this server is not connected to it yet"`
}

// CodeContextDeleteOut is the reply of code_context_delete.
type CodeContextDeleteOut struct {
	SandboxID string `json:"sandbox_id" jsonschema:"sandbox id"`
	ContextID string `json:"context_id,omitempty" jsonschema:"the deleted context"`
	Language  string `json:"language,omitempty" jsonschema:"the language whose contexts were deleted"`
	Deleted   bool   `json:"deleted" jsonschema:"true: deleted"`
}

func (t *tools) codeContextDelete(ctx context.Context, in CodeContextDeleteIn) (CodeContextDeleteOut, error) {
	if (in.ContextID == "") == (in.Language == "") {
		return CodeContextDeleteOut{}, fmt.Errorf("give exactly one of context_id and language")
	}
	sb, err := t.reg.get(ctx, in.SandboxID, in.ConnectIfMissing)
	if err != nil {
		return CodeContextDeleteOut{}, err
	}
	ci := sandbox.NewCodeInterpreter(sb)
	if in.ContextID != "" {
		err = ci.DeleteContext(ctx, in.ContextID)
	} else {
		err = ci.DeleteContexts(ctx, in.Language)
	}
	if err != nil {
		return CodeContextDeleteOut{}, fmt.Errorf("in sandbox %s: %w", in.SandboxID, err)
	}
	return CodeContextDeleteOut{SandboxID: in.SandboxID, ContextID: in.ContextID, Language: in.Language, Deleted: true}, nil
}
