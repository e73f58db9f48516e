package sandbox

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// sdkServer is a real HTTP server standing in for opensandbox-server and,
// under /execd, for the execd of sandbox "sb1". Tests add handlers to mux;
// every request is recorded.
type sdkServer struct {
	*httptest.Server
	mux *http.ServeMux

	mu   sync.Mutex
	reqs []seenRequest
}

// seenRequest is what the server recorded of one request. Body is kept for
// JSON requests only.
type seenRequest struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
}

const (
	sdkTestKey   = "sdk-test-key"
	sdkTestToken = "execd-token-1"
)

func newSDKServer(t *testing.T) *sdkServer {
	t.Helper()
	s := &sdkServer{mux: http.NewServeMux()}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen := seenRequest{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone()}
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/") {
			b, _ := io.ReadAll(r.Body)
			seen.Body = b
			r.Body = io.NopCloser(strings.NewReader(string(b)))
		}
		s.mu.Lock()
		s.reqs = append(s.reqs, seen)
		s.mu.Unlock()
		s.mux.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// host is the server's host:port, as an endpoint answer carries it.
func (s *sdkServer) host() string { return strings.TrimPrefix(s.URL, "http://") }

// requests returns the recorded requests matching method and path.
func (s *sdkServer) requests(method, path string) []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []seenRequest
	for _, r := range s.reqs {
		if r.Method == method && r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// only returns the single recorded request to method and path.
func (s *sdkServer) only(t *testing.T, method, path string) seenRequest {
	t.Helper()
	rs := s.requests(method, path)
	if len(rs) != 1 {
		t.Fatalf("%s %s was requested %d times, want 1", method, path, len(rs))
	}
	return rs[0]
}

// client returns a Client for the server with fast retries.
func (s *sdkServer) client(t *testing.T, opts ...Option) *Client {
	t.Helper()
	base := []Option{WithDomain(s.URL), WithAPIKey(sdkTestKey), WithRetry(RetryPolicy{MaxRetries: 3, Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond})}
	c, err := NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

// serveSandbox makes "sb1" a Running sandbox whose execd is under /execd
// on this server and answers /ping when it carries the token.
func (s *sdkServer) serveSandbox() {
	s.mux.HandleFunc("GET /v1/sandboxes/sb1", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 200, SandboxInfo{ID: "sb1", Status: SandboxStatus{State: StateRunning}})
	})
	s.mux.HandleFunc("GET /v1/sandboxes/sb1/endpoints/44772", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("use_server_proxy") == "true" {
			replyJSON(w, 200, Endpoint{Endpoint: s.host() + "/sandboxes/sb1/proxy/44772"})
			return
		}
		replyJSON(w, 200, Endpoint{Endpoint: s.host() + "/execd", Headers: map[string]string{AccessTokenHeader: sdkTestToken}})
	})
	ping := func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(AccessTokenHeader) != sdkTestToken && !strings.HasPrefix(r.URL.Path, "/sandboxes/") {
			replyJSON(w, 401, map[string]string{"error": "Unauthorized: invalid or missing header X-EXECD-ACCESS-TOKEN"})
			return
		}
	}
	s.mux.HandleFunc("GET /execd/ping", ping)
	s.mux.HandleFunc("GET /sandboxes/sb1/proxy/44772/ping", ping)
}

// connect returns a handle on "sb1" (see serveSandbox).
func (s *sdkServer) connect(t *testing.T, opts ...Option) *Sandbox {
	t.Helper()
	s.serveSandbox()
	sb, err := s.client(t, opts...).Connect(testCtx(t), "sb1", ConnectOptions{})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	return sb
}

func replyJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// testCtx is a context that ends with the test or after 20s.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// decodeBody decodes the JSON body of a recorded request.
func decodeBody(t *testing.T, r seenRequest, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("%s %s body %q: %v", r.Method, r.Path, r.Body, err)
	}
}

// decodeRequest decodes a JSON request body inside a handler.
func decodeRequest(r *http.Request, v any) error { return json.NewDecoder(r.Body).Decode(v) }

// stream writes execution events the way execd does: JSON, blank line,
// flushed.
func stream(w http.ResponseWriter, events ...StreamEvent) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, ev := range events {
		b, _ := json.Marshal(ev)
		w.Write(append(b, '\n', '\n'))
		w.(http.Flusher).Flush()
	}
}
