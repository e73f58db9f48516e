// Command opensandbox-mcp is the Model Context Protocol server of
// OpenSandbox: it gives MCP clients (Claude Desktop, Claude Code, Cursor,
// ...) tools to create sandboxes, run commands and edit files in them,
// over stdio or streamable HTTP. See docs/mcp.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opensandbox-go/opensandbox/internal/mcpserver"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

var version = "dev" // set with -ldflags "-X main.version=..."

type config struct {
	apiKey, domain, protocol string
	useServerProxy           *bool // nil: from the environment
	requestTimeout           *time.Duration
	transport, addr          string
	toolPrefix               string
	logLevel                 slog.Level
}

func main() {
	var cfg config
	fs := flag.NewFlagSet("opensandbox-mcp", flag.ExitOnError)
	fs.StringVar(&cfg.apiKey, "api-key", "", "lifecycle API key (default $"+sandbox.EnvAPIKey+")")
	fs.StringVar(&cfg.domain, "domain", "", "lifecycle server host:port, may start with http(s):// (default $"+sandbox.EnvDomain+" or localhost:8080)")
	fs.StringVar(&cfg.protocol, "protocol", "", "http or https (default $"+sandbox.EnvProtocol+" or http)")
	fs.Var(boolFlag{&cfg.useServerProxy}, "use-server-proxy", "reach sandboxes through the server's proxy route (default $"+sandbox.EnvUseServerProxy+" or false)")
	fs.Func("request-timeout", "timeout of each non-streaming API request, as a duration (30s) or seconds (30); 0 = none (default 30s)", func(s string) error {
		d, err := parseTimeout(s)
		cfg.requestTimeout = &d
		return err
	})
	fs.StringVar(&cfg.transport, "transport", "stdio", "stdio or streamable-http")
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:8090", "listen address for --transport streamable-http (endpoint path "+mcpserver.HTTPPath+")")
	fs.StringVar(&cfg.toolPrefix, "tool-prefix", "", "prefix for every tool name, e.g. osb_")
	fs.TextVar(&cfg.logLevel, "log-level", slog.LevelInfo, "debug, info, warn or error (logs go to stderr)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Parse(os.Args[1:])
	if *showVersion {
		fmt.Println("opensandbox-mcp", version)
		return
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("opensandbox-mcp failed", "err", err)
		stop()
		os.Exit(1)
	}
}

// boolFlag is a boolean flag that remembers whether it was given.
type boolFlag struct{ p **bool }

func (f boolFlag) IsBoolFlag() bool { return true }
func (f boolFlag) String() string {
	if f.p == nil || *f.p == nil {
		return ""
	}
	return strconv.FormatBool(**f.p)
}
func (f boolFlag) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false: %w", err)
	}
	*f.p = &b
	return nil
}

// parseTimeout reads a duration ("30s") or a number of seconds ("30").
func parseTimeout(s string) (time.Duration, error) {
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Duration(n * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("not a duration or a number of seconds: %q", s)
	}
	return d, nil
}

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	opts := []sandbox.Option{sandbox.WithUserAgent("opensandbox-mcp/" + version)}
	if cfg.apiKey != "" {
		opts = append(opts, sandbox.WithAPIKey(cfg.apiKey))
	}
	if cfg.domain != "" {
		opts = append(opts, sandbox.WithDomain(cfg.domain))
	}
	if cfg.protocol != "" {
		opts = append(opts, sandbox.WithProtocol(cfg.protocol))
	}
	proxy := false
	if cfg.useServerProxy != nil {
		proxy = *cfg.useServerProxy
		opts = append(opts, sandbox.WithServerProxy(proxy))
	} else if v := os.Getenv(sandbox.EnvUseServerProxy); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s=%q: %w", sandbox.EnvUseServerProxy, v, err)
		}
		proxy = b
	}
	if cfg.requestTimeout != nil {
		opts = append(opts, sandbox.WithRequestTimeout(*cfg.requestTimeout))
	}
	client, err := sandbox.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("sandbox client: %w", err)
	}
	srv, err := mcpserver.New(mcpserver.Config{
		Client:         client,
		UseServerProxy: proxy,
		ToolPrefix:     cfg.toolPrefix,
		Logger:         log,
		Version:        version,
	})
	if err != nil {
		return fmt.Errorf("mcp server: %w", err)
	}
	log.Info("opensandbox-mcp starting", "version", version, "transport", cfg.transport, "lifecycle", client.BaseURL())
	switch strings.ToLower(cfg.transport) {
	case "stdio":
		if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
			return fmt.Errorf("serve MCP over stdio: %w", err)
		}
		return nil
	case "streamable-http", "http":
		ln, err := net.Listen("tcp", cfg.addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.addr, err)
		}
		return mcpserver.ServeHTTP(ctx, ln, srv, log)
	default:
		return fmt.Errorf("unknown --transport %q: want stdio or streamable-http", cfg.transport)
	}
}
