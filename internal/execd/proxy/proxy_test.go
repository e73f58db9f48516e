package proxy

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
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// seen is what a backend observed of one forwarded request.
type seen struct {
	method, requestURI, host, body string
	header                         http.Header
}

// backend starts a loopback server and returns its port.
func backend(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
}

// recorder is a backend that reports each request on a channel.
func recorder(t *testing.T) (port string, got <-chan seen) {
	t.Helper()
	ch := make(chan seen, 1)
	port = backend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ch <- seen{method: r.Method, requestURI: r.RequestURI, host: r.Host, body: string(body), header: r.Header.Clone()}
		io.WriteString(w, "ok")
	}))
	return port, ch
}

// front serves the proxy on both routes execd mounts it at.
func front(t *testing.T) *httptest.Server {
	t.Helper()
	p := New(Options{StripHeaders: []string{sandbox.AccessTokenHeader}})
	mux := http.NewServeMux()
	mux.Handle("/proxy/{port}/", p)
	mux.Handle("/proxy/{port}", p)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestForwardsPathAndQuery(t *testing.T) {
	port, got := recorder(t)
	srv := front(t)
	tests := []struct {
		name, method, path, body string
		wantURI                  string
	}{
		{"bare port", "GET", "/proxy/" + port, "", "/"},
		{"trailing slash", "GET", "/proxy/" + port + "/", "", "/"},
		{"path and query", "GET", "/proxy/" + port + "/api/v1/items?limit=10&q=a%20b+c", "", "/api/v1/items?limit=10&q=a%20b+c"},
		{"escaped segments kept", "GET", "/proxy/" + port + "/files/a%2Fb/c%20d%41?p=%2Ftmp", "", "/files/a%2Fb/c%20d%41?p=%2Ftmp"},
		{"empty query kept", "GET", "/proxy/" + port + "/x?", "", "/x?"},
		{"post body", "POST", "/proxy/" + port + "/submit", `{"a":1}`, "/submit"},
		{"leading zero port", "GET", "/proxy/0" + port + "/z", "", "/z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(testContext(t), tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Host = "evil.example:1" // must not steer the target
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tt.method, tt.path, err)
			}
			defer resp.Body.Close()
			if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || string(b) != "ok" {
				t.Fatalf("%s %s = %d %q, want 200 \"ok\"", tt.method, tt.path, resp.StatusCode, b)
			}
			s := <-got
			if s.requestURI != tt.wantURI {
				t.Errorf("%s %s forwarded as %q, want %q", tt.method, tt.path, s.requestURI, tt.wantURI)
			}
			if s.method != tt.method || s.body != tt.body {
				t.Errorf("%s %s backend saw %s body %q, want %s body %q", tt.method, tt.path, s.method, s.body, tt.method, tt.body)
			}
			if want := "127.0.0.1:" + port; s.host != want {
				t.Errorf("%s %s backend Host = %q, want %q", tt.method, tt.path, s.host, want)
			}
			if fh := s.header.Get("X-Forwarded-Host"); fh != "evil.example:1" {
				t.Errorf("%s %s X-Forwarded-Host = %q, want the caller's Host %q", tt.method, tt.path, fh, "evil.example:1")
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	port, got := recorder(t)
	srv := front(t)
	req, err := http.NewRequestWithContext(testContext(t), "GET", srv.URL+"/proxy/"+port+"/h", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(sandbox.AccessTokenHeader, "secret")
	req.Header.Set(sandbox.APIKeyHeader, "platform-key")
	req.Header.Add(strings.ToLower(sandbox.APIKeyHeader), "platform-key-2")
	req.Header.Set("X-Custom", "keep")
	req.Header.Set("Authorization", "Bearer app-token")
	req.Header.Set("X-Forwarded-For", "10.0.0.1")
	req.Header.Set("X-Forwarded-Proto", "gopher")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	resp.Body.Close()
	s := <-got
	checks := []struct{ header, want string }{
		{sandbox.AccessTokenHeader, ""},
		{sandbox.APIKeyHeader, ""},
		{"X-Custom", "keep"},
		{"Authorization", "Bearer app-token"},
		{"X-Forwarded-For", "10.0.0.1, 127.0.0.1"},
		{"X-Forwarded-Proto", "http"},
		{"X-Forwarded-Host", strings.TrimPrefix(srv.URL, "http://")},
	}
	for _, c := range checks {
		if g := strings.Join(s.header.Values(c.header), ", "); g != c.want {
			t.Errorf("backend header %s = %q, want %q", c.header, g, c.want)
		}
	}
}

func TestStreamsBeforeBackendFinishes(t *testing.T) {
	release := make(chan struct{})
	port := backend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "second\n")
	}))
	srv := front(t)
	req, err := http.NewRequestWithContext(testContext(t), "GET", srv.URL+"/proxy/"+port+"/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("GET /stream: %v (headers held back until the backend finished?)", err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first chunk = %q, %v; want %q while the backend is still running", line, err, "first\n")
	}
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "second\n" {
		t.Errorf("rest of stream = %q, %v; want %q", rest, err, "second\n")
	}
}

func TestWebSocket(t *testing.T) {
	paths := make(chan string, 1)
	port := backend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths <- r.URL.Path
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, data, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, data); err != nil {
				return
			}
		}
	}))
	srv := front(t)
	ctx := testContext(t)
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/proxy/" + port + "/ws"
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatalf("websocket.Dial(%s): %v", url, err)
	}
	defer c.CloseNow()
	if p := <-paths; p != "/ws" {
		t.Errorf("backend WebSocket path = %q, want /ws", p)
	}
	for _, msg := range []string{"hello", "world"} {
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatalf("Write(%q): %v", msg, err)
		}
		typ, data, err := c.Read(ctx)
		if err != nil || typ != websocket.MessageText || string(data) != msg {
			t.Fatalf("Read() = %v %q, %v; want text %q", typ, data, err, msg)
		}
	}
	if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Errorf("Close(): %v", err)
	}
}

// apiError decodes a {code, message} reply.
func apiError(t *testing.T, resp *http.Response) (code, message string) {
	t.Helper()
	var body struct{ Code, Message string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("decoding error body: %v", err)
	}
	return body.Code, body.Message
}

func TestBadGateway(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()

	srv := front(t)
	resp, err := srv.Client().Get(srv.URL + "/proxy/" + port + "/x")
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	defer resp.Body.Close()
	code, msg := apiError(t, resp)
	if resp.StatusCode != http.StatusBadGateway || code != "BAD_GATEWAY" || !strings.Contains(msg, port) {
		t.Errorf("GET /proxy/%s/x with nothing listening = %d %s %q, want 502 BAD_GATEWAY naming port %s", port, resp.StatusCode, code, msg, port)
	}
}

func TestInvalidPort(t *testing.T) {
	srv := front(t)
	for _, port := range []string{"0", "70000", "65536", "abc", "-1", "+80", "8080x"} {
		for _, suffix := range []string{"", "/x"} {
			path := "/proxy/" + port + suffix
			resp, err := srv.Client().Get(srv.URL + path)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			code, msg := apiError(t, resp)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || code != "INVALID_PORT" {
				t.Errorf("GET %s = %d %s %q, want 400 INVALID_PORT", path, resp.StatusCode, code, msg)
			}
		}
	}
}

func TestForwardPath(t *testing.T) {
	tests := []struct {
		escaped, pattern, want string
	}{
		{"/proxy/80", "/proxy/{port}", "/"},
		{"/proxy/80/", "/proxy/{port}/", "/"},
		{"/proxy/80/a/b", "/proxy/{port}/", "/a/b"},
		{"/proxy/80/a%2Fb/", "GET /proxy/{port}/", "/a%2Fb/"},
		{"/proxy/80/a", "", "/a"},
		{"/v1/proxy/80/a/b", "/v1/proxy/{port}/{rest...}", "/a/b"},
		{"/proxy/80/a", "example.com/proxy/{port}/", "/a"},
	}
	for _, tt := range tests {
		if got := forwardPath(tt.escaped, tt.pattern); got != tt.want {
			t.Errorf("forwardPath(%q, %q) = %q, want %q", tt.escaped, tt.pattern, got, tt.want)
		}
	}
}

// TestFullDuplex: the rest of a request body still reaches a service that
// answered before reading it all.
func TestFullDuplex(t *testing.T) {
	port := backend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex()
		br := bufio.NewReader(r.Body)
		first, _ := br.ReadString('\n')
		io.WriteString(w, "got "+first)
		http.NewResponseController(w).Flush()
		rest, _ := io.ReadAll(br)
		io.WriteString(w, "then "+string(rest))
	}))
	srv := front(t)
	ctx := testContext(t)
	pr, pw := io.Pipe()
	// A transport stuck sending the body ignores ctx; ending the body
	// unblocks it, so a proxy without full duplex fails here, not hangs.
	context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/proxy/"+port+"/duplex", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len("one\ntwo\n"))
	go pw.Write([]byte("one\n"))
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "got one\n" {
		t.Fatalf("first reply line = %q, %v; want %q", line, err, "got one\n")
	}
	pw.Write([]byte("two\n"))
	pw.Close()
	if rest, err := io.ReadAll(br); err != nil || string(rest) != "then two\n" {
		t.Errorf("rest of reply = %q, %v; want %q", rest, err, "then two\n")
	}
}

// rawExchange sends raw bytes to srv and reads until it closes the
// connection (10 s at most; an error then).
func rawExchange(t *testing.T, srv *httptest.Server, raw string) ([]byte, error) {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	go io.WriteString(conn, raw) // a large request may not fit the socket buffers
	return io.ReadAll(conn)
}

// TestBadChunkEndsConnection: the bytes behind a malformed chunk must not
// be served as a second request (see httpmw.FullDuplex).
func TestBadChunkEndsConnection(t *testing.T) {
	var smuggled atomic.Bool
	port := backend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/smuggled" {
			smuggled.Store(true)
		}
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "backend "+r.URL.Path)
	}))
	srv := front(t)
	replies, err := rawExchange(t, srv, "POST /proxy/"+port+"/first HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"5\r\nhello\r\nZZ\r\n"+
		"GET /proxy/"+port+"/smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
	if err != nil {
		t.Fatalf("reading the replies: %v (the connection was not closed)", err)
	}
	if smuggled.Load() || strings.Count(string(replies), "HTTP/1.1 ") > 1 {
		t.Fatalf("the request behind the bad chunk was served; replies:\n%s", replies)
	}
}

// TestUnreadBodyEndsConnection: a body the proxy never relays (the port is
// closed) and that is too long to drain must not be read as requests.
func TestUnreadBodyEndsConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	srv := front(t)
	inner := "GET /proxy/" + closed + "/smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
	body := inner + strings.Repeat("x", 400000-len(inner))
	// The server closes with unread bytes pending: the read may end in a reset.
	replies, _ := rawExchange(t, srv, "POST /proxy/"+closed+"/first HTTP/1.1\r\nHost: x\r\nContent-Length: 400000\r\n\r\n"+body)
	if n := strings.Count(string(replies), "HTTP/1.1 "); n != 1 {
		t.Fatalf("%d replies to one request whose body was never relayed; want 1:\n%.500s", n, replies)
	}
}
