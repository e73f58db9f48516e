package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// putSnapshot stores a snapshot record directly.
func putSnapshot(t *testing.T, e *testEnv, id, sandboxID, state string) sandbox.Snapshot {
	t.Helper()
	snap := sandbox.Snapshot{
		ID: id, SandboxID: sandboxID,
		Status:    sandbox.SnapshotStatus{State: state},
		CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	if err := e.store.PutSnapshot(t.Context(), snap); err != nil {
		t.Fatalf("PutSnapshot: %v", err)
	}
	return snap
}

// snapshotState reads a snapshot through the API.
func snapshotState(t *testing.T, e *testEnv, id string) sandbox.Snapshot {
	t.Helper()
	r := e.do("GET", "/v1/snapshots/"+id, nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/snapshots/%s = %s", id, r)
	}
	return decode[sandbox.Snapshot](t, r)
}

func TestSnapshotLifecycle(t *testing.T) {
	e := newEnv(t)
	e.run()
	release := make(chan error)
	e.rt.commit = func(ctx context.Context, sandboxID, snapshotID string) error {
		select {
		case err := <-release:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	e.rt.add(fakeSandbox("sb1"))

	r := e.do("POST", "/v1/sandboxes/sb1/snapshots", map[string]string{"name": "before upgrade"})
	if r.status != http.StatusAccepted {
		t.Fatalf("POST snapshots = %s, want 202", r)
	}
	snap := decode[sandbox.Snapshot](t, r)
	if snap.Status.State != sandbox.SnapshotCreating || snap.Status.Reason != "snapshot_accepted" || snap.SandboxID != "sb1" || snap.Name != "before upgrade" || len(snap.ID) != 36 {
		t.Errorf("POST snapshots reply = %+v, want Creating/snapshot_accepted for sb1", snap)
	}
	// While Creating: cannot be deleted nor restored.
	wantError(t, "DELETE creating snapshot", e.do("DELETE", "/v1/snapshots/"+snap.ID, nil), 409, apierror.CodeInvalidState, "still being created")
	b := map[string]any{"snapshotId": snap.ID}
	wantError(t, "create from creating snapshot", e.do("POST", "/v1/sandboxes", b), 409, apierror.CodeInvalidState, "Ready")

	release <- nil
	waitFor(t, "snapshot Ready", 5*time.Second, func() bool {
		return snapshotState(t, e, snap.ID).Status.State == sandbox.SnapshotReady
	})
	if got := snapshotState(t, e, snap.ID).Status.Reason; got != "snapshot_ready" {
		t.Errorf("reason = %q, want snapshot_ready", got)
	}

	// Restore: entrypoint defaults to tail -f /dev/null.
	id := e.createSandbox(b)
	spec := e.rt.lastSpec()
	if spec.SnapshotID != snap.ID || spec.Image != "" || !reflect.DeepEqual(spec.Entrypoint, []string{"tail", "-f", "/dev/null"}) || spec.ID != id {
		t.Errorf("restore spec = %+v, want snapshot %s with the default entrypoint", spec, snap.ID)
	}

	// In use → 409; then gone from the runtime → record still deleted.
	e.rt.deleteSnapErr = fmt.Errorf("image is used: %w", runtime.ErrConflict)
	wantError(t, "DELETE used snapshot", e.do("DELETE", "/v1/snapshots/"+snap.ID, nil), 409, apierror.CodeInvalidState, "used by a sandbox")
	e.rt.deleteSnapErr = fmt.Errorf("no image: %w", runtime.ErrNotFound)
	if r := e.do("DELETE", "/v1/snapshots/"+snap.ID, nil); r.status != http.StatusNoContent {
		t.Errorf("DELETE snapshot whose image is gone = %s, want 204", r)
	}
	wantError(t, "GET deleted snapshot", e.do("GET", "/v1/snapshots/"+snap.ID, nil), 404, apierror.CodeSnapshotNotFound)
	wantError(t, "DELETE deleted snapshot", e.do("DELETE", "/v1/snapshots/"+snap.ID, nil), 404, apierror.CodeSnapshotNotFound)
	wantError(t, "create from deleted snapshot", e.do("POST", "/v1/sandboxes", b), 404, apierror.CodeSnapshotNotFound)
}

func TestSnapshotFailure(t *testing.T) {
	e := newEnv(t)
	e.run()
	e.rt.commit = func(ctx context.Context, sandboxID, snapshotID string) error {
		return fmt.Errorf("docker: commit: %w", runtime.ErrConflict)
	}
	e.rt.add(fakeSandbox("sb1"))
	snap := decode[sandbox.Snapshot](t, e.do("POST", "/v1/sandboxes/sb1/snapshots", nil))
	waitFor(t, "snapshot Failed", 5*time.Second, func() bool {
		return snapshotState(t, e, snap.ID).Status.State == sandbox.SnapshotFailed
	})
	got := snapshotState(t, e, snap.ID).Status
	if got.Reason != "snapshot_capture_failed" || got.Message == "" || got.LastTransitionAt == nil {
		t.Errorf("failed status = %+v, want reason snapshot_capture_failed with a message", got)
	}
	if r := e.do("DELETE", "/v1/snapshots/"+snap.ID, nil); r.status != http.StatusNoContent {
		t.Errorf("DELETE failed snapshot = %s, want 204", r)
	}
}

func TestSnapshotPreconditions(t *testing.T) {
	e := newEnv(t)
	e.run()
	stopped := fakeSandbox("stopped")
	stopped.State = sandbox.StateTerminated
	e.rt.add(stopped)
	paused := fakeSandbox("paused")
	paused.State = sandbox.StatePaused
	e.rt.add(paused)
	wantError(t, "snapshot of missing", e.do("POST", "/v1/sandboxes/nope/snapshots", nil), 404, apierror.CodeSandboxNotFound)
	wantError(t, "snapshot of terminated", e.do("POST", "/v1/sandboxes/stopped/snapshots", nil), 409, apierror.CodeInvalidState, "Terminated")
	wantError(t, "snapshot bad body", e.do("POST", "/v1/sandboxes/paused/snapshots", "{"), 400, apierror.CodeInvalidRequest)
	if r := e.do("POST", "/v1/sandboxes/paused/snapshots", "{}"); r.status != http.StatusAccepted {
		t.Errorf("snapshot of paused = %s, want 202", r)
	}
}

func TestListSnapshots(t *testing.T) {
	e := newEnv(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	states := []string{"Ready", "Failed", "Ready", "Creating", "Ready"}
	for i, st := range states {
		snap := sandbox.Snapshot{
			ID: fmt.Sprintf("s%d", i), SandboxID: []string{"a", "b"}[i%2],
			Status: sandbox.SnapshotStatus{State: st}, CreatedAt: base.Add(time.Duration(i) * time.Hour),
		}
		e.store.PutSnapshot(t.Context(), snap)
	}
	tests := []struct {
		query string
		want  []string
		total int
	}{
		{"", []string{"s4", "s3", "s2", "s1", "s0"}, 5},
		{"?sandboxId=a", []string{"s4", "s2", "s0"}, 3},
		{"?state=ready", []string{"s4", "s2", "s0"}, 3},
		{"?state=Failed&state=Creating", []string{"s3", "s1"}, 2},
		{"?sandboxId=b&state=Ready", nil, 0},
		{"?pageSize=2&page=2", []string{"s2", "s1"}, 5},
	}
	for _, tc := range tests {
		r := e.do("GET", "/v1/snapshots"+tc.query, nil)
		list := decode[sandbox.ListSnapshotsResponse](t, r)
		var got []string
		for _, s := range list.Items {
			got = append(got, s.ID)
		}
		if !reflect.DeepEqual(got, tc.want) || list.Pagination.TotalItems != tc.total || list.Items == nil {
			t.Errorf("GET /v1/snapshots%s = %v (total %d), want %v (total %d)", tc.query, got, list.Pagination.TotalItems, tc.want, tc.total)
		}
	}
}

func TestRunRecoversSnapshots(t *testing.T) {
	e := newEnv(t)
	putSnapshot(t, e, "left", "sb1", sandbox.SnapshotCreating)
	putSnapshot(t, e, "done", "sb1", sandbox.SnapshotReady)
	e.run()
	waitFor(t, "recovery of snapshot left", 5*time.Second, func() bool {
		s, err := e.store.GetSnapshot(t.Context(), "left")
		return err == nil && s.Status.State == sandbox.SnapshotFailed
	})
	left, _ := e.store.GetSnapshot(t.Context(), "left")
	done, _ := e.store.GetSnapshot(t.Context(), "done")
	if left.Status.Reason != "server_restarted" || done.Status.State != sandbox.SnapshotReady {
		t.Errorf("after recovery: left %+v, done %+v; want Failed/server_restarted and Ready", left.Status, done.Status)
	}
}

func TestRunWaitsForSnapshotWorkers(t *testing.T) {
	e := newEnv(t)
	started := make(chan struct{})
	stopped := make(chan struct{})
	e.rt.commit = func(ctx context.Context, sandboxID, snapshotID string) error {
		close(started)
		<-ctx.Done()
		close(stopped)
		return ctx.Err()
	}
	e.rt.add(fakeSandbox("sb1"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.srv.Run(ctx) }()
	snap := decode[sandbox.Snapshot](t, e.do("POST", "/v1/sandboxes/sb1/snapshots", nil))
	<-started
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	select {
	case <-stopped:
	default:
		t.Errorf("Run returned before its snapshot worker ended")
	}
	// Interrupted by shutdown: left Creating for the next start to recover.
	got, err := e.store.GetSnapshot(t.Context(), snap.ID)
	if err != nil || got.Status.State != sandbox.SnapshotCreating {
		t.Errorf("snapshot after shutdown = %+v, %v; want still Creating", got.Status, err)
	}
	if err := e.srv.Run(context.Background()); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("second Run = %v, want an error", err)
	}
}
