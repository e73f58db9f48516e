package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// seen is what the backend observed of one proxied request.
type seen struct {
	Method, EscapedPath, RawQuery, Host string
	Header                              http.Header
}

// proxyEnv is a test server whose sandbox sb1 is served by a real HTTP
// backend: 8080 and 44772 map to it directly, other ports through a
// /proxy/<port> prefix as on the Docker runtime.
type proxyEnv struct {
	*testEnv
	backend *httptest.Server
	hits    atomic.Int32
}

func newProxyEnv(t *testing.T, handler http.Handler, opts ...envOption) *proxyEnv {
	t.Helper()
	p := &proxyEnv{testEnv: newEnv(t, opts...)}
	if handler == nil {
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set(sandbox.RequestIDHeader, "from-backend")
			json.NewEncoder(w).Encode(seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Host, r.Header})
		})
	}
	p.backend = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(p.backend.Close)
	host, portStr, _ := net.SplitHostPort(p.backend.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	p.rt.address = func(id string, target int) (runtimeAddress, error) {
		a := runtimeAddress{Host: host, Port: port}
		if target != sandbox.ExecdPort && target != sandbox.HTTPPort {
			a.PathPrefix = "/proxy/" + strconv.Itoa(target)
		}
		return a, nil
	}
	p.rt.add(fakeSandbox("sb1"))
	return p
}

func TestProxyHeaders(t *testing.T) {
	p := newProxyEnv(t, nil)
	tests := []struct {
		path      string
		wantToken string
	}{
		{"/sandboxes/sb1/proxy/44772/ping", "token-sb1"},
		{"/v1/sandboxes/sb1/proxy/3000/app", "token-sb1"},
		{"/sandboxes/sb1/proxy/8080/app", ""},
	}
	for _, tc := range tests {
		r := p.do("POST", tc.path, `{"x":1}`,
			sandbox.APIKeyHeader, testAPIKey,
			"Authorization", "Bearer user-secret",
			"Cookie", "session=secret",
			sandbox.AccessTokenHeader, "caller-guess",
			"Connection", "X-Hop",
			"X-Hop", "hop-value",
			"X-Forwarded-For", "203.0.113.9",
			"X-Custom", "kept",
			sandbox.RequestIDHeader, "rid-1",
		)
		if r.status != http.StatusOK {
			t.Fatalf("POST %s = %s", tc.path, r)
		}
		got := decode[seen](t, r)
		for _, h := range []string{sandbox.APIKeyHeader, "Authorization", "Cookie", "X-Hop"} {
			if v := got.Header.Get(h); v != "" {
				t.Errorf("POST %s: backend got %s = %q, want it stripped", tc.path, h, v)
			}
		}
		if v := got.Header.Get(sandbox.AccessTokenHeader); v != tc.wantToken {
			t.Errorf("POST %s: backend got %s = %q, want %q", tc.path, sandbox.AccessTokenHeader, v, tc.wantToken)
		}
		if v := got.Header.Get("X-Custom"); v != "kept" || got.Method != "POST" {
			t.Errorf("POST %s: backend got method %s, X-Custom %q; want POST and kept", tc.path, got.Method, v)
		}
		if v := got.Header.Get("X-Forwarded-For"); v != "203.0.113.9, 127.0.0.1" {
			t.Errorf("POST %s: X-Forwarded-For = %q, want the chain plus 127.0.0.1", tc.path, v)
		}
		if v := got.Header.Get("X-Forwarded-Host"); v != strings.TrimPrefix(p.http.URL, "http://") {
			t.Errorf("POST %s: X-Forwarded-Host = %q, want the server's host", tc.path, v)
		}
		if v := got.Header.Get("X-Forwarded-Proto"); v != "http" {
			t.Errorf("POST %s: X-Forwarded-Proto = %q, want http", tc.path, v)
		}
		if v := got.Header.Get(sandbox.RequestIDHeader); v != "rid-1" {
			t.Errorf("POST %s: backend got X-Request-ID %q, want rid-1", tc.path, v)
		}
		if v := r.header.Values(sandbox.RequestIDHeader); len(v) != 1 || v[0] != "rid-1" {
			t.Errorf("POST %s: reply X-Request-ID = %q, want only rid-1", tc.path, v)
		}
		if got.Host != strings.TrimPrefix(p.backend.URL, "http://") {
			t.Errorf("POST %s: backend Host = %q, want its own address", tc.path, got.Host)
		}
	}
}

func TestProxyPaths(t *testing.T) {
	p := newProxyEnv(t, nil)
	tests := []struct {
		path, wantPath, wantQuery string
	}{
		{"/sandboxes/sb1/proxy/8080", "/", ""},
		{"/sandboxes/sb1/proxy/8080/", "/", ""},
		{"/v1/sandboxes/sb1/proxy/8080/a/b/", "/a/b/", ""},
		{"/sandboxes/sb1/proxy/3000", "/proxy/3000/", ""},
		{"/sandboxes/sb1/proxy/3000/x?q=1&r=%2F", "/proxy/3000/x", "q=1&r=%2F"},
		{"/sandboxes/sb1/proxy/8080/a%2Fb/c%20d", "/a%2Fb/c%20d", ""},
		{"/sandboxes/sb1/proxy/8080/file.tar.gz", "/file.tar.gz", ""},
		{"/sandboxes/sb1/proxy/8080/..dots../x", "/..dots../x", ""},
	}
	for _, tc := range tests {
		r := p.do("GET", tc.path, nil)
		if r.status != http.StatusOK {
			t.Errorf("GET %s = %s", tc.path, r)
			continue
		}
		got := decode[seen](t, r)
		if got.EscapedPath != tc.wantPath || got.RawQuery != tc.wantQuery {
			t.Errorf("GET %s reached %s?%s, want %s?%s", tc.path, got.EscapedPath, got.RawQuery, tc.wantPath, tc.wantQuery)
		}
	}
}

func TestProxyPathSafety(t *testing.T) {
	p := newProxyEnv(t, nil)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	paths := []string{
		"/sandboxes/sb1/proxy/8080/%2e%2e/%2e%2e/v1/sandboxes",
		"/sandboxes/sb1/proxy/8080/%2E%2E",
		"/sandboxes/sb1/proxy/3000/%2e",
		"/sandboxes/sb1/proxy/3000/a/..%2f..%2fetc",
		"/sandboxes/sb1/proxy/3000/..%5c..%5cwin",
		"/sandboxes/sb1/proxy/8080/a/%2e%2e",
		"/sandboxes/sb1/proxy/8080/../../health", // cleaned by the router: redirect, never forwarded
		"/sandboxes/sb1/proxy/8080/a/./b",
	}
	for _, path := range paths {
		req, _ := http.NewRequest("GET", p.http.URL+path, nil)
		req.Header.Set(sandbox.APIKeyHeader, testAPIKey)
		req.URL.Opaque = path // send exactly these bytes
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("GET %s -> %d", path, resp.StatusCode)
		if resp.StatusCode < 300 {
			t.Errorf("GET %s = %d %s, want it refused or redirected", path, resp.StatusCode, body)
		}
		if resp.StatusCode == http.StatusBadRequest {
			var e struct{ Code string }
			json.Unmarshal(body, &e)
			if e.Code != apierror.CodeInvalidRequest {
				t.Errorf("GET %s code = %q, want %s", path, e.Code, apierror.CodeInvalidRequest)
			}
		}
	}
	if n := p.hits.Load(); n != 0 {
		t.Errorf("backend was reached %d times by unsafe paths, want 0", n)
	}
}

func TestProxyErrors(t *testing.T) {
	p := newProxyEnv(t, nil)
	paused := fakeSandbox("paused")
	paused.State = sandbox.StatePaused
	p.rt.add(paused)
	tests := []struct {
		path   string
		status int
		code   string
	}{
		{"/sandboxes/nope/proxy/8080/", 404, apierror.CodeSandboxNotFound},
		{"/sandboxes/paused/proxy/8080/", 409, apierror.CodeSandboxNotRunning},
		{"/sandboxes/sb1/proxy/0/", 400, apierror.CodeInvalidRequest},
		{"/sandboxes/sb1/proxy/99999/", 400, apierror.CodeInvalidRequest},
		{"/sandboxes/sb1/proxy/http/", 400, apierror.CodeInvalidRequest},
	}
	for _, tc := range tests {
		wantError(t, "GET "+tc.path, p.do("GET", tc.path, nil), tc.status, tc.code)
	}
	// A sandbox whose port has nothing listening: 502.
	dead := closedPort(t)
	p.rt.address = func(id string, port int) (runtimeAddress, error) {
		return runtimeAddress{Host: "127.0.0.1", Port: dead}, nil
	}
	r := p.do("GET", "/sandboxes/sb1/proxy/8080/", nil, sandbox.RequestIDHeader, "rid-502")
	wantError(t, "GET to a closed port", r, http.StatusBadGateway, apierror.CodeBadGateway, "8080")
	if got := r.header.Get(sandbox.RequestIDHeader); got != "rid-502" {
		t.Errorf("502 X-Request-ID = %q, want rid-502", got)
	}
}

func TestProxyStreamsImmediately(t *testing.T) {
	release := make(chan struct{})
	p := newProxyEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "second\n")
	}))
	resp, err := getWithKey(p.http.URL + "/sandboxes/sb1/proxy/8080/stream")
	if err != nil {
		close(release)
		t.Fatalf("GET stream: %v", err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	// The backend is still holding the rest: the first line arrived
	// because the proxy flushed it, not because the reply ended.
	close(release)
	if err != nil || line != "first\n" {
		t.Fatalf("first streamed line = %q, %v; want %q", line, err, "first\n")
	}
	if rest, _ := io.ReadAll(br); string(rest) != "second\n" {
		t.Errorf("rest of stream = %q, want %q", rest, "second\n")
	}
}

func TestProxyWebSocket(t *testing.T) {
	p := newProxyEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get(sandbox.AccessTokenHeader); got != "token-sb1" {
			http.Error(w, "no token: "+got, http.StatusUnauthorized)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		for {
			typ, msg, err := c.Read(ctx)
			if err != nil {
				return
			}
			if err := c.Write(ctx, typ, append([]byte("echo:"), msg...)); err != nil {
				return
			}
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(p.http.URL, "http") + "/v1/sandboxes/sb1/proxy/44772/pty/s1/ws"
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{sandbox.APIKeyHeader: {testAPIKey}}})
	if err != nil {
		t.Fatalf("websocket.Dial(%s): %v", url, err)
	}
	defer c.CloseNow()
	if got := resp.Header.Get(sandbox.RequestIDHeader); !hex32.MatchString(got) {
		t.Errorf("upgrade reply X-Request-ID = %q, want a generated id", got)
	}
	if err := c.Write(ctx, websocket.MessageText, []byte("hi")); err != nil {
		t.Fatalf("write: %v", err)
	}
	typ, msg, err := c.Read(ctx)
	if err != nil || typ != websocket.MessageText || string(msg) != "echo:hi" {
		t.Errorf("read = %v %q %v, want text echo:hi", typ, msg, err)
	}
	c.Close(websocket.StatusNormalClosure, "")
}

func TestProxyTokenCached(t *testing.T) {
	p := newProxyEnv(t, nil)
	for range 3 {
		if r := p.do("GET", "/sandboxes/sb1/proxy/44772/ping", nil); r.status != http.StatusOK {
			t.Fatalf("GET ping = %s", r)
		}
	}
	// Address goes through Get in the stub too: one Get per request for
	// the address, plus one token lookup in all.
	p.rt.mu.Lock()
	calls := p.rt.getCalls
	p.rt.mu.Unlock()
	if calls != 4 {
		t.Errorf("runtime Get calls for 3 proxied requests = %d, want 4 (token cached after the first)", calls)
	}
	// Deleting the sandbox forgets its token.
	p.do("DELETE", "/v1/sandboxes/sb1", nil)
	if p.srv.lc.TokenCached("sb1") {
		t.Errorf("token of deleted sandbox sb1 still cached")
	}
}

func TestRestAfterPort(t *testing.T) {
	tests := []struct {
		escaped, pattern, want string
		ok                     bool
	}{
		{"/sandboxes/a/proxy/80", "/sandboxes/{sandboxId}/proxy/{port}", "/", true},
		{"/v1/sandboxes/a/proxy/80/x/y", "/v1/sandboxes/{sandboxId}/proxy/{port}/{path...}", "/x/y", true},
		{"/sandboxes/a%2Fb/proxy/80/x", "/sandboxes/{sandboxId}/proxy/{port}/{path...}", "/x", true},
		{"/sandboxes/a/proxy/80/%2e%2e", "/sandboxes/{sandboxId}/proxy/{port}/{path...}", "", false},
		{"/sandboxes/a/proxy/80/x%2F..", "/sandboxes/{sandboxId}/proxy/{port}/{path...}", "", false},
		{"/sandboxes/a/proxy/80/%zz", "/sandboxes/{sandboxId}/proxy/{port}/{path...}", "", false},
	}
	for _, tc := range tests {
		got, err := restAfterPort(tc.escaped, tc.pattern)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("restAfterPort(%q, %q) = %q, %v; want %q, ok=%v", tc.escaped, tc.pattern, got, err, tc.want, tc.ok)
		}
	}
}

// TestProxyFullDuplex: a backend may answer before it has read the whole
// request body (execd streams a command's init frame as soon as it has
// parsed the request). The proxy must keep relaying the rest of the body
// after the reply has started; Go's HTTP/1 server otherwise swallows the
// unread body on the first response write, and the upstream connection
// is torn down mid-stream.
func TestProxyFullDuplex(t *testing.T) {
	p := newProxyEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex()
		br := bufio.NewReader(r.Body)
		first, _ := br.ReadString('\n')
		io.WriteString(w, "got "+first)
		w.(http.Flusher).Flush()
		rest, _ := io.ReadAll(br)
		io.WriteString(w, "then "+string(rest))
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	// A transport stuck sending the body ignores ctx; ending the body
	// unblocks it, so a proxy without full duplex fails here, not hangs.
	context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.http.URL+"/sandboxes/sb1/proxy/8080/duplex", pr)
	req.ContentLength = int64(len("one\ntwo\n"))
	req.Header.Set(sandbox.APIKeyHeader, testAPIKey)
	go pw.Write([]byte("one\n"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		pw.Close()
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	// The rest of the body is sent only once the reply has begun.
	if line, err := br.ReadString('\n'); err != nil || line != "got one\n" {
		pw.Close()
		t.Fatalf("first reply line = %q, %v; want %q", line, err, "got one\n")
	}
	pw.Write([]byte("two\n"))
	pw.Close()
	if rest, err := io.ReadAll(br); err != nil || string(rest) != "then two\n" {
		t.Errorf("rest of reply = %q, %v; want %q", rest, err, "then two\n")
	}
}

// TestProxyCutStreamIsLogged: when the sandbox drops a stream midway the
// client sees the reply end abruptly and the request is still logged.
func TestProxyCutStreamIsLogged(t *testing.T) {
	p := newProxyEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	resp, err := getWithKey(p.http.URL + "/sandboxes/sb1/proxy/8080/stream")
	if err != nil {
		t.Fatalf("GET stream: %v", err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Errorf("reading a cut stream succeeded; want an error")
	}
	if logs := p.logs.String(); !strings.Contains(logs, `msg="request aborted"`) || !strings.Contains(logs, "/proxy/8080/stream") {
		t.Errorf("server log has no line for the aborted request:\n%s", logs)
	}
	// The proxy says how the upstream connection was used, so a cut seen
	// once in a long run can be told apart: a request that failed to be
	// sent (the transport then closes the connection under the reply)
	// from a connection the sandbox dropped.
	if logs := p.logs.String(); !strings.Contains(logs, `msg="proxied reply cut"`) || !strings.Contains(logs, "request_sent=true") ||
		!strings.Contains(logs, "conn_reused=false") {
		t.Errorf("server log does not describe the cut upstream connection:\n%s", logs)
	}
}

// TestProxyCutBySendFailureIsLogged: when relaying the request body
// fails while the sandbox is already streaming its reply, the transport
// closes the upstream connection under the reply ("use of closed network
// connection" on the read side). The log must name the failed send, as
// that is what tells this cut from one by the sandbox.
func TestProxyCutBySendFailureIsLogged(t *testing.T) {
	p := newProxyEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex()
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		// Keep streaming until the proxy drops the connection.
		for range 100 {
			time.Sleep(20 * time.Millisecond)
			if _, err := io.WriteString(w, "more\n"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	c, err := net.Dial("tcp", strings.TrimPrefix(p.http.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "POST /sandboxes/sb1/proxy/8080/s HTTP/1.1\r\nHost: x\r\n"+keyLine+"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the reply before the bad chunk: %v", err)
		}
		if line == "first\n" {
			break
		}
	}
	io.WriteString(c, "ZZ\r\n") // not a chunk size: relaying the body fails
	if _, err := io.ReadAll(br); err != nil {
		t.Fatalf("the proxy did not end the connection: %v", err)
	}
	logs := p.logs.String()
	if !strings.Contains(logs, `msg="proxied reply cut"`) || !strings.Contains(logs, "request_sent=false") ||
		!strings.Contains(logs, `request_send_error="invalid byte in chunk length"`) {
		t.Errorf("server log does not name the failed send:\n%s", logs)
	}
}

// rawExchange sends raw bytes to the server at url and reads until the
// server closes the connection (10 s at most; an error then).
func rawExchange(t *testing.T, url, raw string) ([]byte, error) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	go io.WriteString(conn, raw) // a large request may not fit the socket buffers
	return io.ReadAll(conn)
}

// TestProxyBadChunkEndsConnection: with full duplex, net/http keeps a
// connection open after a malformed chunk, and the bytes behind it would
// be read as a second request. The proxy must end the connection instead,
// so nothing smuggled behind a bad body reaches a sandbox.
func TestProxyBadChunkEndsConnection(t *testing.T) {
	var paths sync.Map
	p := newProxyEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths.Store(r.URL.Path, true)
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "backend "+r.URL.Path)
	}))
	replies, err := rawExchange(t, p.http.URL, "POST /sandboxes/sb1/proxy/8080/first HTTP/1.1\r\nHost: x\r\n"+keyLine+"Transfer-Encoding: chunked\r\n\r\n"+
		"5\r\nhello\r\nZZ\r\n"+
		"GET /sandboxes/sb1/proxy/8080/smuggled HTTP/1.1\r\nHost: x\r\n"+keyLine+"\r\n")
	if err != nil {
		t.Fatalf("reading the replies: %v (the connection was not closed)", err)
	}
	if _, ok := paths.Load("/smuggled"); ok || strings.Contains(string(replies), "backend /smuggled") {
		t.Fatalf("the request behind the bad chunk reached the sandbox; replies:\n%s", replies)
	}
	if n := strings.Count(string(replies), "HTTP/1.1 "); n > 1 {
		t.Errorf("%d replies on a connection whose request body was malformed; want at most 1:\n%s", n, replies)
	}
}

// TestProxyBadChunkUnreadEndsConnection: when the sandbox cannot be
// reached, the body is never relayed; a malformed chunk in it must still
// end the connection rather than let what follows be read as a request.
func TestProxyBadChunkUnreadEndsConnection(t *testing.T) {
	p := newProxyEnv(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	p.rt.address = func(string, int) (runtimeAddress, error) { return runtimeAddress{Host: "127.0.0.1", Port: closed}, nil }
	replies, err := rawExchange(t, p.http.URL, "POST /sandboxes/sb1/proxy/8080/first HTTP/1.1\r\nHost: x\r\n"+keyLine+"Transfer-Encoding: chunked\r\n\r\n"+
		"5\r\nhello\r\nZZZ\r\n"+
		"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\n"+sandbox.APIKeyHeader+": "+testAPIKey+"\r\n\r\n")
	if err != nil {
		t.Fatalf("reading the replies: %v (the connection was not closed)", err)
	}
	if n := strings.Count(string(replies), "HTTP/1.1 "); n != 1 {
		t.Fatalf("%d replies to one request with a malformed body; want 1:\n%s", n, replies)
	}
}

// keyLine is the API key header of a raw HTTP/1.1 request.
const keyLine = sandbox.APIKeyHeader + ": " + testAPIKey + "\r\n"

// getWithKey is http.Get with the API key.
func getWithKey(url string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(sandbox.APIKeyHeader, testAPIKey)
	return http.DefaultClient.Do(req)
}
