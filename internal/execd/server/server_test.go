package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/opensandbox-go/opensandbox/internal/execd/code"
	"github.com/opensandbox-go/opensandbox/internal/execd/command"
	"github.com/opensandbox-go/opensandbox/internal/execd/files"
	"github.com/opensandbox-go/opensandbox/internal/execd/isolation"
	"github.com/opensandbox-go/opensandbox/internal/execd/metrics"
	"github.com/opensandbox-go/opensandbox/internal/execd/proxy"
	"github.com/opensandbox-go/opensandbox/internal/execd/pty"
	"github.com/opensandbox-go/opensandbox/internal/execd/session"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

const testToken = "test-token"

// forwardHost is where the test server's proxy forwards: a loopback
// address nothing of this test listens on with execd's port, so a request
// for execd's own port that went out through the proxy would fail with
// 502 instead of quietly reaching execd again.
const forwardHost = "127.0.0.2"

// startServer runs execd's API on 127.0.0.1 with Config.Port set to the
// port it listens on, as cmd/execd does.
func startServer(t *testing.T) (*httptest.Server, int) {
	t.Helper()
	return startServerWith(t, nil)
}

// startServerWith is startServer with edit applied to the Config first.
func startServerWith(t *testing.T, edit func(*Config)) (*httptest.Server, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	cmds, err := command.New(command.Options{LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	mc, err := metrics.New(metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		AccessToken: testToken,
		Port:        port,
		Commands:    cmds,
		Sessions:    session.New(session.Options{}),
		Code:        code.New(code.Options{}),
		Files:       files.New(files.Options{BaseDir: t.TempDir()}),
		Metrics:     mc,
		PTY:         pty.New(pty.Options{}),
		Isolated:    isolation.New(isolation.Options{}),
		Proxy:       proxy.New(proxy.Options{Host: forwardHost, StripHeaders: []string{sandbox.AccessTokenHeader}}),
	}
	if edit != nil {
		edit(&cfg)
	}
	s := New(cfg)
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		s.closeRunners()
	})
	return srv, port
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// do sends one request with the token and returns status and body.
func do(t *testing.T, method, u, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(sandbox.AccessTokenHeader, testToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, u, err)
	}
	return resp.StatusCode, string(b)
}

// TestProxyToOwnPort: /proxy/{execd's port}/... is served by execd's own
// routes, streams and WebSockets included, and never leaves the process.
func TestProxyToOwnPort(t *testing.T) {
	srv, port := startServer(t)
	self := srv.URL + "/proxy/" + strconv.Itoa(port)

	if code, body := do(t, "GET", self+"/ping", ""); code != http.StatusOK {
		t.Errorf("GET /proxy/<self>/ping = %d %s, want 200", code, body)
	}
	if code, body := do(t, "GET", srv.URL+"/proxy/0"+strconv.Itoa(port)+"/ping", ""); code != http.StatusOK {
		t.Errorf("GET /proxy/0<self>/ping = %d %s, want 200 (the same port)", code, body)
	}
	resp, err := http.Get(self + "/ping")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /proxy/<self>/ping without the token = %d, want 401", resp.StatusCode)
	}

	// A streamed command: the SSE frames come back through the prefix.
	code, stream := do(t, "POST", self+"/command", `{"command":"echo through-self"}`)
	if code != http.StatusOK || !strings.Contains(stream, `"text":"through-self"`) || !strings.Contains(stream, `"execution_complete"`) {
		t.Errorf("POST /proxy/<self>/command = %d %q, want the command's stream", code, stream)
	}
	// Method checks see execd's route, not the proxy's.
	if code, body := do(t, "PUT", self+"/command", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("PUT /proxy/<self>/command = %d %s, want 405", code, body)
	}
	if code, body := do(t, "GET", self+"/no-such-route", ""); code != http.StatusNotFound {
		t.Errorf("GET /proxy/<self>/no-such-route = %d %s, want 404", code, body)
	}

	// Files, with an escaped query.
	dir := t.TempDir()
	file := filepath.Join(dir, "a b.txt")
	if err := os.WriteFile(file, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, info := do(t, "GET", self+"/files/info?path="+url.QueryEscape(file), "")
	var got map[string]sandbox.FileInfo
	if code != http.StatusOK || json.Unmarshal([]byte(info), &got) != nil || got[file].Size != 5 {
		t.Errorf("GET /proxy/<self>/files/info = %d %s, want %s of size 5", code, info, file)
	}

	// A terminal over WebSocket.
	var created sandbox.CreatePTYResponse
	code, body := do(t, "POST", self+"/pty", `{"command":"read line; echo got:$line"}`)
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &created) != nil || created.SessionID == "" {
		t.Fatalf("POST /proxy/<self>/pty = %d %s", code, body)
	}
	ctx := testContext(t)
	wsURL := "ws" + strings.TrimPrefix(self, "http") + "/pty/" + url.PathEscape(created.SessionID) + "/ws?pty=0"
	c, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{sandbox.AccessTokenHeader: {testToken}}})
	if err != nil {
		t.Fatalf("dial %s: %v", wsURL, err)
	}
	defer c.CloseNow()
	if typ, msg, err := c.Read(ctx); err != nil || typ != websocket.MessageText || !strings.Contains(string(msg), `"connected"`) {
		t.Fatalf("first frame = %v %s %v", typ, msg, err)
	}
	if err := c.Write(ctx, websocket.MessageBinary, append([]byte{0}, "over-ws\n"...)); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for !strings.Contains(out.String(), "got:over-ws") {
		typ, msg, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v (output so far %q)", err, out.String())
		}
		if typ == websocket.MessageBinary && len(msg) > 0 && msg[0] == 1 {
			out.Write(msg[1:])
		}
	}
}

// TestProxyToOtherPorts: every other port is still forwarded, without
// execd's token.
func TestProxyToOtherPorts(t *testing.T) {
	ln, err := net.Listen("tcp", net.JoinHostPort(forwardHost, "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", forwardHost, err)
	}
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "backend "+r.URL.Path+" token="+r.Header.Get(sandbox.AccessTokenHeader))
	}))
	backend.Listener.Close()
	backend.Listener = ln
	backend.Start()
	t.Cleanup(backend.Close)
	bport := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)

	srv, port := startServer(t)
	if code, body := do(t, "GET", srv.URL+"/proxy/"+bport+"/x", ""); code != http.StatusOK || body != "backend /x token=" {
		t.Errorf("GET /proxy/<backend>/x = %d %q, want the backend without the token", code, body)
	}
	// execd's own prefix first, then another port: one local step, then
	// forwarded.
	if code, body := do(t, "GET", srv.URL+"/proxy/"+strconv.Itoa(port)+"/proxy/"+bport+"/y", ""); code != http.StatusOK || body != "backend /y token=" {
		t.Errorf("GET /proxy/<self>/proxy/<backend>/y = %d %q, want the backend", code, body)
	}
}
