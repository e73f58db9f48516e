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
	"strconv"
	"strings"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/hostname"
)

// Injector gives the headers to add to a request, and true, when exactly one
// credential binding matches it. *vault.Store implements it.
type Injector interface {
	Match(scheme, host string, port int, method, path string) (http.Header, bool)
}

// Config configures a Proxy. CA and OriginalDst are required.
type Config struct {
	// CA mints the certificates the sandbox sees.
	CA *CA
	// Injector decides what to inject. Nil injects nothing.
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
	// Logger receives errors; never header values. Nil discards.
	Logger *slog.Logger
}

// Proxy terminates the sandbox's TLS, injects credentials and forwards to the
// origin. Create it with New and run it with Serve.
type Proxy struct {
	cfg       Config
	log       *slog.Logger
	upstreams *upstreams
	tlsConfig *tls.Config
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
	p.upstreams = newUpstreams(roots, dial)
	p.tlsConfig = &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
		GetCertificate: p.certificate,
	}
	return p, nil
}

// Serve accepts TLS connections on ln until ctx ends, then closes ln and all
// connections and returns nil. Other failures of ln are returned.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           http.HandlerFunc(p.serveHTTP),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext: func(c context.Context, conn net.Conn) context.Context {
			raw := conn
			if tc, ok := conn.(*tls.Conn); ok {
				raw = tc.NetConn()
			}
			host, port := p.cfg.OriginalDst(raw)
			return context.WithValue(c, connKey{}, &connInfo{host: host, port: port, addr: net.JoinHostPort(host, strconv.Itoa(port))})
		},
		ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	done := make(chan struct{})
	defer close(done)
	endServe := p.upstreams.serve()
	defer endServe()
	go func() {
		tick := time.NewTicker(idleTimeout / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				srv.Close()
				return
			case <-done:
				return
			case <-tick.C:
				p.upstreams.closeExpired()
			}
		}
	}()
	err := srv.Serve(tls.NewListener(ln, p.tlsConfig))
	if errors.Is(err, http.ErrServerClosed) && ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("tlsproxy: serve: %w", err)
}

// certificate mints the leaf for the SNI name, or for the destination IP
// when the client sent no SNI.
func (p *Proxy) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := hello.ServerName
	if name == "" {
		name, _ = p.cfg.OriginalDst(hello.Conn)
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
