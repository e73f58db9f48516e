package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
)

// DefaultForwardListen is where a Forwarder listens unless
// ForwardOptions.Listen says otherwise: a free port on IPv4 loopback.
const DefaultForwardListen = "127.0.0.1:0"

// ErrNotLoopback is wrapped by the error of Forward when the listen
// address is not a loopback address and ForwardOptions.AllowRemote is not
// set.
var ErrNotLoopback = errors.New("listen address is not loopback")

// ForwardOptions configures Client.Forward and Sandbox.Forward. Every field
// is optional.
type ForwardOptions struct {
	// Listen is the local "host:port" to listen on. Default
	// DefaultForwardListen ("127.0.0.1:0", a free port). Unless AllowRemote
	// is set the host must be a loopback address or "localhost".
	Listen string

	// AllowRemote permits a Listen address that is not loopback (":8080",
	// "0.0.0.0:8080", a LAN address) and accepts requests whatever their
	// Host header says. Whoever reaches the listener then reaches the
	// sandbox port with this Client's credentials: set it only on a
	// network you trust.
	AllowRemote bool

	// TrustedOrigins are browser origins ("https://app.example.com") whose
	// pages may send cross-origin requests and open WebSockets through the
	// forwarder. Without them only pages served by the forwarder itself
	// and non-browser clients may; see Forwarder.
	TrustedOrigins []string

	// StripHeaders are request headers removed before forwarding, on top
	// of the platform credentials (API key, execd and sidecar tokens) that
	// are always removed from what a client sends. "Cookie", for example,
	// keeps cookies a browser holds for other services on the same local
	// host away from the sandbox, at the price of cookie sessions in it.
	StripHeaders []string

	// Logger receives diagnostics, such as a request the upstream could
	// not serve. Default slog.Default().
	Logger *slog.Logger
}

// Forwarder serves a local HTTP listener that forwards every request,
// WebSocket upgrades and streamed bodies included, to one port inside a
// sandbox, adding the headers that port's endpoint needs (execd's access
// token, or the API key through the server proxy). A web browser, which
// cannot add those headers itself, can then open a service of the sandbox
// (noVNC, VS Code, DevTools) at URL.
//
// The local path maps onto the endpoint's path: with the endpoint
// "10.0.0.5:44772/proxy/6080", GET /vnc.html?x=1 is forwarded as GET
// http://10.0.0.5:44772/proxy/6080/vnc.html?x=1 with Host 10.0.0.5:44772.
// X-Forwarded-For, -Host and -Proto describe the local request; those a
// client sends are dropped. The endpoint's headers are never sent back to
// the client.
//
// Anyone who can send requests to the listener acts with the Client's
// credentials on that sandbox port, so by default the Forwarder guards its
// loopback listener the way local development servers should:
//   - the Host header must name a loopback address or localhost, which
//     defeats DNS rebinding (a remote page whose name resolves to
//     127.0.0.1);
//   - unsafe methods (POST, PUT, ...) from a browser page of another origin
//     are refused (http.CrossOriginProtection), as are WebSocket upgrades
//     whose Origin is neither the forwarder's own nor in TrustedOrigins.
//
// A same-origin Origin header is not forwarded, so services that compare
// Origin with the Host they see (code-server does) accept the forwarded
// WebSocket; a trusted origin is forwarded as it is.
//
// The endpoint is resolved once, by Forward; after the sandbox is paused
// and resumed make a new Forwarder. Close stops it.
type Forwarder struct {
	id      string
	port    int
	target  *url.URL    // the endpoint as a URL, without credentials
	header  http.Header // added to every forwarded request
	strip   []string    // canonical header names removed from requests
	secret  []string    // canonical header names never sent back
	remote  bool
	cop     *http.CrossOriginProtection
	trusted map[string]bool // TrustedOrigins, exactly as given
	log     *slog.Logger

	ln  net.Listener
	srv *http.Server
	rp  *httputil.ReverseProxy

	cancel   context.CancelFunc // ends every request's context
	done     chan struct{}      // closed when Serve has returned
	serveErr error              // what Serve returned; read after done

	mu     sync.Mutex
	closed bool
	active sync.WaitGroup // running handlers, upgraded connections included

	closeOnce sync.Once
	closeErr  error
}

// Forward resolves the endpoint of port inside the sandbox (through the
// server proxy when the Client uses it) and starts a Forwarder for it; see
// Client.Forward.
func (s *Sandbox) Forward(ctx context.Context, port int, opts ForwardOptions) (*Forwarder, error) {
	return s.c.Forward(ctx, s.id, port, opts)
}

// Forward resolves the endpoint of port inside sandbox id (through the
// server proxy when the Client uses it, with the Client's protocol unless
// the endpoint names its own scheme), listens on opts.Listen and serves a
// Forwarder there until Close. ctx bounds the endpoint lookup and the
// listen only: the Forwarder outlives it.
//
// It fails on a port outside 1-65535, a listen address that is not
// loopback without opts.AllowRemote (wrapping ErrNotLoopback), a sandbox
// the server does not know (IsNotFound) or that is not running
// (IsConflict), and an address it cannot listen on.
func (c *Client) Forward(ctx context.Context, id string, port int, opts ForwardOptions) (*Forwarder, error) {
	fail := func(err error) (*Forwarder, error) {
		return nil, wrap(err, "forward sandbox %s port %d", id, port)
	}
	if port < 1 || port > 65535 {
		return fail(fmt.Errorf("port %d: want 1-65535", port))
	}
	listen := opts.Listen
	if listen == "" {
		listen = DefaultForwardListen
	}
	if err := checkListen(listen, opts.AllowRemote); err != nil {
		return fail(err)
	}
	cop := http.NewCrossOriginProtection()
	trusted := map[string]bool{}
	for _, o := range opts.TrustedOrigins {
		if err := cop.AddTrustedOrigin(o); err != nil {
			return fail(fmt.Errorf("trusted origin: %w", err))
		}
		trusted[o] = true
	}
	base, h, err := c.target(ctx, id, port)
	if err != nil {
		return fail(err)
	}
	target, err := url.Parse(base)
	if err != nil {
		return fail(fmt.Errorf("endpoint %q: %w", base, err))
	}
	if target.Scheme != "http" && target.Scheme != "https" {
		return fail(fmt.Errorf("endpoint %q: scheme %q, want http or https", base, target.Scheme))
	}
	// Headers given with WithHeader go along, as on every execd call; the
	// endpoint's own win.
	for k, vs := range c.o.headers {
		if _, ok := h[k]; !ok {
			h[k] = append([]string(nil), vs...)
		}
	}

	f := &Forwarder{
		id: id, port: port, target: target, header: h,
		remote: opts.AllowRemote, cop: cop, trusted: trusted, log: opts.Logger,
		done: make(chan struct{}),
	}
	if f.log == nil {
		f.log = slog.Default()
	}
	// A client's copy of a platform credential never reaches the sandbox,
	// nor does any header the endpoint asks for, which is set afresh.
	for _, k := range []string{APIKeyHeader, AccessTokenHeader, EgressAuthHeader} {
		f.secret = appendHeaderName(f.secret, k)
	}
	for k := range h {
		f.secret = appendHeaderName(f.secret, k)
	}
	f.strip = append([]string(nil), f.secret...)
	for _, k := range opts.StripHeaders {
		f.strip = appendHeaderName(f.strip, k)
	}

	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", listen)
	if err != nil {
		return fail(fmt.Errorf("listen: %w", err))
	}
	if !opts.AllowRemote && !isLoopbackAddr(ln.Addr()) {
		ln.Close()
		return fail(fmt.Errorf("%q is bound to %s: %w", listen, ln.Addr(), ErrNotLoopback))
	}
	f.ln = ln

	f.rp = &httputil.ReverseProxy{
		Rewrite:        f.rewrite,
		Transport:      c.hc.Transport, // nil is http.DefaultTransport
		FlushInterval:  -1,             // streams (logs, SSE) pass through at once
		ModifyResponse: f.modifyResponse,
		ErrorHandler:   f.fail,
		ErrorLog:       slog.NewLogLogger(f.log.Handler(), slog.LevelDebug),
	}
	baseCtx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.srv = &http.Server{
		Handler:           f,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// No read or write timeout: streams and WebSockets last as long
		// as the client keeps them.
		BaseContext: func(net.Listener) context.Context { return baseCtx },
		ErrorLog:    slog.NewLogLogger(f.log.Handler(), slog.LevelDebug),
	}
	go func() {
		defer close(f.done)
		f.serveErr = f.srv.Serve(ln)
	}()
	return f, nil
}

// Addr returns the address the Forwarder listens on.
func (f *Forwarder) Addr() net.Addr { return f.ln.Addr() }

// URL returns the Forwarder's base URL, e.g. "http://127.0.0.1:40123".
// For a listener on every interface (AllowRemote with ":port") the host is
// 127.0.0.1.
func (f *Forwarder) URL() string {
	host, port, err := net.SplitHostPort(f.ln.Addr().String())
	if err != nil {
		return "http://" + f.ln.Addr().String()
	}
	if ip, perr := netip.ParseAddr(host); perr == nil && ip.IsUnspecified() {
		if ip.Is6() {
			host = "::1"
		} else {
			host = "127.0.0.1"
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// Target returns the endpoint requests are forwarded to, as a URL without
// the headers that carry its credentials.
func (f *Forwarder) Target() string { return f.target.String() }

// SandboxID returns the id of the sandbox the Forwarder reaches.
func (f *Forwarder) SandboxID() string { return f.id }

// Port returns the port inside the sandbox the Forwarder reaches.
func (f *Forwarder) Port() int { return f.port }

// Done returns a channel closed when the Forwarder stops serving: after
// Close, or when its listener fails (Close then returns why).
func (f *Forwarder) Done() <-chan struct{} { return f.done }

// Close stops the Forwarder: it closes the listener and every connection,
// WebSockets included, and waits until its goroutines have ended. It
// returns the error that stopped serving early, if any. Calling it again
// returns the same.
func (f *Forwarder) Close() error {
	f.closeOnce.Do(func() {
		f.mu.Lock()
		f.closed = true
		f.mu.Unlock()
		f.cancel() // ends upgraded connections, which Server.Close does not track
		err := f.srv.Close()
		<-f.done
		f.active.Wait()
		if f.serveErr != nil && !errors.Is(f.serveErr, http.ErrServerClosed) {
			err = errors.Join(fmt.Errorf("forward sandbox %s port %d: serve: %w", f.id, f.port, f.serveErr), err)
		}
		f.closeErr = err
	})
	return f.closeErr
}

// ServeHTTP checks and forwards one request.
func (f *Forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		http.Error(w, "forwarder closed", http.StatusServiceUnavailable)
		return
	}
	f.active.Add(1)
	f.mu.Unlock()
	defer f.active.Done()

	if !f.remote && !isLoopbackHost(r.Host) {
		http.Error(w, fmt.Sprintf("forwarder: Host %q is not a loopback name; open %s", r.Host, f.URL()), http.StatusMisdirectedRequest)
		return
	}
	if err := f.cop.Check(r); err != nil {
		http.Error(w, "forwarder: "+err.Error(), http.StatusForbidden)
		return
	}
	if isUpgrade(r) && !f.originAllowed(r) {
		http.Error(w, fmt.Sprintf("forwarder: WebSocket from origin %q refused (not this forwarder's, not trusted)", r.Header.Get("Origin")), http.StatusForbidden)
		return
	}
	// The upstream may answer before it has read the whole body; without
	// full duplex Go's HTTP/1 server would discard the rest of it at the
	// first write of the reply. HTTP/2 is duplex already.
	_ = http.NewResponseController(w).EnableFullDuplex()
	f.rp.ServeHTTP(w, r)
}

// originAllowed reports whether an upgrade request may pass: no Origin
// (not a browser), the forwarder's own origin, or a trusted one.
func (f *Forwarder) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	return origin == "" || sameOrigin(origin, r) || f.trusted[origin]
}

// sameOrigin reports whether origin is the one a page served by the
// forwarder at r.Host has.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host) && (u.Scheme == "http" || u.Scheme == "https")
}

func (f *Forwarder) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(f.target) // path joined under the endpoint's, query kept, Host = endpoint's
	out := pr.Out.Header
	for _, k := range f.strip {
		out.Del(k)
	}
	for k, vs := range f.header {
		out[k] = append([]string(nil), vs...)
	}
	// A page of the forwarder's own origin (checked in ServeHTTP) goes on
	// as a client without Origin would: the service cannot tell that
	// origin from a foreign one, since it sees another Host (the proxies
	// on the way each rewrite it), and services that check Origin
	// (code-server, coder/websocket) let a missing one through.
	if o := pr.In.Header.Get("Origin"); o != "" && sameOrigin(o, pr.In) {
		out.Del("Origin")
	}
	pr.SetXForwarded()
}

func (f *Forwarder) modifyResponse(resp *http.Response) error {
	for _, k := range f.secret {
		resp.Header.Del(k)
	}
	return nil
}

// fail answers a request the upstream could not serve.
func (f *Forwarder) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		f.log.DebugContext(r.Context(), "forwarded request canceled",
			slog.String("sandbox", f.id), slog.Int("port", f.port), slog.String("path", r.URL.Path), slog.Any("err", err))
		return
	}
	f.log.WarnContext(r.Context(), "forwarded request failed",
		slog.String("sandbox", f.id), slog.Int("port", f.port), slog.String("path", r.URL.Path), slog.Any("err", err))
	http.Error(w, fmt.Sprintf("forwarder: cannot reach sandbox %s port %d: %v", f.id, f.port, err), http.StatusBadGateway)
}

// checkListen refuses a listen address that does not parse, or that is not
// loopback unless remote is allowed. Names other than localhost are refused
// too: what they resolve to is not known here.
func checkListen(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if allowRemote {
		return nil
	}
	if host == "" {
		return fmt.Errorf("listen address %q is every interface: %w", addr, ErrNotLoopback)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return fmt.Errorf("listen address %q: %w", addr, ErrNotLoopback)
	}
	return nil
}

func isLoopbackAddr(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// isLoopbackHost reports whether a Host header names a loopback address or
// localhost (or a name under .localhost, which resolves to loopback).
func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// isUpgrade reports whether r asks to switch protocols (WebSocket).
func isUpgrade(r *http.Request) bool {
	for _, v := range r.Header.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

func appendHeaderName(names []string, k string) []string {
	k = http.CanonicalHeaderKey(k)
	for _, n := range names {
		if n == k {
			return names
		}
	}
	return append(names, k)
}
