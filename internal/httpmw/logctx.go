package httpmw

import (
	"context"
	"log/slog"
)

// RequestIDKey is the log attribute that carries a request's id.
const RequestIDKey = "request_id"

type requestIDKey struct{}

// WithRequestID returns ctx carrying request id id, for ContextHandler
// (and anything else serving the request) to find.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID is the request id ctx carries, "" when none.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// ContextHandler wraps h so that every record logged with a context that
// carries a request id (slog's ...Context methods, LogAttrs) gets a
// request_id attribute, unless the logger has one already (a logger made
// with With("request_id", ...)). So code far from the HTTP layer (a
// runtime driver creating a sandbox) logs the id of the request it serves
// without being handed a logger. Wrapping twice wraps once.
func ContextHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(*contextHandler); ok {
		return h
	}
	return &contextHandler{inner: h}
}

type contextHandler struct {
	inner slog.Handler
	hasID bool // the logger carries a request_id of its own
}

func (c *contextHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return c.inner.Enabled(ctx, l)
}

func (c *contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if !c.hasID {
		if id := RequestID(ctx); id != "" {
			r = r.Clone()
			r.AddAttrs(slog.String(RequestIDKey, id))
		}
	}
	return c.inner.Handle(ctx, r)
}

func (c *contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	has := c.hasID
	for _, a := range attrs {
		if a.Key == RequestIDKey {
			has = true
		}
	}
	return &contextHandler{inner: c.inner.WithAttrs(attrs), hasID: has}
}

func (c *contextHandler) WithGroup(name string) slog.Handler {
	return &contextHandler{inner: c.inner.WithGroup(name), hasID: c.hasID}
}
