package metrics

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
)

// Get serves GET /metrics: one sample as JSON.
func (c *Collector) Get(w http.ResponseWriter, r *http.Request) {
	m, err := c.Sample(r.Context())
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away; nobody to answer
		}
		apierror.Write(w, r, apierror.Wrap(err, http.StatusInternalServerError, apierror.CodeRuntimeError, "collecting metrics failed"))
		return
	}
	apierror.WriteJSON(w, http.StatusOK, m)
}

// Watch serves GET /metrics/watch: a text/event-stream of one JSON sample
// and a newline per Interval, the first at once, until the client leaves.
func (c *Collector) Watch(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	m, err := c.Sample(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		apierror.Write(w, r, apierror.Wrap(err, http.StatusInternalServerError, apierror.CodeRuntimeError, "collecting metrics failed"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w) // Encode ends each value with "\n"
	tick := time.NewTicker(c.interval)
	defer tick.Stop()
	for {
		if err := enc.Encode(m); err != nil {
			c.log.DebugContext(ctx, "metrics watch ended", slog.Any("err", err))
			return
		}
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			c.log.DebugContext(ctx, "metrics watch ended", slog.Any("err", err))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if m, err = c.Sample(ctx); err != nil {
			if ctx.Err() == nil {
				c.log.WarnContext(ctx, "metrics watch stopped: sampling failed", slog.Any("err", err))
			}
			return
		}
	}
}
