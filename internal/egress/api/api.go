// Package api serves the egress sidecar's HTTP API (port 18080): GET,
// POST, PUT, PATCH and DELETE /policy over a policy.Store, and /healthz.
// Routes live on the API's own mux, in one table; token auth wraps them
// once. Errors are text/plain, as upstream's sidecar answers them.
//
//	a, err := api.New(api.Config{Store: store, Token: token, Apply: nftApply})
//	srv := &http.Server{Addr: ":18080", Handler: a.Handler()}
//
// Writes go through Store.Update: the Apply hook enforces the new policy
// before it becomes current, so a failed enforcement leaves the previous
// policy in place and answers 500. The package must not import the
// enforcement packages; the sidecar's wiring passes them in as hooks.
package api

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/opensandbox-go/opensandbox/internal/egress/policy"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// DefaultMaxBodyBytes caps request bodies unless Config says otherwise.
const DefaultMaxBodyBytes = 1 << 20

// Config holds the API's dependencies. Store is required.
type Config struct {
	// Store holds the current policy.
	Store *policy.Store
	// Options are the limits new policies are built with (the rule cap).
	// The zero value means no cap; the sidecar passes
	// policy.DefaultMaxRules unless configured.
	Options policy.Options
	// Token, when set, must be sent in the OPENSANDBOX-EGRESS-AUTH header
	// of every /policy request. /healthz is always open so that probes
	// need no secret.
	Token string
	// Metrics, when set, is served at GET /metrics with the token.
	Metrics http.Handler
	// EnforcementMode is reported in replies; default "dns".
	EnforcementMode string
	// Reason, when set, returns extra context for replies, such as why
	// enforcement is disabled; "" adds nothing.
	Reason func() string
	// Apply enforces a policy before it becomes current; nil accepts
	// every policy without enforcing anything.
	Apply policy.ApplyFunc
	// Ready reports readiness for /healthz: nil error means ready; nil
	// Ready means always ready.
	Ready func(ctx context.Context) error
	// Vault, when set, serves /credential-vault and everything under it,
	// behind the same token check as /policy.
	Vault http.Handler
	// MaxBodyBytes caps request bodies; default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Logger receives internal causes of 500 replies; default
	// slog.Default().
	Logger *slog.Logger
}

// API is the egress HTTP API.
type API struct {
	cfg     Config
	handler http.Handler
}

// New checks cfg and builds the route table.
func New(cfg Config) (*API, error) {
	if cfg.Store == nil {
		return nil, errors.New("egress api: Config.Store is required")
	}
	if cfg.EnforcementMode == "" {
		cfg.EnforcementMode = sandbox.EgressEnforcementDNS
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &API{cfg: cfg}
	mux := http.NewServeMux()
	for _, rt := range a.routes() {
		var h http.Handler = rt.handler
		if !rt.open {
			h = a.auth(h)
		}
		mux.Handle(rt.pattern, h)
	}
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", a.auth(cfg.Metrics))
	}
	if cfg.Vault != nil {
		v := a.auth(cfg.Vault)
		mux.Handle("/credential-vault", v)
		mux.Handle("/credential-vault/", v)
	}
	a.handler = mux
	return a, nil
}

type route struct {
	pattern string
	handler http.HandlerFunc
	open    bool // served without the token
}

// routes is the whole API, one line per endpoint.
func (a *API) routes() []route {
	return []route{
		{pattern: "GET /policy", handler: a.getPolicy},
		{pattern: "POST /policy", handler: a.replacePolicy},
		{pattern: "PUT /policy", handler: a.replacePolicy},
		{pattern: "PATCH /policy", handler: a.patchPolicy},
		{pattern: "DELETE /policy", handler: a.deletePolicy},
		{pattern: "GET /healthz", handler: a.healthz, open: true},
	}
}

// Handler returns the API.
func (a *API) Handler() http.Handler { return a.handler }

func (a *API) auth(next http.Handler) http.Handler {
	if a.cfg.Token == "" {
		return next
	}
	want := []byte(a.cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get(sandbox.EgressAuthHeader))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *API) getPolicy(w http.ResponseWriter, r *http.Request) {
	a.writeStatus(w, a.cfg.Store.Current())
}

// replacePolicy handles POST and PUT: the body is a whole NetworkPolicy,
// and an empty body, {} or null means deny-all.
func (a *API) replacePolicy(w http.ResponseWriter, r *http.Request) {
	body, ok := a.readBody(w, r)
	if !ok {
		return
	}
	next, err := policy.Parse(body, a.cfg.Options)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.update(w, r, func(*policy.Policy) (*policy.Policy, error) { return next, nil })
}

// patchPolicy merges a JSON array of rules into the current policy.
func (a *API) patchPolicy(w http.ResponseWriter, r *http.Request) {
	var rules []sandbox.NetworkRule
	if !a.decodeList(w, r, &rules, "rules") {
		return
	}
	if len(rules) == 0 {
		http.Error(w, "body must be a JSON array of at least one rule", http.StatusBadRequest)
		return
	}
	a.update(w, r, func(cur *policy.Policy) (*policy.Policy, error) { return cur.Patch(rules) })
}

// deletePolicy removes the rules whose targets are listed.
func (a *API) deletePolicy(w http.ResponseWriter, r *http.Request) {
	var targets []string
	if !a.decodeList(w, r, &targets, "target strings") {
		return
	}
	if len(targets) == 0 {
		http.Error(w, "body must be a JSON array of at least one target", http.StatusBadRequest)
		return
	}
	for i, t := range targets {
		if strings.TrimSpace(t) == "" {
			http.Error(w, fmt.Sprintf("target %d is empty", i), http.StatusBadRequest)
			return
		}
	}
	a.update(w, r, func(cur *policy.Policy) (*policy.Policy, error) { return cur.Without(targets), nil })
}

func (a *API) healthz(w http.ResponseWriter, r *http.Request) {
	if a.cfg.Ready != nil {
		if err := a.cfg.Ready(r.Context()); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ok")
}

func (a *API) update(w http.ResponseWriter, r *http.Request, change func(*policy.Policy) (*policy.Policy, error)) {
	next, err := a.cfg.Store.Update(r.Context(), change, a.cfg.Apply)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeStatus(w, next)
}

// readBody reads the capped body; on failure it has answered.
func (a *API) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		http.Error(w, fmt.Sprintf("request body larger than %d bytes", tooLarge.Limit), http.StatusRequestEntityTooLarge)
		return nil, false
	case err != nil:
		http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
		return nil, false
	}
	return body, true
}

// decodeList reads a JSON array into v; on failure it has answered.
func (a *API) decodeList(w http.ResponseWriter, r *http.Request, v any, what string) bool {
	body, ok := a.readBody(w, r)
	if !ok {
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		http.Error(w, fmt.Sprintf("body must be a JSON array of %s: %v", what, err), http.StatusBadRequest)
		return false
	}
	return true
}

// writeError is the one place policy errors become status codes.
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, policy.ErrTooManyRules):
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
	case errors.Is(err, policy.ErrInvalid):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case errors.Is(err, policy.ErrApply):
		a.cfg.Logger.WarnContext(r.Context(), "egress policy not applied", slog.String("method", r.Method), slog.Any("error", err))
		http.Error(w, "policy not applied, previous policy still in force: "+err.Error(), http.StatusInternalServerError)
	default:
		a.cfg.Logger.ErrorContext(r.Context(), "egress policy request failed", slog.String("method", r.Method), slog.Any("error", err))
		http.Error(w, "internal error", http.StatusInternalServerError)
	}
}

func (a *API) writeStatus(w http.ResponseWriter, p *policy.Policy) {
	st := sandbox.PolicyStatus{
		Status:          "ok",
		Mode:            p.Mode(),
		EnforcementMode: a.cfg.EnforcementMode,
		Policy:          p.Wire(),
	}
	if a.cfg.Reason != nil {
		st.Reason = a.cfg.Reason()
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(st)
}
