package sandbox

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// CreateSnapshot starts saving the filesystem of sandbox sandboxID as a
// snapshot (name may be empty) and returns it in state Creating; see
// WaitSnapshot.
func (c *Client) CreateSnapshot(ctx context.Context, sandboxID, name string) (Snapshot, error) {
	cl := c.lifecycle(http.MethodPost, "/sandboxes/"+url.PathEscape(sandboxID)+"/snapshots")
	cl.body = CreateSnapshotRequest{Name: name}
	var snap Snapshot
	_, err := c.do(ctx, cl, &snap)
	return snap, wrap(err, "snapshot sandbox %s", sandboxID)
}

// WaitSnapshot polls snapshot id (backoff 200ms to 2s) until it is Ready
// and returns it. A Failed (or Deleting) snapshot gives an error wrapping
// ErrNotReady with its reason; ctx bounds the wait.
func (c *Client) WaitSnapshot(ctx context.Context, id string) (Snapshot, error) {
	backoff := 200 * time.Millisecond
	for {
		snap, err := c.GetSnapshot(ctx, id)
		if err != nil {
			return snap, err
		}
		switch snap.Status.State {
		case SnapshotReady:
			return snap, nil
		case SnapshotFailed, SnapshotDeleting:
			return snap, fmt.Errorf("%w: snapshot %s is %s (%s: %s)", ErrNotReady, id, snap.Status.State, snap.Status.Reason, snap.Status.Message)
		}
		if err := sleepCtx(ctx, backoff); err != nil {
			return snap, err
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// GetSnapshot returns snapshot id.
func (c *Client) GetSnapshot(ctx context.Context, id string) (Snapshot, error) {
	var snap Snapshot
	_, err := c.do(ctx, c.lifecycle(http.MethodGet, "/snapshots/"+url.PathEscape(id)), &snap)
	return snap, wrap(err, "get snapshot %s", id)
}

// SnapshotListOptions filter and page ListSnapshots. Zero fields do not
// filter; Page and PageSize default to the server's 1 and 20.
type SnapshotListOptions struct {
	SandboxID string
	States    []string
	Page      int
	PageSize  int
}

// ListSnapshots returns one page of snapshots, newest first.
func (c *Client) ListSnapshots(ctx context.Context, opts SnapshotListOptions) (ListSnapshotsResponse, error) {
	cl := c.lifecycle(http.MethodGet, "/snapshots")
	q := url.Values{}
	if opts.SandboxID != "" {
		q.Set("sandboxId", opts.SandboxID)
	}
	for _, s := range opts.States {
		q.Add("state", s)
	}
	setPage(q, opts.Page, opts.PageSize)
	cl.query = q
	var out ListSnapshotsResponse
	_, err := c.do(ctx, cl, &out)
	return out, wrap(err, "list snapshots")
}

// DeleteSnapshot removes snapshot id. One still Creating, or used by a
// sandbox, cannot be deleted (IsConflict).
func (c *Client) DeleteSnapshot(ctx context.Context, id string) error {
	_, err := c.do(ctx, c.lifecycle(http.MethodDelete, "/snapshots/"+url.PathEscape(id)), nil)
	return wrap(err, "delete snapshot %s", id)
}
