package server

import (
	"context"
	"net/http"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// readyTimeout bounds the engine check of GET /ready.
const readyTimeout = 3 * time.Second

// ready is the readiness route: 200 when the runtime's engine answers,
// 503 RUNTIME_UNAVAILABLE when it does not. /health stays a liveness
// check that answers whenever the process serves HTTP. A runtime that
// cannot be pinged is taken as ready.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if p, ok := s.rt.(runtime.Pinger); ok {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := p.Ping(ctx); err != nil {
			// Logged at debug only: probes repeat for as long as the
			// outage lasts, and the API calls that fail say so already.
			s.reqLog(r).Debug("readiness: engine unavailable", "err", err)
			apierror.WriteJSON(w, http.StatusServiceUnavailable, sandbox.ErrorResponse{
				Code:    apierror.CodeRuntimeUnavailable,
				Message: "the container engine is unavailable",
			})
			return
		}
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
