package tlsproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/vault"
)

// issuedBy reports whether the leaf the client saw was signed by ca.
func issuedBy(cs *tls.ConnectionState, ca *CA) bool {
	return cs != nil && len(cs.PeerCertificates) > 0 && cs.PeerCertificates[0].CheckSignatureFrom(ca.Certificate()) == nil
}

// get sends GET url as the sandbox and returns the response with its body
// read.
func (e *env) get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := e.client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp, string(b)
}

// TestInterceptOnlyWhatABindingCouldMatch checks, against an origin that
// offers HTTP/2, that a connection whose SNI name no binding covers is
// spliced (the sandbox sees the origin's own certificate and negotiates h2
// with it), while one a binding covers is terminated by the proxy as
// before, even when the request itself matches no binding.
func TestInterceptOnlyWhatABindingCouldMatch(t *testing.T) {
	e := newEnvWith(t, standardBindings(), nil, envOptions{http2: true})
	for _, tt := range []struct {
		name, host  string
		intercepted bool
		wantAuth    string
	}{
		{"unbound host is spliced", "unbound.test", false, ""},
		{"apex of a wildcard binding is spliced", "basic.test", false, ""},
		{"bound host is intercepted", "bearer.test", true, "Bearer " + secretBearer},
		{"wildcard subdomain is intercepted", "a.basic.test", true, "Basic " + secretBasic},
		{"bound host, unmatched request, is intercepted", "key.test", true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := e.get(t, e.url(tt.host, "/"))
			if resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("GET %s = %d %q, want 200 ok", tt.host, resp.StatusCode, body)
			}
			if got := issuedBy(resp.TLS, e.proxyCA); got != tt.intercepted {
				t.Errorf("certificate issued by the sandbox CA = %v, want %v", got, tt.intercepted)
			}
			if got := issuedBy(resp.TLS, e.originCA); got == tt.intercepted {
				t.Errorf("certificate issued by the origin's CA = %v, want %v", got, !tt.intercepted)
			}
			// The proxy offers http/1.1 only; the origin offers h2.
			wantMajor := map[bool]int{true: 1, false: 2}[tt.intercepted]
			if resp.ProtoMajor != wantMajor {
				t.Errorf("protocol %s, want HTTP/%d", resp.Proto, wantMajor)
			}
			if got := e.lastSeen(t).Get("Authorization"); got != tt.wantAuth {
				t.Errorf("origin got Authorization of %d bytes, want %d bytes", len(got), len(tt.wantAuth))
			}
		})
	}
}

// TestNoSNIDecidesByDestinationIP: without SNI the original destination IP
// decides.
func TestNoSNIDecidesByDestinationIP(t *testing.T) {
	ipBinding := []vault.CredentialBinding{bind("ip", "127.0.0.1", vault.Auth{Type: vault.AuthBearer, Credential: "c0"})}
	for _, tt := range []struct {
		name        string
		bindings    []vault.CredentialBinding
		intercepted bool
		wantAuth    string
	}{
		{"IP binding: intercepted", ipBinding, true, "Bearer " + secretBearer},
		{"no IP binding: spliced", standardBindings(), false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.bindings, nil)
			resp, body := e.get(t, e.url("127.0.0.1", "/")) // Go sends no SNI for an IP
			if resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("status %d %q, want 200 ok", resp.StatusCode, body)
			}
			if resp.TLS.ServerName != "" {
				t.Fatalf("client sent SNI %q, want none", resp.TLS.ServerName)
			}
			if got := issuedBy(resp.TLS, e.proxyCA); got != tt.intercepted {
				t.Errorf("certificate issued by the sandbox CA = %v, want %v", got, tt.intercepted)
			}
			if got := e.lastSeen(t).Get("Authorization"); got != tt.wantAuth {
				t.Errorf("origin got Authorization of %d bytes, want %d bytes", len(got), len(tt.wantAuth))
			}
		})
	}
}

// waitClosed reads c until the proxy closes it, failing if that takes 10 s
// or the proxy sends anything.
func waitClosed(t *testing.T, what string, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 512))
	if n > 0 {
		t.Errorf("%s: proxy sent %d bytes, want none", what, n)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("%s: still open after 10 s", what)
	}
}

// TestBadFirstFlightClosed: a client that sends no TLS, or nothing at all
// until the ClientHello deadline, is closed without an answer, and other
// connections are served meanwhile.
func TestBadFirstFlightClosed(t *testing.T) {
	e := newEnvWith(t, standardBindings(), nil, envOptions{helloTimeout: 300 * time.Millisecond})
	silent, err := net.Dial("tcp", e.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	garbage, err := net.Dial("tcp", e.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer garbage.Close()
	if _, err := io.WriteString(garbage, "GET / HTTP/1.1\r\nHost: bearer.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, "non-TLS client", garbage)
	// While the silent client still holds its connection:
	if code, body := e.do(t, "GET", e.url("bearer.test", "/"), nil, nil); code != 200 || body != "ok" {
		t.Fatalf("GET beside a silent client = %d %q, want 200 ok", code, body)
	}
	waitClosed(t, "silent client", silent)
	if got := e.originConns.Load(); got != 1 {
		t.Errorf("origin accepted %d connections, want 1 (none for the bad clients)", got)
	}
}

// TestCancelClosesSplicedConn: when Serve's context ends, an open spliced
// connection is closed too. Serve waits for the goroutines of its
// connections before it returns, so its return also shows none is left.
func TestCancelClosesSplicedConn(t *testing.T) {
	e := newEnv(t, standardBindings(), nil)
	raw, err := net.Dial("tcp", e.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	roots := x509.NewCertPool()
	roots.AddCert(e.originCA.Certificate())
	c := tls.Client(raw, &tls.Config{RootCAs: roots, ServerName: "unbound.test"})
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: unbound.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if st := c.ConnectionState(); !issuedBy(&st, e.originCA) {
		t.Fatal("connection was not spliced: the certificate is not the origin's")
	}
	stopped := make(chan struct{})
	go func() {
		e.stop()
		close(stopped)
	}()
	_, err = br.ReadByte()
	if err == nil {
		t.Fatal("read on the spliced connection after cancel returned data")
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("spliced connection still open 10 s after cancel")
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return within 10 s of cancel")
	}
}

// serveProxy runs a proxy with cfg on loopback until the test ends and
// returns its address.
func serveProxy(t *testing.T, cfg Config) string {
	t.Helper()
	addr, _ := startProxy(t, cfg)
	return addr
}

// startProxy runs a proxy with cfg on loopback and returns its address and
// a stop function (also run when the test ends) that cancels Serve and
// checks it returns nil.
func startProxy(t *testing.T, cfg Config) (addr string, stop func()) {
	t.Helper()
	return startServing(t, cfg, (*Proxy).Serve)
}

// startPlainProxy is startProxy for the plain-HTTP listener.
func startPlainProxy(t *testing.T, cfg Config) (addr string, stop func()) {
	t.Helper()
	return startServing(t, cfg, (*Proxy).ServePlain)
}

// startServing makes a proxy of cfg and serves a loopback listener with
// serve until stop (or the test's end), which checks serve's result.
func startServing(t *testing.T, cfg Config, serve func(*Proxy, context.Context, net.Listener) error) (addr string, stop func()) {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(p, ctx, ln) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serving = %v, want nil after cancel", err)
		}
	})
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

// TestNilInjectorSplicesEverything: with nothing to inject no connection is
// terminated; a destination that refuses the dial closes the client.
func TestNilInjectorSplicesEverything(t *testing.T) {
	ca, err := NewCA("s")
	if err != nil {
		t.Fatal(err)
	}
	origin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer origin.Close()
	port := origin.Listener.Addr().(*net.TCPAddr).Port
	addr := serveProxy(t, Config{CA: ca, OriginalDst: func(net.Conn) (string, int) { return "127.0.0.1", port }})
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: origin.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com"})
	if err != nil {
		t.Fatalf("handshake through the proxy: %v", err)
	}
	if got := c.ConnectionState().PeerCertificates[0]; !got.Equal(origin.Certificate()) {
		t.Errorf("client saw a certificate for %v, want the origin's own", got.DNSNames)
	}
	c.Close()

	// A destination nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	addr = serveProxy(t, Config{CA: ca, OriginalDst: func(net.Conn) (string, int) { return "127.0.0.1", deadPort }})
	d := &net.Dialer{Deadline: time.Now().Add(10 * time.Second)}
	_, err = tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: "example.com"})
	if err == nil {
		t.Fatal("handshake succeeded with an unreachable destination")
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("client not closed after a failed dial: %v", err)
	}
}

// TestConnectionToTheProxyItself: a sandbox shares the sidecar's loopback
// and can connect to the proxy's port directly; the original destination
// is then the proxy itself, and splicing there would loop without end.
func TestConnectionToTheProxyItself(t *testing.T) {
	ca, err := NewCA("s")
	if err != nil {
		t.Fatal(err)
	}
	var lookups atomic.Int32
	addr := serveProxy(t, Config{CA: ca, OriginalDst: func(c net.Conn) (string, int) {
		lookups.Add(1)
		a := c.LocalAddr().(*net.TCPAddr)
		return a.IP.String(), a.Port
	}})
	d := &net.Dialer{Deadline: time.Now().Add(5 * time.Second)}
	_, err = tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: "example.com"})
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("handshake with the proxy as its own destination: %v; want the connection closed at once", err)
	}
	if n := lookups.Load(); n != 1 {
		t.Fatalf("the proxy handled %d connections for one client; want 1 (no loop)", n)
	}
}
