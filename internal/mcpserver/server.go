package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Config is what New needs. Client is required; every other field has a
// default.
type Config struct {
	// Client reaches the lifecycle API (and, through the handles it
	// returns, each sandbox's execd). Required.
	Client *sandbox.Client
	// UseServerProxy makes sandbox_get_endpoint return the server-proxied
	// address. It should match the client's sandbox.WithServerProxy.
	UseServerProxy bool
	// ToolPrefix is prepended to every tool name ("" = none), so several
	// servers can live side by side in one client.
	ToolPrefix string
	// OutputLimit caps each output stream of command_run, in bytes.
	// Default DefaultOutputLimit (64 KiB).
	OutputLimit int
	// Logger receives one line per failed tool call and the go-sdk's own
	// messages. Default: discard.
	Logger *slog.Logger
	// Version is reported to clients in the initialize handshake.
	// Default "dev".
	Version string
}

// tools is the state every tool handler shares.
type tools struct {
	cfg Config
	reg *registry
	log *slog.Logger
}

// ToolNames lists the tools New registers, without prefix, in order.
var ToolNames = []string{
	"sandbox_create", "sandbox_connect", "sandbox_kill", "sandbox_get_info", "sandbox_list",
	"sandbox_renew", "sandbox_get_metrics", "sandbox_healthcheck", "sandbox_get_endpoint",
	"command_run", "command_interrupt",
	"code_run", "code_context_create", "code_context_list", "code_context_delete",
	"file_read", "file_write", "file_delete", "file_search", "file_create_directories",
	"file_delete_directories", "file_move", "file_replace_contents",
	"egress_get_policy", "egress_patch_policy",
}

// New returns an MCP server with every OpenSandbox tool registered. The
// server may be run on any number of transports at once; they share one
// registry of connected sandboxes.
func New(cfg Config) (*mcp.Server, error) {
	if cfg.Client == nil {
		return nil, errors.New("mcpserver: Config.Client is required")
	}
	if cfg.OutputLimit <= 0 {
		cfg.OutputLimit = DefaultOutputLimit
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	t := &tools{cfg: cfg, reg: newRegistry(cfg.Client), log: cfg.Logger}
	s := mcp.NewServer(&mcp.Implementation{Name: "opensandbox-mcp", Title: "OpenSandbox", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       cfg.Logger,
		Capabilities: &mcp.ServerCapabilities{},
	})
	if err := t.register(s); err != nil {
		return nil, err
	}
	return s, nil
}

const instructions = `Tools for OpenSandbox: isolated containers where you can run commands and edit files.
Start with sandbox_create (or sandbox_connect to an existing sandbox_id); then use command_run and the file_* tools with that sandbox_id.
In a sandbox made from a code-interpreter image (opensandbox/code-interpreter:latest, entrypoint /opt/opensandbox/code-interpreter.sh), code_run runs Python, JavaScript or Bash with state kept between calls.
Sandboxes expire after timeout_seconds unless renewed with sandbox_renew; call sandbox_kill when done.`

// register adds every tool to s; the first schema error stops it.
func (t *tools) register(s *mcp.Server) error {
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	add(addTool(t, s, "sandbox_create", "Create a sandbox from a container image and wait until it is ready; returns its sandbox_id, which later calls take. The sandbox is connected in this server.", hints{}, createDefaults, t.sandboxCreate))
	add(addTool(t, s, "sandbox_connect", "Connect this server to an existing sandbox by id (waits until its execd answers) so command and file tools can use it.", hints{idempotent: true}, connectDefaults, t.sandboxConnect))
	add(addTool(t, s, "sandbox_kill", "Delete a sandbox and everything in it. Works on any sandbox id.", hints{destructive: true, idempotent: true}, nil, t.sandboxKill))
	add(addTool(t, s, "sandbox_get_info", "Describe a sandbox: state, image, metadata, entrypoint, creation and expiry times. Works on any sandbox id.", hints{readOnly: true}, nil, t.sandboxGetInfo))
	add(addTool(t, s, "sandbox_list", "List sandboxes, optionally filtered by state and metadata, one page at a time.", hints{readOnly: true}, nil, t.sandboxList))
	add(addTool(t, s, "sandbox_renew", "Extend a sandbox's life: it now expires timeout_seconds from now. Works on any sandbox id.", hints{idempotent: true}, nil, t.sandboxRenew))
	add(addTool(t, s, "sandbox_get_metrics", "CPU and memory use of a connected sandbox.", hints{readOnly: true}, nil, t.sandboxGetMetrics))
	add(addTool(t, s, "sandbox_healthcheck", "Whether a connected sandbox's execd answers.", hints{readOnly: true}, nil, t.sandboxHealthcheck))
	add(addTool(t, s, "sandbox_get_endpoint", "The address (host:port[/path], no scheme) and headers to reach a port inside a sandbox. Works on any sandbox id.", hints{readOnly: true}, nil, t.sandboxGetEndpoint))
	add(addTool(t, s, "command_run", "Run a shell command in a connected sandbox and wait for it; returns stdout, stderr, exit_code and execution_id. Each stream is capped (start and end kept). With background: true it returns at once with the execution_id.", hints{destructive: true}, runDefaults, t.commandRun))
	add(addTool(t, s, "command_interrupt", "Interrupt a running command (by the execution_id command_run returned).", hints{destructive: true, idempotent: true}, nil, t.commandInterrupt))
	add(addTool(t, s, "code_run", "Run code (python by default; javascript, bash) in a stateful interpreter context of a connected code-interpreter sandbox and wait for it; variables persist between calls in the same context_id. Returns stdout, stderr, results (text and MIME types, e.g. image/png for plots), error {ename, evalue, traceback} and context_id. Streams are capped (start and end kept).", hints{destructive: true}, codeRunDefaults, t.codeRun))
	add(addTool(t, s, "code_context_create", "Create a fresh interpreter context (its own variables) in a connected code-interpreter sandbox; returns its context_id for code_run.", hints{}, codeContextCreateDefaults, t.codeContextCreate))
	add(addTool(t, s, "code_context_list", "List the interpreter contexts of a connected code-interpreter sandbox, optionally of one language.", hints{readOnly: true}, nil, t.codeContextList))
	add(addTool(t, s, "code_context_delete", "Delete an interpreter context (by context_id) or every context of a language, freeing its interpreter and state.", hints{destructive: true, idempotent: true}, nil, t.codeContextDelete))
	add(addTool(t, s, "file_read", "Read a file from a connected sandbox as text (utf-8) or base64; range_header (e.g. \"bytes=0-1023\") reads part of it. Large files are cut at 1 MiB.", hints{readOnly: true}, readDefaults, t.fileRead))
	add(addTool(t, s, "file_write", "Write a file in a connected sandbox (created or replaced, parent directories created). content is utf-8 text or base64 per encoding.", hints{destructive: true, idempotent: true}, writeDefaults, t.fileWrite))
	add(addTool(t, s, "file_delete", "Delete files in a connected sandbox.", hints{destructive: true, idempotent: true}, nil, t.fileDelete))
	add(addTool(t, s, "file_search", "Find files under a directory of a connected sandbox whose names match a glob pattern (e.g. \"*.py\").", hints{readOnly: true}, nil, t.fileSearch))
	add(addTool(t, s, "file_create_directories", "Create directories (with parents) in a connected sandbox.", hints{idempotent: true}, nil, t.fileCreateDirectories))
	add(addTool(t, s, "file_delete_directories", "Delete directories and their contents in a connected sandbox.", hints{destructive: true, idempotent: true}, nil, t.fileDeleteDirectories))
	add(addTool(t, s, "file_move", "Move or rename files and directories in a connected sandbox.", hints{destructive: true}, nil, t.fileMove))
	add(addTool(t, s, "egress_get_policy", "The egress (outbound network) policy in force in a sandbox created with network_policy: default action, rules and mode. Works on any sandbox id.", hints{readOnly: true}, nil, t.egressGetPolicy))
	add(addTool(t, s, "egress_patch_policy", "Allow or deny more outbound destinations in a sandbox created with network_policy: the rules go before the existing ones and replace rules with the same target. Works on any sandbox id.", hints{idempotent: true}, nil, t.egressPatchPolicy))
	add(addTool(t, s, "file_replace_contents", "Replace every occurrence of old_content with new_content in files of a connected sandbox; returns how many were replaced per file.", hints{destructive: true}, nil, t.fileReplaceContents))
	return errors.Join(errs...)
}

type hints struct{ readOnly, destructive, idempotent bool }

// addTool registers one typed tool under the configured prefix. Its input
// schema is inferred from In, with defaults (property name → JSON value)
// written into it so clients see them and the go-sdk fills them in.
// Failed calls are logged and returned as tool errors.
func addTool[In, Out any](t *tools, s *mcp.Server, name, desc string, h hints, defaults map[string]any, fn func(context.Context, In) (Out, error)) error {
	schema, err := inputSchema[In](defaults)
	if err != nil {
		return fmt.Errorf("tool %s: %w", name, err)
	}
	open := true
	tool := &mcp.Tool{
		Name:        t.cfg.ToolPrefix + name,
		Description: desc,
		InputSchema: schema,
		Annotations: &mcp.ToolAnnotations{
			ReadOnlyHint:    h.readOnly,
			DestructiveHint: &h.destructive,
			IdempotentHint:  h.idempotent,
			OpenWorldHint:   &open,
		},
	}
	mcp.AddTool(s, tool, func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		start := time.Now()
		out, err := fn(ctx, in)
		if err != nil {
			t.log.WarnContext(ctx, "tool failed", "tool", name, "elapsed", time.Since(start), "err", err)
			var zero Out
			return nil, zero, err
		}
		t.log.DebugContext(ctx, "tool done", "tool", name, "elapsed", time.Since(start))
		return nil, out, nil
	})
	return nil
}

// inputSchema infers the schema of In and sets the given property defaults.
// Optional properties also accept null (models often send null for "not
// given"); the handler then sees the zero value.
func inputSchema[In any](defaults map[string]any) (*jsonschema.Schema, error) {
	s, err := jsonschema.For[In](nil)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	for name, p := range s.Properties {
		if p.Type != "" && !slices.Contains(s.Required, name) {
			p.Types = []string{"null", p.Type}
			p.Type = ""
		}
	}
	for prop, v := range defaults {
		p, ok := s.Properties[prop]
		if !ok {
			return nil, fmt.Errorf("input schema: default for unknown property %q", prop)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("input schema: default for %q: %w", prop, err)
		}
		p.Default = b
	}
	return s, nil
}

// errMissing is the error for a required argument left empty.
func errMissing(arg string) error {
	return fmt.Errorf("argument %q is required", arg)
}

// seconds turns a count of seconds into a duration.
func seconds(n int) time.Duration { return time.Duration(n) * time.Second }
