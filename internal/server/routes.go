package server

import (
	"net/http"
	"slices"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
)

// route is one line of the route table.
type route struct {
	pattern string // ServeMux pattern without the /v1 prefix
	handler http.HandlerFunc
	// open routes skip the API key: health, readiness and the OpenAPI document.
	open bool
	// proxy routes skip it only when Config.OpenProxy says so.
	proxy bool
}

// routes is the whole API, one line per endpoint. register serves it at
// the root and under /v1.
func (s *Server) routes() []route {
	return []route{
		{pattern: "GET /health", handler: s.health, open: true},
		{pattern: "GET /ready", handler: s.ready, open: true},
		{pattern: "GET /openapi.json", handler: s.openAPI, open: true},

		{pattern: "GET /sandboxes", handler: s.listSandboxes},
		{pattern: "POST /sandboxes", handler: s.createSandbox},
		{pattern: "GET /sandboxes/{sandboxId}", handler: s.getSandbox},
		{pattern: "DELETE /sandboxes/{sandboxId}", handler: s.deleteSandbox},
		{pattern: "PATCH /sandboxes/{sandboxId}/metadata", handler: s.patchMetadata},
		{pattern: "POST /sandboxes/{sandboxId}/pause", handler: s.pauseSandbox},
		{pattern: "POST /sandboxes/{sandboxId}/resume", handler: s.resumeSandbox},
		{pattern: "POST /sandboxes/{sandboxId}/renew-expiration", handler: s.renewExpiration},
		{pattern: "GET /sandboxes/{sandboxId}/endpoints/{port}", handler: s.getEndpoint},

		{pattern: "POST /sandboxes/{sandboxId}/snapshots", handler: s.createSnapshot},
		{pattern: "GET /snapshots", handler: s.listSnapshots},
		{pattern: "GET /snapshots/{snapshotId}", handler: s.getSnapshot},
		{pattern: "DELETE /snapshots/{snapshotId}", handler: s.deleteSnapshot},

		// Warm pools: 501 POOL_NOT_SUPPORTED unless the runtime implements
		// runtime.Pools (see pools.go).
		{pattern: "POST /pools", handler: s.withPools(s.createPool)},
		{pattern: "GET /pools", handler: s.withPools(s.listPools)},
		{pattern: "GET /pools/{poolName}", handler: s.withPools(s.getPool)},
		{pattern: "PUT /pools/{poolName}", handler: s.withPools(s.updatePool)},
		{pattern: "DELETE /pools/{poolName}", handler: s.withPools(s.deletePool)},

		{pattern: "GET /sandboxes/{sandboxId}/diagnostics/logs", handler: s.diagnosticLogs},
		{pattern: "GET /sandboxes/{sandboxId}/diagnostics/events", handler: s.diagnosticEvents},
		{pattern: "GET /sandboxes/{sandboxId}/diagnostics/inspect", handler: s.diagnosticInspect},
		{pattern: "GET /sandboxes/{sandboxId}/diagnostics/summary", handler: s.diagnosticSummary},

		{pattern: "POST /metrics/events", handler: s.reportMetricsEvent},
		// Prometheus metrics, behind the API key like the API itself
		// (a debug listener may serve them without it on loopback).
		{pattern: "GET /metrics", handler: s.serveMetrics},

		// Any method; behind the API key unless Config.OpenProxy (upstream's
		// behaviour). The proxy strips the key before forwarding.
		{pattern: "/sandboxes/{sandboxId}/proxy/{port}", handler: s.proxy.ServeHTTP, proxy: true},
		{pattern: "/sandboxes/{sandboxId}/proxy/{port}/{path...}", handler: s.proxy.ServeHTTP, proxy: true},
	}
}

// prefixes are where the route table is mounted; the SDKs use /v1.
var prefixes = []string{"", "/v1"}

// register mounts the route table under every prefix, wrapping the routes
// that need it with the API-key check, and answers everything else with
// 404 or 405.
func (s *Server) register() {
	for _, prefix := range prefixes {
		for _, rt := range s.routes() {
			var h http.Handler = rt.handler
			if !rt.open && !(rt.proxy && s.cfg.OpenProxy) {
				h = s.requireAPIKey(h)
			}
			s.mux.Handle(withPrefix(rt.pattern, prefix), h)
		}
	}
	s.mux.HandleFunc("/", s.noRoute)
}

// withPrefix inserts prefix in front of the path of a pattern such as
// "GET /sandboxes".
func withPrefix(pattern, prefix string) string {
	for i := range len(pattern) {
		if pattern[i] == '/' {
			return pattern[:i] + prefix + pattern[i:]
		}
	}
	return pattern
}

// probeMethods are tried to tell a wrong method (405) from an unknown path (404).
var probeMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// noRoute answers requests no route matched: 405 with Allow when the path
// exists under other methods, 404 otherwise.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range probeMethods {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		if slices.Contains(allow, http.MethodGet) {
			allow = append(allow, http.MethodHead)
		}
		for _, m := range allow {
			w.Header().Add("Allow", m)
		}
		s.writeError(w, r, apierror.New(http.StatusMethodNotAllowed, apierror.CodeMethodNotAllowed,
			"method %s is not allowed on %s", r.Method, r.URL.Path))
		return
	}
	s.writeError(w, r, apierror.NotFound(apierror.CodeRouteNotFound, "no route for %s %s", r.Method, r.URL.Path))
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	apierror.WriteJSON(w, http.StatusOK, map[string]string{"status": "healthy"})
}

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	if len(s.cfg.OpenAPIJSON) == 0 {
		s.writeError(w, r, apierror.NotFound(apierror.CodeRouteNotFound, "this server has no OpenAPI document configured"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(s.cfg.OpenAPIJSON)
}

// sandboxID is the {sandboxId} of the request's path.
func sandboxID(r *http.Request) string { return r.PathValue("sandboxId") }
