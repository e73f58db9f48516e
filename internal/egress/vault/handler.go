package vault

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
)

// maxBodyBytes caps a vault request body.
const maxBodyBytes = 1 << 20

// HandlerConfig configures Handler. Store is required; the rest is optional.
type HandlerConfig struct {
	Store *Store
	// Ready, when set, is asked before a vault is created; false answers 412
	// (the credential proxy is not ready to use it). Nil means always ready.
	Ready func() bool
	// CheckBindings, when set, re-validates bindings against the network
	// policy before a write is applied; an error answers 400 with its text.
	// The text must not contain secret values (bindings carry none).
	CheckBindings func([]CredentialBinding) error
	// TrustedPeer, when set, names further peers whose plain-TCP writes
	// are accepted besides loopback: hosts on a link that never leaves the
	// machine (the host's address on the sandbox's bridge).
	TrustedPeer func(netip.Addr) bool
	// Logger receives one line per failed write, without bodies. Nil
	// discards.
	Logger *slog.Logger
}

// Handler serves the /credential-vault routes. Mount it on the egress API mux
// at "/credential-vault" and "/credential-vault/"; the egress API's own auth
// (OPENSANDBOX-EGRESS-AUTH) wraps it outside. Errors are text/plain.
func Handler(cfg HandlerConfig) http.Handler {
	if cfg.Store == nil {
		panic("vault.Handler: Store is required")
	}
	h := &handler{cfg: cfg, log: cfg.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	routes := map[string]http.HandlerFunc{
		"POST /credential-vault":                   h.write(h.create),
		"GET /credential-vault":                    h.get,
		"PATCH /credential-vault":                  h.write(h.patch),
		"DELETE /credential-vault":                 h.write(h.delete),
		"GET /credential-vault/credentials":        h.listCredentials,
		"GET /credential-vault/credentials/{name}": h.getCredential,
		"GET /credential-vault/bindings":           h.listBindings,
		"GET /credential-vault/bindings/{name}":    h.getBinding,
		"/credential-vault/_active":                h.active,
	}
	for pattern, fn := range routes {
		mux.HandleFunc(pattern, fn)
	}
	return mux
}

type handler struct {
	cfg HandlerConfig
	log *slog.Logger
}

// errUpgradeRequired is the 426 answer for vault writes over plain TCP from
// a non-loopback peer, where the secret would cross the network in clear.
var errUpgradeRequired = errors.New("credential vault writes require TLS or loopback transport")

// secureTransport reports whether r arrived over TLS, from a loopback
// address or from a trusted peer.
func (h *handler) secureTransport(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.Unmap()
	return a.IsLoopback() || (h.cfg.TrustedPeer != nil && h.cfg.TrustedPeer(a))
}

// write wraps a mutating route with the transport rule and a body cap.
func (h *handler) write(fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.secureTransport(r) {
			http.Error(w, errUpgradeRequired.Error(), http.StatusUpgradeRequired)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
		fn(w, r)
	}
}

func (h *handler) create(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Ready != nil && !h.cfg.Ready() {
		http.Error(w, "credential proxy is not ready", http.StatusPreconditionFailed)
		return
	}
	var req CreateRequest
	if err := decode(r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.checkBindings(req.Bindings); err != nil {
		h.fail(w, r, err)
		return
	}
	st, err := h.cfg.Store.Create(req)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, st)
}

func (h *handler) patch(w http.ResponseWriter, r *http.Request) {
	var req PatchRequest
	if err := decode(r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	if b := req.Bindings; b != nil {
		if err := h.checkBindings(append(append([]CredentialBinding(nil), b.Add...), b.Replace...)); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	st, err := h.cfg.Store.Patch(req)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (h *handler) delete(w http.ResponseWriter, r *http.Request) {
	if err := h.cfg.Store.Delete(); err != nil {
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	v, err := h.cfg.Store.Get()
	respond(h, w, r, v, err)
}

func (h *handler) listCredentials(w http.ResponseWriter, r *http.Request) {
	v, err := h.cfg.Store.Credentials()
	respond(h, w, r, v, err)
}

func (h *handler) getCredential(w http.ResponseWriter, r *http.Request) {
	v, err := h.cfg.Store.Credential(r.PathValue("name"))
	respond(h, w, r, v, err)
}

func (h *handler) listBindings(w http.ResponseWriter, r *http.Request) {
	v, err := h.cfg.Store.Bindings()
	respond(h, w, r, v, err)
}

func (h *handler) getBinding(w http.ResponseWriter, r *http.Request) {
	v, err := h.cfg.Store.Binding(r.PathValue("name"))
	respond(h, w, r, v, err)
}

// active refuses the active-state route: the unredacted vault is served to
// the proxy in-process (or over a unix socket), never over HTTP.
func (h *handler) active(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "the active credential vault is not served over HTTP", http.StatusForbidden)
}

func (h *handler) checkBindings(b []CredentialBinding) error {
	if h.cfg.CheckBindings == nil || len(b) == 0 {
		return nil
	}
	if err := h.cfg.CheckBindings(b); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// respond writes v as 200 JSON, or the error.
func respond(h *handler, w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// statusFor is the one place vault errors become HTTP status codes.
func statusFor(err error) int {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrAlreadyExists), errors.Is(err, ErrConflict):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// fail answers with err's text. Store and decode errors never contain secret
// values, so the text is safe to show.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := statusFor(err)
	if r.Method != http.MethodGet {
		h.log.Warn("credential vault write refused", "method", r.Method, "path", r.URL.Path, "status", code, "err", err)
	}
	http.Error(w, err.Error(), code)
}

// decode reads one JSON object strictly. Its errors describe where the body
// is wrong, never what it contained.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("trailing data after the JSON object")
	}
	if err == nil {
		return nil
	}
	var tooBig *http.MaxBytesError
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooBig):
		return fmt.Errorf("request body is larger than %d bytes: %w", tooBig.Limit, err)
	case errors.As(err, &syn):
		return fmt.Errorf("%w: malformed JSON at byte %d", ErrInvalid, syn.Offset)
	case errors.As(err, &typ):
		return fmt.Errorf("%w: field %q must be %s", ErrInvalid, typ.Field, typ.Type)
	}
	// Unknown-field and EOF errors name fields, not values.
	return fmt.Errorf("%w: %v", ErrInvalid, err)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
