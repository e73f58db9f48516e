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
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/hostname"
)

// Injector gives the headers to add to a request, and true, when exactly one
// credential binding matches it. *vault.Store implements it, and
// HostMatcher too.
type Injector interface {
	Match(scheme, host string, port int, method, path string) (http.Header, bool)
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
	// HelloTimeout bounds the wait for a connection's ClientHello, which
	// decides between intercepting and splicing. Zero means 10 s.
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
	host   string // SNI host (or destination IP without SNI): upstream TLS name
	port   int
	key    upstreamKey
	inject http.Header // nil when no binding matched
}

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
	p.upstreams = newUpstreams(roots, dial)
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
	q := newConnQueue(ln.Addr())
	srv := &http.Server{
		Handler:           http.HandlerFunc(p.serveHTTP),
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
	err := p.accept(ctx, ln, &conns, q, &wg)
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
func (p *Proxy) accept(ctx context.Context, ln net.Listener, conns *connSet, q *connQueue, wg *sync.WaitGroup) error {
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
		wg.Go(func() { p.route(ctx, c, conns, q) })
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
	// The Host header must name the server the TLS session was opened for:
	// otherwise a shared front end (a CDN) could route a request carrying
	// credentials for one name to another tenant.
	if normHost(r.Host) != host || (r.URL.Host != "" && normHost(r.URL.Host) != host) {
		http.Error(w, "Host header does not match the TLS server name", http.StatusMisdirectedRequest)
		return
	}
	if r.Method == http.MethodConnect {
		// A tunnel would carry requests the proxy never sees.
		http.Error(w, "CONNECT is not supported", http.StatusMethodNotAllowed)
		return
	}
	f := &forward{host: host, port: ci.port, key: upstreamKey{addr: ci.addr, serverName: host}}
	if p.cfg.Injector != nil {
		if pth, ok := canonicalPath(r.URL); ok {
			f.inject, _ = p.cfg.Injector.Match("https", host, ci.port, r.Method, pth)
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
