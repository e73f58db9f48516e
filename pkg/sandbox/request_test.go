package sandbox

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

func TestRequestHeaders(t *testing.T) {
	s := newSDKServer(t)
	s.mux.HandleFunc("GET /v1/sandboxes/sb1", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 200, SandboxInfo{ID: "sb1"})
	})
	c := s.client(t, WithHeader("X-Trace", "t1"), WithUserAgent("agent/1"))
	if _, err := c.Get(testCtx(t), "sb1"); err != nil {
		t.Fatalf("Get: %v", err)
	}
	h := s.only(t, "GET", "/v1/sandboxes/sb1").Header
	for k, want := range map[string]string{APIKeyHeader: sdkTestKey, "X-Trace": "t1", "User-Agent": "agent/1"} {
		if got := h.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}

	s.mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) { replyJSON(w, 200, ListSandboxesResponse{}) })
	if _, err := s.client(t).List(testCtx(t), ListOptions{}); err != nil {
		t.Fatalf("List: %v", err)
	}
	if got := s.only(t, "GET", "/v1/sandboxes").Header.Get("User-Agent"); got != defaultUserAgent {
		t.Errorf("default User-Agent = %q, want %q", got, defaultUserAgent)
	}
}

func TestRetryIdempotent(t *testing.T) {
	s := newSDKServer(t)
	var n atomic.Int32
	s.mux.HandleFunc("GET /v1/sandboxes/sb1", func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			replyJSON(w, 429, ErrorResponse{Code: "TOO_MANY", Message: "slow down"})
			return
		}
		replyJSON(w, 200, SandboxInfo{ID: "sb1"})
	})
	start := time.Now()
	info, err := s.client(t, WithRetry(RetryPolicy{MaxRetries: 2, Initial: 30 * time.Millisecond})).Get(testCtx(t), "sb1")
	if err != nil || info.ID != "sb1" {
		t.Fatalf("Get after a 429 = %+v, %v; want sb1", info, err)
	}
	if n.Load() != 2 {
		t.Errorf("GET sent %d times, want 2", n.Load())
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("retry came after %v, want a backoff of at least 30ms", d)
	}
}

func TestRetryGivesUp(t *testing.T) {
	s := newSDKServer(t)
	s.mux.HandleFunc("DELETE /v1/sandboxes/sb1", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 503, ErrorResponse{Code: "UNAVAILABLE", Message: "engine down"})
	})
	err := s.client(t).Kill(testCtx(t), "sb1")
	var ae *APIError
	if !errors.As(err, &ae) || ae.StatusCode != 503 {
		t.Fatalf("Kill = %v, want a 503 APIError", err)
	}
	if got := len(s.requests("DELETE", "/v1/sandboxes/sb1")); got != 4 {
		t.Errorf("DELETE sent %d times, want 4 (1 + 3 retries)", got)
	}
	// Retries off.
	s.client(t, WithRetry(RetryPolicy{})).Kill(testCtx(t), "sb1")
	if got := len(s.requests("DELETE", "/v1/sandboxes/sb1")); got != 5 {
		t.Errorf("with MaxRetries 0 DELETE total = %d, want 5", got)
	}
}

func TestNoRetryForPost(t *testing.T) {
	s := newSDKServer(t)
	s.mux.HandleFunc("POST /v1/sandboxes/sb1/pause", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 503, ErrorResponse{Code: "UNAVAILABLE", Message: "engine down"})
	})
	if err := s.client(t).Pause(testCtx(t), "sb1"); err == nil {
		t.Fatal("Pause = nil, want the 503")
	}
	if got := len(s.requests("POST", "/v1/sandboxes/sb1/pause")); got != 1 {
		t.Errorf("POST sent %d times, want 1 (never retried)", got)
	}
}

func TestContextErrorsUndecorated(t *testing.T) {
	s := newSDKServer(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	s.mux.HandleFunc("GET /v1/sandboxes/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	s.mux.HandleFunc("GET /v1/sandboxes/busy", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 503, ErrorResponse{Code: "UNAVAILABLE"})
	})
	c := s.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Get(ctx, "slow"); err != context.DeadlineExceeded {
		t.Errorf("Get past the deadline = %v, want context.DeadlineExceeded itself", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := c.Get(ctx, "busy"); err != context.Canceled {
		t.Errorf("Get with a cancelled context = %v, want context.Canceled itself", err)
	}
	// The request timeout bounds a call too.
	c = s.client(t, WithRequestTimeout(50*time.Millisecond))
	if _, err := c.Get(testCtx(t), "slow"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get past the request timeout = %v, want a deadline error", err)
	}
}

func TestRetryConnectionError(t *testing.T) {
	s := newSDKServer(t)
	url := s.URL
	s.Close() // nothing listens any more
	c, err := NewClient(WithDomain(url), WithRetry(RetryPolicy{MaxRetries: 2, Initial: 20 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.Get(testCtx(t), "sb1"); err == nil {
		t.Fatal("Get against a closed server = nil error")
	}
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Errorf("Get gave up after %v, want two retries (20ms + 40ms)", d)
	}
}
