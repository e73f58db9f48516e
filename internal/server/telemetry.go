package server

import (
	"log/slog"
	"net/http"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
)

// metricsEvent is the body of POST /metrics/events: best-effort telemetry
// that newer SDKs send after creating a sandbox (their language and
// version travel in User-Agent).
type metricsEvent struct {
	EventType        string `json:"eventType"`
	SandboxID        string `json:"sandboxId,omitempty"`
	Image            string `json:"image,omitempty"`
	CreateDurationMs *int64 `json:"createDurationMs,omitempty"`
	Success          *bool  `json:"success,omitempty"`
}

// reportMetricsEvent accepts an SDK telemetry event and records it in the
// log (at debug; there is no metrics exporter yet). Answering 404 would be
// harmless to the SDKs, which ignore the reply, but noisy in our logs.
func (s *Server) reportMetricsEvent(w http.ResponseWriter, r *http.Request) {
	var ev metricsEvent
	if err := decodeJSON(w, r, &ev, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if ev.EventType == "" {
		s.writeError(w, r, apierror.BadRequest(apierror.CodeInvalidRequest, "eventType is required"))
		return
	}
	if ev.CreateDurationMs != nil && *ev.CreateDurationMs < 0 {
		s.writeError(w, r, apierror.BadRequest(apierror.CodeInvalidRequest, "createDurationMs must be >= 0, got %d", *ev.CreateDurationMs))
		return
	}
	attrs := []slog.Attr{slog.String("event", ev.EventType), slog.String("user_agent", r.UserAgent())}
	if ev.SandboxID != "" {
		attrs = append(attrs, slog.String("sandbox", ev.SandboxID))
	}
	if ev.CreateDurationMs != nil {
		attrs = append(attrs, slog.Int64("create_ms", *ev.CreateDurationMs))
	}
	if ev.Success != nil {
		attrs = append(attrs, slog.Bool("success", *ev.Success))
	}
	s.reqLog(r).LogAttrs(r.Context(), slog.LevelDebug, "sdk metrics event", attrs...)
	w.WriteHeader(http.StatusNoContent)
}
