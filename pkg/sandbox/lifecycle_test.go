package sandbox

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestCreate checks the request Create sends (with defaults), that it waits
// for Running and for execd's /ping with the token.
func TestCreate(t *testing.T) {
	s := newSDKServer(t)
	s.serveSandbox()
	var gets atomic.Int32
	s.mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 202, CreateSandboxResponse{ID: "sb2", Status: SandboxStatus{State: StatePending}})
	})
	s.mux.HandleFunc("GET /v1/sandboxes/sb2", func(w http.ResponseWriter, r *http.Request) {
		state := StatePending
		if gets.Add(1) >= 2 {
			state = StateRunning
		}
		replyJSON(w, 200, SandboxInfo{ID: "sb2", Status: SandboxStatus{State: state}})
	})
	s.mux.HandleFunc("GET /v1/sandboxes/sb2/endpoints/44772", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 200, Endpoint{Endpoint: s.host() + "/execd", Headers: map[string]string{AccessTokenHeader: sdkTestToken}})
	})
	sb, err := s.client(t).Create(testCtx(t), CreateOptions{Image: "img:1", Env: map[string]string{"A": "b"}})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if sb.ID() != "sb2" || sb.ExecdURL() != s.URL+"/execd" {
		t.Errorf("Create = %s at %s, want sb2 at %s/execd", sb.ID(), sb.ExecdURL(), s.URL)
	}
	var req CreateSandboxRequest
	decodeBody(t, s.only(t, "POST", "/v1/sandboxes"), &req)
	want := CreateSandboxRequest{
		Image:          &ImageSpec{URI: "img:1"},
		Timeout:        ptrTo[int64](600),
		ResourceLimits: map[string]string{"cpu": "1", "memory": "2Gi"},
		Env:            map[string]string{"A": "b"},
		Entrypoint:     []string{"tail", "-f", "/dev/null"},
	}
	if !reflect.DeepEqual(req, want) {
		t.Errorf("create request = %+v, want %+v", req, want)
	}
	if gets.Load() < 2 {
		t.Errorf("Create polled GET %d times, want it to wait for Running", gets.Load())
	}
	if len(s.requests("GET", "/execd/ping")) == 0 {
		t.Error("Create did not wait for execd's /ping")
	}
	if len(s.requests("DELETE", "/v1/sandboxes/sb2")) != 0 {
		t.Error("a successful Create deleted its sandbox")
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestCreateManualCleanup(t *testing.T) {
	s := newSDKServer(t)
	s.serveSandbox()
	s.mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 202, CreateSandboxResponse{ID: "sb1", Status: SandboxStatus{State: StateRunning}})
	})
	_, err := s.client(t).Create(testCtx(t), CreateOptions{SnapshotID: "snap", ManualCleanup: true, Timeout: time.Hour, Entrypoint: []string{"sleep", "1d"}, SkipHealthCheck: true})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	var req map[string]any
	decodeBody(t, s.only(t, "POST", "/v1/sandboxes"), &req)
	if _, ok := req["timeout"]; ok || req["snapshotId"] != "snap" || req["image"] != nil {
		t.Errorf("create request = %v, want no timeout, snapshotId snap, no image", req)
	}
	if len(s.requests("GET", "/execd/ping")) != 0 {
		t.Error("SkipHealthCheck still pinged execd")
	}
	if _, err := s.client(t).Create(testCtx(t), CreateOptions{}); err == nil {
		t.Error("Create without Image or SnapshotID = nil error")
	}
}

// TestCreateFailureDeletes checks that a sandbox that fails, or whose execd
// never answers, is deleted and the error wraps ErrNotReady.
func TestCreateFailureDeletes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state string
		ping  int
	}{
		{"failed", StateFailed, 200},
		{"no ping", StateRunning, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSDKServer(t)
			s.mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
				replyJSON(w, 202, CreateSandboxResponse{ID: "sb3", Status: SandboxStatus{State: StatePending}})
			})
			s.mux.HandleFunc("GET /v1/sandboxes/sb3", func(w http.ResponseWriter, r *http.Request) {
				replyJSON(w, 200, SandboxInfo{ID: "sb3", Status: SandboxStatus{State: tc.state, Reason: "entrypoint_exited"}})
			})
			s.mux.HandleFunc("GET /v1/sandboxes/sb3/endpoints/44772", func(w http.ResponseWriter, r *http.Request) {
				replyJSON(w, 200, Endpoint{Endpoint: s.host() + "/execd"})
			})
			s.mux.HandleFunc("GET /execd/ping", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(tc.ping) })
			s.mux.HandleFunc("DELETE /v1/sandboxes/sb3", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
			_, err := s.client(t).Create(testCtx(t), CreateOptions{Image: "img", ReadyTimeout: 300 * time.Millisecond})
			if !errors.Is(err, ErrNotReady) {
				t.Fatalf("Create = %v, want an error wrapping ErrNotReady", err)
			}
			s.only(t, "DELETE", "/v1/sandboxes/sb3")
		})
	}
}

func TestConnectNotRunning(t *testing.T) {
	s := newSDKServer(t)
	s.mux.HandleFunc("GET /v1/sandboxes/p1", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 200, SandboxInfo{ID: "p1", Status: SandboxStatus{State: StatePaused}})
	})
	_, err := s.client(t).Connect(testCtx(t), "p1", ConnectOptions{})
	if !errors.Is(err, ErrNotReady) {
		t.Errorf("Connect to a paused sandbox = %v, want ErrNotReady", err)
	}
	if _, err := s.client(t).Connect(testCtx(t), "nope", ConnectOptions{}); !IsNotFound(err) {
		t.Errorf("Connect to an unknown sandbox = %v, want IsNotFound", err)
	}
}

func TestResume(t *testing.T) {
	s := newSDKServer(t)
	s.serveSandbox()
	s.mux.HandleFunc("POST /v1/sandboxes/sb1/resume", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(202) })
	sb, err := s.client(t).Resume(testCtx(t), "sb1", ConnectOptions{})
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	s.only(t, "POST", "/v1/sandboxes/sb1/resume")
	if err := sb.Resume(testCtx(t)); err != nil {
		t.Fatalf("Sandbox.Resume: %v", err)
	}
}

func TestLifecycleCalls(t *testing.T) {
	s := newSDKServer(t)
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s.mux.HandleFunc("DELETE /v1/sandboxes/sb1", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	s.mux.HandleFunc("POST /v1/sandboxes/sb1/pause", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(202) })
	s.mux.HandleFunc("POST /v1/sandboxes/sb1/renew-expiration", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 200, RenewSandboxExpirationResponse{ExpiresAt: exp})
	})
	s.mux.HandleFunc("PATCH /v1/sandboxes/sb1/metadata", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 200, SandboxInfo{ID: "sb1", Metadata: map[string]string{"a": "1"}})
	})
	s.mux.HandleFunc("GET /v1/sandboxes/sb1/endpoints/8080", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 200, Endpoint{Endpoint: "h:1"})
	})
	c := s.client(t)
	ctx := testCtx(t)
	if err := c.Kill(ctx, "sb1"); err != nil {
		t.Errorf("Kill: %v", err)
	}
	if err := c.Pause(ctx, "sb1"); err != nil {
		t.Errorf("Pause: %v", err)
	}
	got, err := c.Renew(ctx, "sb1", exp)
	if err != nil || !got.Equal(exp) {
		t.Errorf("Renew = %v, %v; want %v", got, err, exp)
	}
	var renew RenewSandboxExpirationRequest
	decodeBody(t, s.only(t, "POST", "/v1/sandboxes/sb1/renew-expiration"), &renew)
	if !renew.ExpiresAt.Equal(exp) {
		t.Errorf("renew body expiresAt = %v, want %v", renew.ExpiresAt, exp)
	}
	info, err := c.PatchMetadata(ctx, "sb1", map[string]*string{"a": ptrTo("1"), "b": nil})
	if err != nil || info.Metadata["a"] != "1" {
		t.Errorf("PatchMetadata = %+v, %v", info, err)
	}
	patch := s.only(t, "PATCH", "/v1/sandboxes/sb1/metadata")
	if string(patch.Body) != `{"a":"1","b":null}` || patch.Header.Get("Content-Type") != "application/merge-patch+json" {
		t.Errorf("patch = %s (%s), want {\"a\":\"1\",\"b\":null} as merge-patch", patch.Body, patch.Header.Get("Content-Type"))
	}
	if _, err := c.Endpoint(ctx, "sb1", 8080, true); err != nil {
		t.Errorf("Endpoint: %v", err)
	}
	if q := s.only(t, "GET", "/v1/sandboxes/sb1/endpoints/8080").RawQuery; q != "use_server_proxy=true" {
		t.Errorf("endpoint query = %q, want use_server_proxy=true", q)
	}
}

// TestCreateStopsWaitingWhenTheSandboxFails checks that a sandbox which is
// Running when created but fails while execd does not answer (its
// entrypoint exited) ends the wait at once, not at ReadyTimeout.
func TestCreateStopsWaitingWhenTheSandboxFails(t *testing.T) {
	s := newSDKServer(t)
	var gets atomic.Int32
	s.mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 202, CreateSandboxResponse{ID: "sb4", Status: SandboxStatus{State: StateRunning}})
	})
	s.mux.HandleFunc("GET /v1/sandboxes/sb4", func(w http.ResponseWriter, r *http.Request) {
		st := SandboxStatus{State: StateRunning}
		if gets.Add(1) > 1 {
			st = SandboxStatus{State: StateFailed, Reason: "CONTAINER_EXITED", Message: "exited with code 3"}
		}
		replyJSON(w, 200, SandboxInfo{ID: "sb4", Status: st})
	})
	s.mux.HandleFunc("GET /v1/sandboxes/sb4/endpoints/44772", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 200, Endpoint{Endpoint: s.host() + "/execd"})
	})
	s.mux.HandleFunc("GET /execd/ping", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
	s.mux.HandleFunc("DELETE /v1/sandboxes/sb4", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	start := time.Now()
	_, err := s.client(t).Create(testCtx(t), CreateOptions{Image: "img", ReadyTimeout: 20 * time.Second})
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "exited with code 3") {
		t.Fatalf("Create = %v, want ErrNotReady naming the exit", err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("Create waited %v; want it to stop once the sandbox failed", waited)
	}
	s.only(t, "DELETE", "/v1/sandboxes/sb4")
}
