package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// subjectSandbox names a sandbox in error messages.
func subjectSandbox(id string) string { return fmt.Sprintf("sandbox %q", id) }

// view is the API form of a sandbox whose overrides the lifecycle
// applied. Registry credentials are never part of it.
func view(rs runtime.Sandbox) sandbox.SandboxInfo {
	v := sandbox.SandboxInfo{
		ID:         rs.ID,
		SnapshotID: rs.SnapshotID,
		Status:     status(rs),
		Entrypoint: slices.Clone(rs.Entrypoint),
		ExpiresAt:  utcPtr(rs.ExpiresAt),
		CreatedAt:  rs.CreatedAt.UTC(),
	}
	if len(rs.Metadata) > 0 {
		v.Metadata = rs.Metadata
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

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// lookup reads a sandbox with its overrides applied, taking no action
// on an overdue one.
func (s *Server) lookup(ctx context.Context, id string) (runtime.Sandbox, error) {
	rs, err := s.lc.Lookup(ctx, id)
	if err != nil {
		return rs, fromRuntime(err, sandboxCodes, subjectSandbox(id))
	}
	return rs, nil
}

// getSandbox answers with the sandbox; one whose expiry has passed is
// deleted now and reported missing (see lifecycle.Service.Get).
func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	id := sandboxID(r)
	rs, err := s.lc.Get(r.Context(), id)
	if err != nil {
		s.writeError(w, r, fromRuntime(err, sandboxCodes, subjectSandbox(id)))
		return
	}
	apierror.WriteJSON(w, http.StatusOK, view(rs))
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	id := sandboxID(r)
	if err := s.lc.Delete(r.Context(), id, "user_delete"); err != nil {
		s.writeError(w, r, fromRuntime(err, sandboxCodes, subjectSandbox(id)))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// execdToken returns the execd token of sandbox id (cached by the
// lifecycle).
func (s *Server) execdToken(ctx context.Context, id string) (string, error) {
	t, err := s.lc.ExecdToken(ctx, id)
	if err != nil {
		return "", fromRuntime(err, sandboxCodes, subjectSandbox(id))
	}
	return t, nil
}

func (s *Server) pauseSandbox(w http.ResponseWriter, r *http.Request) {
	id := sandboxID(r)
	if err := s.lc.Pause(r.Context(), id); err != nil {
		s.writeError(w, r, fromRuntime(err, runningCodes, subjectSandbox(id)))
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func (s *Server) resumeSandbox(w http.ResponseWriter, r *http.Request) {
	id := sandboxID(r)
	if err := s.lc.Resume(r.Context(), id); err != nil {
		codes := classCodes{notFound: apierror.CodeSandboxNotFound, conflict: apierror.CodeSandboxNotPaused}
		s.writeError(w, r, fromRuntime(err, codes, subjectSandbox(id)))
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// requestLogger is the logger of a request's context, or nil outside
// requests: the lifecycle logs with it so its lines carry the request id.
func requestLogger(ctx context.Context) *slog.Logger {
	l, _ := ctx.Value(loggerKey{}).(*slog.Logger)
	return l
}
