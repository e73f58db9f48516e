package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/internal/store"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

const testAPIKey = "test-key"

// stubRuntime stands in for the container engine only to test HTTP
// behaviour: validation, error mapping, formatting, pagination, the proxy's
// header and path handling. The real flow against the Docker driver is
// covered end to end by TestDockerFlow here and by test/e2e.
type stubRuntime struct {
	mu      sync.Mutex
	boxes   map[string]runtime.Sandbox
	specs   []runtime.Spec
	deleted []string

	// Behaviour knobs; nil/zero means the plain in-memory behaviour.
	createErr     error
	address       func(id string, port int) (runtime.Address, error)
	commit        func(ctx context.Context, sandboxID, snapshotID string) error
	deleteSnapErr error
	logs          []byte
	events        []runtime.Event
	getCalls      int
}

func newStubRuntime() *stubRuntime { return &stubRuntime{boxes: map[string]runtime.Sandbox{}} }

func (r *stubRuntime) Create(ctx context.Context, spec runtime.Spec) (runtime.Sandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.specs = append(r.specs, spec)
	if r.createErr != nil {
		return runtime.Sandbox{}, r.createErr
	}
	now := time.Now()
	sb := runtime.Sandbox{
		ID: spec.ID, Image: spec.Image, SnapshotID: spec.SnapshotID,
		Entrypoint: spec.Entrypoint, Metadata: spec.Metadata, Platform: spec.Platform,
		State: sandbox.StateRunning, Reason: "CONTAINER_RUNNING",
		LastTransitionAt: now, CreatedAt: now, ExpiresAt: spec.ExpiresAt, ExecdToken: spec.ExecdToken,
	}
	r.boxes[spec.ID] = sb
	return sb, nil
}

// add puts a sandbox in the runtime directly.
func (r *stubRuntime) add(sb runtime.Sandbox) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sb.State == "" {
		sb.State = sandbox.StateRunning
	}
	r.boxes[sb.ID] = sb
}

func (r *stubRuntime) has(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.boxes[id]
	return ok
}

func (r *stubRuntime) lastSpec() runtime.Spec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.specs[len(r.specs)-1]
}

func (r *stubRuntime) Get(ctx context.Context, id string) (runtime.Sandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.getCalls++
	sb, ok := r.boxes[id]
	if !ok {
		return sb, fmt.Errorf("stub: sandbox %s: %w", id, runtime.ErrNotFound)
	}
	return sb, nil
}

func (r *stubRuntime) List(ctx context.Context) ([]runtime.Sandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]runtime.Sandbox, 0, len(r.boxes))
	for _, sb := range r.boxes {
		out = append(out, sb)
	}
	return out, nil
}

func (r *stubRuntime) Delete(ctx context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.boxes[id]; !ok {
		return fmt.Errorf("stub: sandbox %s: %w", id, runtime.ErrNotFound)
	}
	delete(r.boxes, id)
	r.deleted = append(r.deleted, id)
	return nil
}

func (r *stubRuntime) setState(id, from, to string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, ok := r.boxes[id]
	if !ok {
		return fmt.Errorf("stub: sandbox %s: %w", id, runtime.ErrNotFound)
	}
	if sb.State != from {
		return fmt.Errorf("stub: sandbox %s is %s: %w", id, sb.State, runtime.ErrConflict)
	}
	sb.State = to
	r.boxes[id] = sb
	return nil
}

func (r *stubRuntime) Pause(ctx context.Context, id string) error {
	return r.setState(id, sandbox.StateRunning, sandbox.StatePaused)
}

func (r *stubRuntime) Resume(ctx context.Context, id string) error {
	return r.setState(id, sandbox.StatePaused, sandbox.StateRunning)
}

func (r *stubRuntime) Address(ctx context.Context, id string, port int) (runtime.Address, error) {
	sb, err := r.Get(ctx, id)
	if err != nil {
		return runtime.Address{}, err
	}
	if sb.State != sandbox.StateRunning {
		return runtime.Address{}, fmt.Errorf("stub: sandbox %s is not running: %w", id, runtime.ErrConflict)
	}
	if r.address != nil {
		return r.address(id, port)
	}
	// Docker bridge's shape: 8080 on its own port, every other port (execd's
	// included) under execd's /proxy.
	if port == sandbox.HTTPPort {
		return runtime.Address{Host: "10.0.0.5", Port: 40080}, nil
	}
	return runtime.Address{Host: "10.0.0.5", Port: 40772, PathPrefix: fmt.Sprintf("/proxy/%d", port)}, nil
}

func (r *stubRuntime) CommitSnapshot(ctx context.Context, sandboxID, snapshotID string) error {
	if r.commit != nil {
		return r.commit(ctx, sandboxID, snapshotID)
	}
	return nil
}

func (r *stubRuntime) DeleteSnapshot(ctx context.Context, snapshotID string) error {
	return r.deleteSnapErr
}

func (r *stubRuntime) Logs(ctx context.Context, id string, opts runtime.LogOptions) ([]byte, error) {
	if _, err := r.Get(ctx, id); err != nil {
		return nil, err
	}
	return r.logs, nil
}

func (r *stubRuntime) Inspect(ctx context.Context, id string) ([]byte, error) {
	if _, err := r.Get(ctx, id); err != nil {
		return nil, err
	}
	return []byte(`{"Id":"` + id + `"}`), nil
}

func (r *stubRuntime) Events(ctx context.Context, id string, limit int) ([]runtime.Event, error) {
	if _, err := r.Get(ctx, id); err != nil {
		return nil, err
	}
	ev := r.events
	if limit > 0 && len(ev) > limit {
		ev = ev[len(ev)-limit:]
	}
	return ev, nil
}

// boltStore adapts the real bbolt store (internal/store), whose override
// methods take any JSON value, to the Store interface.
type boltStore struct{ *store.Store }

func (b boltStore) GetOverrides(ctx context.Context, id string) (Overrides, error) {
	var o Overrides
	_, err := b.Store.GetOverrides(ctx, id, &o)
	return o, err
}

func (b boltStore) PutOverrides(ctx context.Context, id string, o Overrides) error {
	return b.Store.PutOverrides(ctx, id, o)
}

func openStore(t *testing.T) boltStore {
	t.Helper()
	st, err := store.Open(store.Options{Path: filepath.Join(t.TempDir(), "store.db")})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return boltStore{st}
}

// testEnv is a server over a stub runtime and a real store, served by an
// httptest server.
type testEnv struct {
	t     *testing.T
	rt    *stubRuntime
	store boltStore
	srv   *Server
	http  *httptest.Server
	logs  *syncBuffer
}

type envOption func(*Config)

func newEnv(t *testing.T, opts ...envOption) *testEnv {
	t.Helper()
	e := &testEnv{t: t, rt: newStubRuntime(), store: openStore(t), logs: &syncBuffer{}}
	cfg := Config{
		Runtime: e.rt,
		Store:   e.store,
		APIKey:  testAPIKey,
		Logger:  slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.srv = srv
	e.http = httptest.NewServer(srv.Handler())
	t.Cleanup(e.http.Close)
	return e
}

// run starts Run and stops it (waiting for it) when the test ends.
func (e *testEnv) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.srv.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run: %v", err)
		}
	})
}

// reply is a finished HTTP exchange.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// errorCode decodes an ErrorResponse body.
func (r reply) errorCode() (code, message string) {
	var e struct{ Code, Message string }
	json.Unmarshal(r.body, &e)
	return e.Code, e.Message
}

// do sends a request with the API key (unless headers set it) and returns
// the reply. body is JSON-encoded unless it is a string or nil.
func (e *testEnv) do(method, path string, body any, headers ...string) reply {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.http.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set(sandbox.APIKeyHeader, testAPIKey)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.http.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

// decode unmarshals a reply body, failing the test on error.
func decode[T any](t *testing.T, r reply) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decoding %T from %s: %v", v, r, err)
	}
	return v
}

// wantError checks the status and code of an error reply and that the
// message mentions every wanted fragment.
func wantError(t *testing.T, call string, r reply, status int, code string, fragments ...string) {
	t.Helper()
	gotCode, msg := r.errorCode()
	if r.status != status || gotCode != code {
		t.Errorf("%s = %d %s (%q), want %d %s", call, r.status, gotCode, msg, status, code)
		return
	}
	for _, f := range fragments {
		if !strings.Contains(msg, f) {
			t.Errorf("%s message = %q, want it to mention %q", call, msg, f)
		}
	}
}

// createBody is a valid create request for tests to modify.
func createBody() map[string]any {
	return map[string]any{
		"image":      map[string]any{"uri": "busybox:latest"},
		"entrypoint": []string{"sleep", "1000"},
		"timeout":    3600,
	}
}

// createSandbox creates a sandbox through the API and returns its id.
func (e *testEnv) createSandbox(body map[string]any) string {
	e.t.Helper()
	r := e.do("POST", "/v1/sandboxes", body)
	if r.status != http.StatusAccepted {
		e.t.Fatalf("POST /v1/sandboxes = %s, want 202", r)
	}
	return decode[sandbox.CreateSandboxResponse](e.t, r).ID
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var _ = slices.Contains[[]string]

// runtimeAddress shortens runtime.Address in test tables.
type runtimeAddress = runtime.Address

// fakeSandbox is a running sandbox as a runtime would report it.
func fakeSandbox(id string) runtime.Sandbox {
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	return runtime.Sandbox{
		ID: id, Image: "busybox:latest", Entrypoint: []string{"sleep", "1000"},
		State: sandbox.StateRunning, Reason: "CONTAINER_RUNNING",
		LastTransitionAt: at, CreatedAt: at, ExecdToken: "token-" + id,
	}
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// doHost sends an authenticated GET with the given Host header.
func (e *testEnv) doHost(host, path string) reply {
	e.t.Helper()
	req, err := http.NewRequest("GET", e.http.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Host = host
	req.Header.Set(sandbox.APIKeyHeader, testAPIKey)
	resp, err := e.http.Client().Do(req)
	if err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

func newHTTPTestServer(t *testing.T, h http.Handler) *httptest.Server {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}
