package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state", "opensandbox.db")
	st, err := Open(Options{Path: path})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}

func snap(id string) sandbox.Snapshot {
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	return sandbox.Snapshot{
		ID:        id,
		SandboxID: "sbx-" + id,
		Name:      "name-" + id,
		Status:    sandbox.SnapshotStatus{State: sandbox.SnapshotReady, LastTransitionAt: &at},
		CreatedAt: at,
	}
}

type overrides struct {
	Metadata  map[string]string `json:"metadata,omitempty"`
	ExpiresAt *time.Time        `json:"expiresAt,omitempty"`
}

func TestOpenCreatesPrivateFile(t *testing.T) {
	_, path := openTemp(t)
	for _, c := range []struct {
		path string
		want os.FileMode
	}{{filepath.Dir(path), 0o700}, {path, 0o600}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatalf("Stat(%s): %v", c.path, err)
		}
		if got := fi.Mode().Perm(); got != c.want {
			t.Errorf("mode of %s = %v, want %v", c.path, got, c.want)
		}
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	ctx := context.Background()
	st, _ := openTemp(t)
	want := snap("a")
	if err := st.PutSnapshot(ctx, want); err != nil {
		t.Fatalf("PutSnapshot: %v", err)
	}
	got, err := st.GetSnapshot(ctx, "a")
	if err != nil {
		t.Fatalf("GetSnapshot(a): %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GetSnapshot(a) = %+v, want %+v", got, want)
	}

	// Put replaces.
	want.Status.State = sandbox.SnapshotFailed
	want.Status.Reason = "CommitFailed"
	if err := st.PutSnapshot(ctx, want); err != nil {
		t.Fatalf("PutSnapshot (replace): %v", err)
	}
	got, err = st.GetSnapshot(ctx, "a")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("GetSnapshot(a) after replace = %+v, %v; want %+v, nil", got, err, want)
	}

	if err := st.DeleteSnapshot(ctx, "a"); err != nil {
		t.Fatalf("DeleteSnapshot(a): %v", err)
	}
	if _, err := st.GetSnapshot(ctx, "a"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("GetSnapshot(a) after delete: err = %v, want runtime.ErrNotFound", err)
	}
}

func TestListSnapshotsOrderedByID(t *testing.T) {
	ctx := context.Background()
	st, _ := openTemp(t)
	got, err := st.ListSnapshots(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("ListSnapshots on empty store = %v, %v; want [], nil", got, err)
	}
	for _, id := range []string{"c", "a", "b"} {
		if err := st.PutSnapshot(ctx, snap(id)); err != nil {
			t.Fatalf("PutSnapshot(%s): %v", id, err)
		}
	}
	got, err = st.ListSnapshots(ctx)
	if err != nil {
		t.Fatalf("ListSnapshots: %v", err)
	}
	var ids []string
	for _, s := range got {
		ids = append(ids, s.ID)
	}
	if want := []string{"a", "b", "c"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("ListSnapshots ids = %v, want %v", ids, want)
	}
	if !reflect.DeepEqual(got[1], snap("b")) {
		t.Errorf("ListSnapshots[1] = %+v, want %+v", got[1], snap("b"))
	}
}

func TestMissing(t *testing.T) {
	ctx := context.Background()
	st, _ := openTemp(t)
	tests := []struct {
		name string
		call func() error
		want error // nil: no error expected
	}{
		{"GetSnapshot", func() error { _, err := st.GetSnapshot(ctx, "nope"); return err }, runtime.ErrNotFound},
		{"GetSnapshot empty id", func() error { _, err := st.GetSnapshot(ctx, ""); return err }, runtime.ErrNotFound},
		{"DeleteSnapshot", func() error { return st.DeleteSnapshot(ctx, "nope") }, runtime.ErrNotFound},
		{"DeleteOverrides", func() error { return st.DeleteOverrides(ctx, "nope") }, nil},
		{"PutSnapshot empty id", func() error { return st.PutSnapshot(ctx, sandbox.Snapshot{}) }, runtime.ErrInvalid},
		{"PutOverrides empty id", func() error { return st.PutOverrides(ctx, "", overrides{}) }, runtime.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if tt.want == nil && err != nil {
				t.Errorf("%s: err = %v, want nil", tt.name, err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
			}
		})
	}

	var o overrides
	found, err := st.GetOverrides(ctx, "nope", &o)
	if err != nil || found || !reflect.DeepEqual(o, overrides{}) {
		t.Errorf("GetOverrides(nope) = %v, %v, value %+v; want false, nil, zero value", found, err, o)
	}
}

func TestOverridesRoundTrip(t *testing.T) {
	ctx := context.Background()
	st, _ := openTemp(t)
	exp := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	want := overrides{Metadata: map[string]string{"team": "ml"}, ExpiresAt: &exp}
	if err := st.PutOverrides(ctx, "sbx1", want); err != nil {
		t.Fatalf("PutOverrides: %v", err)
	}
	var got overrides
	found, err := st.GetOverrides(ctx, "sbx1", &got)
	if err != nil || !found || !reflect.DeepEqual(got, want) {
		t.Fatalf("GetOverrides(sbx1) = %v, %v, %+v; want true, nil, %+v", found, err, got, want)
	}
	if err := st.DeleteOverrides(ctx, "sbx1"); err != nil {
		t.Fatalf("DeleteOverrides: %v", err)
	}
	found, err = st.GetOverrides(ctx, "sbx1", &got)
	if err != nil || found {
		t.Errorf("GetOverrides(sbx1) after delete = %v, %v; want false, nil", found, err)
	}
}

func TestCancelledContext(t *testing.T) {
	st, _ := openTemp(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := st.PutSnapshot(ctx, snap("a")); !errors.Is(err, context.Canceled) {
		t.Errorf("PutSnapshot(cancelled ctx): err = %v, want context.Canceled", err)
	}
	if _, err := st.ListSnapshots(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("ListSnapshots(cancelled ctx): err = %v, want context.Canceled", err)
	}
}

func TestReopenPersists(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "opensandbox.db")
	st, err := Open(Options{Path: path})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := st.PutSnapshot(ctx, snap("a")); err != nil {
		t.Fatalf("PutSnapshot: %v", err)
	}
	if err := st.PutOverrides(ctx, "sbx1", overrides{Metadata: map[string]string{"k": "v"}}); err != nil {
		t.Fatalf("PutOverrides: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	st, err = Open(Options{Path: path})
	if err != nil {
		t.Fatalf("Open (again): %v", err)
	}
	defer st.Close()
	got, err := st.GetSnapshot(ctx, "a")
	if err != nil || !reflect.DeepEqual(got, snap("a")) {
		t.Errorf("GetSnapshot(a) after reopen = %+v, %v; want %+v, nil", got, err, snap("a"))
	}
	var o overrides
	if found, err := st.GetOverrides(ctx, "sbx1", &o); err != nil || !found || o.Metadata["k"] != "v" {
		t.Errorf("GetOverrides(sbx1) after reopen = %v, %v, %+v; want true, nil, metadata k=v", found, err, o)
	}
}

func TestSecondOpenFailsFast(t *testing.T) {
	_, path := openTemp(t)
	// bbolt takes a flock on its own file descriptor, so a second Open in
	// the same process conflicts exactly like a second process would.
	start := time.Now()
	second, err := Open(Options{Path: path})
	if err == nil {
		second.Close()
		t.Fatalf("second Open(%s) succeeded, want ErrLocked", path)
	}
	if !errors.Is(err, ErrLocked) {
		t.Errorf("second Open(%s): err = %v, want ErrLocked", path, err)
	}
	if elapsed := time.Since(start); elapsed > DefaultLockTimeout+5*time.Second {
		t.Errorf("second Open took %v, want about %v", elapsed, DefaultLockTimeout)
	}
}

func TestOpenRejectsForeignFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "opensandbox.db")
	// Not a bbolt file (the upstream server keeps SQLite here).
	data := make([]byte, 8192)
	copy(data, "SQLite format 3\x00")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := Open(Options{Path: path})
	if err == nil {
		st.Close()
		t.Fatalf("Open(sqlite file) succeeded, want an error")
	}
	t.Logf("Open(sqlite file): %v", err)
}

func TestOpenEmptyPath(t *testing.T) {
	if _, err := Open(Options{}); !errors.Is(err, runtime.ErrInvalid) {
		t.Errorf("Open(empty path): err = %v, want runtime.ErrInvalid", err)
	}
}
