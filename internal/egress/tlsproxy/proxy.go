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
	"net/http/httputil"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
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
	rp        *httputil.ReverseProxy
	tlsConfig *tls.Config
}

type connKey struct{}

// connInfo is the original destination of one sandbox connection.
type connInfo struct {
	host string
	port int
}

type forwardKey struct{}

// forward is what rewrite and the upstream pool need to know about one
// request.
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
		dial = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	p.upstreams = &upstreams{roots: roots, dial: dial, m: make(map[upstreamKey]*http.Transport)}
	p.rp = &httputil.ReverseProxy{
		Rewrite:   p.rewrite,
		Transport: p.upstreams,
		// Bodies of unknown length and event streams are flushed on every
		// write (ReverseProxy forces that); a body of known length is held
		// at most this long. Flushing every write (-1) for all bodies cost
		// a separate TLS record, write syscall and timer goroutine for the
		// headers of every response, before the body.
		FlushInterval:  10 * time.Millisecond,
		BufferPool:     bufferPool{},
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.errorHandler,
		ErrorLog:       slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
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
			return context.WithValue(c, connKey{}, &connInfo{host: host, port: port})
		},
		ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			srv.Close()
		case <-done:
		}
	}()
	err := srv.Serve(tls.NewListener(ln, p.tlsConfig))
	p.upstreams.closeIdle()
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
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
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
	f := &forward{host: host, port: ci.port, key: upstreamKey{addr: net.JoinHostPort(ci.host, strconv.Itoa(ci.port)), serverName: host}}
	if p.cfg.Injector != nil {
		if pth, ok := canonicalPath(r.URL); ok {
			f.inject, _ = p.cfg.Injector.Match("https", host, ci.port, r.Method, pth)
		}
	}
	// Let the origin read the rest of the body while it answers (echo and
	// bidirectional streams); ignore servers that cannot.
	_ = http.NewResponseController(w).EnableFullDuplex()
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), forwardKey{}, f)))
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

func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	f := pr.In.Context().Value(forwardKey{}).(*forward)
	pr.Out.URL.Scheme = "https"
	pr.Out.URL.Host = net.JoinHostPort(f.host, strconv.Itoa(f.port))
	pr.Out.Host = pr.In.Host
	// ReverseProxy drops forwarding headers before Rewrite; we are
	// transparent, so pass the sandbox's own through and add none.
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		if v, ok := pr.In.Header[h]; ok {
			pr.Out.Header[h] = v
		}
	}
	for k, v := range f.inject {
		pr.Out.Header[k] = v // replaces whatever the sandbox sent
	}
	if len(f.inject) > 0 {
		// An identity-encoded answer can be scanned for echoed secrets.
		pr.Out.Header.Del("Accept-Encoding")
	}
}

// modifyResponse redacts injected secrets an origin echoes, in response
// headers and (streaming, same length) in bodies, so the sandbox never
// reads a secret back. Bodies of injected requests arrive unencoded (rewrite
// drops Accept-Encoding); a body the origin encodes anyway is scanned as is.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	f, _ := resp.Request.Context().Value(forwardKey{}).(*forward)
	if f == nil || len(f.inject) == 0 {
		return nil
	}
	var needles []string
	for _, vs := range f.inject {
		for _, v := range vs {
			needles = append(needles, v)
			if _, tok, ok := strings.Cut(v, " "); ok && len(tok) >= 8 {
				needles = append(needles, tok)
			}
		}
	}
	for k, vs := range resp.Header {
		for i, v := range vs {
			for _, n := range needles {
				if strings.Contains(v, n) {
					resp.Header[k][i] = "[REDACTED]"
					break
				}
			}
		}
	}
	if resp.Body != nil && resp.Body != http.NoBody {
		resp.Body = newRedactingBody(resp.Body, needles)
	}
	return nil
}

func (p *Proxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	f, _ := r.Context().Value(forwardKey{}).(*forward)
	if f != nil {
		p.log.Warn("tlsproxy: upstream request failed", "method", r.Method, "host", f.host, "port", f.port, "injected", f.inject != nil, "err", err)
	}
	if r.Context().Err() != nil {
		return // the sandbox went away
	}
	w.WriteHeader(http.StatusBadGateway)
}

// bufferPool recycles ReverseProxy copy buffers.
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *buffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { buffers.Put(&b) }
