package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// subjectSandbox names a sandbox in error messages.
func subjectSandbox(id string) string { return fmt.Sprintf("sandbox %q", id) }

// view is the API form of a runtime sandbox with its overrides applied.
// Registry credentials are never part of it.
func view(rs runtime.Sandbox, o Overrides) sandbox.SandboxInfo {
	v := sandbox.SandboxInfo{
		ID:         rs.ID,
		SnapshotID: rs.SnapshotID,
		Status:     status(rs),
		Metadata:   effectiveMetadata(rs, o),
		Entrypoint: slices.Clone(rs.Entrypoint),
		ExpiresAt:  utcPtr(effectiveExpiry(rs, o)),
		CreatedAt:  rs.CreatedAt.UTC(),
	}
	if rs.Image != "" {
		v.Image = &sandbox.ImageSpec{URI: rs.Image}
	}
	if rs.Platform != nil {
		v.Platform = &sandbox.PlatformSpec{OS: rs.Platform.OS, Arch: rs.Platform.Arch}
	}
	if v.Entrypoint == nil {
		v.Entrypoint = []string{}
	}
	return v
}

func status(rs runtime.Sandbox) sandbox.SandboxStatus {
	st := sandbox.SandboxStatus{State: rs.State, Reason: rs.Reason, Message: rs.Message}
	if !rs.LastTransitionAt.IsZero() {
		st.LastTransitionAt = utcPtr(&rs.LastTransitionAt)
	}
	return st
}

// effectiveMetadata is the metadata a sandbox shows: the override when
// one was stored, else what it was created with; nil when empty.
func effectiveMetadata(rs runtime.Sandbox, o Overrides) map[string]string {
	m := rs.Metadata
	if o.Metadata != nil {
		m = o.Metadata
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// effectiveExpiry is when a sandbox expires: the renewed expiry when one
// was stored, else the one it was created with; nil for manual cleanup.
func effectiveExpiry(rs runtime.Sandbox, o Overrides) *time.Time {
	if o.ExpiresAt != nil {
		return o.ExpiresAt
	}
	return rs.ExpiresAt
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// lookup reads a sandbox and its overrides.
func (s *Server) lookup(ctx context.Context, id string) (runtime.Sandbox, Overrides, error) {
	rs, err := s.rt.Get(ctx, id)
	if err != nil {
		return rs, Overrides{}, fromRuntime(err, sandboxCodes, subjectSandbox(id))
	}
	o, err := s.store.GetOverrides(ctx, id)
	if err != nil {
		return rs, Overrides{}, fromRuntime(err, classCodes{}, "")
	}
	return rs, o, nil
}

// getSandbox answers with the sandbox. One whose expiry has passed (the
// timer may not have fired yet, for instance right after a restart) is
// deleted now and reported missing, so callers never see it outlive its
// expiry.
func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	id := sandboxID(r)
	ctx := r.Context()
	rs, o, err := s.lookup(ctx, id)
	if err == nil && s.expired(rs, o) && s.expire(ctx, id) {
		err = fromRuntime(runtime.ErrNotFound, sandboxCodes, subjectSandbox(id))
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, view(rs, o))
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	id := sandboxID(r)
	if err := s.removeSandbox(r.Context(), id, "user_delete"); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// removeSandbox deletes a sandbox and everything the server keeps about
// it: expiry deadline, overrides, cached token.
func (s *Server) removeSandbox(ctx context.Context, id, reason string) error {
	defer s.locks.lock(id)()
	return s.removeSandboxLocked(ctx, id, reason)
}

// removeSandboxLocked is removeSandbox for a caller holding id's lock.
func (s *Server) removeSandboxLocked(ctx context.Context, id, reason string) error {
	started := time.Now()
	err := s.rt.Delete(ctx, id)
	s.metrics.ObserveDelete(reason, time.Since(started), err)
	if err != nil && !errors.Is(err, runtime.ErrNotFound) {
		return fromRuntime(err, sandboxCodes, subjectSandbox(id))
	}
	// The sandbox is gone (or never was): forget it either way.
	s.expiry.cancel(id)
	s.tokens.forget(id)
	if serr := s.store.DeleteOverrides(ctx, id); serr != nil && !errors.Is(serr, runtime.ErrNotFound) {
		logFrom(ctx, s.log).Warn("deleting sandbox overrides", "sandbox", id, "err", serr)
	}
	if err != nil {
		return fromRuntime(err, sandboxCodes, subjectSandbox(id))
	}
	logFrom(ctx, s.log).Info("sandbox deleted", "sandbox", id, "reason", reason)
	return nil
}

func (s *Server) pauseSandbox(w http.ResponseWriter, r *http.Request) {
	id := sandboxID(r)
	if err := s.rt.Pause(r.Context(), id); err != nil {
		s.writeError(w, r, fromRuntime(err, runningCodes, subjectSandbox(id)))
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func (s *Server) resumeSandbox(w http.ResponseWriter, r *http.Request) {
	id := sandboxID(r)
	if err := s.rt.Resume(r.Context(), id); err != nil {
		codes := classCodes{notFound: apierror.CodeSandboxNotFound, conflict: apierror.CodeSandboxNotPaused}
		s.writeError(w, r, fromRuntime(err, codes, subjectSandbox(id)))
		return
	}
	w.WriteHeader(http.StatusAccepted)
}
