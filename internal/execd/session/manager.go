// Package session keeps persistent bash sessions for execd's /session API.
// Each session is one long-lived bash process; every run is sourced into it,
// so the working directory, shell variables and exported environment carry
// over from one run to the next, as in a terminal. A run's end is detected
// by a random marker the shell prints after the command, carrying its exit
// code, so no polling or timing is involved.
package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/execd/eventstream"
	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Options configure a Manager.
type Options struct {
	// Env builds the environment of each session's shell.
	Env procenv.Builder
	// KillGrace is the time between SIGTERM and SIGKILL when a run is
	// interrupted or times out; default 3s.
	KillGrace time.Duration
	// RawOutput sends output as it is read, newlines kept, instead of one
	// event per line (the code interpreter's bash contexts, like Jupyter
	// kernels, stream raw chunks).
	RawOutput bool
	// MaxJSONBody caps request bodies; default 1 MiB.
	MaxJSONBody int64
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// ErrNotFound is returned for an unknown session id.
var ErrNotFound = errors.New("session not found")

// Manager owns the bash sessions.
type Manager struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	sessions map[string]*Shell
	closed   bool
}

// New returns a Manager.
func New(opts Options) *Manager {
	if opts.KillGrace <= 0 {
		opts.KillGrace = 3 * time.Second
	}
	if opts.MaxJSONBody <= 0 {
		opts.MaxJSONBody = 1 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Manager{opts: opts, log: opts.Logger, sessions: map[string]*Shell{}}
}

// Create handles POST /session (the body is optional).
func (m *Manager) Create(w http.ResponseWriter, r *http.Request) {
	var req sandbox.CreateSessionRequest
	if r.ContentLength != 0 {
		if err := decodeOptional(w, r, m.opts.MaxJSONBody, &req); err != nil {
			apierror.Write(w, r, err)
			return
		}
	}
	id := newID()
	sh, err := startShell(id, req.Cwd, m.opts)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		sh.Close()
		apierror.Write(w, r, apierror.New(http.StatusServiceUnavailable, apierror.CodeServiceDraining, "execd is shutting down"))
		return
	}
	m.sessions[id] = sh
	m.mu.Unlock()
	go func() {
		// A shell that dies (exit in a run, killed from outside) takes
		// its session with it.
		<-sh.Exited()
		m.mu.Lock()
		if m.sessions[id] == sh {
			delete(m.sessions, id)
		}
		m.mu.Unlock()
		sh.Close()
	}()
	apierror.WriteJSON(w, http.StatusOK, sandbox.CreateSessionResponse{SessionID: id})
}

// decodeOptional decodes a JSON body that may also be empty.
func decodeOptional(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	err := apierror.DecodeJSON(w, r, limit, v)
	var ae *apierror.Error
	if errors.As(err, &ae) && errors.Is(ae.Cause, io.EOF) {
		return nil
	}
	return err
}

// Run handles POST /session/{sessionId}/run.
func (m *Manager) Run(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("sessionId")
	sh, ok := m.get(id)
	if !ok {
		apierror.Write(w, r, apierror.NotFound(apierror.CodeSessionNotFound, "session %q not found", id))
		return
	}
	var req sandbox.RunInSessionRequest
	if err := apierror.DecodeJSON(w, r, m.opts.MaxJSONBody, &req); err != nil {
		apierror.Write(w, r, err)
		return
	}
	if req.Command == "" {
		apierror.Write(w, r, apierror.BadRequest(apierror.CodeInvalidRequestBody, "command is required"))
		return
	}
	if req.Timeout < 0 {
		apierror.Write(w, r, apierror.BadRequest(apierror.CodeInvalidRequestBody, "timeout must be >= 0 milliseconds, got %d", req.Timeout))
		return
	}
	sw := eventstream.New(w)
	sh.Run(r.Context(), sw, req)
}

// Delete handles DELETE /session/{sessionId}.
func (m *Manager) Delete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("sessionId")
	m.mu.Lock()
	sh, ok := m.sessions[id]
	delete(m.sessions, id)
	m.mu.Unlock()
	if !ok {
		apierror.Write(w, r, apierror.NotFound(apierror.CodeSessionNotFound, "session %q not found", id))
		return
	}
	sh.Close()
	w.WriteHeader(http.StatusOK)
}

// Interrupt stops the run in progress in session id, keeping the session.
// It succeeds when nothing is running.
func (m *Manager) Interrupt(id string) error {
	sh, ok := m.get(id)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	sh.Interrupt("interrupted")
	return nil
}

// Close ends every session.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	all := make([]*Shell, 0, len(m.sessions))
	for id, sh := range m.sessions {
		all = append(all, sh)
		delete(m.sessions, id)
	}
	m.mu.Unlock()
	for _, sh := range all {
		sh.Close()
	}
	for _, sh := range all {
		select {
		case <-sh.Exited():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (m *Manager) get(id string) (*Shell, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sh, ok := m.sessions[id]
	return sh, ok
}

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return "session-" + hex.EncodeToString(b[:])
}

// Count returns how many bash sessions exist.
func (m *Manager) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}
