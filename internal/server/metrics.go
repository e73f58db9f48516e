package server

import (
	"context"
	"net/http"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/metrics"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// Metrics returns the server's Prometheus metrics, which Handler serves at
// GET /metrics (behind the API key) and a debug listener may serve too.
func (s *Server) Metrics() *metrics.Metrics { return s.metrics }

// serveMetrics answers GET /metrics with the Prometheus exposition.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	s.metricsHTTP.ServeHTTP(w, r)
}

// countStates tells the metrics how many sandboxes are in each state.
func countStates(rt runtime.Runtime) metrics.StateCounter {
	return func(ctx context.Context) (map[string]int, error) {
		all, err := rt.List(ctx)
		if err != nil {
			return nil, err
		}
		n := make(map[string]int)
		for _, sb := range all {
			n[sb.State]++
		}
		return n, nil
	}
}

// countFailure counts a server-side failure of the API operation r (most
// are the engine's: unavailable, timed out, or an unexpected error). A
// sandbox that cannot be reached through the proxy (502) is not one.
func (s *Server) countFailure(r *http.Request, ae *apierror.Error) {
	if !serverFault(ae.Status) || ae.Status == http.StatusBadGateway || r.Context().Err() != nil {
		return
	}
	op := r.Pattern
	if op == "" {
		op = "unknown"
	}
	s.metrics.EngineError(op)
}
