package server

import (
	"errors"
	"net/http"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/lifecycle"
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
	// Where the time of the create went, for the caller (the create
	// benchmark prints it): the driver's steps and its engine requests.
	ctx, phases := runtime.WithPhases(r.Context())
	end := phases.Start("runtime")
	rs, err := s.lc.Create(ctx, spec, timeout)
	end()
	w.Header().Set("Server-Timing", phases.ServerTiming())
	if err != nil {
		s.writeError(w, r, createError(err, spec))
		return
	}
	// The caller learns the id from this answer: only once it is written
	// (and flushed) may the create's journal entry go.
	defer func() {
		if err := http.NewResponseController(w).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			s.reqLog(r).Debug("flushing the create response", "err", err)
		}
		s.lc.CreateAnswered(r.Context(), rs.ID)
	}()
	v := view(rs)
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
	var le *lifecycle.Error
	switch {
	case errors.As(err, &le):
		return fromRuntime(err, classCodes{}, "")
	case errors.Is(err, runtime.ErrImagePull):
		return apierror.Wrap(err, http.StatusBadRequest, apierror.CodeImagePullFailed, "%v", err)
	case errors.Is(err, runtime.ErrDiskLimitUnsupported):
		return apierror.Wrap(err, http.StatusBadRequest, apierror.CodeDiskLimitUnsupported,
			"%v (see docs/server.md#disk-limits)", err)
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
