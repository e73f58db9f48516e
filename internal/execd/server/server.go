// Package server assembles execd's HTTP API: one route table over the
// command, session, code, files, metrics, terminal and proxy packages,
// wrapped once with panic recovery, request logging and access-token auth.
package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/execd/code"
	"github.com/opensandbox-go/opensandbox/internal/execd/command"
	"github.com/opensandbox-go/opensandbox/internal/execd/files"
	"github.com/opensandbox-go/opensandbox/internal/execd/isolation"
	"github.com/opensandbox-go/opensandbox/internal/execd/metrics"
	"github.com/opensandbox-go/opensandbox/internal/execd/proxy"
	"github.com/opensandbox-go/opensandbox/internal/execd/pty"
	"github.com/opensandbox-go/opensandbox/internal/execd/session"
	"github.com/opensandbox-go/opensandbox/internal/execd/telemetry"
	"github.com/opensandbox-go/opensandbox/internal/httpmw"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Config holds the parts the server routes to. All fields are required
// except AccessToken, Logger and Port.
type Config struct {
	// AccessToken, when set, must be sent in X-EXECD-ACCESS-TOKEN with
	// every request.
	AccessToken string
	// ClaimToken starts execd unclaimed, for a pool's pod: it serves only
	// POST /claim with this token, which sets the access token (see
	// claim.go). Excludes AccessToken.
	ClaimToken string
	Logger     *slog.Logger
	// Port is the TCP port execd listens on. Requests for /proxy/{Port}/...
	// (the shape a Docker bridge endpoint for execd has) are served by
	// execd's own routes with the prefix removed, never forwarded to
	// itself. 0 turns that off.
	Port int

	Commands *command.Manager
	Sessions *session.Manager
	Code     *code.Manager
	Files    *files.Handler
	Metrics  *metrics.Collector
	PTY      *pty.Manager
	Proxy    *proxy.Proxy
	// Isolated serves /v1/isolated (upstream OSEP-0013).
	Isolated *isolation.Manager

	// ReadHeaderTimeout bounds the reading of a request's headers;
	// default DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	// BodyLimits bound how long a client may take to send a request body
	// (httpmw.BoundBody, by progress); the zero value means
	// httpmw.DefaultBodyLimits, those of every server in the project.
	BodyLimits httpmw.BodyLimits
}

// DefaultReadHeaderTimeout is the default of Config.ReadHeaderTimeout.
const DefaultReadHeaderTimeout = 10 * time.Second

// Server is execd's HTTP API.
type Server struct {
	cfg     Config
	gate    *gate
	mux     *http.ServeMux
	handler http.Handler
	tel     *telemetry.Metrics
}

// New builds the server and its route table.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if cfg.BodyLimits == (httpmw.BodyLimits{}) {
		cfg.BodyLimits = httpmw.DefaultBodyLimits
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), gate: &gate{access: cfg.AccessToken, claim: cfg.ClaimToken}}
	s.tel = telemetry.New(telemetry.Gauges{
		RunningCommands: cfg.Commands.Running,
		Sessions:        cfg.Sessions.Count,
		CodeContexts:    cfg.Code.Count,
		Terminals:       cfg.PTY.Count,
	})
	for _, rt := range s.routes() {
		s.mux.HandleFunc(rt.pattern, rt.handler)
	}
	s.mux.HandleFunc("/", s.notFound)
	// BoundBody is outermost so that it sees the connection's own writer.
	s.handler = httpmw.BoundBody(s.tel.Middleware(s.recover(s.logRequests(s.auth(s.mux)))), cfg.BodyLimits)
	return s
}

type route struct {
	pattern string
	handler http.HandlerFunc
}

// routes is the whole API, one line per endpoint.
func (s *Server) routes() []route {
	c := s.cfg
	return []route{
		{"GET /ping", s.ping},

		{"POST /command", c.Commands.Run},
		{"DELETE /command", s.interrupt},
		// "/command/status/{id}" and "/command/{id}/logs" overlap as
		// patterns, so one route serves both.
		{"GET /command/{a}/{b}", s.commandQuery},

		{"POST /session", c.Sessions.Create},
		{"POST /session/{sessionId}/run", c.Sessions.Run},
		{"DELETE /session/{sessionId}", c.Sessions.Delete},

		{"POST /code", c.Code.Run},
		{"DELETE /code", c.Code.InterruptHTTP},
		{"POST /code/context", c.Code.CreateContext},
		{"GET /code/contexts", c.Code.ListContexts},
		{"DELETE /code/contexts", c.Code.DeleteContexts},
		{"GET /code/contexts/{context_id}", c.Code.GetContext},
		{"DELETE /code/contexts/{context_id}", c.Code.DeleteContext},

		{"GET /files/info", c.Files.Info},
		{"DELETE /files", c.Files.Remove},
		{"POST /files/permissions", c.Files.Chmod},
		{"POST /files/mv", c.Files.Move},
		{"GET /files/search", c.Files.Search},
		{"POST /files/replace", c.Files.Replace},
		{"POST /files/upload", c.Files.Upload},
		{"GET /files/download", c.Files.Download},
		{"GET /directories/list", c.Files.ListDir},
		{"POST /directories", c.Files.MakeDirs},
		{"DELETE /directories", c.Files.RemoveDirs},

		{"GET /metrics", c.Metrics.Get},
		{"GET /metrics/watch", c.Metrics.Watch},
		// Prometheus exposition of execd itself; /metrics is the sandbox's
		// resource usage (the contract's route).
		{"GET /metrics/prometheus", s.tel.Handler().ServeHTTP},

		{"POST /pty", c.PTY.Create},
		{"GET /pty/{sessionId}", c.PTY.Status},
		{"DELETE /pty/{sessionId}", c.PTY.Delete},
		{"GET /pty/{sessionId}/ws", c.PTY.Attach},

		{"GET /v1/isolated/capabilities", c.Isolated.Capabilities},
		{"POST /v1/isolated/session", c.Isolated.Create},
		{"GET /v1/isolated/sessions", c.Isolated.List},
		{"GET /v1/isolated/session/{sessionId}", c.Isolated.Get},
		{"DELETE /v1/isolated/session/{sessionId}", c.Isolated.Delete},
		{"POST /v1/isolated/session/{sessionId}/run", c.Isolated.Run},
		{"GET /v1/isolated/session/{sessionId}/diff", c.Isolated.NotSupported},
		{"POST /v1/isolated/session/{sessionId}/commit", c.Isolated.NotSupported},
		{"GET /v1/isolated/session/{sessionId}/files/info", c.Isolated.Files},
		{"DELETE /v1/isolated/session/{sessionId}/files", c.Isolated.Files},
		{"POST /v1/isolated/session/{sessionId}/files/permissions", c.Isolated.Files},
		{"POST /v1/isolated/session/{sessionId}/files/mv", c.Isolated.Files},
		{"GET /v1/isolated/session/{sessionId}/files/search", c.Isolated.Files},
		{"POST /v1/isolated/session/{sessionId}/files/replace", c.Isolated.Files},
		{"POST /v1/isolated/session/{sessionId}/files/upload", c.Isolated.Files},
		{"GET /v1/isolated/session/{sessionId}/files/download", c.Isolated.Files},
		{"GET /v1/isolated/session/{sessionId}/directories/list", c.Isolated.Files},
		{"POST /v1/isolated/session/{sessionId}/directories", c.Isolated.Files},
		{"DELETE /v1/isolated/session/{sessionId}/directories", c.Isolated.Files},

		{"/proxy/{port}", s.proxy},
		{"/proxy/{port}/", s.proxy},
	}
}

// Handler returns the API with its middleware.
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) ping(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }

// proxy serves /proxy/{port}: execd's own port in-process, through this
// route table (the caller already passed auth), any other port through
// the forwarding proxy.
func (s *Server) proxy(w http.ResponseWriter, r *http.Request) {
	if local, ok := proxy.Local(r, s.cfg.Port); ok {
		s.mux.ServeHTTP(w, local)
		return
	}
	s.cfg.Proxy.ServeHTTP(w, r)
}

func (s *Server) commandQuery(w http.ResponseWriter, r *http.Request) {
	a, b := r.PathValue("a"), r.PathValue("b")
	switch {
	case a == "status":
		r.SetPathValue("id", b)
		s.cfg.Commands.Status(w, r)
	case b == "logs":
		r.SetPathValue("id", a)
		s.cfg.Commands.Logs(w, r)
	default:
		s.notFound(w, r)
	}
}

// interrupt handles DELETE /command?id=, which upstream uses for commands,
// bash sessions and code contexts alike.
func (s *Server) interrupt(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		apierror.Write(w, r, apierror.BadRequest(apierror.CodeMissingQuery, "query parameter id is required"))
		return
	}
	err := s.cfg.Commands.Interrupt(id)
	if errors.Is(err, command.ErrNotFound) {
		err = s.cfg.Sessions.Interrupt(id)
	}
	if errors.Is(err, session.ErrNotFound) {
		err = s.cfg.Code.Interrupt(id)
	}
	if errors.Is(err, code.ErrNotFound) {
		apierror.Write(w, r, apierror.NotFound(apierror.CodeCommandNotFound, "no command, session or code context with id %q", id))
		return
	}
	if err != nil {
		apierror.Write(w, r, apierror.Wrap(err, http.StatusInternalServerError, apierror.CodeRuntimeError, "interrupt %s", id))
		return
	}
	w.WriteHeader(http.StatusOK)
}

var probeMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// notFound answers unknown paths with 404 and known paths with the wrong
// method with 405, both as {code, message}.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
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
		for _, m := range allow {
			w.Header().Add("Allow", m)
		}
		apierror.Write(w, r, apierror.New(http.StatusMethodNotAllowed, apierror.CodeMethodNotAllowed, "method %s not allowed on %s", r.Method, r.URL.Path))
		return
	}
	apierror.Write(w, r, apierror.NotFound(apierror.CodeRouteNotFound, "no route for %s %s", r.Method, r.URL.Path))
}

func (s *Server) auth(next http.Handler) http.Handler {
	if s.cfg.AccessToken == "" && s.cfg.ClaimToken == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == ClaimPath {
			s.claim(w, r)
			return
		}
		want := s.gate.accessToken()
		if want == "" {
			unauthorized(w, "Unauthorized: this execd waits to be claimed for a sandbox")
			return
		}
		got := []byte(r.Header.Get(sandbox.AccessTokenHeader))
		if subtle.ConstantTimeCompare(got, []byte(want)) != 1 {
			unauthorized(w, "Unauthorized: invalid or missing header "+sandbox.AccessTokenHeader)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) recover(next http.Handler) http.Handler {
	return httpmw.Recover(next, func(w http.ResponseWriter, r *http.Request, v any) {
		s.cfg.Logger.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
		apierror.Write(w, r, apierror.New(http.StatusInternalServerError, apierror.CodeInternal, "internal error"))
	})
}

func (s *Server) logRequests(next http.Handler) http.Handler {
	log := s.cfg.Logger
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !log.Enabled(r.Context(), slog.LevelDebug) {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		rec := &httpmw.StatusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rec.Status, "duration", time.Since(start))
	})
}

// Serve runs the API on ln until ctx ends, then shuts down: it stops
// accepting, gives open requests up to grace to finish, and closes the
// runners (killing what they still run).
func (s *Server) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.closeRunners()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := hs.Shutdown(shutdownCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = hs.Close()
	}
	s.closeRunners()
	<-errc
	return err
}

func (s *Server) closeRunners() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, closer := range map[string]func(context.Context) error{
		"commands": s.cfg.Commands.Close,
		"sessions": s.cfg.Sessions.Close,
		"code":     s.cfg.Code.Close,
		"pty":      s.cfg.PTY.Close,
		"isolated": s.cfg.Isolated.Close,
	} {
		if err := closer(ctx); err != nil {
			s.cfg.Logger.Warn("closing runners", "runner", name, "err", err)
		}
	}
}
