package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// poolServer stands in for opensandbox-server and the execd of its
// sandboxes, with just enough for the pool: create (answers Running at
// once), get, delete, the execd endpoint, and execd's /ping served under
// /execd/<id> on the same listener. Tests steer it: fail creates, hold
// creates until released, make a sandbox unhealthy. The real flow is
// covered end to end by test/e2e/pool_test.go.
type poolServer struct {
	*httptest.Server

	mu          sync.Mutex
	next        int
	live        map[string]bool // id -> answers /ping
	createCalls int
	deleted     []string
	failCreates bool
	hold        int           // the next hold creates wait for release
	held        int           // creates waiting now
	release     chan struct{} // closed by releaseHeld
}

const poolKey = "pool-test-key"

func newPoolServer(t *testing.T) *poolServer {
	t.Helper()
	fs := &poolServer{live: map[string]bool{}, release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes", fs.create)
	mux.HandleFunc("GET /v1/sandboxes/{id}", fs.get)
	mux.HandleFunc("DELETE /v1/sandboxes/{id}", fs.delete)
	mux.HandleFunc("GET /v1/sandboxes/{id}/endpoints/{port}", fs.endpoint)
	mux.HandleFunc("GET /execd/{id}/ping", fs.ping)
	fs.Server = httptest.NewServer(mux)
	t.Cleanup(func() { fs.releaseHeld(); fs.Close() })
	return fs
}

func (fs *poolServer) authorized(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get(APIKeyHeader) != poolKey {
		poolReply(w, 401, ErrorResponse{Code: "INVALID_API_KEY", Message: "bad key"})
		return false
	}
	return true
}

func (fs *poolServer) create(w http.ResponseWriter, r *http.Request) {
	if !fs.authorized(w, r) {
		return
	}
	var req CreateSandboxRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		poolReply(w, 400, ErrorResponse{Code: "INVALID_REQUEST", Message: err.Error()})
		return
	}
	fs.mu.Lock()
	fs.createCalls++
	if fs.hold > 0 {
		fs.hold--
		fs.held++
		release := fs.release
		fs.mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		fs.mu.Lock()
		fs.held--
	}
	if fs.failCreates {
		fs.mu.Unlock()
		poolReply(w, 500, ErrorResponse{Code: "SANDBOX_START_FAILED", Message: "engine says no"})
		return
	}
	fs.next++
	id := fmt.Sprintf("sb-%03d", fs.next)
	fs.live[id] = true
	fs.mu.Unlock()
	now := time.Now().UTC()
	resp := CreateSandboxResponse{ID: id, Status: SandboxStatus{State: StateRunning}, Metadata: req.Metadata, CreatedAt: now, Entrypoint: req.Entrypoint}
	if req.Timeout != nil {
		exp := now.Add(time.Duration(*req.Timeout) * time.Second)
		resp.ExpiresAt = &exp
	}
	poolReply(w, 202, resp)
}

func (fs *poolServer) get(w http.ResponseWriter, r *http.Request) {
	if !fs.authorized(w, r) {
		return
	}
	id := r.PathValue("id")
	fs.mu.Lock()
	_, ok := fs.live[id]
	fs.mu.Unlock()
	if !ok {
		poolReply(w, 404, ErrorResponse{Code: "SANDBOX_NOT_FOUND", Message: id})
		return
	}
	poolReply(w, 200, SandboxInfo{ID: id, Status: SandboxStatus{State: StateRunning}, Entrypoint: []string{"sleep", "1000"}})
}

func (fs *poolServer) delete(w http.ResponseWriter, r *http.Request) {
	if !fs.authorized(w, r) {
		return
	}
	id := r.PathValue("id")
	fs.mu.Lock()
	_, ok := fs.live[id]
	delete(fs.live, id)
	if ok {
		fs.deleted = append(fs.deleted, id)
	}
	fs.mu.Unlock()
	if !ok {
		poolReply(w, 404, ErrorResponse{Code: "SANDBOX_NOT_FOUND", Message: id})
		return
	}
	w.WriteHeader(204)
}

func (fs *poolServer) endpoint(w http.ResponseWriter, r *http.Request) {
	if !fs.authorized(w, r) {
		return
	}
	id := r.PathValue("id")
	poolReply(w, 200, Endpoint{Endpoint: r.Host + "/execd/" + id, Headers: map[string]string{AccessTokenHeader: "tok-" + id}})
}

func (fs *poolServer) ping(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if r.Header.Get(AccessTokenHeader) != "tok-"+id {
		poolReply(w, 401, map[string]string{"error": "bad token"})
		return
	}
	fs.mu.Lock()
	healthy := fs.live[id]
	fs.mu.Unlock()
	if !healthy {
		w.WriteHeader(503)
		return
	}
	w.WriteHeader(200)
}

func poolReply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// Steering and inspection.

func (fs *poolServer) setFailCreates(on bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.failCreates = on
}

func (fs *poolServer) holdCreates(n int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.hold = n
}

func (fs *poolServer) releaseHeld() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.hold = 0
	close(fs.release)
	fs.release = make(chan struct{})
}

func (fs *poolServer) setHealthy(id string, ok bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, exists := fs.live[id]; exists {
		fs.live[id] = ok
	}
}

func (fs *poolServer) liveIDs() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var ids []string
	for id := range fs.live {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (fs *poolServer) isLive(id string) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	_, ok := fs.live[id]
	return ok
}

func (fs *poolServer) counts() (creates, held int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.createCalls, fs.held
}

// poolWaitFor polls cond until it holds, failing the test after 10s.
func poolWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// poolClient is a Client for fs without retries, on its own transport so
// that tests can close its idle connections.
func poolClient(t *testing.T, fs *poolServer) (*Client, *http.Client) {
	t.Helper()
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(hc.CloseIdleConnections)
	c, err := NewClient(WithDomain(fs.URL), WithAPIKey(poolKey), WithRetry(RetryPolicy{MaxRetries: 0}), WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	return c, hc
}

func poolCreateOptions() CreateOptions {
	return CreateOptions{Image: "busybox", Entrypoint: []string{"sleep", "1000"}, Timeout: 10 * time.Minute, ReadyTimeout: 5 * time.Second}
}

// startPool starts a pool on fs (with hooks when given) and closes it at
// the end of the test.
func startPool(t *testing.T, fs *poolServer, opts PoolOptions, hooks *poolHooks) *Pool {
	t.Helper()
	c, _ := poolClient(t, fs)
	if opts.Create.Image == "" {
		opts.Create = poolCreateOptions()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	h := poolHooks{now: time.Now, after: time.After}
	if hooks != nil {
		h = *hooks
	}
	p, err := c.newPool(t.Context(), opts, h)
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Close(ctx)
	})
	return p
}

func poolWaitReady(t *testing.T, p *Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v (stats %+v)", err, p.Stats())
	}
}

func TestPoolOptionsValidated(t *testing.T) {
	fs := newPoolServer(t)
	c, _ := poolClient(t, fs)
	good := poolCreateOptions()
	for _, o := range []PoolOptions{
		{Size: 0, Create: good}, {Size: -1, Create: good}, {Size: 1, Refill: -1, Create: good},
		{Size: 1, MinRemaining: -time.Second, Create: good}, {Size: 1}, {Size: 1, Create: CreateOptions{Image: "a", SnapshotID: "b"}},
		{Size: 1, Create: CreateOptions{Image: "a", Timeout: time.Minute}}, // dropped as soon as made (MinRemaining 1m)
	} {
		if p, err := c.NewPool(t.Context(), o); err == nil {
			p.Close(t.Context())
			t.Errorf("NewPool(%+v) = nil error, want one", o)
		}
	}
}

func TestPoolAcquireFromFullPool(t *testing.T) {
	fs := newPoolServer(t)
	// Refill 1: created one after the other, so the oldest is known.
	p := startPool(t, fs, PoolOptions{Size: 2, Refill: 1}, nil)
	poolWaitReady(t, p)
	before := fs.liveIDs()
	if got := p.Stats(); got.Idle != 2 || got.Creating != 0 || got.Failures != 0 {
		t.Fatalf("Stats() after WaitReady = %+v, want 2 idle, 0 creating, 0 failures", got)
	}

	sb, err := p.Acquire(t.Context())
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if sb.ID() != before[0] {
		t.Errorf("Acquire() = %s, want the oldest idle sandbox %s (idle were %v)", sb.ID(), before[0], before)
	}
	if got := p.Stats().Acquired; got != 1 {
		t.Errorf("Stats().Acquired = %d, want 1", got)
	}

	// Refill behind the acquired one: back to two idle, three alive.
	poolWaitFor(t, "refill to 2 idle", func() bool { return p.Stats().Idle == 2 && len(fs.liveIDs()) == 3 })
}

func TestPoolFallbackCreateWhenEmpty(t *testing.T) {
	fs := newPoolServer(t)
	fs.holdCreates(1) // the pool's own create hangs: it stays empty
	p := startPool(t, fs, PoolOptions{Size: 1, Refill: 1}, nil)
	poolWaitFor(t, "the pool's create to be held", func() bool { _, held := fs.counts(); return held == 1 })

	sb, err := p.Acquire(t.Context())
	if err != nil {
		t.Fatalf("Acquire on an empty pool: %v", err)
	}
	if !fs.isLive(sb.ID()) {
		t.Errorf("Acquire() = %s, which the server does not know", sb.ID())
	}
	if got := p.Stats(); got.Idle != 0 || got.Creating != 1 || got.Acquired != 1 {
		t.Errorf("Stats() = %+v, want 0 idle, 1 creating, 1 acquired", got)
	}
	fs.releaseHeld()
	poolWaitReady(t, p)
}

func TestPoolFailFastEmpty(t *testing.T) {
	fs := newPoolServer(t)
	fs.holdCreates(1)
	p := startPool(t, fs, PoolOptions{Size: 1, Refill: 1, FailFast: true}, nil)
	poolWaitFor(t, "the pool's create to be held", func() bool { _, held := fs.counts(); return held == 1 })

	if sb, err := p.Acquire(t.Context()); !errors.Is(err, ErrPoolEmpty) {
		t.Fatalf("Acquire on an empty FailFast pool = %v, %v; want ErrPoolEmpty", sb, err)
	}
	if creates, _ := fs.counts(); creates != 1 {
		t.Errorf("server saw %d creates, want only the pool's 1 (FailFast must not create)", creates)
	}
	fs.releaseHeld()
	poolWaitReady(t, p)
	if _, err := p.Acquire(t.Context()); err != nil {
		t.Errorf("Acquire on a ready FailFast pool: %v", err)
	}
}

// The backoff timer is the hook: each request is recorded and the filler
// waits until the test fires it, so no wall-clock waiting is involved.
func TestPoolCreateFailuresBackOff(t *testing.T) {
	fs := newPoolServer(t)
	fs.setFailCreates(true)
	waits := make(chan time.Duration, 100)
	fire := make(chan time.Time)
	hooks := &poolHooks{now: time.Now, after: func(d time.Duration) <-chan time.Time { waits <- d; return fire }}
	p := startPool(t, fs, PoolOptions{Size: 1, Refill: 1}, hooks)

	nextWait := func() time.Duration {
		t.Helper()
		select {
		case d := <-waits:
			return d
		case <-time.After(10 * time.Second):
			t.Fatalf("no backoff after a failed create (stats %+v)", p.Stats())
			return 0
		}
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i, w := range want {
		d := nextWait()
		if d != w*time.Second {
			t.Fatalf("backoff after failure %d = %v, want %v", i+1, d, w*time.Second)
		}
		// While the filler waits no create may happen.
		if creates, _ := fs.counts(); creates != i+1 {
			t.Fatalf("creates during backoff %d = %d, want %d", i+1, creates, i+1)
		}
		st := p.Stats()
		if st.Failures != i+1 || st.LastError == "" {
			t.Fatalf("Stats() after failure %d = %+v, want %d failures and a LastError", i+1, st, i+1)
		}
		if i == len(want)-1 {
			fs.setFailCreates(false)
		}
		fire <- time.Now()
	}
	poolWaitReady(t, p)

	// A success resets the backoff to its start.
	fs.setFailCreates(true)
	if _, err := p.Acquire(t.Context()); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if d := nextWait(); d != time.Second {
		t.Errorf("backoff after a success then a failure = %v, want 1s", d)
	}
}

func TestPoolWaitReadyReportsLastError(t *testing.T) {
	fs := newPoolServer(t)
	fs.setFailCreates(true)
	p := startPool(t, fs, PoolOptions{Size: 1}, nil)
	poolWaitFor(t, "a failure", func() bool { return p.Stats().Failures > 0 })
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := p.WaitReady(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitReady(cancelled) = %v, want context.Canceled", err)
	}
	if st := p.Stats(); st.LastError == "" || !strings.Contains(err.Error(), st.LastError) {
		t.Errorf("WaitReady = %v with Stats().LastError %q: want the last create failure named", err, st.LastError)
	}
}

func TestPoolAcquireSkipsUnhealthy(t *testing.T) {
	fs := newPoolServer(t)
	p := startPool(t, fs, PoolOptions{Size: 2, Refill: 1, HealthInterval: time.Hour}, nil)
	poolWaitReady(t, p)
	ids := fs.liveIDs()
	fs.setHealthy(ids[0], false)

	sb, err := p.Acquire(t.Context())
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if sb.ID() != ids[1] {
		t.Errorf("Acquire() = %s, want the healthy %s", sb.ID(), ids[1])
	}
	poolWaitFor(t, "the unhealthy sandbox to be killed", func() bool { return !fs.isLive(ids[0]) })
	poolWaitFor(t, "refill to 2 idle", func() bool { return p.Stats().Idle == 2 })
}

func TestPoolHealthLoopReplacesUnhealthy(t *testing.T) {
	fs := newPoolServer(t)
	p := startPool(t, fs, PoolOptions{Size: 2, HealthInterval: 10 * time.Millisecond}, nil)
	poolWaitReady(t, p)
	bad := fs.liveIDs()[1]
	fs.setHealthy(bad, false)

	poolWaitFor(t, "the unhealthy sandbox to be killed", func() bool { return !fs.isLive(bad) })
	poolWaitFor(t, "refill to 2 idle", func() bool { return p.Stats().Idle == 2 && len(fs.liveIDs()) == 2 })
	if got := p.Stats().Acquired; got != 0 {
		t.Errorf("Stats().Acquired = %d, want 0", got)
	}
}

func TestPoolDropsNearExpiry(t *testing.T) {
	for _, tc := range []struct {
		name   string
		health time.Duration
	}{
		{"acquire", time.Hour},
		{"health loop", 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newPoolServer(t)
			var skew atomic.Int64
			hooks := &poolHooks{now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }, after: time.After}
			opts := PoolOptions{Size: 2, MinRemaining: time.Minute, HealthInterval: tc.health, Create: poolCreateOptions()}
			opts.Create.Timeout = 2 * time.Minute
			p := startPool(t, fs, opts, hooks)
			poolWaitReady(t, p)
			old := fs.liveIDs()

			skew.Store(int64(90 * time.Second)) // 30s left, MinRemaining is 1m
			if tc.health == time.Hour {
				sb, err := p.Acquire(t.Context())
				if err != nil {
					t.Fatalf("Acquire: %v", err)
				}
				if slices.Contains(old, sb.ID()) {
					t.Errorf("Acquire() = %s, one of the near-expiry sandboxes %v", sb.ID(), old)
				}
			}
			poolWaitFor(t, "near-expiry sandboxes killed", func() bool { return !fs.isLive(old[0]) && !fs.isLive(old[1]) })
			poolWaitFor(t, "refill to 2 idle", func() bool { return p.Stats().Idle == 2 })
		})
	}
}

func TestPoolCloseKillsIdle(t *testing.T) {
	fs := newPoolServer(t)
	p := startPool(t, fs, PoolOptions{Size: 3}, nil)
	poolWaitReady(t, p)
	kept, err := p.Acquire(t.Context())
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	poolWaitReady(t, p)

	if err := p.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := fs.liveIDs(); !slices.Equal(got, []string{kept.ID()}) {
		t.Errorf("alive after Close = %v, want only the acquired %s", got, kept.ID())
	}
	if got := p.Stats().Idle; got != 0 {
		t.Errorf("Stats().Idle after Close = %d, want 0", got)
	}
	if _, err := p.Acquire(t.Context()); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("Acquire after Close = %v, want ErrPoolClosed", err)
	}
	if err := p.WaitReady(t.Context()); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("WaitReady after Close = %v, want ErrPoolClosed", err)
	}
	if err := p.Close(t.Context()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestPoolCloseWaitsForInflightCreates(t *testing.T) {
	fs := newPoolServer(t)
	fs.holdCreates(2)
	// FailFast: an Acquire that still finds the pool open must not create.
	p := startPool(t, fs, PoolOptions{Size: 2, FailFast: true}, nil)
	poolWaitFor(t, "two creates held", func() bool { _, held := fs.counts(); return held == 2 })

	closed := make(chan error, 1)
	go func() { closed <- p.Close(context.Background()) }()
	poolWaitFor(t, "Acquire to see the pool closed", func() bool {
		_, err := p.Acquire(t.Context())
		return errors.Is(err, ErrPoolClosed)
	})
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while creates were in flight", err)
	default:
	}
	fs.releaseHeld()
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := fs.liveIDs(); len(got) != 0 {
		t.Errorf("alive after Close = %v, want none (in-flight creates killed)", got)
	}
}

func TestPoolNoGoroutineLeak(t *testing.T) {
	fs := newPoolServer(t)
	c, hc := poolClient(t, fs)
	base := runtime.NumGoroutine()

	p, err := c.NewPool(t.Context(), PoolOptions{Size: 2, HealthInterval: 5 * time.Millisecond, Create: poolCreateOptions(),
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	poolWaitReady(t, p)
	sb, err := p.Acquire(t.Context())
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := sb.Kill(t.Context()); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := p.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var n int
	deadline := time.Now().Add(10 * time.Second)
	for {
		hc.CloseIdleConnections() // keep-alive connections hold goroutines on both ends
		if n = runtime.NumGoroutine(); n <= base {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines after Close = %d, want <= %d\n%s", n, base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPoolConcurrentAcquire(t *testing.T) {
	fs := newPoolServer(t)
	p := startPool(t, fs, PoolOptions{Size: 4, Refill: 3, HealthInterval: 5 * time.Millisecond}, nil)
	poolWaitReady(t, p)

	const n = 24
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sb, err := p.Acquire(t.Context())
			if err != nil {
				t.Errorf("Acquire %d: %v", i, err)
				return
			}
			ids[i] = sb.ID()
			_ = p.Stats()
		})
	}
	wg.Wait()
	slices.Sort(ids)
	if len(slices.Compact(slices.Clone(ids))) != n {
		t.Fatalf("Acquire handed out duplicates: %v", ids)
	}
	if got := p.Stats().Acquired; got != n {
		t.Errorf("Stats().Acquired = %d, want %d", got, n)
	}
	if err := p.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// The pool never touches acquired sandboxes: all n are still alive.
	if got := fs.liveIDs(); !slices.Equal(got, ids) {
		t.Errorf("alive after Close = %v, want exactly the %d acquired %v", got, n, ids)
	}
}

// A caller whose context is already over when it closes the pool still
// gets every idle sandbox killed: the kills never depend on its context
// (a Close cut short once left an idle sandbox alive, failing a fresh
// clone's run with "kill sb-017: context canceled").
func TestPoolCloseKillsIdleWhateverTheContext(t *testing.T) {
	fs := newPoolServer(t)
	p := startPool(t, fs, PoolOptions{Size: 3, Refill: 3}, nil)
	poolWaitReady(t, p)
	idle := fs.liveIDs()
	if len(idle) != 3 {
		t.Fatalf("live before Close = %v, want 3", idle)
	}

	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.Close(cancelled); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Close(cancelled ctx) = %v, want nil or context.Canceled", err)
	}
	// A second Close waits for the work the first one started.
	ctx, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if got := fs.liveIDs(); len(got) != 0 {
		t.Errorf("alive after Close = %v, want none (idle were %v)", got, idle)
	}
}
