package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// SnapshotTimeout bounds one snapshot capture.
const SnapshotTimeout = 15 * time.Minute

// Snapshot status reasons.
const (
	reasonSnapshotAccepted = "snapshot_accepted"
	reasonSnapshotReady    = "snapshot_ready"
	reasonSnapshotFailed   = "snapshot_capture_failed"
)

// CreateSnapshot records a snapshot of sandbox sandboxID in state
// Creating and captures it in the background (owned by Run); it does not
// wait for the capture. The sandbox must be Running or Paused
// (ErrSandboxState).
func (s *Service) CreateSnapshot(ctx context.Context, sandboxID, name string) (sandbox.Snapshot, error) {
	rs, err := s.rt.Get(ctx, sandboxID)
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	if rs.State != sandbox.StateRunning && rs.State != sandbox.StatePaused {
		return sandbox.Snapshot{}, newError(ErrSandboxState, nil,
			"sandbox %q is %s; snapshots are taken of Running or Paused sandboxes", sandboxID, rs.State)
	}
	snap := sandbox.Snapshot{
		ID:        NewUUID(),
		SandboxID: sandboxID,
		Name:      name,
		CreatedAt: s.now().UTC(),
	}
	s.setSnapshotStatus(&snap, sandbox.SnapshotCreating, reasonSnapshotAccepted, "")
	// Mark it ours before it is visible, so Run's recovery leaves it alone.
	s.capturing.Store(snap.ID, true)
	if err := s.store.PutSnapshot(ctx, snap); err != nil {
		s.capturing.Delete(snap.ID)
		return sandbox.Snapshot{}, err
	}
	log := s.logFrom(ctx).With("snapshot", snap.ID, "sandbox", sandboxID)
	log.Info("snapshot accepted")
	s.workers.Go(func() {
		defer s.capturing.Delete(snap.ID)
		s.captureSnapshot(s.bg, log, snap)
	})
	return snap, nil
}

// captureSnapshot commits the sandbox's filesystem and records the outcome.
// When the service shuts down mid-capture the record stays Creating; the
// next start marks it failed.
func (s *Service) captureSnapshot(ctx context.Context, log *slog.Logger, snap sandbox.Snapshot) {
	cctx, cancel := context.WithTimeout(ctx, SnapshotTimeout)
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
		return fmt.Sprintf("the capture did not finish within %s", SnapshotTimeout)
	case errors.Is(err, runtime.ErrNotFound):
		return "the sandbox no longer exists"
	case errors.Is(err, runtime.ErrConflict), errors.Is(err, runtime.ErrInvalid), errors.Is(err, runtime.ErrNotSupported):
		return err.Error()
	}
	return "the engine could not capture the sandbox's filesystem"
}

// setSnapshotStatus moves snap to state now.
func (s *Service) setSnapshotStatus(snap *sandbox.Snapshot, state, reason, message string) {
	now := s.now().UTC()
	snap.Status = sandbox.SnapshotStatus{State: state, Reason: reason, Message: message, LastTransitionAt: &now}
}

// GetSnapshot returns the record of snapshot id (ErrSnapshotNotFound).
func (s *Service) GetSnapshot(ctx context.Context, id string) (sandbox.Snapshot, error) {
	snap, err := s.store.GetSnapshot(ctx, id)
	if errors.Is(err, runtime.ErrNotFound) {
		return snap, newError(ErrSnapshotNotFound, err, "snapshot %q not found", id)
	}
	return snap, err
}

// ListSnapshots returns every snapshot record, in no particular order.
func (s *Service) ListSnapshots(ctx context.Context) ([]sandbox.Snapshot, error) {
	return s.store.ListSnapshots(ctx)
}

// DeleteSnapshot removes a snapshot that is not being captured
// (ErrSnapshotBusy) and that no sandbox uses (ErrSnapshotInUse): first
// what the runtime stored, then the record.
func (s *Service) DeleteSnapshot(ctx context.Context, id string) error {
	snap, err := s.GetSnapshot(ctx, id)
	if err != nil {
		return err
	}
	if snap.Status.State == sandbox.SnapshotCreating {
		return newError(ErrSnapshotBusy, nil, "snapshot %q is still being created; delete it once it is Ready or Failed", id)
	}
	if err := s.rt.DeleteSnapshot(ctx, id); err != nil && !errors.Is(err, runtime.ErrNotFound) {
		if errors.Is(err, runtime.ErrConflict) {
			return newError(ErrSnapshotInUse, err, "snapshot %q is used by a sandbox; delete the sandboxes restored from it first", id)
		}
		return err
	}
	if err := s.store.DeleteSnapshot(ctx, id); err != nil && !errors.Is(err, runtime.ErrNotFound) {
		return err
	}
	s.logFrom(ctx).Info("snapshot deleted", "snapshot", id)
	return nil
}
