package sandbox

import (
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"sync/atomic"
	"testing"
)

func TestSnapshots(t *testing.T) {
	s := newSDKServer(t)
	var gets atomic.Int32
	s.mux.HandleFunc("POST /v1/sandboxes/sb1/snapshots", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 202, Snapshot{ID: "snap1", SandboxID: "sb1", Name: "n", Status: SnapshotStatus{State: SnapshotCreating}})
	})
	s.mux.HandleFunc("GET /v1/snapshots/snap1", func(w http.ResponseWriter, r *http.Request) {
		state := SnapshotCreating
		if gets.Add(1) >= 2 {
			state = SnapshotReady
		}
		replyJSON(w, 200, Snapshot{ID: "snap1", Status: SnapshotStatus{State: state}})
	})
	s.mux.HandleFunc("GET /v1/snapshots/bad", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 200, Snapshot{ID: "bad", Status: SnapshotStatus{State: SnapshotFailed, Reason: "snapshot_capture_failed"}})
	})
	s.mux.HandleFunc("GET /v1/snapshots", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 200, ListSnapshotsResponse{Items: []Snapshot{{ID: "snap1"}}})
	})
	s.mux.HandleFunc("DELETE /v1/snapshots/snap1", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	c := s.client(t)
	ctx := testCtx(t)

	snap, err := c.CreateSnapshot(ctx, "sb1", "n")
	if err != nil || snap.ID != "snap1" {
		t.Fatalf("CreateSnapshot = %+v, %v", snap, err)
	}
	var req CreateSnapshotRequest
	decodeBody(t, s.only(t, "POST", "/v1/sandboxes/sb1/snapshots"), &req)
	if req.Name != "n" {
		t.Errorf("snapshot request name = %q, want n", req.Name)
	}
	if snap, err = c.WaitSnapshot(ctx, "snap1"); err != nil || snap.Status.State != SnapshotReady {
		t.Errorf("WaitSnapshot = %+v, %v; want Ready", snap, err)
	}
	if _, err := c.WaitSnapshot(ctx, "bad"); !errors.Is(err, ErrNotReady) {
		t.Errorf("WaitSnapshot(failed) = %v, want ErrNotReady", err)
	}
	list, err := c.ListSnapshots(ctx, SnapshotListOptions{SandboxID: "sb1", States: []string{"Ready", "Failed"}, PageSize: 5})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("ListSnapshots = %+v, %v", list, err)
	}
	q, _ := url.ParseQuery(s.only(t, "GET", "/v1/snapshots").RawQuery)
	want := url.Values{"sandboxId": {"sb1"}, "state": {"Ready", "Failed"}, "pageSize": {"5"}}
	if !reflect.DeepEqual(q, want) {
		t.Errorf("list query = %v, want %v", q, want)
	}
	if err := c.DeleteSnapshot(ctx, "snap1"); err != nil {
		t.Errorf("DeleteSnapshot: %v", err)
	}
}
