package tlsproxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rawRequest sends raw bytes on a new sandbox connection to the proxy for
// host and returns the connection and a reader on it.
func (e *env) rawConn(t *testing.T, host string) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	tr := e.client.Transport.(*http.Transport)
	raw, err := tr.DialContext(context.Background(), "tcp", "")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(e.proxyCA.Certificate())
	c := tls.Client(raw, &tls.Config{RootCAs: roots, ServerName: host})
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

func TestHopByHopAndForwardingHeaders(t *testing.T) {
	e := newEnv(t, standardBindings(), func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Forwarded-For") != "10.0.0.1" || r.Header.Get("Forwarded") != "for=x" || r.Header.Get("X-Forwarded-Host") != "" {
			http.Error(w, "forwarding headers changed", 500)
			return
		}
		for _, h := range []string{"Keep-Alive", "Proxy-Authorization", "X-Hop", "Upgrade", "Te"} {
			if r.Header.Get(h) != "" {
				http.Error(w, h+" forwarded", 500)
				return
			}
		}
		if r.Header.Get("User-Agent") != "" {
			http.Error(w, "a User-Agent was added", 500)
			return
		}
		w.Header().Set("Connection", "X-Resp-Hop")
		w.Header().Set("X-Resp-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		io.WriteString(w, "ok")
	})
	req, _ := http.NewRequest("GET", e.url("bearer.test", "/"), nil)
	req.Header.Set("User-Agent", "") // none sent
	req.Header.Set("X-Forwarded-For", "10.0.0.1")
	req.Header.Set("Forwarded", "for=x")
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "1")
	req.Header.Set("Keep-Alive", "timeout=5")
	req.Header.Set("Proxy-Authorization", "Basic x")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	for _, h := range []string{"X-Resp-Hop", "Keep-Alive"} {
		if resp.Header.Get(h) != "" {
			t.Errorf("response header %s reached the sandbox", h)
		}
	}
}

// TestIdleOriginCloseNotSeen checks that an origin closing an idle pooled
// connection costs the sandbox nothing, for a POST too.
func TestIdleOriginCloseNotSeen(t *testing.T) {
	var conns atomic.Pointer[net.Conn]
	e := newEnv(t, standardBindings(), func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		c, _, _ := http.NewResponseController(w).Hijack()
		conns.Store(&c)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	for i := range 3 {
		code, body := e.do(t, "POST", e.url("bearer.test", "/"), nil, strings.NewReader("x"))
		if code != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
		(*conns.Load()).Close() // the origin drops the idle connection
		time.Sleep(20 * time.Millisecond)
	}
	if got := e.originConns.Load(); got != 3 {
		t.Errorf("origin accepted %d connections, want 3", got)
	}
}

// TestPostNotRetried checks that a request with a body is never sent twice,
// even when the origin drops the connection without answering.
func TestPostNotRetried(t *testing.T) {
	var posts atomic.Int64
	e := newEnv(t, standardBindings(), func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			posts.Add(1)
			io.Copy(io.Discard, r.Body)
			c, _, _ := http.NewResponseController(w).Hijack()
			c.Close()
			return
		}
		io.WriteString(w, "ok")
	})
	if code, _ := e.do(t, "GET", e.url("bearer.test", "/"), nil, nil); code != 200 {
		t.Fatalf("GET: %d", code)
	}
	code, _ := e.do(t, "POST", e.url("bearer.test", "/"), nil, strings.NewReader("once"))
	if code != http.StatusBadGateway {
		t.Errorf("POST the origin dropped: status %d, want 502", code)
	}
	if got := posts.Load(); got != 1 {
		t.Errorf("origin received the POST %d times, want 1", got)
	}
}

func TestUpgrade(t *testing.T) {
	e := newEnv(t, standardBindings(), func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "no upgrade", 400)
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		brw.Flush()
		io.Copy(c, brw)
	})
	for _, tt := range []struct {
		host string
		want int
	}{{"key.test", 101}, {"bearer.test", 502}} { // key.test: intercepted, nothing injected for GET
		c, br := e.rawConn(t, tt.host)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+tt.host+"\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nfirst|")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.host, err)
		}
		if resp.StatusCode != tt.want {
			t.Fatalf("%s: status %d, want %d", tt.host, resp.StatusCode, tt.want)
		}
		if tt.want != 101 {
			continue // credentials were injected: no opaque tunnel
		}
		io.WriteString(c, "second")
		got := make([]byte, len("first|second"))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != "first|second" {
			t.Fatalf("echo through the tunnel: %q, %v", got, err)
		}
	}
}

func TestExpectContinue(t *testing.T) {
	var bodies atomic.Int64
	e := newEnv(t, standardBindings(), func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/reject" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		b, _ := io.ReadAll(r.Body)
		bodies.Add(1)
		w.Write(b)
	})
	for _, tt := range []struct {
		path string
		want int
	}{{"/accept", 200}, {"/reject", 403}} {
		c, br := e.rawConn(t, "bearer.test")
		io.WriteString(c, "POST "+tt.path+" HTTP/1.1\r\nHost: bearer.test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == 100 {
			io.WriteString(c, "hello")
			resp, err = http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != tt.want {
			t.Errorf("%s: status %d, want %d", tt.path, resp.StatusCode, tt.want)
		}
		if tt.want == 200 && string(b) != "hello" {
			t.Errorf("%s: body %q", tt.path, b)
		}
	}
	if got := bodies.Load(); got != 1 {
		t.Errorf("origin read %d bodies, want 1", got)
	}
}

// TestResponsesFlushed checks a response part reaches the sandbox while the
// origin waits for the sandbox to have seen it: for a body of unknown
// length (streamed) and one of known length.
func TestResponsesFlushed(t *testing.T) {
	seen := make(chan struct{})
	e := newEnv(t, standardBindings(), func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/known" {
			w.Header().Set("Content-Length", "10")
		} else {
			w.Header().Set("Content-Type", "text/event-stream")
		}
		io.WriteString(w, "part1")
		w.(http.Flusher).Flush()
		select {
		case <-seen:
		case <-time.After(5 * time.Second):
			return
		}
		io.WriteString(w, "part2")
	})
	for _, path := range []string{"/stream", "/known"} {
		resp, err := e.client.Get(e.url("bearer.test", path))
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 5)
		if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != "part1" {
			t.Fatalf("%s: first part %q, %v", path, got, err)
		}
		seen <- struct{}{}
		rest, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(rest) != "part2" {
			t.Errorf("%s: rest %q", path, rest)
		}
	}
}

func TestNoBodyResponsesAndTrailers(t *testing.T) {
	e := newEnv(t, standardBindings(), func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(204)
		case "/304":
			w.WriteHeader(304)
		case "/trailer":
			w.Header().Set("Trailer", "X-Sum, X-Echo")
			w.WriteHeader(200)
			io.WriteString(w, "body")
			w.Header().Set("X-Sum", "42")
			w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		default:
			w.Header().Set("Content-Length", "7")
			if r.Method != "HEAD" {
				io.WriteString(w, "content")
			}
		}
	})
	for _, tt := range []struct{ method, path string }{{"HEAD", "/"}, {"GET", "/204"}, {"GET", "/304"}} {
		for range 2 { // the second on the reused origin connection
			resp, err := e.client.Do(must(http.NewRequest(tt.method, e.url("bearer.test", tt.path), nil)))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if len(b) != 0 {
				t.Errorf("%s %s: body %q", tt.method, tt.path, b)
			}
			if tt.method == "HEAD" && resp.ContentLength != 7 {
				t.Errorf("HEAD: Content-Length %d, want 7", resp.ContentLength)
			}
		}
	}
	resp, err := e.client.Get(e.url("bearer.test", "/trailer"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "body" || resp.Trailer.Get("X-Sum") != "42" {
		t.Errorf("body %q, trailer X-Sum %q", b, resp.Trailer.Get("X-Sum"))
	}
	if got := resp.Trailer.Get("X-Echo"); got != "[REDACTED]" {
		t.Errorf("echoed secret in a trailer: %d bytes, want [REDACTED]", len(got))
	}
	if got := e.originConns.Load(); got != 1 {
		t.Errorf("origin accepted %d connections, want 1", got)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// waitGone waits until no goroutine's stack contains fn, and fails the
// test when one still does after 5 s.
func waitGone(t *testing.T, fn string) {
	t.Helper()
	// Generous: under -race on a loaded machine a goroutine that has
	// ended may take a while to be gone from the dump.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var buf bytes.Buffer
		pprof.Lookup("goroutine").WriteTo(&buf, 1)
		if !strings.Contains(buf.String(), fn) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a goroutine in %s outlived its request", fn)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, not waiting for it
	}
}

// TestBodySenderEndsWithItsRequest: when the origin answers before the
// sandbox has sent the whole body (and the sandbox then stalls), the
// goroutine that copies the body ends with the request, not whenever the
// sandbox sends more.
func TestBodySenderEndsWithItsRequest(t *testing.T) {
	e := newEnv(t, standardBindings(), func(w http.ResponseWriter, r *http.Request) {
		// Answer at once, without reading the body (net/http would
		// otherwise try to read it before the answer).
		http.NewResponseController(w).EnableFullDuplex()
		w.Header().Set("Connection", "close")
		http.Error(w, "no", http.StatusForbidden)
	})
	c, br := e.rawConn(t, "key.test")
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: key.test\r\nContent-Length: 100000\r\n\r\npartial")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d, want the origin's 403", resp.StatusCode)
	}
	waitGone(t, "tlsproxy.(*bodySender).run")
}

// TestTunnelGoroutinesEnd: both copies of a protocol switch end, and are
// waited for, when one side closes.
func TestTunnelGoroutinesEnd(t *testing.T) {
	e := newEnv(t, standardBindings(), func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		brw.Flush()
		io.Copy(io.Discard, brw) // reads until the proxy closes; never writes
	})
	c, br := e.rawConn(t, "key.test")
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: key.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v, %v", resp, err)
	}
	c.Close() // the sandbox goes away; the origin stays
	waitGone(t, "tlsproxy.(*Proxy).switchProtocols")
}
