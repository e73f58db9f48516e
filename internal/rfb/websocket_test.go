package rfb

import (
	"context"
	"image"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// serveWebSocket serves a fake RFB server over WebSocket at /websockify,
// as websockify would, behind a check of the access-token header. It
// returns the ws:// URL.
func serveWebSocket(t *testing.T, token string, script func(s *serverConn)) string {
	t.Helper()
	var handlers sync.WaitGroup // hijacked connections, which srv.Close does not wait for
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers.Add(1)
		defer handlers.Done()
		if r.URL.Path != "/websockify" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("X-EXECD-ACCESS-TOKEN") != token {
			http.Error(w, "bad access token", http.StatusUnauthorized)
			return
		}
		if got := r.Header.Get("Sec-WebSocket-Protocol"); got != "binary" {
			http.Error(w, "subprotocol "+got, http.StatusBadRequest)
			return
		}
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"binary"}})
		if err != nil {
			t.Errorf("websocket.Accept: %v", err)
			return
		}
		if err := serveConn(websocket.NetConn(context.Background(), ws, websocket.MessageBinary), script); err != nil {
			t.Errorf("fake server: %v", err)
		}
	}))
	t.Cleanup(func() {
		srv.Close()
		handlers.Wait()
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/websockify"
}

func TestDialWebSocket(t *testing.T) {
	const w, h = 9, 4
	want := pattern(w, h, 3)
	url := serveWebSocket(t, "tok-123", func(s *serverConn) {
		s.greet("RFB 003.008\n", "RFB 003.008\n")
		s.write(uint8(1), uint8(SecurityVNCAuth))
		s.expect("security type", []byte{2})
		if !s.vncAuth("3.8", "pw") {
			return
		}
		s.initDesktop(w, h, "over websocket")
		s.expectFullRequest(w, h)
		s.sendUpdate(want, image.Rect(0, 0, w, h))
		s.waitClosed()
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := DialWebSocket(ctx, url, WebSocketOptions{Header: http.Header{"X-Execd-Access-Token": {"tok-123"}}})
	if err != nil {
		t.Fatalf("DialWebSocket: %v", err)
	}
	c, err := NewClient(ctx, conn, Config{Password: "pw"})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	defer c.Close()
	if got := c.ServerInit().Name; got != "over websocket" {
		t.Errorf("ServerInit().Name = %q, want %q", got, "over websocket")
	}
	got, err := c.Frame(ctx)
	if err != nil {
		t.Fatalf("Frame: %v", err)
	}
	if d := diffImages(got, want); d != "" {
		t.Errorf("Frame differs from what the server sent:\n%s", d)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestDialWebSocketRefused(t *testing.T) {
	url := serveWebSocket(t, "right", func(s *serverConn) {})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := DialWebSocket(ctx, url, WebSocketOptions{Header: http.Header{"X-Execd-Access-Token": {"wrong"}}})
	if err == nil {
		t.Fatal("DialWebSocket with a wrong token succeeded")
	}
	for _, want := range []string{"rfb: websocket ", "HTTP 401 Unauthorized", `"bad access token"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("DialWebSocket error = %q, want it to contain %q", err, want)
		}
	}
}
