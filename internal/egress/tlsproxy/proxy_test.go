package tlsproxy

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/inject"
	"github.com/opensandbox-go/opensandbox/internal/egress/vault"
)

const (
	secretBearer = "sk-bearer-secret-1111"
	secretBasic  = "dXNlcjpiYXNpYy1zZWNyZXQtMjIyMg=="
	secretKey    = "apikey-secret-3333"
	secretID     = "custom-id-secret-4444"
)

var allSecrets = []string{secretBearer, secretBasic, secretKey, secretID}

// env is one proxy between a "sandbox" client and a loopback origin.
type env struct {
	client     *http.Client // trusts the proxy CA and the origin's (as system roots); every dial goes to the proxy
	originPort int
	proxyAddr  string
	mu         sync.Mutex
	seen       []http.Header // request headers the origin received
	proxyCA    *CA
	originCA   *CA
	stop       func() // cancels Serve and waits for it to return
	// originConns counts connections the origin accepted, and
	// originFullHandshakes the TLS handshakes that did not resume.
	originConns, originFullHandshakes atomic.Int64
}

func (e *env) url(host, path string) string {
	return "https://" + host + ":" + strconv.Itoa(e.originPort) + path
}

func (e *env) lastSeen(t *testing.T) http.Header {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.seen) == 0 {
		t.Fatal("origin received no request")
	}
	return e.seen[len(e.seen)-1]
}

// newEnv starts an origin (handler nil: record headers, answer "ok"), a
// vault with the given bindings and the proxy, all on loopback.
func newEnv(t *testing.T, bindings []vault.CredentialBinding, handler http.HandlerFunc) *env {
	t.Helper()
	return newEnvWith(t, bindings, handler, envOptions{})
}

// envOptions are the settings a few tests change.
type envOptions struct {
	http2        bool          // the origin offers h2 (and the client asks for it)
	helloTimeout time.Duration // Config.HelloTimeout
}

func newEnvWith(t *testing.T, bindings []vault.CredentialBinding, handler http.HandlerFunc, opts envOptions) *env {
	t.Helper()
	e := &env{}
	originCA, err := NewCA("origin")
	if err != nil {
		t.Fatal(err)
	}
	e.originCA = originCA
	if handler == nil {
		handler = func(w http.ResponseWriter, r *http.Request) {
			e.mu.Lock()
			e.seen = append(e.seen, r.Header.Clone())
			e.mu.Unlock()
			io.Copy(io.Discard, r.Body)
			io.WriteString(w, "ok")
		}
	}
	origin := httptest.NewUnstartedServer(handler)
	origin.EnableHTTP2 = opts.http2
	ipLeaf, err := originCA.Leaf("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	origin.TLS = &tls.Config{
		Certificates: []tls.Certificate{*ipLeaf}, // without SNI
		GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			e.originFullHandshakes.Add(1) // not called when a session resumes
			return originCA.Leaf(h.ServerName)
		},
	}
	origin.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			e.originConns.Add(1)
		}
	}
	origin.StartTLS()
	t.Cleanup(origin.Close)
	e.originPort = origin.Listener.Addr().(*net.TCPAddr).Port

	store := vault.NewStore()
	creds := []vault.Credential{}
	for i, s := range []string{secretBearer, secretBasic, secretKey, secretID} {
		creds = append(creds, vault.Credential{Name: fmt.Sprintf("c%d", i), Source: vault.CredentialSource{Type: vault.SourceInline, Value: vault.Secret(s)}})
	}
	for i := range bindings {
		bindings[i].Match.Ports = []int{e.originPort}
	}
	if _, err := store.Create(vault.CreateRequest{Credentials: creds, Bindings: bindings}); err != nil {
		t.Fatal(err)
	}

	e.proxyCA, err = NewCA("sandbox-1")
	if err != nil {
		t.Fatal(err)
	}
	var proxyAddr string
	proxyAddr, e.stop = startProxy(t, Config{
		CA:           e.proxyCA,
		Injector:     store,
		OriginalDst:  func(net.Conn) (string, int) { return "127.0.0.1", e.originPort },
		ExtraRoots:   []*x509.Certificate{originCA.Certificate()},
		HelloTimeout: opts.helloTimeout,
	})
	roots := x509.NewCertPool()
	roots.AddCert(e.proxyCA.Certificate())
	roots.AddCert(originCA.Certificate()) // spliced connections show the origin's certificate
	e.proxyAddr = proxyAddr
	tr := &http.Transport{
		TLSClientConfig:    &tls.Config{RootCAs: roots},
		DisableCompression: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, proxyAddr) // the transparent redirect
		},
		MaxIdleConnsPerHost: 64,
		ForceAttemptHTTP2:   opts.http2,
	}
	t.Cleanup(tr.CloseIdleConnections)
	e.client = &http.Client{Transport: tr}
	return e
}

func bind(name, host string, auth vault.Auth) vault.CredentialBinding {
	return vault.CredentialBinding{Name: name, Match: vault.RequestMatch{Hosts: []string{host}}, Auth: auth}
}

func standardBindings() []vault.CredentialBinding {
	key := bind("key", "key.test", vault.Auth{Type: vault.AuthAPIKey, Name: "X-Api-Key", Credential: "c2"})
	key.Match.Methods = []string{"POST"}
	key.Match.Paths = []string{"/v1/*"}
	return []vault.CredentialBinding{
		bind("bearer", "bearer.test", vault.Auth{Type: vault.AuthBearer, Credential: "c0"}),
		bind("basic", "*.basic.test", vault.Auth{Type: vault.AuthBasic, Credential: "c1"}),
		key,
		bind("custom", "custom.test", vault.Auth{Type: vault.AuthCustomHeaders, Headers: []vault.HeaderRef{{Name: "X-Id", Credential: "c3"}, {Name: "X-Token", Credential: "c0"}}}),
	}
}

// do sends one request as the sandbox and checks the answer carries no secret.
func (e *env) do(t *testing.T, method, url string, hdr http.Header, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	var all strings.Builder
	all.Write(b)
	for k, v := range resp.Header {
		fmt.Fprintf(&all, "%s: %s\n", k, strings.Join(v, ","))
	}
	for _, s := range allSecrets {
		if strings.Contains(all.String(), s) {
			t.Fatalf("%s %s: the sandbox saw a secret in the response", method, url)
		}
	}
	return resp.StatusCode, string(b)
}

func TestInjection(t *testing.T) {
	e := newEnv(t, standardBindings(), nil)
	tests := []struct {
		name, method, url string
		sent, want        http.Header // want: exact values at the origin; "" = absent
	}{
		{"bearer replaces the sandbox's header", "GET", e.url("bearer.test", "/x"), http.Header{"Authorization": {"Bearer placeholder"}}, http.Header{"Authorization": {"Bearer " + secretBearer}}},
		{"basic on a subdomain", "PUT", e.url("a.basic.test", "/"), nil, http.Header{"Authorization": {"Basic " + secretBasic}}},
		{"basic not on the apex", "PUT", e.url("basic.test", "/"), http.Header{"Authorization": {"Basic own"}}, http.Header{"Authorization": {"Basic own"}}},
		{"apiKey", "POST", e.url("key.test", "/v1/chat?q=1"), http.Header{"X-Api-Key": {"fake"}, "X-Other": {"kept"}}, http.Header{"X-Api-Key": {secretKey}, "X-Other": {"kept"}}},
		{"apiKey other method", "GET", e.url("key.test", "/v1/chat"), http.Header{"X-Api-Key": {"fake"}}, http.Header{"X-Api-Key": {"fake"}}},
		{"apiKey other path", "POST", e.url("key.test", "/v2/chat"), nil, http.Header{"X-Api-Key": {""}}},
		{"apiKey dot segments", "POST", e.url("key.test", "/v1/../admin"), nil, http.Header{"X-Api-Key": {""}}},
		{"customHeaders", "DELETE", e.url("custom.test", "/"), nil, http.Header{"X-Id": {secretID}, "X-Token": {secretBearer}}},
		{"unbound host", "GET", e.url("unbound.test", "/"), http.Header{"Authorization": {"Bearer own"}}, http.Header{"Authorization": {"Bearer own"}, "X-Api-Key": {""}, "X-Id": {""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := e.do(t, tt.method, tt.url, tt.sent, nil)
			if code != 200 || body != "ok" {
				t.Fatalf("%s %s = %d %q, want 200 ok", tt.method, tt.url, code, body)
			}
			got := e.lastSeen(t)
			for k, v := range tt.want {
				if g := got.Get(k); g != v[0] {
					t.Errorf("origin header %s: got %d bytes, want %d bytes (equal: false)", k, len(g), len(v[0]))
				}
				if len(got.Values(k)) > 1 {
					t.Errorf("origin header %s sent %d times, want once", k, len(got.Values(k)))
				}
			}
		})
	}
}

func TestEchoedSecretRedacted(t *testing.T) {
	var e *env
	e = newEnv(t, standardBindings(), func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		w.Header().Set("X-Echo-Token", strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		io.WriteString(w, "ok")
	})
	req, _ := http.NewRequest("GET", e.url("bearer.test", "/"), nil)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, h := range []string{"X-Echo", "X-Echo-Token"} {
		if got := resp.Header.Get(h); got != "[REDACTED]" {
			t.Errorf("response header %s = %d bytes, want [REDACTED]", h, len(got))
		}
	}
}

// TestHostMismatchRefused: the Host header must name the TLS server name
// and the connection's port, in plain host[:port] form; a variant that
// only normalizes to the name (another port, a list, brackets) could be
// routed elsewhere by a front end, so it gets 421 too.
func TestHostMismatchRefused(t *testing.T) {
	e := newEnv(t, standardBindings(), nil)
	port := strconv.Itoa(e.originPort)
	for _, host := range []string{"unbound.test", "bearer.test:1", "bearer.test:" + port + ",evil.test",
		"bearer.test:evil.test", "[bearer.test]", "[bearer.test]:" + port, "bearer.test:0" + port} {
		req, _ := http.NewRequest("GET", e.url("bearer.test", "/"), nil)
		req.Host = host
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("Host %q: status = %d, want 421", host, resp.StatusCode)
		}
	}
	if len(e.seen) != 0 {
		t.Errorf("origin received %d requests, want 0", len(e.seen))
	}
	for _, host := range []string{"BEARER.test", "bearer.test.", "bearer.test:" + port} {
		req, _ := http.NewRequest("GET", e.url("bearer.test", "/"), nil)
		req.Host = host
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Host %q: status = %d, want 200", host, resp.StatusCode)
		}
	}
}

func TestSandboxMustTrustProxyCA(t *testing.T) {
	e := newEnv(t, standardBindings(), nil)
	tr := e.client.Transport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: x509.NewCertPool()}
	_, err := (&http.Client{Transport: tr}).Get(e.url("bearer.test", "/"))
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("Get with an empty trust store: error = %v, want x509.UnknownAuthorityError", err)
	}
}

func TestUntrustedOriginGetsNothing(t *testing.T) {
	got := make(chan struct{}, 1)
	origin := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { got <- struct{}{} }))
	defer origin.Close()
	port := origin.Listener.Addr().(*net.TCPAddr).Port
	store := vault.NewStore()
	b := bind("b", "example.com", vault.Auth{Type: vault.AuthBearer, Credential: "c"})
	b.Match.Ports = []int{port}
	if _, err := store.Create(vault.CreateRequest{Credentials: []vault.Credential{{Name: "c", Source: vault.CredentialSource{Type: "inline", Value: secretBearer}}}, Bindings: []vault.CredentialBinding{b}}); err != nil {
		t.Fatal(err)
	}
	ca, err := NewCA("s")
	if err != nil {
		t.Fatal(err)
	}
	addr := serveProxy(t, Config{CA: ca, Injector: store, OriginalDst: func(net.Conn) (string, int) { return "127.0.0.1", port }}) // no extra roots
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	c := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, n, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, n, addr)
		},
	}}
	resp, err := c.Get("https://example.com:" + strconv.Itoa(port) + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status = %d, want 502", resp.StatusCode)
	}
	select {
	case <-got:
		t.Errorf("an origin with an untrusted certificate received the request")
	default:
	}
}

// TestStreaming sends 10 MiB in lockstep with an echoing origin: each chunk
// is written only after the previous one came back, so any hop that buffered
// a whole body would deadlock (and the test would time out).
func TestStreaming(t *testing.T) {
	const chunk, total = 64 << 10, 10 << 20
	e := newEnv(t, standardBindings(), func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secretBearer {
			http.Error(w, "no credential", http.StatusForbidden)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.EnableFullDuplex(); err != nil {
			t.Error(err)
		}
		w.WriteHeader(200)
		rc.Flush()
		buf := make([]byte, chunk)
		for {
			n, err := io.ReadFull(r.Body, buf)
			if n > 0 {
				w.Write(buf[:n])
				rc.Flush()
			}
			if err != nil {
				return
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*1e9)
	defer cancel()
	pr, pw := io.Pipe()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.url("bearer.test", "/upload"), pr)
	var before, ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	peak := before.HeapAlloc
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := e.client.Do(req)
		done <- result{resp, err}
	}()
	out := bytes.Repeat([]byte("0123456789abcdef"), chunk/16)
	in := make([]byte, chunk)
	if _, err := pw.Write(out); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.resp.Body.Close()
	if res.resp.StatusCode != 200 {
		t.Fatalf("status %d", res.resp.StatusCode)
	}
	for sent := chunk; ; sent += chunk {
		if _, err := io.ReadFull(res.resp.Body, in); err != nil {
			t.Fatalf("after %d bytes: read echo: %v", sent, err)
		}
		if !bytes.Equal(in, out) {
			t.Fatalf("after %d bytes: echo differs", sent)
		}
		if sent%(1<<20) == 0 {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
		if sent == total {
			break
		}
		if _, err := pw.Write(out); err != nil {
			t.Fatalf("after %d bytes: write: %v", sent, err)
		}
	}
	pw.Close()
	if n, _ := io.Copy(io.Discard, res.resp.Body); n != 0 {
		t.Errorf("extra %d bytes after the echo", n)
	}
	// Live heap sampled every MiB stays far below the body size (budget:
	// 4 MiB over the start; raise only with a reason).
	if grew := int64(peak) - int64(before.HeapAlloc); grew > 4<<20 {
		t.Errorf("live heap grew by %d bytes while streaming %d bytes both ways; want <= 4 MiB", grew, total)
	} else {
		t.Logf("live heap grew by at most %d KiB while streaming %d MiB both ways", max(grew, 0)>>10, total>>20)
	}
}

func TestConcurrent(t *testing.T) {
	e := newEnv(t, standardBindings(), func(w http.ResponseWriter, r *http.Request) {
		want := map[string]string{"bearer.test": "Bearer " + secretBearer, "unbound.test": ""}[normHost(r.Host)]
		if r.Header.Get("Authorization") != want {
			http.Error(w, "wrong credential", http.StatusForbidden)
			return
		}
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
	var wg sync.WaitGroup
	errs := make(chan string, 1000)
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			host := []string{"bearer.test", "unbound.test"}[g%2]
			for range 20 {
				resp, err := e.client.Post(e.url(host, "/p"), "text/plain", strings.NewReader("body"))
				if err != nil {
					errs <- err.Error()
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					errs <- fmt.Sprintf("%s: status %d", host, resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCA(t *testing.T) {
	a, err := NewCA("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewCA("b")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.CertPEM(), b.CertPEM()) || a.Certificate().PublicKey.(*ecdsa.PublicKey).Equal(b.Certificate().PublicKey) {
		t.Fatal("two CAs share a certificate or key")
	}
	l1, err := a.Leaf("API.example.com.")
	if err != nil {
		t.Fatal(err)
	}
	l2, _ := a.Leaf("api.example.com")
	if l1 != l2 {
		t.Errorf("Leaf() minted twice for the same host")
	}
	roots := x509.NewCertPool()
	roots.AddCert(a.Certificate())
	for host, name := range map[string]string{"api.example.com": "api.example.com", "127.0.0.1": "127.0.0.1"} {
		l, err := a.Leaf(host)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots}); err != nil {
			t.Errorf("leaf for %s does not verify: %v", host, err)
		}
	}
	path := filepath.Join(t.TempDir(), "sub", "ca.pem")
	if err := a.WriteCertFile(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, rest := pem.Decode(data)
	if blk == nil || blk.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("%s: want exactly one CERTIFICATE block (and no key)", path)
	}
}

// TestOriginConnectionReused checks the proxy keeps origin connections
// alive across requests and sandbox connections, and pools them per server
// name.
func TestOriginConnectionReused(t *testing.T) {
	e := newEnv(t, standardBindings(), nil)
	for i := range 3 {
		if code, _ := e.do(t, "GET", e.url("bearer.test", "/"), nil, nil); code != 200 {
			t.Fatalf("request %d: status %d, want 200", i, code)
		}
	}
	if got := e.originConns.Load(); got != 1 {
		t.Errorf("3 requests on one sandbox connection: origin accepted %d connections, want 1", got)
	}
	e.client.CloseIdleConnections() // the next request comes on a new sandbox connection
	if code, _ := e.do(t, "GET", e.url("bearer.test", "/"), nil, nil); code != 200 {
		t.Fatalf("status %d, want 200", code)
	}
	if got := e.originConns.Load(); got != 1 {
		t.Errorf("after a new sandbox connection: origin accepted %d connections, want 1", got)
	}
	// key.test is bound (for POST only), so its connection is intercepted.
	if code, _ := e.do(t, "GET", e.url("key.test", "/"), nil, nil); code != 200 {
		t.Fatalf("status %d, want 200", code)
	}
	if got := e.originConns.Load(); got != 2 {
		t.Errorf("after a request for another server name: origin accepted %d connections, want 2", got)
	}
	if got := e.originFullHandshakes.Load(); got != 2 {
		t.Errorf("origin did %d full TLS handshakes, want 2", got)
	}
}

// TestOriginSessionResumed checks a new origin connection resumes the TLS
// session of the previous one instead of a full handshake.
func TestOriginSessionResumed(t *testing.T) {
	e := newEnv(t, standardBindings(), func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "ok")
	})
	for i := range 3 {
		if code, _ := e.do(t, "GET", e.url("bearer.test", "/"), nil, nil); code != 200 {
			t.Fatalf("request %d: status %d, want 200", i, code)
		}
	}
	if got := e.originConns.Load(); got != 3 {
		t.Errorf("origin accepted %d connections, want 3 (it closes each)", got)
	}
	if got := e.originFullHandshakes.Load(); got != 1 {
		t.Errorf("origin did %d full TLS handshakes for 3 connections, want 1 (then resumed)", got)
	}
}

// TestPoolKeyedByOriginalDst sends requests with one server name to two
// original destinations: an origin connection pooled for one destination
// must not carry a request meant for the other.
func TestPoolKeyedByOriginalDst(t *testing.T) {
	originCA, err := NewCA("origin")
	if err != nil {
		t.Fatal(err)
	}
	lnA, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lnA.Addr().(*net.TCPAddr).Port
	lnB, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(port)))
	if err != nil {
		lnA.Close()
		t.Skipf("second loopback address unavailable: %v", err)
	}
	for name, ln := range map[string]net.Listener{"A": lnA, "B": lnB} {
		o := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, name)
		})}}
		o.TLS = &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) { return originCA.Leaf(h.ServerName) }}
		o.StartTLS()
		t.Cleanup(o.Close)
	}
	var dst atomic.Value
	ca, err := NewCA("s")
	if err != nil {
		t.Fatal(err)
	}
	addr := serveProxy(t, Config{
		CA:          ca,
		Injector:    noHostMatcher{}, // intercept every connection
		OriginalDst: func(net.Conn) (string, int) { return dst.Load().(string), port },
		ExtraRoots:  []*x509.Certificate{originCA.Certificate()},
	})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	c := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		DisableKeepAlives: true, // each request a new sandbox connection, so OriginalDst is asked each time
		DialContext: func(ctx context.Context, n, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, n, addr)
		},
	}}
	for _, want := range []string{"A", "B", "A", "B"} {
		dst.Store(map[string]string{"A": "127.0.0.1", "B": "127.0.0.2"}[want])
		resp, err := c.Get("https://same.test:" + strconv.Itoa(port) + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != want {
			t.Errorf("request for destination %s answered by %q", want, b)
		}
	}
}

// noHostMatcher injects nothing and has no MayMatch, so the proxy
// intercepts every connection (its behaviour before HostMatcher existed).
type noHostMatcher struct{}

func (noHostMatcher) Match(string, string, int, string, string) (*inject.Plan, bool) {
	return nil, false
}
