package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req sandbox.CreateSandboxRequest
	if err := decodeJSON(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	spec, timeout, err := s.checkCreate(&req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	if spec.SnapshotID != "" {
		snap, err := s.store.GetSnapshot(ctx, spec.SnapshotID)
		if err != nil {
			s.writeError(w, r, fromRuntime(err, snapshotCodes, subjectSnapshot(spec.SnapshotID)))
			return
		}
		if snap.Status.State != sandbox.SnapshotReady {
			s.writeError(w, r, apierror.New(http.StatusConflict, apierror.CodeInvalidState,
				"snapshot %q is %s; only Ready snapshots can be restored", snap.ID, snap.Status.State))
			return
		}
	}
	spec.ID = newUUID()
	spec.ExecdToken = newToken()
	if spec.Egress != nil {
		spec.Egress.Token = newToken()
	}
	if timeout > 0 {
		at := s.now().Add(timeout).UTC()
		spec.ExpiresAt = &at
	}
	log := s.reqLog(r).With("sandbox", spec.ID)
	log.Info("creating sandbox", "image", spec.Image, "snapshot", spec.SnapshotID, "expires_at", spec.ExpiresAt)
	started := time.Now()
	rs, err := s.rt.Create(ctx, spec)
	s.metrics.ObserveCreate(time.Since(started), err)
	if err != nil {
		s.writeError(w, r, createError(err, spec))
		return
	}
	if spec.ExpiresAt != nil {
		s.expiry.set(rs.ID, *spec.ExpiresAt)
	}
	log.Info("sandbox created", "state", rs.State)
	v := view(rs, Overrides{})
	apierror.WriteJSON(w, http.StatusAccepted, sandbox.CreateSandboxResponse{
		ID:         v.ID,
		Status:     v.Status,
		Metadata:   v.Metadata,
		Platform:   v.Platform,
		ExpiresAt:  v.ExpiresAt,
		CreatedAt:  v.CreatedAt,
		Entrypoint: v.Entrypoint,
	})
}

// createError maps a failed Runtime.Create. The engine's message is kept:
// it is what tells the caller why the image or the sandbox failed.
func createError(err error, spec runtime.Spec) *apierror.Error {
	switch {
	case errors.Is(err, runtime.ErrImagePull):
		return apierror.Wrap(err, http.StatusBadRequest, apierror.CodeImagePullFailed, "%v", err)
	case errors.Is(err, runtime.ErrNotFound) && spec.SnapshotID != "" && !hasClaims(spec):
		return apierror.Wrap(err, http.StatusNotFound, apierror.CodeSnapshotNotFound,
			"the image of snapshot %q is gone: %v", spec.SnapshotID, err)
	case errors.Is(err, runtime.ErrNotFound):
		return apierror.Wrap(err, http.StatusBadRequest, apierror.CodeVolumeNotFound, "%v", err)
	}
	return fromRuntime(err, classCodes{other: apierror.CodeSandboxStartFailed, showOther: true}, "")
}

func hasClaims(spec runtime.Spec) bool {
	for _, v := range spec.Volumes {
		if v.ClaimName != "" || v.SubPath != "" {
			return true
		}
	}
	return false
}

// newToken is a fresh execd access token: 32 random bytes in hex.
func newToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}
