package sandbox

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Sandbox is a handle on a running sandbox: lifecycle calls by its id and
// execd calls (commands, sessions, files, metrics) at its execd endpoint.
// Get one from Client.Create, Connect or Resume. It is safe for concurrent
// use.
type Sandbox struct {
	c  *Client
	id string

	mu     sync.RWMutex
	execd  string      // execd base URL, no trailing slash
	header http.Header // endpoint headers (access token ...)
	egress *Egress     // made on first use by Egress
}

// handle resolves the execd endpoint of sandbox id into a Sandbox.
func (c *Client) handle(ctx context.Context, id string) (*Sandbox, error) {
	s := &Sandbox{c: c, id: id}
	if err := s.resolve(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// resolve (re)reads the execd endpoint, directly or through the server
// proxy as the Client is configured.
func (s *Sandbox) resolve(ctx context.Context) error {
	base, h, err := s.c.target(ctx, s.id, ExecdPort)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.execd, s.header = base, h
	s.mu.Unlock()
	return nil
}

// target resolves port of sandbox id, directly or through the server proxy
// as the Client is configured, into a base URL without a trailing slash and
// the headers every request to it must carry.
func (c *Client) target(ctx context.Context, id string, port int) (string, http.Header, error) {
	ep, err := c.Endpoint(ctx, id, port, c.o.serverProxy)
	if err != nil {
		return "", nil, err
	}
	h := http.Header{}
	for k, v := range ep.Headers {
		h.Set(k, v)
	}
	if c.o.serverProxy && c.o.apiKey != "" {
		// Harmless: the proxy strips it and adds the execd token itself.
		h.Set(APIKeyHeader, c.o.apiKey)
	}
	// An endpoint is host[:port][/path]; one that names its own scheme
	// ("https://...") keeps it.
	base := c.scheme + "://" + trimSlash(ep.Endpoint)
	if strings.Contains(ep.Endpoint, "://") {
		base = trimSlash(ep.Endpoint)
	}
	if _, err := url.Parse(base); err != nil {
		return "", nil, fmt.Errorf("sandbox %s: bad endpoint %q for port %d: %w", id, ep.Endpoint, port, err)
	}
	return base, h, nil
}

func trimSlash(s string) string {
	for len(s) > 0 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}

// ID returns the sandbox id.
func (s *Sandbox) ID() string { return s.id }

// ExecdURL returns the base URL of the sandbox's execd (direct or through
// the server proxy), without a trailing slash.
func (s *Sandbox) ExecdURL() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.execd
}

// ExecdHeaders returns a copy of the headers every execd request needs
// (X-EXECD-ACCESS-TOKEN when direct), plus those given with WithHeader.
func (s *Sandbox) ExecdHeaders() http.Header {
	h := s.c.o.headers.Clone()
	if h == nil {
		h = http.Header{}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k, vs := range s.header {
		h[k] = append([]string(nil), vs...)
	}
	return h
}

// execdCall returns a call to execd at path.
func (s *Sandbox) execdCall(method, path string) *call {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return &call{method: method, url: s.execd + path, header: s.header.Clone()}
}

// Info returns the sandbox's description from the server.
func (s *Sandbox) Info(ctx context.Context) (SandboxInfo, error) { return s.c.Get(ctx, s.id) }

// Kill deletes the sandbox. The handle is useless afterwards.
func (s *Sandbox) Kill(ctx context.Context) error { return s.c.Kill(ctx, s.id) }

// Pause freezes the sandbox; execd does not answer until Resume.
func (s *Sandbox) Pause(ctx context.Context) error { return s.c.Pause(ctx, s.id) }

// Resume resumes the paused sandbox, waits for Running, re-reads the execd
// endpoint and waits for execd's /ping, within 30s.
func (s *Sandbox) Resume(ctx context.Context) error {
	if err := s.c.ResumeNoWait(ctx, s.id); err != nil {
		return err
	}
	fresh, err := s.c.ready(ctx, s.id, SandboxStatus{State: StateResuming}, defaultReadyTimeout, false, true)
	if err != nil {
		return err
	}
	fresh.mu.RLock()
	base, h := fresh.execd, fresh.header
	fresh.mu.RUnlock()
	s.mu.Lock()
	s.execd, s.header = base, h
	if s.egress != nil {
		s.egress.forget() // the sidecar may be reached elsewhere now
	}
	s.mu.Unlock()
	return nil
}

// Renew moves the sandbox's expiry to now + d and returns the new expiry.
func (s *Sandbox) Renew(ctx context.Context, d time.Duration) (time.Time, error) {
	return s.c.Renew(ctx, s.id, time.Now().Add(d))
}

// PatchMetadata changes the sandbox's metadata; see Client.PatchMetadata.
func (s *Sandbox) PatchMetadata(ctx context.Context, patch map[string]*string) (SandboxInfo, error) {
	return s.c.PatchMetadata(ctx, s.id, patch)
}

// Endpoint returns how to reach port inside the sandbox, through the server
// proxy when the Client uses it.
func (s *Sandbox) Endpoint(ctx context.Context, port int) (Endpoint, error) {
	return s.c.Endpoint(ctx, s.id, port, s.c.o.serverProxy)
}

// Healthy reports whether execd answers GET /ping (one attempt, no retry).
func (s *Sandbox) Healthy(ctx context.Context) bool {
	cl := s.execdCall(http.MethodGet, "/ping")
	cl.noRetry = true
	_, err := s.c.do(ctx, cl, nil)
	return err == nil
}

// waitPing polls /ping with a backoff from 20ms to 200ms until it answers
// or ctx ends; it returns the last error.
//
// While execd does not answer, check (when not nil) is called at most once
// per stateCheckInterval; an error from it ends the wait (the sandbox will
// never answer, for example because its entrypoint exited).
func (s *Sandbox) waitPing(ctx context.Context, check func(context.Context) error) error {
	backoff := 20 * time.Millisecond
	var checked time.Time
	for {
		cl := s.execdCall(http.MethodGet, "/ping")
		cl.noRetry = true
		_, err := s.c.do(ctx, cl, nil)
		if err == nil {
			return nil
		}
		if check != nil && time.Since(checked) >= stateCheckInterval {
			checked = time.Now()
			if cerr := check(ctx); cerr != nil {
				return cerr
			}
		}
		if serr := sleepCtx(ctx, backoff); serr != nil {
			return err
		}
		backoff = min(backoff*2, 200*time.Millisecond)
	}
}

// stateCheckInterval spaces the state checks of waitPing.
const stateCheckInterval = 500 * time.Millisecond

// Snapshot saves the sandbox's filesystem as a snapshot named name and
// waits until it is Ready; see Client.WaitSnapshot.
func (s *Sandbox) Snapshot(ctx context.Context, name string) (Snapshot, error) {
	snap, err := s.c.CreateSnapshot(ctx, s.id, name)
	if err != nil {
		return snap, err
	}
	return s.c.WaitSnapshot(ctx, snap.ID)
}
