package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
	"unicode"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// snapshotTimeout bounds one snapshot capture.
const snapshotTimeout = 15 * time.Minute

// maxSnapshotName bounds the optional snapshot name.
const maxSnapshotName = 253

// Snapshot status reasons.
const (
	reasonSnapshotAccepted = "snapshot_accepted"
	reasonSnapshotReady    = "snapshot_ready"
	reasonSnapshotFailed   = "snapshot_capture_failed"
)

// subjectSnapshot names a snapshot in error messages.
func subjectSnapshot(id string) string { return fmt.Sprintf("snapshot %q", id) }

// createSnapshot records a snapshot in state Creating and captures it in
// the background; the reply does not wait for the capture.
func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) {
	var req sandbox.CreateSnapshotRequest
	if err := decodeJSON(w, r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(req.Name) > maxSnapshotName {
		s.writeError(w, r, badRequest("name is longer than %d characters", maxSnapshotName))
		return
	}
	for _, c := range req.Name {
		if unicode.IsControl(c) {
			s.writeError(w, r, badRequest("name must not contain control characters"))
			return
		}
	}
	id := sandboxID(r)
	ctx := r.Context()
	rs, err := s.rt.Get(ctx, id)
	if err != nil {
		s.writeError(w, r, fromRuntime(err, sandboxCodes, subjectSandbox(id)))
		return
	}
	if rs.State != sandbox.StateRunning && rs.State != sandbox.StatePaused {
		s.writeError(w, r, apierror.New(http.StatusConflict, apierror.CodeInvalidState,
			"sandbox %q is %s; snapshots are taken of Running or Paused sandboxes", id, rs.State))
		return
	}
	now := s.now().UTC()
	snap := sandbox.Snapshot{
		ID:        newUUID(),
		SandboxID: id,
		Name:      req.Name,
		CreatedAt: now,
	}
	s.setSnapshotStatus(&snap, sandbox.SnapshotCreating, reasonSnapshotAccepted, "")
	// Mark it ours before it is visible, so Run's recovery leaves it alone.
	s.capturing.Store(snap.ID, true)
	if err := s.store.PutSnapshot(ctx, snap); err != nil {
		s.capturing.Delete(snap.ID)
		s.writeError(w, r, fromRuntime(err, classCodes{}, ""))
		return
	}
	log := s.reqLog(r).With("snapshot", snap.ID, "sandbox", id)
	log.Info("snapshot accepted")
	s.workers.Go(func() {
		defer s.capturing.Delete(snap.ID)
		s.captureSnapshot(logCtx(s.bg, log), snap)
	})
	apierror.WriteJSON(w, http.StatusAccepted, snap)
}

// logCtx returns ctx carrying logger log.
func logCtx(ctx context.Context, log *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, log)
}

// captureSnapshot commits the sandbox's filesystem and records the outcome.
// When the server shuts down mid-capture the record stays Creating; the
// next start marks it failed.
func (s *Server) captureSnapshot(ctx context.Context, snap sandbox.Snapshot) {
	log := logFrom(ctx, s.log)
	cctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	err := s.rt.CommitSnapshot(cctx, snap.SandboxID, snap.ID)
	cancel()
	if err != nil && ctx.Err() != nil {
		log.Info("snapshot capture interrupted by shutdown", "err", err)
		return
	}
	if err != nil {
		log.Warn("snapshot capture failed", "err", err)
		s.setSnapshotStatus(&snap, sandbox.SnapshotFailed, reasonSnapshotFailed, captureMessage(err))
		if derr := s.rt.DeleteSnapshot(ctx, snap.ID); derr != nil && !errors.Is(derr, runtime.ErrNotFound) {
			log.Warn("removing what a failed snapshot left", "err", derr)
		}
	} else {
		log.Info("snapshot ready")
		s.setSnapshotStatus(&snap, sandbox.SnapshotReady, reasonSnapshotReady, "")
	}
	if err := s.store.PutSnapshot(ctx, snap); err != nil {
		log.Error("recording snapshot outcome", "state", snap.Status.State, "err", err)
	}
}

// captureMessage is what a failed snapshot tells its owner.
func captureMessage(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("the capture did not finish within %s", snapshotTimeout)
	case errors.Is(err, runtime.ErrNotFound):
		return "the sandbox no longer exists"
	case errors.Is(err, runtime.ErrConflict), errors.Is(err, runtime.ErrInvalid), errors.Is(err, runtime.ErrNotSupported):
		return err.Error()
	}
	return "the engine could not capture the sandbox's filesystem"
}

// setSnapshotStatus moves snap to state now.
func (s *Server) setSnapshotStatus(snap *sandbox.Snapshot, state, reason, message string) {
	now := s.now().UTC()
	snap.Status = sandbox.SnapshotStatus{State: state, Reason: reason, Message: message, LastTransitionAt: &now}
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("snapshotId")
	snap, err := s.store.GetSnapshot(r.Context(), id)
	if err != nil {
		s.writeError(w, r, fromRuntime(err, snapshotCodes, subjectSnapshot(id)))
		return
	}
	apierror.WriteJSON(w, http.StatusOK, snap)
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := parsePage(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	states := parseStates(q)
	sandboxFilter, _ := single(q, "sandboxId")
	all, err := s.store.ListSnapshots(r.Context())
	if err != nil {
		s.writeError(w, r, fromRuntime(err, classCodes{}, ""))
		return
	}
	items := make([]sandbox.Snapshot, 0, len(all))
	for _, snap := range all {
		if sandboxFilter != "" && snap.SandboxID != sandboxFilter {
			continue
		}
		if !states.match(snap.Status.State) {
			continue
		}
		items = append(items, snap)
	}
	sortNewestFirst(items, func(v sandbox.Snapshot) (string, int64) { return v.ID, v.CreatedAt.UnixNano() })
	pageItems, info := paginate(items, page)
	apierror.WriteJSON(w, http.StatusOK, sandbox.ListSnapshotsResponse{Items: pageItems, Pagination: info})
}

// deleteSnapshot removes a snapshot that is not being captured: first what
// the runtime stored, then the record.
func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("snapshotId")
	ctx := r.Context()
	snap, err := s.store.GetSnapshot(ctx, id)
	if err != nil {
		s.writeError(w, r, fromRuntime(err, snapshotCodes, subjectSnapshot(id)))
		return
	}
	if snap.Status.State == sandbox.SnapshotCreating {
		s.writeError(w, r, apierror.New(http.StatusConflict, apierror.CodeInvalidState,
			"snapshot %q is still being created; delete it once it is Ready or Failed", id))
		return
	}
	if err := s.rt.DeleteSnapshot(ctx, id); err != nil && !errors.Is(err, runtime.ErrNotFound) {
		if errors.Is(err, runtime.ErrConflict) {
			s.writeError(w, r, apierror.Wrap(err, http.StatusConflict, apierror.CodeInvalidState,
				"snapshot %q is used by a sandbox; delete the sandboxes restored from it first", id))
			return
		}
		s.writeError(w, r, fromRuntime(err, snapshotCodes, subjectSnapshot(id)))
		return
	}
	if err := s.store.DeleteSnapshot(ctx, id); err != nil && !errors.Is(err, runtime.ErrNotFound) {
		s.writeError(w, r, fromRuntime(err, classCodes{}, ""))
		return
	}
	s.reqLog(r).Info("snapshot deleted", "snapshot", id)
	w.WriteHeader(http.StatusNoContent)
}
