package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/internal/store"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// fakeRuntime is an in-memory runtime: the behaviour tested here does not
// depend on an engine. Calls the service does not make here panic (the
// embedded interface is nil).
type fakeRuntime struct {
	runtime.Runtime

	mu        sync.Mutex
	boxes     map[string]runtime.Sandbox
	specs     []runtime.Spec
	createErr error
	// commit, when set, is CommitSnapshot.
	commit func(ctx context.Context, sandboxID, snapshotID string) error
	// deleteSnapErr is what DeleteSnapshot returns; deletedSnaps records
	// its calls.
	deleteSnapErr error
	deletedSnaps  []string
}

func newFakeRuntime() *fakeRuntime { return &fakeRuntime{boxes: map[string]runtime.Sandbox{}} }

func (r *fakeRuntime) Create(ctx context.Context, spec runtime.Spec) (runtime.Sandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.specs = append(r.specs, spec)
	if r.createErr != nil {
		return runtime.Sandbox{}, r.createErr
	}
	sb := runtime.Sandbox{ID: spec.ID, Image: spec.Image, SnapshotID: spec.SnapshotID, Entrypoint: spec.Entrypoint,
		Metadata: maps.Clone(spec.Metadata), State: sandbox.StateRunning, ExpiresAt: spec.ExpiresAt, ExecdToken: spec.ExecdToken}
	r.boxes[spec.ID] = sb
	return sb, nil
}

func (r *fakeRuntime) Get(ctx context.Context, id string) (runtime.Sandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, ok := r.boxes[id]
	if !ok {
		return sb, fmt.Errorf("fake: sandbox %s: %w", id, runtime.ErrNotFound)
	}
	return sb, nil
}

func (r *fakeRuntime) List(ctx context.Context) ([]runtime.Sandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slicesOf(r.boxes), nil
}

func slicesOf(m map[string]runtime.Sandbox) []runtime.Sandbox {
	out := make([]runtime.Sandbox, 0, len(m))
	for _, sb := range m {
		out = append(out, sb)
	}
	return out
}

func (r *fakeRuntime) Delete(ctx context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.boxes[id]; !ok {
		return fmt.Errorf("fake: sandbox %s: %w", id, runtime.ErrNotFound)
	}
	delete(r.boxes, id)
	return nil
}

func (r *fakeRuntime) has(id string) bool {
	_, err := r.Get(context.Background(), id)
	return err == nil
}

func (r *fakeRuntime) setState(id, state string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb := r.boxes[id]
	sb.State = state
	r.boxes[id] = sb
}

func (r *fakeRuntime) CommitSnapshot(ctx context.Context, sandboxID, snapshotID string) error {
	if r.commit != nil {
		return r.commit(ctx, sandboxID, snapshotID)
	}
	return nil
}

func (r *fakeRuntime) DeleteSnapshot(ctx context.Context, snapshotID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deletedSnaps = append(r.deletedSnaps, snapshotID)
	return r.deleteSnapErr
}

// boltStore adapts the real store (internal/store) to Store.
type boltStore struct{ *store.Store }

func (b boltStore) GetOverrides(ctx context.Context, id string) (Overrides, error) {
	var o Overrides
	_, err := b.Store.GetOverrides(ctx, id, &o)
	return o, err
}

func (b boltStore) PutOverrides(ctx context.Context, id string, o Overrides) error {
	return b.Store.PutOverrides(ctx, id, o)
}

func openStore(t *testing.T, path string) boltStore {
	t.Helper()
	st, err := store.Open(store.Options{Path: path})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return boltStore{st}
}

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type fixture struct {
	rt    *fakeRuntime
	store boltStore
	clock *clock
	svc   *Service
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{
		rt:    newFakeRuntime(),
		store: openStore(t, filepath.Join(t.TempDir(), "store.db")),
		clock: &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)},
	}
	f.svc = f.newService(t)
	return f
}

func (f *fixture) newService(t *testing.T) *Service {
	t.Helper()
	svc, err := New(Config{Runtime: f.rt, Store: f.store, MaxTimeout: 2 * time.Hour,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// run runs svc.Run until the test ends and waits for it to return.
func run(t *testing.T, svc *Service) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func spec() runtime.Spec {
	return runtime.Spec{Image: "img", Entrypoint: []string{"sleep", "1000"}, Metadata: map[string]string{"team": "ai", "tier": "1"}}
}

var uuid4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNewUUID(t *testing.T) {
	a, b := NewUUID(), NewUUID()
	if !uuid4.MatchString(a) || !uuid4.MatchString(b) || a == b {
		t.Errorf("NewUUID() = %q, %q; want two different canonical version-4 UUIDs", a, b)
	}
}

func TestCreateSchedulesExpiry(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	rs, err := f.svc.Create(ctx, spec(), 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := f.clock.Now().Add(10 * time.Minute)
	got := f.rt.specs[0]
	if !uuid4.MatchString(got.ID) || got.ID != rs.ID || len(got.ExecdToken) != 64 {
		t.Errorf("spec id %q token %q (sandbox %q), want a uuid4 and 64 hex digits", got.ID, got.ExecdToken, rs.ID)
	}
	if got.ExpiresAt == nil || !got.ExpiresAt.Equal(want) {
		t.Errorf("spec.ExpiresAt = %v, want %v", got.ExpiresAt, want)
	}
	if at, ok := f.svc.Deadline(rs.ID); !ok || !at.Equal(want) {
		t.Errorf("Deadline = %v, %v; want %v armed", at, ok, want)
	}

	manual, err := f.svc.Create(ctx, spec(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if f.rt.specs[1].ExpiresAt != nil {
		t.Errorf("timeout 0: spec.ExpiresAt = %v, want nil", f.rt.specs[1].ExpiresAt)
	}
	if _, ok := f.svc.Deadline(manual.ID); ok {
		t.Error("timeout 0: an expiry deadline is armed")
	}

	// A failed create arms nothing and keeps the runtime's class.
	f.rt.createErr = fmt.Errorf("fake: no room: %w", runtime.ErrUnavailable)
	if _, err := f.svc.Create(ctx, spec(), time.Minute); !errors.Is(err, runtime.ErrUnavailable) {
		t.Errorf("Create with a failing runtime = %v, want ErrUnavailable", err)
	}
	if _, ok := f.svc.Deadline(f.rt.specs[2].ID); ok {
		t.Error("a failed create armed an expiry deadline")
	}
}

func TestRenewSurvivesRestart(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	rs, err := f.svc.Create(ctx, spec(), 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The caller got the id (else a restart deletes the sandbox as a
	// create never answered).
	f.svc.CreateAnswered(ctx, rs.ID)
	at := f.clock.Now().Add(time.Hour)
	got, err := f.svc.Renew(ctx, rs.ID, at)
	if err != nil || !got.Equal(at) {
		t.Fatalf("Renew = %v, %v; want %v", got, err, at)
	}
	if d, ok := f.svc.Deadline(rs.ID); !ok || !d.Equal(at) {
		t.Errorf("Deadline after renew = %v, %v; want %v", d, ok, at)
	}
	if g, err := f.svc.Get(ctx, rs.ID); err != nil || g.ExpiresAt == nil || !g.ExpiresAt.Equal(at) {
		t.Errorf("Get after renew: expiresAt %v, %v; want %v", g.ExpiresAt, err, at)
	}

	// A new service over the same runtime and store file (the old one's
	// deadlines are gone with it) finds the renewed expiry.
	path := f.store.Path()
	if err := f.store.Close(); err != nil {
		t.Fatal(err)
	}
	f.store = openStore(t, path)
	restarted := f.newService(t)
	if _, ok := restarted.Deadline(rs.ID); ok {
		t.Fatal("a fresh service has a deadline before Run")
	}
	run(t, restarted)
	waitUntil(t, "deadline rebuilt", func() bool { _, ok := restarted.Deadline(rs.ID); return ok })
	if d, _ := restarted.Deadline(rs.ID); !d.Equal(at) {
		t.Errorf("Deadline after restart = %v, want the renewed %v (created with %v)", d, at, rs.ExpiresAt)
	}
	if g, err := restarted.Get(ctx, rs.ID); err != nil || g.ExpiresAt == nil || !g.ExpiresAt.Equal(at) {
		t.Errorf("Get after restart: expiresAt %v, %v; want %v", g.ExpiresAt, err, at)
	}
	// Past the created expiry but before the renewed one the sandbox lives.
	f.clock.advance(30 * time.Minute)
	if _, err := restarted.Get(ctx, rs.ID); err != nil {
		t.Errorf("Get between the created and the renewed expiry: %v", err)
	}
}

func TestRenewRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	rs, err := f.svc.Create(ctx, spec(), 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	manual, err := f.svc.Create(ctx, spec(), 0)
	if err != nil {
		t.Fatal(err)
	}
	now := f.clock.Now()
	for _, tc := range []struct {
		name        string
		id          string
		at          time.Time
		kind, class error
	}{
		{"in the past", rs.ID, now.Add(-time.Second), ErrInvalidExpiration, runtime.ErrInvalid},
		{"now", rs.ID, now, ErrInvalidExpiration, runtime.ErrInvalid},
		{"beyond the maximum", rs.ID, now.Add(2*time.Hour + time.Second), ErrInvalidExpiration, runtime.ErrInvalid},
		{"manual cleanup", manual.ID, now.Add(time.Minute), ErrNotRenewable, runtime.ErrConflict},
		{"missing", "nope", now.Add(time.Minute), runtime.ErrNotFound, runtime.ErrNotFound},
	} {
		_, err := f.svc.Renew(ctx, tc.id, tc.at)
		if !errors.Is(err, tc.kind) || !errors.Is(err, tc.class) {
			t.Errorf("Renew %s = %v, want %v (class %v)", tc.name, err, tc.kind, tc.class)
		}
	}
	if d, _ := f.svc.Deadline(rs.ID); !d.Equal(now.Add(10 * time.Minute)) {
		t.Errorf("refused renewals moved the deadline to %v", d)
	}
}

func TestDeleteExpiredSandbox(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	rs, err := f.svc.Create(ctx, spec(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.PatchMetadata(ctx, rs.ID, map[string]json.RawMessage{"k": json.RawMessage(`"v"`)}); err != nil {
		t.Fatal(err)
	}
	// Its expiry passes with no expiry loop running (as right after a
	// restart): the sandbox is still in the runtime, and a delete of it
	// works and clears what the core kept.
	f.clock.advance(2 * time.Minute)
	if err := f.svc.Delete(ctx, rs.ID, "user_delete"); err != nil {
		t.Fatalf("Delete of an expired sandbox: %v", err)
	}
	if f.rt.has(rs.ID) {
		t.Error("the runtime still has the sandbox")
	}
	if _, ok := f.svc.Deadline(rs.ID); ok {
		t.Error("its expiry deadline is still armed")
	}
	if o, err := f.store.GetOverrides(ctx, rs.ID); err != nil || o.Metadata != nil || o.ExpiresAt != nil {
		t.Errorf("overrides after delete = %+v, %v; want none", o, err)
	}
	if err := f.svc.Delete(ctx, rs.ID, "user_delete"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("second Delete = %v, want ErrNotFound", err)
	}

	// Get of an expired sandbox deletes it and reports it missing.
	rs2, err := f.svc.Create(ctx, spec(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.advance(time.Minute)
	if _, err := f.svc.Get(ctx, rs2.ID); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Get at its expiry = %v, want ErrNotFound", err)
	}
	if f.rt.has(rs2.ID) {
		t.Error("Get at its expiry left the sandbox in the runtime")
	}
}

func TestMetadataOverrides(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	rs, err := f.svc.Create(ctx, spec(), 0)
	if err != nil {
		t.Fatal(err)
	}
	patch := func(p string) (runtime.Sandbox, error) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(p), &m); err != nil {
			t.Fatal(err)
		}
		return f.svc.PatchMetadata(ctx, rs.ID, m)
	}
	got, err := patch(`{"team": null, "owner": "bob"}`)
	want := map[string]string{"tier": "1", "owner": "bob"}
	if err != nil || !maps.Equal(got.Metadata, want) {
		t.Fatalf("PatchMetadata = %v, %v; want %v", got.Metadata, err, want)
	}
	if g, _ := f.svc.Get(ctx, rs.ID); !maps.Equal(g.Metadata, want) {
		t.Errorf("Get metadata = %v, want %v", g.Metadata, want)
	}
	if l, _ := f.svc.List(ctx); len(l) != 1 || !maps.Equal(l[0].Metadata, want) {
		t.Errorf("List = %+v, want one sandbox with metadata %v", l, want)
	}
	if r, _ := f.rt.Get(ctx, rs.ID); r.Metadata["team"] != "ai" {
		t.Errorf("the runtime's metadata changed to %v; overrides live in the store", r.Metadata)
	}
	// Bad patches change nothing and are ErrInvalidArgument (ErrInvalid).
	for _, p := range []string{`{"bad key": "x"}`, `{"k": 1}`} {
		if _, err := patch(p); !errors.Is(err, ErrInvalidArgument) || !errors.Is(err, runtime.ErrInvalid) {
			t.Errorf("PatchMetadata %s = %v, want ErrInvalidArgument", p, err)
		}
	}
	// Deleting every key leaves no metadata, not the runtime's again.
	got, err = patch(`{"tier": null, "owner": null}`)
	if err != nil || got.Metadata != nil {
		t.Errorf("PatchMetadata deleting all = %v, %v; want nil metadata", got.Metadata, err)
	}
	if g, _ := f.svc.Get(ctx, rs.ID); g.Metadata != nil {
		t.Errorf("Get after deleting every key = %v, want none", g.Metadata)
	}
	if _, err := f.svc.PatchMetadata(ctx, "nope", nil); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("PatchMetadata of a missing sandbox = %v, want ErrNotFound", err)
	}
}

func TestSnapshotStates(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	release := make(chan error)
	f.rt.commit = func(ctx context.Context, sandboxID, snapshotID string) error {
		select {
		case err := <-release:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	run(t, f.svc)
	rs, err := f.svc.Create(ctx, spec(), 0)
	if err != nil {
		t.Fatal(err)
	}
	state := func(id string) string {
		snap, err := f.svc.GetSnapshot(ctx, id)
		if err != nil {
			t.Fatalf("GetSnapshot %s: %v", id, err)
		}
		return snap.Status.State
	}

	snap, err := f.svc.CreateSnapshot(ctx, rs.ID, "first")
	if err != nil || snap.Status.State != sandbox.SnapshotCreating || snap.SandboxID != rs.ID || !uuid4.MatchString(snap.ID) {
		t.Fatalf("CreateSnapshot = %+v, %v; want a Creating snapshot of %s", snap, err, rs.ID)
	}
	if err := f.svc.DeleteSnapshot(ctx, snap.ID); !errors.Is(err, ErrSnapshotBusy) || !errors.Is(err, runtime.ErrConflict) {
		t.Errorf("DeleteSnapshot while Creating = %v, want ErrSnapshotBusy", err)
	}
	restore := runtime.Spec{SnapshotID: snap.ID, Entrypoint: []string{"sh"}}
	if _, err := f.svc.Create(ctx, restore, 0); !errors.Is(err, ErrSnapshotNotReady) || !errors.Is(err, runtime.ErrConflict) {
		t.Errorf("Create from a Creating snapshot = %v, want ErrSnapshotNotReady", err)
	}
	release <- nil
	waitUntil(t, "snapshot Ready", func() bool { return state(snap.ID) == sandbox.SnapshotReady })
	if _, err := f.svc.Create(ctx, restore, 0); err != nil {
		t.Errorf("Create from a Ready snapshot: %v", err)
	}

	// A failed capture ends Failed and removes what it left.
	failed, err := f.svc.CreateSnapshot(ctx, rs.ID, "second")
	if err != nil {
		t.Fatal(err)
	}
	release <- fmt.Errorf("fake: commit: %w", runtime.ErrNotFound)
	waitUntil(t, "snapshot Failed", func() bool { return state(failed.ID) == sandbox.SnapshotFailed })
	if got, _ := f.svc.GetSnapshot(ctx, failed.ID); got.Status.Message != "the sandbox no longer exists" {
		t.Errorf("failed snapshot message = %q", got.Status.Message)
	}
	f.rt.mu.Lock()
	cleaned := len(f.rt.deletedSnaps) == 1 && f.rt.deletedSnaps[0] == failed.ID
	f.rt.mu.Unlock()
	if !cleaned {
		t.Errorf("runtime DeleteSnapshot calls = %v, want one for %s", f.rt.deletedSnaps, failed.ID)
	}

	// Snapshots are of Running or Paused sandboxes only.
	f.rt.setState(rs.ID, sandbox.StatePaused)
	paused, err := f.svc.CreateSnapshot(ctx, rs.ID, "paused")
	if err != nil {
		t.Fatalf("CreateSnapshot of a paused sandbox: %v", err)
	}
	release <- nil
	waitUntil(t, "paused snapshot Ready", func() bool { return state(paused.ID) == sandbox.SnapshotReady })
	f.rt.setState(rs.ID, sandbox.StateTerminated)
	if _, err := f.svc.CreateSnapshot(ctx, rs.ID, "x"); !errors.Is(err, ErrSandboxState) || !errors.Is(err, runtime.ErrConflict) {
		t.Errorf("CreateSnapshot of a terminated sandbox = %v, want ErrSandboxState", err)
	}

	// Deletes: one a sandbox still uses is refused; a free one goes.
	f.rt.mu.Lock()
	f.rt.deleteSnapErr = fmt.Errorf("fake: image in use: %w", runtime.ErrConflict)
	f.rt.mu.Unlock()
	if err := f.svc.DeleteSnapshot(ctx, snap.ID); !errors.Is(err, ErrSnapshotInUse) {
		t.Errorf("DeleteSnapshot in use = %v, want ErrSnapshotInUse", err)
	}
	f.rt.mu.Lock()
	f.rt.deleteSnapErr = nil
	f.rt.mu.Unlock()
	if err := f.svc.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatalf("DeleteSnapshot: %v", err)
	}
	if _, err := f.svc.GetSnapshot(ctx, snap.ID); !errors.Is(err, ErrSnapshotNotFound) || !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("GetSnapshot after delete = %v, want ErrSnapshotNotFound", err)
	}
	if _, err := f.svc.Create(ctx, restore, 0); !errors.Is(err, ErrSnapshotNotFound) {
		t.Errorf("Create from a deleted snapshot = %v, want ErrSnapshotNotFound", err)
	}
}
