package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// fwdUpstream stands in for what an endpoint points at: execd's
// /proxy/6080 (wanting the access token) and the server's proxy route
// /sandboxes/sb1/proxy/6080 (wanting the API key). Below either prefix it
// serves /echo (the request as JSON), /stream (two chunks, the second once
// release is closed), /ws (a WebSocket echo) and /leak (a reply carrying
// credential headers).
type fwdUpstream struct {
	*httptest.Server
	release chan struct{}
}

// echoed is what /echo answers.
type echoed struct {
	Method, Path, RawQuery, Host, Body string
	Header                             http.Header
}

func newFwdUpstream(t *testing.T, tlsOn bool) *fwdUpstream {
	t.Helper()
	u := &fwdUpstream{release: make(chan struct{})}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rest string
		switch {
		case strings.HasPrefix(r.URL.Path, "/proxy/6080/"):
			if r.Header.Get(AccessTokenHeader) != sdkTestToken {
				replyJSON(w, 401, map[string]string{"error": "missing or wrong X-EXECD-ACCESS-TOKEN"})
				return
			}
			rest = strings.TrimPrefix(r.URL.Path, "/proxy/6080")
		case strings.HasPrefix(r.URL.Path, "/sandboxes/sb1/proxy/6080/"):
			if r.Header.Get(APIKeyHeader) != sdkTestKey {
				replyJSON(w, 401, ErrorResponse{Code: "MISSING_API_KEY", Message: "no key"})
				return
			}
			rest = strings.TrimPrefix(r.URL.Path, "/sandboxes/sb1/proxy/6080")
		default:
			http.NotFound(w, r)
			return
		}
		switch rest {
		case "/echo":
			b, _ := io.ReadAll(r.Body)
			replyJSON(w, 200, echoed{Method: r.Method, Path: rest, RawQuery: r.URL.RawQuery, Host: r.Host, Body: string(b), Header: r.Header})
		case "/stream":
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "one\n")
			w.(http.Flusher).Flush()
			select {
			case <-u.release:
			case <-r.Context().Done():
				return
			}
			io.WriteString(w, "two\n")
		case "/ws":
			// Accept checks that Origin, if any, matches the Host it sees.
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
				if err := c.Write(ctx, typ, append([]byte("echo: "), msg...)); err != nil {
					return
				}
			}
		case "/leak":
			w.Header().Set(AccessTokenHeader, r.Header.Get(AccessTokenHeader))
			w.Header().Set(APIKeyHeader, r.Header.Get(APIKeyHeader))
			w.Header().Set("X-Kept", "yes")
		default:
			http.NotFound(w, r)
		}
	})
	if tlsOn {
		u.Server = httptest.NewTLSServer(h)
	} else {
		u.Server = httptest.NewServer(h)
	}
	t.Cleanup(u.Close)
	return u
}

// hostPort is the upstream's host:port.
func (u *fwdUpstream) hostPort() string { return u.Listener.Addr().String() }

// newFwdLifecycle is a lifecycle server whose sandbox "sb1" has port 6080
// at up (with the token), port 7001 at up without any header, and port
// 6443 at up with an explicit https scheme. With use_server_proxy, 6080 is
// at up's server-proxy route.
func newFwdLifecycle(t *testing.T, up *fwdUpstream) *sdkServer {
	t.Helper()
	s := newSDKServer(t)
	s.mux.HandleFunc("GET /v1/sandboxes/sb1/endpoints/{port}", func(w http.ResponseWriter, r *http.Request) {
		proxied := r.URL.Query().Get("use_server_proxy") == "true"
		switch port := r.PathValue("port"); {
		case port == "6080" && proxied:
			replyJSON(w, 200, Endpoint{Endpoint: up.hostPort() + "/sandboxes/sb1/proxy/6080"})
		case port == "6080":
			replyJSON(w, 200, Endpoint{Endpoint: up.hostPort() + "/proxy/6080", Headers: map[string]string{AccessTokenHeader: sdkTestToken}})
		case port == "7001":
			replyJSON(w, 200, Endpoint{Endpoint: up.hostPort() + "/proxy/6080"})
		case port == "6443":
			replyJSON(w, 200, Endpoint{Endpoint: "https://" + up.hostPort() + "/proxy/6080", Headers: map[string]string{AccessTokenHeader: sdkTestToken}})
		default:
			replyJSON(w, 404, ErrorResponse{Code: "NOT_FOUND", Message: "no port " + port})
		}
	})
	s.mux.HandleFunc("GET /v1/sandboxes/gone/endpoints/{port}", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 404, ErrorResponse{Code: "SANDBOX_NOT_FOUND", Message: "no sandbox gone"})
	})
	return s
}

// startForward forwards port of sb1 and closes the forwarder with the test.
func startForward(t *testing.T, c *Client, port int, opts ForwardOptions) *Forwarder {
	t.Helper()
	f, err := c.Forward(testCtx(t), "sb1", port, opts)
	if err != nil {
		t.Fatalf("Forward(sb1, %d): %v", port, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// fwdDo sends a request through the forwarder with plain net/http.
func fwdDo(t *testing.T, method, u string, body io.Reader, header http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func decodeEcho(t *testing.T, resp *http.Response) echoed {
	t.Helper()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: status %d, body %q; want 200", resp.Request.Method, resp.Request.URL, resp.StatusCode, b)
	}
	var e echoed
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("decode echo: %v", err)
	}
	return e
}

func TestForwardGetPathQueryAndHeaders(t *testing.T) {
	up := newFwdUpstream(t, false)
	f := startForward(t, newFwdLifecycle(t, up).client(t), 6080, ForwardOptions{})
	if !strings.HasPrefix(f.URL(), "http://127.0.0.1:") {
		t.Errorf("URL() = %q, want http://127.0.0.1:<port>", f.URL())
	}
	if want := "http://" + up.hostPort() + "/proxy/6080"; f.Target() != want {
		t.Errorf("Target() = %q, want %q", f.Target(), want)
	}
	resp := fwdDo(t, "GET", f.URL()+"/echo?a=1&b=x%20y", nil, http.Header{
		AccessTokenHeader: {"client-forged"},
		APIKeyHeader:      {"client-key"},
		"X-Forwarded-For": {"203.0.113.9"},
		"X-Custom":        {"kept"},
		"Origin":          {f.URL()},
	})
	e := decodeEcho(t, resp)
	if e.Method != "GET" || e.Path != "/echo" || e.RawQuery != "a=1&b=x%20y" {
		t.Errorf("upstream saw %s %s?%s, want GET /echo?a=1&b=x%%20y", e.Method, e.Path, e.RawQuery)
	}
	if e.Host != up.hostPort() {
		t.Errorf("upstream saw Host %q, want the endpoint's %q", e.Host, up.hostPort())
	}
	if got := e.Header.Get(AccessTokenHeader); got != sdkTestToken {
		t.Errorf("upstream saw %s %q, want the endpoint's token", AccessTokenHeader, got)
	}
	if got := e.Header.Values(APIKeyHeader); len(got) != 0 {
		t.Errorf("upstream saw %s %q, want none (a client's copy is dropped)", APIKeyHeader, got)
	}
	if got := e.Header.Values("X-Forwarded-For"); len(got) != 1 || got[0] != "127.0.0.1" {
		t.Errorf("upstream saw X-Forwarded-For %q, want [127.0.0.1] (the client's own claim dropped)", got)
	}
	if got := e.Header.Get("X-Forwarded-Host"); got != f.Addr().String() {
		t.Errorf("upstream saw X-Forwarded-Host %q, want %q", got, f.Addr().String())
	}
	if got := e.Header.Get("X-Forwarded-Proto"); got != "http" {
		t.Errorf("upstream saw X-Forwarded-Proto %q, want http", got)
	}
	if got := e.Header.Values("Origin"); len(got) != 0 {
		t.Errorf("upstream saw Origin %q, want none for the forwarder's own origin", got)
	}
	if got := e.Header.Get("X-Custom"); got != "kept" {
		t.Errorf("upstream saw X-Custom %q, want kept", got)
	}
}

func TestForwardPostBody(t *testing.T) {
	up := newFwdUpstream(t, false)
	f := startForward(t, newFwdLifecycle(t, up).client(t), 6080, ForwardOptions{})
	body := strings.Repeat("0123456789", 100_000) // 1 MB, more than any buffer
	e := decodeEcho(t, fwdDo(t, "POST", f.URL()+"/echo", strings.NewReader(body), http.Header{"Content-Type": {"text/plain"}}))
	if e.Method != "POST" || e.Body != body {
		t.Errorf("upstream saw %s with a %d-byte body, want POST with the %d bytes sent", e.Method, len(e.Body), len(body))
	}
}

func TestForwardStreams(t *testing.T) {
	up := newFwdUpstream(t, false)
	f := startForward(t, newFwdLifecycle(t, up).client(t), 6080, ForwardOptions{})
	resp := fwdDo(t, "GET", f.URL()+"/stream", nil, nil)
	br := bufio.NewReader(resp.Body)
	// The upstream holds the second chunk back until the first has come
	// through: a buffering forwarder blocks here until the test's deadline.
	line, err := br.ReadString('\n')
	if err != nil || line != "one\n" {
		t.Fatalf("first chunk: %q, %v; want \"one\\n\" before the upstream finishes", line, err)
	}
	close(up.release)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "two\n" {
		t.Errorf("rest of the stream: %q, %v; want \"two\\n\"", rest, err)
	}
}

func TestForwardWebSocket(t *testing.T) {
	up := newFwdUpstream(t, false)
	f := startForward(t, newFwdLifecycle(t, up).client(t), 6080, ForwardOptions{})
	ctx := testCtx(t)
	wsURL := "ws" + strings.TrimPrefix(f.URL(), "http") + "/ws"
	// A page served by the forwarder sends its own origin; the upstream's
	// Accept, which sees another Host, only takes the upgrade because the
	// forwarder does not pass that origin on.
	c, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {f.URL()}}})
	if err != nil {
		t.Fatalf("Dial %s: %v (response %v)", wsURL, err, resp)
	}
	defer c.CloseNow()
	for _, msg := range []string{"hello", strings.Repeat("x", 30_000)} {
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatalf("Write: %v", err)
		}
		_, got, err := c.Read(ctx)
		if err != nil || string(got) != "echo: "+msg {
			t.Fatalf("Read: %d bytes, %v; want the %d-byte echo", len(got), err, len("echo: "+msg))
		}
	}
	c.Close(websocket.StatusNormalClosure, "")

	// Any other page's WebSocket is refused before it reaches the sandbox.
	_, resp, err = websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"http://evil.example"}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("Dial with Origin http://evil.example: %v, response %v; want 403", err, resp)
	}
}

func TestForwardTrustedOrigin(t *testing.T) {
	up := newFwdUpstream(t, false)
	f := startForward(t, newFwdLifecycle(t, up).client(t), 6080, ForwardOptions{TrustedOrigins: []string{"http://app.example"}})
	resp := fwdDo(t, "POST", f.URL()+"/echo", strings.NewReader("x"), http.Header{"Origin": {"http://app.example"}, "Sec-Fetch-Site": {"cross-site"}})
	if e := decodeEcho(t, resp); e.Header.Get("Origin") != "http://app.example" {
		t.Errorf("upstream saw Origin %q, want the trusted origin unchanged", e.Header.Get("Origin"))
	}
	if _, err := newFwdLifecycle(t, up).client(t).Forward(testCtx(t), "sb1", 6080, ForwardOptions{TrustedOrigins: []string{"app.example"}}); err == nil {
		t.Error("Forward with TrustedOrigins [app.example] (no scheme): no error")
	}
}

func TestForwardRefusesForeignRequests(t *testing.T) {
	up := newFwdUpstream(t, false)
	lc := newFwdLifecycle(t, up)
	f := startForward(t, lc.client(t), 6080, ForwardOptions{})
	tests := []struct {
		name   string
		method string
		host   string // Host header; the forwarder's address when empty
		header http.Header
		want   int
	}{
		{"same-origin POST", "POST", "", http.Header{"Sec-Fetch-Site": {"same-origin"}}, 200},
		{"non-browser POST", "POST", "", nil, 200},
		{"localhost name", "GET", "localhost", nil, 200},
		{"cross-site POST", "POST", "", http.Header{"Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden},
		{"foreign origin POST", "POST", "", http.Header{"Origin": {"http://evil.example"}}, http.StatusForbidden},
		{"rebound DNS name", "GET", "evil.example", nil, http.StatusMisdirectedRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(testCtx(t), tt.method, f.URL()+"/echo", strings.NewReader("x"))
			for k, vs := range tt.header {
				req.Header[k] = vs
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s /echo: %v", tt.method, err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.want {
				b, _ := io.ReadAll(resp.Body)
				t.Errorf("%s /echo with Host %q, headers %v: status %d (%q), want %d", tt.method, tt.host, tt.header, resp.StatusCode, b, tt.want)
			}
		})
	}
}

func TestForwardUpstreamStatusPassesThrough(t *testing.T) {
	up := newFwdUpstream(t, false)
	// Port 7001's endpoint carries no token, so the upstream refuses.
	f := startForward(t, newFwdLifecycle(t, up).client(t), 7001, ForwardOptions{})
	resp := fwdDo(t, "GET", f.URL()+"/echo", nil, nil)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "X-EXECD-ACCESS-TOKEN") {
		t.Errorf("GET /echo without token: status %d, body %q; want the upstream's 401", resp.StatusCode, b)
	}
}

func TestForwardNeverEchoesCredentials(t *testing.T) {
	up := newFwdUpstream(t, false)
	f := startForward(t, newFwdLifecycle(t, up).client(t), 6080, ForwardOptions{})
	resp := fwdDo(t, "GET", f.URL()+"/leak", nil, nil)
	if resp.StatusCode != 200 || resp.Header.Get("X-Kept") != "yes" {
		t.Fatalf("GET /leak: status %d, X-Kept %q; want 200 and yes", resp.StatusCode, resp.Header.Get("X-Kept"))
	}
	for _, k := range []string{AccessTokenHeader, APIKeyHeader} {
		if v := resp.Header.Values(k); len(v) != 0 {
			t.Errorf("reply to the client carries %s %q", k, v)
		}
	}
}

func TestForwardServerProxy(t *testing.T) {
	up := newFwdUpstream(t, false)
	f := startForward(t, newFwdLifecycle(t, up).client(t, WithServerProxy(true)), 6080, ForwardOptions{})
	e := decodeEcho(t, fwdDo(t, "GET", f.URL()+"/echo?q=1", nil, nil))
	if e.Path != "/echo" || e.RawQuery != "q=1" || e.Header.Get(APIKeyHeader) != sdkTestKey {
		t.Errorf("upstream saw %s?%s with API key %q; want /echo?q=1 with the client's key", e.Path, e.RawQuery, e.Header.Get(APIKeyHeader))
	}
}

func TestForwardHTTPSEndpoint(t *testing.T) {
	up := newFwdUpstream(t, true)
	lc := newFwdLifecycle(t, up)
	// The upstream's test client trusts its certificate, and speaks plain
	// HTTP to the lifecycle server too.
	c := lc.client(t, WithHTTPClient(up.Client()))
	f := startForward(t, c, 6443, ForwardOptions{})
	if !strings.HasPrefix(f.Target(), "https://") {
		t.Errorf("Target() = %q, want the endpoint's https scheme", f.Target())
	}
	e := decodeEcho(t, fwdDo(t, "GET", f.URL()+"/echo", nil, nil))
	if e.Header.Get(AccessTokenHeader) != sdkTestToken {
		t.Errorf("upstream saw token %q over https, want the endpoint's", e.Header.Get(AccessTokenHeader))
	}

}

func TestForwardListenAddress(t *testing.T) {
	up := newFwdUpstream(t, false)
	lc := newFwdLifecycle(t, up)
	c := lc.client(t)
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0", "example.com:0"} {
		_, err := c.Forward(testCtx(t), "sb1", 6080, ForwardOptions{Listen: addr})
		if !errors.Is(err, ErrNotLoopback) {
			t.Errorf("Forward with Listen %q: %v, want ErrNotLoopback", addr, err)
		}
	}
	if n := len(lc.requests("GET", "/v1/sandboxes/sb1/endpoints/6080")); n != 0 {
		t.Errorf("refused listen addresses still looked the endpoint up %d times", n)
	}
	if _, err := c.Forward(testCtx(t), "sb1", 6080, ForwardOptions{Listen: "127.0.0.1"}); err == nil || errors.Is(err, ErrNotLoopback) {
		t.Errorf("Forward with Listen 127.0.0.1 (no port): %v, want a parse error", err)
	}

	// A fixed loopback port is used as given.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fixed := ln.Addr().String()
	ln.Close()
	f := startForward(t, c, 6080, ForwardOptions{Listen: fixed})
	if f.URL() != "http://"+fixed {
		t.Errorf("URL() = %q, want http://%s", f.URL(), fixed)
	}

	// AllowRemote opens every interface; URL names loopback, where the
	// test sends its request.
	f = startForward(t, c, 6080, ForwardOptions{Listen: ":0", AllowRemote: true})
	if !strings.HasPrefix(f.URL(), "http://127.0.0.1:") && !strings.HasPrefix(f.URL(), "http://[::1]:") {
		t.Errorf("URL() with Listen :0 = %q, want a loopback URL", f.URL())
	}
	decodeEcho(t, fwdDo(t, "GET", f.URL()+"/echo", nil, nil))
}

func TestForwardErrors(t *testing.T) {
	up := newFwdUpstream(t, false)
	lc := newFwdLifecycle(t, up)
	c := lc.client(t)
	if _, err := c.Forward(testCtx(t), "sb1", 0, ForwardOptions{}); err == nil || !strings.Contains(err.Error(), "port 0") {
		t.Errorf("Forward port 0: %v, want an error naming the port", err)
	}
	if _, err := c.Forward(testCtx(t), "sb1", 65536, ForwardOptions{}); err == nil {
		t.Error("Forward port 65536: no error")
	}
	_, err := c.Forward(testCtx(t), "gone", 6080, ForwardOptions{})
	if !IsNotFound(err) || !strings.Contains(err.Error(), "forward sandbox gone port 6080") {
		t.Errorf("Forward of an unknown sandbox: %v, want a 404 APIError with context", err)
	}
	// The upstream going away is a 502 naming the sandbox and port.
	f := startForward(t, c, 6080, ForwardOptions{Logger: slog.New(slog.DiscardHandler)})
	up.Close()
	resp := fwdDo(t, "GET", f.URL()+"/echo", nil, nil)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "sandbox sb1 port 6080") {
		t.Errorf("GET with the upstream gone: status %d, body %q; want 502 naming sandbox and port", resp.StatusCode, b)
	}
}

func TestForwardClose(t *testing.T) {
	up := newFwdUpstream(t, false)
	f := startForward(t, newFwdLifecycle(t, up).client(t), 6080, ForwardOptions{})
	ctx := testCtx(t)

	// Open a WebSocket and a stream, then close under them.
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(f.URL(), "http")+"/ws", nil)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Read(ctx); err != nil {
		t.Fatal(err)
	}
	resp := fwdDo(t, "GET", f.URL()+"/stream", nil, nil)
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "one\n" {
		t.Fatalf("first chunk: %q, %v", line, err)
	}

	closed := make(chan error, 1)
	go func() { closed <- f.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Close did not return with a WebSocket and a stream open")
	}
	select {
	case <-f.Done():
	default:
		t.Error("Done() not closed after Close")
	}
	if _, _, err := c.Read(ctx); err == nil {
		t.Error("WebSocket still reads after Close")
	}
	if rest, err := io.ReadAll(br); err == nil {
		t.Errorf("stream ended cleanly after Close (%q), want it cut", rest)
	}
	if conn, err := net.Dial("tcp", f.Addr().String()); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after Close", f.Addr())
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestSandboxForward(t *testing.T) {
	up := newFwdUpstream(t, false)
	lc := newFwdLifecycle(t, up)
	sb := lc.connect(t)
	f, err := sb.Forward(testCtx(t), 6080, ForwardOptions{})
	if err != nil {
		t.Fatalf("Sandbox.Forward: %v", err)
	}
	defer f.Close()
	if f.SandboxID() != "sb1" || f.Port() != 6080 {
		t.Errorf("SandboxID, Port = %q, %d; want sb1, 6080", f.SandboxID(), f.Port())
	}
	decodeEcho(t, fwdDo(t, "GET", f.URL()+"/echo", nil, nil))
}
