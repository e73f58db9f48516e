package tlsproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/hostname"
	"github.com/opensandbox-go/opensandbox/internal/egress/inject"
)

// Injector gives what to do to a request (headers to set, placeholders to
// replace), and true, when exactly one credential binding matches it.
// *vault.Store implements it, and HostMatcher too.
type Injector interface {
	Match(scheme, host string, port int, method, path string) (*inject.Plan, bool)
}

// Config configures a Proxy. CA and OriginalDst are required.
type Config struct {
	// CA mints the certificates the sandbox sees.
	CA *CA
	// Injector decides what to inject. Nil injects nothing, and then every
	// connection is spliced. When it also implements HostMatcher, only
	// connections for which MayMatch is true are intercepted; otherwise all
	// are.
	Injector Injector
	// OriginalDst returns where the sandbox meant to connect: in production
	// the pre-redirect address of a transparently redirected connection; in
	// tests a fixed loopback origin. An empty host refuses the connection.
	OriginalDst func(net.Conn) (host string, port int)
	// ExtraRoots are trusted for origins in addition to the system roots.
	ExtraRoots []*x509.Certificate
	// Dial opens upstream connections (production marks them so the
	// redirect rule skips them). Nil uses a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Resolve gives the addresses of a bound host for plain HTTP: the proxy
	// connects a request that an http binding matched to the bound name,
	// never to the address the sandbox chose. Production resolves through
	// the sidecar's upstream resolver under the network policy. Nil refuses
	// such requests (502).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// HelloTimeout bounds the wait for a connection's ClientHello (or, for
	// plain HTTP, its first request head), which decides between
	// intercepting and splicing. Zero means 10 s.
	HelloTimeout time.Duration
	// Logger receives errors and, at debug level, one line per connection
	// (destination, SNI name, intercepted or spliced); never header values
	// or payload. Nil discards.
	Logger *slog.Logger
}

// Proxy terminates the sandbox's TLS, injects credentials and forwards to the
// origin. Create it with New and run it with Serve.
type Proxy struct {
	cfg          Config
	log          *slog.Logger
	dial         func(ctx context.Context, network, addr string) (net.Conn, error)
	helloTimeout time.Duration
	upstreams    *upstreams
	tlsConfig    *tls.Config
}

type connKey struct{}

// connInfo is the original destination of one sandbox connection.
type connInfo struct {
	host string
	port int
	addr string // host:port
}

// forward is what the upstream exchange needs to know about one request.
type forward struct {
	host    string // SNI host (or destination IP without SNI), or the Host of plain HTTP
	port    int
	key     upstreamKey
	plan    *inject.Plan // nil when no binding matched
	uri     string       // the request target sent, placeholders replaced
	secrets []string     // what the answer must not show: plan.Secrets()
	body    *trackedBody // the request body, when there is one
	closing bool         // the answer ends the sandbox's connection
}

// injected reports whether the request carries secrets.
func (f *forward) injected() bool { return len(f.secrets) > 0 }

// New builds a Proxy.
func New(cfg Config) (*Proxy, error) {
	if cfg.CA == nil || cfg.OriginalDst == nil {
		return nil, errors.New("tlsproxy: CA and OriginalDst are required")
	}
	p := &Proxy{cfg: cfg, log: cfg.Logger}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	for _, c := range cfg.ExtraRoots {
		roots.AddCert(c)
	}
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	p.dial = dial
	p.helloTimeout = cfg.HelloTimeout
	if p.helloTimeout <= 0 {
		p.helloTimeout = defaultHelloTimeout
	}
	p.upstreams = newUpstreams(roots, dial, p.dialName)
	p.tlsConfig = &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
		GetCertificate: p.certificate,
	}
	return p, nil
}

// Serve accepts connections on ln until ctx ends, then closes ln and all
// connections and returns nil. Other failures of ln are returned.
//
// Each connection's ClientHello is read first. A connection that a binding
// could match (see HostMatcher) is terminated and its requests go through
// the proxy; any other is spliced, byte for byte, to its original
// destination. The decision is made once per connection: a binding added
// later applies to later connections only.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	return p.serve(ctx, ln, tlsMode{p}, p.serveHTTP)
}

// ServePlain is Serve for the sandbox's plain-HTTP connections (port 80
// redirected to ln). Each connection's first request head is read first:
// when an http binding could match its Host the connection is served by
// the proxy, otherwise (or when it is not HTTP) it is spliced to its
// original destination with the bytes already read. A request an http
// binding matches is sent to the bound host by name (Config.Resolve), never
// to the address the sandbox connected to; every other request goes to the
// original destination without injection.
func (p *Proxy) ServePlain(ctx context.Context, ln net.Listener) error {
	return p.serve(ctx, ln, plainMode{p}, p.servePlainHTTP)
}

func (p *Proxy) serve(ctx context.Context, ln net.Listener, m routeMode, handler http.HandlerFunc) error {
	q := newConnQueue(ln.Addr())
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext: func(c context.Context, conn net.Conn) context.Context {
			return context.WithValue(c, connKey{}, connDst(conn))
		},
		ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	var conns connSet
	var wg sync.WaitGroup
	wg.Go(func() { srv.Serve(q) }) // returns when q closes
	endServe := p.upstreams.serve()
	defer endServe()
	done := make(chan struct{})
	wg.Go(func() {
		tick := time.NewTicker(idleTimeout / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
			case <-done:
			case <-tick.C:
				p.upstreams.closeExpired()
				continue
			}
			ln.Close()
			srv.Close() // closes q and the intercepted connections
			conns.closeAll()
			return
		}
	})
	err := p.accept(ctx, ln, m, &conns, q, &wg)
	close(done)
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("tlsproxy: serve: %w", err)
}

// accept accepts connections and routes each on its own goroutine until ln
// fails; temporary failures (out of file descriptors) are retried with
// backoff, like net/http does.
func (p *Proxy) accept(ctx context.Context, ln net.Listener, m routeMode, conns *connSet, q *connQueue, wg *sync.WaitGroup) error {
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			var te interface{ Temporary() bool }
			if ctx.Err() != nil || !errors.As(err, &te) || !te.Temporary() {
				return err
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			p.log.Warn("tlsproxy: accept failed; retrying", "err", err, "in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
			continue
		}
		backoff = 0
		wg.Go(func() { p.route(ctx, c, m, conns, q) })
	}
}

// connDst returns the original destination recorded for an intercepted
// connection (a *tls.Conn over a *replayConn), or nil.
func connDst(c net.Conn) *connInfo {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if rc, ok := c.(*replayConn); ok {
		return rc.dst
	}
	return nil
}

// dialName connects to host (a bound name, or an IP literal) at port
// through Config.Resolve, trying its addresses in order.
func (p *Proxy) dialName(ctx context.Context, host, port string) (net.Conn, error) {
	if p.cfg.Resolve == nil {
		return nil, fmt.Errorf("no resolver for bound host %q", host)
	}
	addrs, err := p.cfg.Resolve(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("resolve bound host %q: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve bound host %q: no address", host)
	}
	var errs []error
	for _, a := range addrs {
		c, err := p.dial(ctx, "tcp", net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("connect to bound host %q: %w", host, errors.Join(errs...))
}

// certificate mints the leaf for the SNI name, or for the destination IP
// when the client sent no SNI.
func (p *Proxy) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := hello.ServerName
	if name == "" {
		if dst := connDst(hello.Conn); dst != nil {
			name = dst.host
		}
	}
	if name == "" {
		return nil, errors.New("tlsproxy: no server name and no original destination")
	}
	return p.cfg.CA.Leaf(name)
}

// requestHost parses a Host header (or an absolute-form URL's host)
// strictly: a DNS name (letters, digits, '-', '_', '.'), an IPv4 literal
// or a bracketed IPv6 literal, optionally followed by ':' and a port in
// canonical decimal form. It returns the host as bindings compare it and
// the port (0 when absent); false for anything else. The server accepts
// looser values ("name:80,other", "[name]", "name:x"), which a front end
// could resolve to a host other than the one the proxy matched.
func requestHost(h string) (string, int, bool) {
	host, port := h, 0
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.HasSuffix(h, "]") {
		p, err := strconv.Atoi(h[i+1:])
		if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != h[i+1:] {
			return "", 0, false
		}
		host, port = h[:i], p
	}
	if v6, ok := strings.CutPrefix(host, "["); ok {
		v6, ok = strings.CutSuffix(v6, "]")
		a, err := netip.ParseAddr(v6)
		if !ok || err != nil || !a.Is6() || a.Zone() != "" {
			return "", 0, false
		}
		return a.Unmap().String(), port, true
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !a.Is4() {
			return "", 0, false // an IPv6 literal needs brackets
		}
		return a.String(), port, true
	}
	name := hostname.Canonical(host)
	if name == "" || len(name) > 253 {
		return "", 0, false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return "", 0, false
		}
	}
	return name, port, true
}

func normHost(h string) string {
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	return hostname.Canonical(strings.Trim(h, "[]"))
}

func (p *Proxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	ci, _ := r.Context().Value(connKey{}).(*connInfo)
	if ci == nil || ci.host == "" || ci.port == 0 {
		http.Error(w, "original destination unknown", http.StatusBadGateway)
		return
	}
	host := normHost(r.TLS.ServerName)
	if host == "" {
		host = normHost(ci.host)
	}
	// The Host header must name the server the TLS session was opened for
	// (and the port the connection was made to), plainly: otherwise a
	// shared front end (a CDN) could route a request carrying credentials
	// for one name to another tenant.
	if !sameHost(r.Host, host, ci.port) || (r.URL.Host != "" && !sameHost(r.URL.Host, host, ci.port)) {
		http.Error(w, "Host header does not match the TLS server name", http.StatusMisdirectedRequest)
		return
	}
	if r.Method == http.MethodConnect {
		// A tunnel would carry requests the proxy never sees.
		http.Error(w, "CONNECT is not supported", http.StatusMethodNotAllowed)
		return
	}
	f := &forward{host: host, port: ci.port, key: upstreamKey{addr: ci.addr, serverName: host}}
	f.plan = p.match("https", host, ci.port, r)
	p.forward(w, r, f)
}

// sameHost reports whether the Host value h names host (canonical) and,
// if it has a port, port.
func sameHost(h, host string, port int) bool {
	hh, hp, ok := requestHost(h)
	return ok && hh == host && (hp == 0 || hp == port)
}

// match asks the Injector about a request; nil when no binding matches or
// the path is not canonical.
func (p *Proxy) match(scheme, host string, port int, r *http.Request) *inject.Plan {
	if p.cfg.Injector == nil {
		return nil
	}
	pth, ok := canonicalPath(r.URL)
	if !ok {
		return nil
	}
	plan, _ := p.cfg.Injector.Match(scheme, host, port, r.Method, pth)
	return plan
}

// servePlainHTTP handles one request of an intercepted plain-HTTP
// connection. Without TLS nothing ties the connection to a name, so a
// request that a binding matches is sent to the bound host itself,
// resolved by the sidecar, and never to the address the sandbox chose:
// a sandbox that sends a bound Host header to an address of its own gets
// its request, with the credential, delivered to the bound host.
func (p *Proxy) servePlainHTTP(w http.ResponseWriter, r *http.Request) {
	ci, _ := r.Context().Value(connKey{}).(*connInfo)
	if ci == nil || ci.host == "" || ci.port == 0 {
		http.Error(w, "original destination unknown", http.StatusBadGateway)
		return
	}
	if r.Method == http.MethodConnect {
		http.Error(w, "CONNECT is not supported", http.StatusMethodNotAllowed)
		return
	}
	// r.Host is the URL's host for an absolute-form target. Only a Host in
	// plain form naming the connection's port (or none) may match.
	host, hport, ok := requestHost(r.Host)
	if !ok {
		host = normHost(r.Host) // for the log only
	}
	f := &forward{host: host, port: ci.port, key: upstreamKey{addr: ci.addr, plain: true}}
	if ok && (hport == 0 || hport == ci.port) {
		if plan := p.match("http", host, ci.port, r); plan != nil {
			f.plan = plan
			f.key = upstreamKey{addr: net.JoinHostPort(host, strconv.Itoa(ci.port)), serverName: host, plain: true, byName: true}
		}
	}
	p.forward(w, r, f)
}

// canonicalPath returns the path to match bindings against, and false when
// the path is not in canonical form (dot segments, doubled or encoded
// slashes and dots, backslashes): an origin may resolve such a path
// differently than we would, so it never gets credentials.
func canonicalPath(u *url.URL) (string, bool) {
	p := u.Path
	if !strings.HasPrefix(p, "/") || strings.ContainsRune(p, '\\') {
		return "", false
	}
	raw := strings.ToLower(u.RawPath)
	if strings.Contains(raw, "%2f") || strings.Contains(raw, "%2e") || strings.Contains(raw, "%5c") {
		return "", false
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return p, clean == p
}
