//go:build linux

package pty

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// testTimeout bounds every wait of a test; conditions are awaited by
// reading frames or polling state, never by sleeping.
const testTimeout = 30 * time.Second

// harness is a Manager behind a real HTTP server, with the routes execd
// registers, and the clients a test opened.
type harness struct {
	t   *testing.T
	m   *Manager
	srv *httptest.Server
	tr  *http.Transport
	hc  *http.Client
	ctx context.Context

	mu    sync.Mutex
	conns []*websocket.Conn
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	baseline := runtime.NumGoroutine()
	if opts.Logger == nil {
		level := slog.LevelError
		if os.Getenv("PTY_TEST_LOG") != "" {
			level = slog.LevelDebug
		}
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
	}
	if opts.Env.Base == nil {
		// An empty home keeps the shells of the tests clear of the rc files
		// of whoever runs them.
		opts.Env.Base = append(os.Environ(), "HOME="+t.TempDir())
	}
	m := New(opts)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /pty", m.Create)
	mux.HandleFunc("GET /pty/{sessionId}", m.Status)
	mux.HandleFunc("DELETE /pty/{sessionId}", m.Delete)
	mux.HandleFunc("GET /pty/{sessionId}/ws", m.Attach)
	srv := httptest.NewServer(mux)
	tr := &http.Transport{}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	h := &harness{t: t, m: m, srv: srv, tr: tr, hc: &http.Client{Transport: tr}, ctx: ctx}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), testTimeout)
		defer ccancel()
		// Clients go first: a socket whose peer no longer reads would hold
		// the server's close handshake for its full timeout.
		h.mu.Lock()
		for _, c := range h.conns {
			c.CloseNow()
		}
		h.mu.Unlock()
		if err := m.Close(cctx); err != nil {
			t.Errorf("Manager.Close: %v", err)
		}
		srv.Close()
		tr.CloseIdleConnections()
		cancel()
		checkGoroutines(t, baseline)
	})
	return h
}

// checkGoroutines polls until the goroutine count is back to baseline.
func checkGoroutines(t *testing.T, baseline int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Errorf("runtime.NumGoroutine() = %d after cleanup, want <= %d (baseline); stacks:\n%s",
				runtime.NumGoroutine(), baseline, buf[:n])
			return
		}
		runtime.Gosched()
		time.Sleep(5 * time.Millisecond) // poll interval, not a readiness wait
	}
}

// do sends an HTTP request and returns the status and body.
func (h *harness) do(method, path, body string) (int, []byte) {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(h.ctx, method, h.srv.URL+path, rd)
	if err != nil {
		h.t.Fatalf("NewRequest(%s %s): %v", method, path, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// create registers a session and returns its id.
func (h *harness) create(req sandbox.CreatePTYRequest) string {
	h.t.Helper()
	b, _ := json.Marshal(req)
	code, body := h.do(http.MethodPost, "/pty", string(b))
	if code != http.StatusCreated {
		h.t.Fatalf("POST /pty %s = %d %s, want 201", b, code, body)
	}
	var resp sandbox.CreatePTYResponse
	if err := json.Unmarshal(body, &resp); err != nil || resp.SessionID == "" {
		h.t.Fatalf("POST /pty body = %s, want {session_id} (err %v)", body, err)
	}
	return resp.SessionID
}

func (h *harness) status(id string) sandbox.PTYStatus {
	h.t.Helper()
	code, body := h.do(http.MethodGet, "/pty/"+id, "")
	if code != http.StatusOK {
		h.t.Fatalf("GET /pty/%s = %d %s, want 200", id, code, body)
	}
	var st sandbox.PTYStatus
	if err := json.Unmarshal(body, &st); err != nil {
		h.t.Fatalf("GET /pty/%s body %s: %v", id, body, err)
	}
	return st
}

// waitStatus polls the session status until cond holds.
func (h *harness) waitStatus(id string, what string, cond func(sandbox.PTYStatus) bool) sandbox.PTYStatus {
	h.t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		st := h.status(id)
		if cond(st) {
			return st
		}
		select {
		case <-h.ctx.Done():
			h.t.Fatalf("GET /pty/%s: last status %+v, never %s", id, st, what)
		case <-tick.C:
		}
	}
}

// dialRaw opens a WebSocket to the session, returning the HTTP error
// response when the upgrade is refused.
func (h *harness) dialRaw(id, query string) (*websocket.Conn, *http.Response, error) {
	u := strings.Replace(h.srv.URL, "http://", "ws://", 1) + "/pty/" + id + "/ws"
	if query != "" {
		u += "?" + query
	}
	c, resp, err := websocket.Dial(h.ctx, u, &websocket.DialOptions{HTTPClient: h.hc})
	if err != nil {
		return nil, resp, err
	}
	c.SetReadLimit(-1)
	h.mu.Lock()
	h.conns = append(h.conns, c)
	h.mu.Unlock()
	return c, resp, nil
}

// dial attaches a client and checks the connected frame.
func (h *harness) dial(id, query, wantMode string) *wsClient {
	h.t.Helper()
	c, _, err := h.dialRaw(id, query)
	if err != nil {
		h.t.Fatalf("Dial /pty/%s/ws?%s: %v", id, query, err)
	}
	w := &wsClient{t: h.t, ctx: h.ctx, c: c}
	f := w.next()
	if f.msg.Type != "connected" || f.msg.SessionID != id || f.msg.Mode != wantMode {
		h.t.Fatalf("first frame of /pty/%s/ws?%s = %s, want connected to %s in %s mode", id, query, f, id, wantMode)
	}
	return w
}

// serverMsg is any JSON frame the server sends.
type serverMsg struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	Mode      string `json:"mode"`
	ExitCode  *int   `json:"exit_code"`
	Code      string `json:"code"`
	Error     string `json:"error"`
}

// frame is one decoded server message.
type frame struct {
	text bool
	msg  serverMsg
	ch   byte
	off  int64 // replay frames
	data []byte
}

func (f frame) String() string {
	if f.text {
		b, _ := json.Marshal(f.msg)
		return string(b)
	}
	if f.ch == chanReplay {
		return fmt.Sprintf("replay@%d %q", f.off, f.data)
	}
	return fmt.Sprintf("ch%d %q", f.ch, f.data)
}

// wsClient is a test client. stdout and stderr accumulate live output.
type wsClient struct {
	t      *testing.T
	ctx    context.Context
	c      *websocket.Conn
	stdout bytes.Buffer
	stderr bytes.Buffer
}

// read returns the next frame or the read error.
func (w *wsClient) read() (frame, error) {
	typ, b, err := w.c.Read(w.ctx)
	if err != nil {
		return frame{}, err
	}
	if typ == websocket.MessageText {
		f := frame{text: true}
		if err := json.Unmarshal(b, &f.msg); err != nil {
			return f, fmt.Errorf("text frame %q is not JSON: %w", b, err)
		}
		return f, nil
	}
	if len(b) == 0 {
		return frame{}, errors.New("empty binary frame")
	}
	f := frame{ch: b[0], data: b[1:]}
	switch f.ch {
	case chanStdout:
		w.stdout.Write(f.data)
	case chanStderr:
		w.stderr.Write(f.data)
	case chanReplay:
		if len(b) < 9 {
			return f, fmt.Errorf("replay frame of %d bytes, want >= 9", len(b))
		}
		f.off = int64(binary.BigEndian.Uint64(b[1:9]))
		f.data = b[9:]
	default:
		return f, fmt.Errorf("binary frame on unknown channel %#x", f.ch)
	}
	return f, nil
}

func (w *wsClient) next() frame {
	w.t.Helper()
	f, err := w.read()
	if err != nil {
		w.t.Fatalf("Read: %v", err)
	}
	return f
}

// until reads frames until cond holds for one and returns it.
func (w *wsClient) until(what string, cond func(frame) bool) frame {
	w.t.Helper()
	for {
		f, err := w.read()
		if err != nil {
			w.t.Fatalf("Read while waiting for %s: %v (stdout so far %q, stderr %q)", what, err, w.stdout.String(), w.stderr.String())
		}
		if cond(f) {
			return f
		}
	}
}

// waitStdout reads until live stdout contains s.
func (w *wsClient) waitStdout(s string) {
	w.t.Helper()
	if strings.Contains(w.stdout.String(), s) {
		return
	}
	w.until(fmt.Sprintf("stdout containing %q", s), func(frame) bool {
		return strings.Contains(w.stdout.String(), s)
	})
}

// waitMsg reads until a JSON frame of the given type arrives.
func (w *wsClient) waitMsg(typ string) serverMsg {
	w.t.Helper()
	return w.until(typ+" frame", func(f frame) bool { return f.text && f.msg.Type == typ }).msg
}

// waitClosed reads until the socket closes and returns the close error.
func (w *wsClient) waitClosed() websocket.CloseError {
	w.t.Helper()
	for {
		_, err := w.read()
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			w.t.Fatalf("Read after close = %v, want a websocket.CloseError", err)
		}
		return ce
	}
}

func (w *wsClient) sendBinary(b []byte) {
	w.t.Helper()
	if err := w.c.Write(w.ctx, websocket.MessageBinary, b); err != nil {
		w.t.Fatalf("Write(binary %q): %v", b, err)
	}
}

func (w *wsClient) sendText(s string) {
	w.t.Helper()
	if err := w.c.Write(w.ctx, websocket.MessageText, []byte(s)); err != nil {
		w.t.Fatalf("Write(text %s): %v", s, err)
	}
}

// stdin sends input as a binary 0x00 frame.
func (w *wsClient) stdin(s string) {
	w.t.Helper()
	w.sendBinary(append([]byte{chanStdin}, s...))
}

func (w *wsClient) sendJSON(v any) {
	w.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		w.t.Fatalf("Marshal(%v): %v", v, err)
	}
	w.sendText(string(b))
}

// processGone reports whether pid no longer runs (absent, or a zombie
// waiting for a parent that is not the test).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && len(b) > i+2 && (b[i+2] == 'Z' || b[i+2] == 'X')
}

// waitGone polls until pid has died.
func waitGone(t *testing.T, ctx context.Context, pid int) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !processGone(pid) {
		select {
		case <-ctx.Done():
			t.Fatalf("process %d still running after the session was killed", pid)
		case <-tick.C:
		}
	}
}
