package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Defaults of CreateOptions and ConnectOptions.
const (
	defaultSandboxTimeout = 10 * time.Minute
	defaultReadyTimeout   = 30 * time.Second
	cleanupTimeout        = 30 * time.Second
)

// CreateOptions describe a new sandbox. Exactly one of Image and SnapshotID
// is required.
type CreateOptions struct {
	// Image is the image reference, e.g. "python:3.12-slim".
	Image string
	// ImageAuth holds registry credentials for Image; nil for none.
	ImageAuth *ImageAuth
	// SnapshotID starts the sandbox from a Ready snapshot instead of Image.
	SnapshotID string
	// Entrypoint is the sandbox's main process. Default
	// ["tail", "-f", "/dev/null"].
	Entrypoint []string
	// Timeout is how long the sandbox lives before the server deletes it
	// (see Renew). Default 10m; ignored when ManualCleanup is set.
	Timeout time.Duration
	// ManualCleanup makes a sandbox that never expires; it lives until
	// Kill.
	ManualCleanup bool
	// Resources are limits by name ("cpu", "memory", "gpu",
	// "ephemeral-storage" for the sandbox's disk). Default
	// {"cpu": "1", "memory": "2Gi"}.
	Resources map[string]string
	// Env is added to the environment of the entrypoint and of commands.
	Env map[string]string
	// Metadata labels the sandbox; List filters on it.
	Metadata map[string]string
	// Extensions are passed to the server as is.
	Extensions map[string]string
	// Volumes are mounted into the sandbox.
	Volumes []Volume
	// Platform selects OS and architecture; nil for the server's own.
	Platform *PlatformSpec
	// NetworkPolicy is the egress policy; nil for none (no egress
	// sidecar, so Sandbox.Egress has nothing to talk to).
	NetworkPolicy *NetworkPolicy
	// CredentialProxy turns on the sidecar's credential proxy, which
	// injects the credentials written with Sandbox.CredentialVault into
	// matching outbound HTTPS requests. It needs NetworkPolicy.
	CredentialProxy bool
	// ReadyTimeout bounds the wait for Running and for execd to answer
	// /ping. Default 30s.
	ReadyTimeout time.Duration
	// SkipHealthCheck returns as soon as the sandbox is Running, without
	// waiting for execd's /ping.
	SkipHealthCheck bool
}

// request turns the options into the wire request, applying defaults.
func (o CreateOptions) request() CreateSandboxRequest {
	req := CreateSandboxRequest{
		SnapshotID:     o.SnapshotID,
		Platform:       o.Platform,
		ResourceLimits: o.Resources,
		Env:            o.Env,
		Metadata:       o.Metadata,
		Entrypoint:     o.Entrypoint,
		NetworkPolicy:  o.NetworkPolicy,
		Volumes:        o.Volumes,
		Extensions:     o.Extensions,
	}
	if o.Image != "" {
		req.Image = &ImageSpec{URI: o.Image, Auth: o.ImageAuth}
	}
	if o.CredentialProxy {
		req.CredentialProxy = &CredentialProxyConfig{Enabled: true}
	}
	if len(req.Entrypoint) == 0 {
		req.Entrypoint = []string{"tail", "-f", "/dev/null"}
	}
	if req.ResourceLimits == nil {
		req.ResourceLimits = map[string]string{"cpu": "1", "memory": "2Gi"}
	}
	if !o.ManualCleanup {
		d := o.Timeout
		if d <= 0 {
			d = defaultSandboxTimeout
		}
		secs := int64((d + time.Second - 1) / time.Second)
		req.Timeout = &secs
	}
	return req
}

// Create creates a sandbox and returns once it is usable: it sends POST
// /sandboxes, waits for the Running state (polling with a backoff from 100ms
// to 1s), resolves the execd endpoint and waits for execd to answer /ping
// (backoff 20ms to 200ms), all within opts.ReadyTimeout (default 30s).
//
// On any failure after the POST the sandbox is deleted (with a fresh
// context, so this happens even when ctx was cancelled). A sandbox that ends
// Failed or Terminated, or is not ready in time, gives an error wrapping
// ErrNotReady with the last state and reason.
func (c *Client) Create(ctx context.Context, opts CreateOptions) (sb *Sandbox, err error) {
	if (opts.Image == "") == (opts.SnapshotID == "") {
		return nil, errors.New("opensandbox: create: exactly one of Image and SnapshotID is required")
	}
	cl := c.lifecycle(http.MethodPost, "/sandboxes")
	cl.body = opts.request()
	var created CreateSandboxResponse
	if _, err := c.do(ctx, cl, &created); err != nil {
		return nil, wrap(err, "create sandbox")
	}
	defer func() {
		if err == nil {
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if kerr := c.Kill(dctx, created.ID); kerr != nil && !IsNotFound(kerr) {
			err = fmt.Errorf("%w (and deleting it failed: %v)", err, kerr)
		}
	}()
	return c.ready(ctx, created.ID, created.Status, opts.ReadyTimeout, opts.SkipHealthCheck, false)
}

// ConnectOptions configure Connect and Resume.
type ConnectOptions struct {
	// ReadyTimeout bounds the wait for Running and for execd's /ping.
	// Default 30s.
	ReadyTimeout time.Duration
	// SkipHealthCheck does not wait for execd's /ping.
	SkipHealthCheck bool
}

// Connect returns a handle on an existing sandbox. A Pending or Resuming
// sandbox is waited for; one in any other state than Running gives an
// error wrapping ErrNotReady. Unless opts.SkipHealthCheck is set, it also
// waits for execd to answer /ping, within opts.ReadyTimeout (default 30s).
func (c *Client) Connect(ctx context.Context, id string, opts ConnectOptions) (*Sandbox, error) {
	info, err := c.Get(ctx, id)
	if err != nil {
		return nil, wrap(err, "connect to sandbox %s", id)
	}
	return c.ready(ctx, id, info.Status, opts.ReadyTimeout, opts.SkipHealthCheck, false)
}

// Resume resumes a paused sandbox (POST .../resume), waits for it to be
// Running and healthy within opts.ReadyTimeout (default 30s), and returns a
// handle on it.
func (c *Client) Resume(ctx context.Context, id string, opts ConnectOptions) (*Sandbox, error) {
	if err := c.ResumeNoWait(ctx, id); err != nil {
		return nil, err
	}
	return c.ready(ctx, id, SandboxStatus{State: StateResuming}, opts.ReadyTimeout, opts.SkipHealthCheck, true)
}

// ready waits for the sandbox to be Running, then resolves its execd
// endpoint and, unless skipPing, waits for /ping; all within timeout.
// resuming tolerates a Paused state while a resume takes effect.
func (c *Client) ready(ctx context.Context, id string, st SandboxStatus, timeout time.Duration, skipPing, resuming bool) (*Sandbox, error) {
	if timeout <= 0 {
		timeout = defaultReadyTimeout
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	notReady := func(what string, last error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		state := "state " + st.State
		if st.Reason != "" {
			state += ", reason " + st.Reason
		}
		if st.Message != "" {
			state += ": " + st.Message
		}
		if last != nil && !isCtxErr(last) {
			return fmt.Errorf("%w: sandbox %s %s (%s): %w", ErrNotReady, id, what, state, last)
		}
		return fmt.Errorf("%w: sandbox %s %s (%s)", ErrNotReady, id, what, state)
	}
	backoff := 100 * time.Millisecond
	for st.State != StateRunning {
		switch st.State {
		case StatePending, StateResuming, "":
		case StatePaused, StatePausing:
			if !resuming {
				return nil, notReady("not running", nil)
			}
		default: // Failed, Terminated, Stopping and states we do not know
			return nil, notReady("will not run", nil)
		}
		if err := sleepCtx(wctx, backoff); err != nil {
			return nil, notReady(fmt.Sprintf("not running after %v", timeout), nil)
		}
		backoff = min(backoff*2, time.Second)
		info, err := c.Get(wctx, id)
		if err != nil {
			if wctx.Err() != nil {
				return nil, notReady(fmt.Sprintf("not running after %v", timeout), nil)
			}
			return nil, wrap(err, "wait for sandbox %s", id)
		}
		st = info.Status
	}
	sb, err := c.handle(wctx, id)
	if err != nil {
		if wctx.Err() != nil {
			return nil, notReady(fmt.Sprintf("no endpoint after %v", timeout), err)
		}
		return nil, err
	}
	if skipPing {
		return sb, nil
	}
	// A sandbox that stops while we wait (its entrypoint exited) will never
	// answer: say so at once rather than when the timeout runs out.
	errStopped := errors.New("stopped")
	err = sb.waitPing(wctx, func(ctx context.Context) error {
		info, err := c.Get(ctx, id)
		if err != nil {
			return nil // keep pinging; the timeout still bounds the wait
		}
		if st = info.Status; st.State != StateRunning {
			return errStopped
		}
		return nil
	})
	if errors.Is(err, errStopped) {
		return nil, notReady("stopped before execd answered", nil)
	}
	if err != nil {
		return nil, notReady(fmt.Sprintf("execd did not answer /ping within %v", timeout), err)
	}
	return sb, nil
}

// Get returns the description of sandbox id (GET /sandboxes/{id}).
func (c *Client) Get(ctx context.Context, id string) (SandboxInfo, error) {
	var info SandboxInfo
	_, err := c.do(ctx, c.lifecycle(http.MethodGet, "/sandboxes/"+url.PathEscape(id)), &info)
	return info, wrap(err, "get sandbox %s", id)
}

// Kill deletes sandbox id and everything the server made for it.
func (c *Client) Kill(ctx context.Context, id string) error {
	_, err := c.do(ctx, c.lifecycle(http.MethodDelete, "/sandboxes/"+url.PathEscape(id)), nil)
	return wrap(err, "kill sandbox %s", id)
}

// Pause freezes every process of sandbox id. It returns once the server has
// accepted; the state becomes Paused.
func (c *Client) Pause(ctx context.Context, id string) error {
	_, err := c.do(ctx, c.lifecycle(http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/pause"), nil)
	return wrap(err, "pause sandbox %s", id)
}

// ResumeNoWait asks the server to resume paused sandbox id and returns once
// it has accepted, without waiting for Running (see Resume).
func (c *Client) ResumeNoWait(ctx context.Context, id string) error {
	_, err := c.do(ctx, c.lifecycle(http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/resume"), nil)
	return wrap(err, "resume sandbox %s", id)
}

// Renew sets the expiry of sandbox id to expiresAt and returns the expiry
// now in force. A sandbox made with ManualCleanup cannot be renewed
// (IsConflict).
func (c *Client) Renew(ctx context.Context, id string, expiresAt time.Time) (time.Time, error) {
	cl := c.lifecycle(http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/renew-expiration")
	cl.body = RenewSandboxExpirationRequest{ExpiresAt: expiresAt.UTC()}
	var out RenewSandboxExpirationResponse
	if _, err := c.do(ctx, cl, &out); err != nil {
		return time.Time{}, wrap(err, "renew sandbox %s", id)
	}
	return out.ExpiresAt, nil
}

// PatchMetadata applies a JSON merge patch to the metadata of sandbox id: a
// value sets its key, a nil value deletes it, keys not in patch are kept.
// It returns the updated sandbox.
func (c *Client) PatchMetadata(ctx context.Context, id string, patch map[string]*string) (SandboxInfo, error) {
	cl := c.lifecycle(http.MethodPatch, "/sandboxes/"+url.PathEscape(id)+"/metadata")
	if patch == nil {
		patch = map[string]*string{}
	}
	cl.body = patch
	cl.contentType = "application/merge-patch+json"
	var info SandboxInfo
	_, err := c.do(ctx, cl, &info)
	return info, wrap(err, "patch metadata of sandbox %s", id)
}

// Endpoint returns how to reach port inside sandbox id: an address without
// scheme and the headers to send with every request to it. With
// serverProxy the address is the server's proxy route and needs no headers.
func (c *Client) Endpoint(ctx context.Context, id string, port int, serverProxy bool) (Endpoint, error) {
	cl := c.lifecycle(http.MethodGet, "/sandboxes/"+url.PathEscape(id)+"/endpoints/"+strconv.Itoa(port))
	if serverProxy {
		cl.query = url.Values{"use_server_proxy": {"true"}}
	}
	var ep Endpoint
	_, err := c.do(ctx, cl, &ep)
	return ep, wrap(err, "endpoint of sandbox %s port %d", id, port)
}
