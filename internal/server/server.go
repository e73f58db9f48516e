package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/httpmw"
	"github.com/opensandbox-go/opensandbox/internal/lifecycle"
	"github.com/opensandbox-go/opensandbox/internal/metrics"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// DefaultMinTimeout is the lowest sandbox timeout a create accepts when
// Config.MinTimeout is zero.
const DefaultMinTimeout = lifecycle.DefaultMinTimeout

// maxJSONBody caps every JSON request body.
const maxJSONBody = 1 << 20

// Store is what the server keeps outside the runtime (see
// lifecycle.Store); internal/store implements it.
type Store = lifecycle.Store

// CreateJournal is the part of the Store that remembers unanswered creates
// (see lifecycle.CreateJournal).
type CreateJournal = lifecycle.CreateJournal

// Overrides are the changes made to a sandbox after it was created (see
// lifecycle.Overrides).
type Overrides = lifecycle.Overrides

// Config is what a Server is built from. Runtime and Store are required.
type Config struct {
	Runtime runtime.Runtime
	Store   Store
	// APIKey must be sent in OPEN-SANDBOX-API-KEY; "" turns auth off (main
	// allows that only when told to run insecure).
	APIKey string
	// OpenProxy lets the proxy route through without the API key, as
	// upstream does (callers on a sandbox network must still send it).
	// false, the default, puts the proxy behind the key like every other
	// route.
	OpenProxy bool
	// PublicHost (a host name or IP, no scheme, no port) replaces the host
	// of endpoint answers: the runtime's address host for direct
	// endpoints, the request's host for server-proxy endpoints. "" keeps
	// those hosts.
	PublicHost string
	// MaxTimeout caps a create's timeout and how far ahead a renew may
	// set the expiry; 0 means no cap.
	MaxTimeout time.Duration
	// MinTimeout is the lowest timeout a create accepts; 0 means
	// DefaultMinTimeout.
	MinTimeout time.Duration
	// DefaultDiskLimit is the disk limit in bytes of sandboxes created
	// without resourceLimits.ephemeral-storage; 0 means none. When the
	// runtime cannot enforce it, such creates fail (400
	// DISK_LIMIT_NOT_SUPPORTED) rather than run unlimited, and New logs a
	// warning.
	DefaultDiskLimit int64
	// OpenAPIJSON is served at /openapi.json.
	OpenAPIJSON []byte
	// Logger receives the server's logs; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// BodyLimits bound how slowly a client may send a request body (the
	// proxy's included); the zero value means httpmw.DefaultBodyLimits.
	BodyLimits httpmw.BodyLimits
	// Metrics records the server's Prometheus metrics; nil makes a new
	// set. Pass one to share it with other code (a debug listener).
	Metrics *metrics.Metrics
	// SweepInterval is how often Run asks a runtime.Sweeper to remove
	// leftovers; 0 means DefaultSweepInterval.
	SweepInterval time.Duration
}

// DefaultSweepInterval is how often leftovers of interrupted work are
// looked for.
const DefaultSweepInterval = lifecycle.DefaultSweepInterval

// Server is the OpenSandbox lifecycle API over a lifecycle.Service.
// Build it with New, serve Handler, and run Run for its background work.
type Server struct {
	cfg     Config
	lc      *lifecycle.Service
	rt      runtime.Runtime // for the calls that pass straight through
	log     *slog.Logger
	mux     *http.ServeMux
	handler http.Handler

	// proxy forwards /sandboxes/{id}/proxy/{port}/... requests.
	proxy *sandboxProxy
	// callers tells requests from inside a sandbox; nil when the runtime
	// cannot say (then none is treated as one).
	callers *sandboxCallers

	// bg ends when Run returns (hijacked proxy connections watch it).
	bg          context.Context
	cancelBg    context.CancelFunc
	metrics     *metrics.Metrics
	metricsHTTP http.Handler
}

// New checks cfg and builds a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("server: Config.Runtime is required")
	}
	if cfg.Store == nil {
		return nil, errors.New("server: Config.Store is required")
	}
	if cfg.MaxTimeout < 0 || cfg.MinTimeout < 0 {
		return nil, errors.New("server: timeouts must not be negative")
	}
	if cfg.MinTimeout == 0 {
		cfg.MinTimeout = DefaultMinTimeout
	}
	if cfg.MaxTimeout > 0 && cfg.MaxTimeout < cfg.MinTimeout {
		return nil, errors.New("server: MaxTimeout is below MinTimeout")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// Records logged with a request's context carry its id.
	cfg.Logger = slog.New(httpmw.ContextHandler(cfg.Logger.Handler()))
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(countStates(cfg.Runtime))
	}
	lc, err := lifecycle.New(lifecycle.Config{
		Runtime:       cfg.Runtime,
		Store:         cfg.Store,
		MaxTimeout:    cfg.MaxTimeout,
		Logger:        cfg.Logger,
		LoggerFrom:    requestLogger,
		Now:           cfg.Now,
		SweepInterval: cfg.SweepInterval,
		Metrics:       cfg.Metrics,
	})
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg,
		lc:  lc,
		rt:  cfg.Runtime,
		log: cfg.Logger,
		mux: http.NewServeMux(),
	}
	s.bg, s.cancelBg = context.WithCancel(context.Background())
	s.proxy = newSandboxProxy(s)
	if sn, ok := cfg.Runtime.(runtime.SandboxNetworks); ok {
		s.callers = &sandboxCallers{src: sn}
	}
	s.metrics = cfg.Metrics
	s.metricsHTTP = s.metrics.Handler()
	s.register()
	lim := cfg.BodyLimits
	if lim == (httpmw.BodyLimits{}) {
		lim = httpmw.DefaultBodyLimits
	}
	s.handler = httpmw.BoundBody(s.withRequestID(s.recoverPanics(s.logRequests(s.metrics.Instrument(s.mux)))), lim)
	return s, nil
}

// Handler returns the API with its middleware: request-body time limits,
// request ids, panic recovery, request logs; auth is applied per route by
// the route table.
func (s *Server) Handler() http.Handler { return s.handler }

// NewHTTPServer returns an http.Server for h with the limits the API
// needs: headers must arrive within 10 s (bodies are bounded by Handler's
// httpmw.BoundBody, by progress rather than a fixed time). It sets no
// ReadTimeout or WriteTimeout: uploads, log streams, command streams and
// WebSockets relayed by the proxy legitimately outlive any fixed bound.
func NewHTTPServer(h http.Handler, addr string) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
	}
}

// Lifecycle returns the service the server is a front end of, so that
// another front end can share it.
func (s *Server) Lifecycle() *lifecycle.Service { return s.lc }

// Run does the lifecycle's background work (see lifecycle.Service.Run)
// until ctx ends; when ctx ends, so do the connections the proxy
// hijacked. It returns nil after every background goroutine finished.
func (s *Server) Run(ctx context.Context) error {
	defer s.cancelBg()
	stop := context.AfterFunc(ctx, s.cancelBg)
	defer stop()
	return s.lc.Run(ctx)
}
