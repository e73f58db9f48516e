package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opensandbox-go/opensandbox/internal/httpmw"
)

// HTTPPath is where ServeHTTP answers the streamable HTTP transport.
const HTTPPath = "/mcp"

// ServeHTTP serves s over the streamable HTTP transport on ln at HTTPPath
// until ctx ends. Requests run under ctx, so its end also cancels calls in
// flight and the clients' event streams; the server then waits up to 10s
// for their handlers to return. It always closes ln.
func ServeHTTP(ctx context.Context, ln net.Listener, s *mcp.Server, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle(HTTPPath, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{
		Logger:         log,
		SessionTimeout: 30 * time.Minute,
	}))
	hs := &http.Server{
		// Headers within 10 s, bodies at a steady pace (the event
		// streams are replies, which nothing bounds).
		Handler:           httpmw.BoundBody(mux, httpmw.DefaultBodyLimits),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.InfoContext(ctx, "serving MCP over streamable HTTP", "url", "http://"+ln.Addr().String()+HTTPPath)
	select {
	case err := <-errc:
		return fmt.Errorf("serve MCP over HTTP: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shut down MCP HTTP server: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve MCP over HTTP: %w", err)
	}
	return nil
}
