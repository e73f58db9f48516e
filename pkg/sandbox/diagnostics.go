package sandbox

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// DiagnosticsOptions select what the diagnostics calls return. Zero fields
// take the server's defaults.
type DiagnosticsOptions struct {
	// Tail is the number of last log lines (logs: default 100; summary:
	// default 50).
	Tail int
	// Since keeps log lines newer than this duration before now ("10m").
	Since string
	// Limit is the number of most recent events (default 50).
	Limit int
	// EventLimit is the number of events in the summary (default 20).
	EventLimit int
}

func (c *Client) diagnostic(ctx context.Context, id, kind string, q url.Values) (string, error) {
	cl := c.lifecycle(http.MethodGet, "/sandboxes/"+url.PathEscape(id)+"/diagnostics/"+kind)
	cl.query = q
	cl.header.Set("Accept", "text/plain")
	var text string
	_, err := c.do(ctx, cl, &text)
	return text, wrap(err, "diagnostic %s of sandbox %s", kind, id)
}

func setPositive(q url.Values, key string, v int) {
	if v > 0 {
		q.Set(key, strconv.Itoa(v))
	}
}

// DiagnosticLogs returns the last lines of the output of the sandbox's main
// process (o.Tail, o.Since).
func (c *Client) DiagnosticLogs(ctx context.Context, id string, o DiagnosticsOptions) (string, error) {
	q := url.Values{}
	setPositive(q, "tail", o.Tail)
	if o.Since != "" {
		q.Set("since", o.Since)
	}
	return c.diagnostic(ctx, id, "logs", q)
}

// DiagnosticEvents returns the engine's lifecycle events of the sandbox,
// one per line, oldest first (o.Limit).
func (c *Client) DiagnosticEvents(ctx context.Context, id string, o DiagnosticsOptions) (string, error) {
	q := url.Values{}
	setPositive(q, "limit", o.Limit)
	return c.diagnostic(ctx, id, "events", q)
}

// DiagnosticInspect returns the engine's description of the sandbox as
// JSON text (not a stable schema).
func (c *Client) DiagnosticInspect(ctx context.Context, id string) (string, error) {
	return c.diagnostic(ctx, id, "inspect", nil)
}

// DiagnosticSummary returns one report for humans: the engine's
// description, recent events (o.EventLimit) and log lines (o.Tail).
func (c *Client) DiagnosticSummary(ctx context.Context, id string, o DiagnosticsOptions) (string, error) {
	q := url.Values{}
	setPositive(q, "tail", o.Tail)
	setPositive(q, "event_limit", o.EventLimit)
	return c.diagnostic(ctx, id, "summary", q)
}
