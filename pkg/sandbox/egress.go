package sandbox

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
)

// Egress talks to the egress sidecar of one sandbox: the network policy
// routes (/policy), its health (/healthz) and, through CredentialVault, the
// credential vault. The sidecar runs only in sandboxes created with a
// NetworkPolicy.
//
// The sidecar is reached like execd: GET /v1/sandboxes/{id}/endpoints/18080
// (through the server proxy when the Client uses it) gives its address and
// the headers to send, among them the sidecar's token in EgressAuthHeader.
// The endpoint is resolved on first use and kept; a transport failure
// forgets it, so the next call resolves it again.
//
// The sidecar answers errors as text/plain. They come back as *APIError
// with the status, the text as Message and a Code of "EGRESS::" plus the
// status name, e.g. "EGRESS::CONFLICT". An Egress is safe for concurrent
// use.
type Egress struct {
	c  *Client
	id string

	mu     sync.Mutex
	base   string      // sidecar base URL, "" until resolved
	header http.Header // endpoint headers (egress token ...)
}

// Egress returns a client for the egress sidecar of sandbox id. It does
// not contact anything until its first call.
func (c *Client) Egress(id string) *Egress { return &Egress{c: c, id: id} }

// Egress returns the client for the sandbox's egress sidecar. Every call
// returns the same *Egress, so the sidecar's endpoint is resolved once.
func (s *Sandbox) Egress() *Egress {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.egress == nil {
		s.egress = s.c.Egress(s.id)
	}
	return s.egress
}

// SandboxID returns the id of the sandbox whose sidecar e talks to.
func (e *Egress) SandboxID() string { return e.id }

// GetPolicy returns the policy in force with its derived mode.
func (e *Egress) GetPolicy(ctx context.Context) (*PolicyStatus, error) {
	var st PolicyStatus
	if err := e.do(ctx, http.MethodGet, "/policy", nil, &st); err != nil {
		return nil, wrap(err, "get egress policy of sandbox %s", e.id)
	}
	return &st, nil
}

// SetPolicy replaces the whole policy (POST /policy). A nil policy, like
// an empty one, means deny-all. The sidecar enforces the new policy before
// it takes effect; when that fails the old one stays and the error has
// status 500.
func (e *Egress) SetPolicy(ctx context.Context, p *NetworkPolicy) (*PolicyStatus, error) {
	var body any
	if p != nil {
		body = p
	}
	var st PolicyStatus
	if err := e.do(ctx, http.MethodPost, "/policy", body, &st); err != nil {
		return nil, wrap(err, "set egress policy of sandbox %s", e.id)
	}
	return &st, nil
}

// PatchPolicy merges rules into the policy (PATCH /policy): they go before
// the existing rules and replace existing rules with the same target; the
// default action is kept. At least one rule is required.
func (e *Egress) PatchPolicy(ctx context.Context, rules []NetworkRule) (*PolicyStatus, error) {
	if len(rules) == 0 {
		return nil, errors.New("opensandbox: patch egress policy: no rules")
	}
	var st PolicyStatus
	if err := e.do(ctx, http.MethodPatch, "/policy", rules, &st); err != nil {
		return nil, wrap(err, "patch egress policy of sandbox %s", e.id)
	}
	return &st, nil
}

// DeletePolicyRules removes the rules whose targets are listed (DELETE
// /policy). Targets no rule has are ignored; the default action is kept.
// At least one target is required.
func (e *Egress) DeletePolicyRules(ctx context.Context, targets []string) (*PolicyStatus, error) {
	if len(targets) == 0 {
		return nil, errors.New("opensandbox: delete egress rules: no targets")
	}
	var st PolicyStatus
	if err := e.do(ctx, http.MethodDelete, "/policy", targets, &st); err != nil {
		return nil, wrap(err, "delete egress rules of sandbox %s", e.id)
	}
	return &st, nil
}

// Health checks that the sidecar answers GET /healthz (one attempt, no
// retry). The error has status 503 while the sidecar is not ready.
func (e *Egress) Health(ctx context.Context) error {
	var body string
	err := e.send(ctx, &call{method: http.MethodGet, url: "/healthz", noRetry: true}, &body)
	return wrap(err, "egress health of sandbox %s", e.id)
}

// do sends one JSON call to path on the sidecar.
func (e *Egress) do(ctx context.Context, method, path string, body, out any) error {
	return e.send(ctx, &call{method: method, url: path, body: body}, out)
}

// send resolves the sidecar (cl.url is a path below it), sends cl and
// turns a plain-text error reply into an EGRESS:: APIError.
func (e *Egress) send(ctx context.Context, cl *call, out any) error {
	base, h, err := e.endpoint(ctx)
	if err != nil {
		return err
	}
	cl.url = base + cl.url
	cl.header = h
	_, err = e.c.do(ctx, cl, out)
	var ae *APIError
	switch {
	case err == nil:
	case errors.As(err, &ae):
		if ae.Code == "" {
			ae.Code = egressCode(ae.StatusCode)
		}
	case !isCtxErr(err):
		e.forget()
	}
	return err
}

// endpoint returns the sidecar's base URL and headers, resolving them on
// first use.
func (e *Egress) endpoint(ctx context.Context) (string, http.Header, error) {
	e.mu.Lock()
	base, h := e.base, e.header
	e.mu.Unlock()
	if base != "" {
		return base, h.Clone(), nil
	}
	base, h, err := e.c.target(ctx, e.id, EgressPort)
	if err != nil {
		return "", nil, wrap(err, "egress sidecar of sandbox %s", e.id)
	}
	e.mu.Lock()
	e.base, e.header = base, h
	e.mu.Unlock()
	return base, h.Clone(), nil
}

// forget drops the resolved endpoint so the next call resolves it again.
func (e *Egress) forget() {
	e.mu.Lock()
	e.base, e.header = "", nil
	e.mu.Unlock()
}

// egressCode derives an APIError code from a status the sidecar answered
// with a plain-text body: 409 gives "EGRESS::CONFLICT".
func egressCode(status int) string {
	text := http.StatusText(status)
	if text == "" {
		text = "ERROR"
	}
	return "EGRESS::" + strings.ToUpper(strings.NewReplacer(" ", "_", "-", "_", "'", "").Replace(text))
}
