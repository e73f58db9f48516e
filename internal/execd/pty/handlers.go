package pty

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"

	"github.com/coder/websocket"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// maxCreateBody caps the body of POST /pty.
const maxCreateBody = 64 << 10

// maxClientFrame caps one message from a client (a large paste).
const maxClientFrame = 1 << 20

func errShuttingDown() error {
	return apierror.New(http.StatusServiceUnavailable, apierror.CodeServiceDraining, "execd is shutting down")
}

func errNoSession(id string) error {
	return apierror.NotFound(apierror.CodeSessionNotFound, "pty session %q not found", id)
}

// Create handles POST /pty. The body {cwd?, command?} is optional. The
// working directory is checked now, but the process only starts when the
// first client attaches.
func (m *Manager) Create(w http.ResponseWriter, r *http.Request) {
	if !supported {
		apierror.Write(w, r, apierror.New(http.StatusNotImplemented, apierror.CodeNotSupported, "%v", errUnsupported))
		return
	}
	var req sandbox.CreatePTYRequest
	if err := apierror.DecodeJSON(w, r, maxCreateBody, &req); err != nil && !errors.Is(err, io.EOF) {
		apierror.Write(w, r, err)
		return
	}
	env, err := m.opts.Env.Environ(nil)
	if err != nil {
		apierror.Write(w, r, apierror.Wrap(err, http.StatusInternalServerError, apierror.CodeRuntimeError, "build pty environment"))
		return
	}
	if _, err := procenv.ResolveDir(req.Cwd, env); err != nil {
		apierror.Write(w, r, apierror.BadRequest(apierror.CodeInvalidRequestBody, "invalid cwd: %v", err))
		return
	}
	s, ok := m.add(req.Cwd, req.Command)
	if !ok {
		apierror.Write(w, r, errShuttingDown())
		return
	}
	m.log.DebugContext(r.Context(), "pty session created", slog.String("session", s.id))
	apierror.WriteJSON(w, http.StatusCreated, sandbox.CreatePTYResponse{SessionID: s.id})
}

// Status handles GET /pty/{sessionId}.
func (m *Manager) Status(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("sessionId")
	s := m.lookup(id)
	if s == nil {
		apierror.Write(w, r, errNoSession(id))
		return
	}
	apierror.WriteJSON(w, http.StatusOK, s.status())
}

// Delete handles DELETE /pty/{sessionId}: it forgets the session, sends
// the attached client a SESSION_GONE error and closes it, kills the process
// tree and waits (as long as the request lasts) until the process is reaped.
func (m *Manager) Delete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("sessionId")
	s := m.remove(id)
	if s == nil {
		apierror.Write(w, r, errNoSession(id))
		return
	}
	done := s.terminate(closeRequest{websocket.StatusNormalClosure, codeSessionGone}, "session deleted")
	if done != nil {
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}
	m.log.DebugContext(r.Context(), "pty session deleted", slog.String("session", id))
	w.WriteHeader(http.StatusOK)
}

// attachQuery holds the query parameters of GET /pty/{sessionId}/ws.
type attachQuery struct {
	pipe     bool  // pty=0
	since    int64 // -1 when absent
	takeover bool  // takeover=1
}

func parseAttachQuery(q url.Values) (attachQuery, error) {
	a := attachQuery{since: -1}
	var err error
	if a.pipe, err = flag(q, "pty", true); err != nil {
		return a, err
	}
	a.pipe = !a.pipe
	if a.takeover, err = flag(q, "takeover", false); err != nil {
		return a, err
	}
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return a, apierror.BadRequest(apierror.CodeInvalidQuery, "since must be a non-negative byte offset, got %q", v)
		}
		a.since = n
	}
	return a, nil
}

// flag reads a 0/1 (or false/true) query parameter.
func flag(q url.Values, name string, def bool) (bool, error) {
	switch v := q.Get(name); v {
	case "":
		return def, nil
	case "1", "true":
		return true, nil
	case "0", "false":
		return false, nil
	default:
		return false, apierror.BadRequest(apierror.CodeInvalidQuery, "%s must be 0 or 1, got %q", name, v)
	}
}

// Attach handles GET /pty/{sessionId}/ws. Errors found before the upgrade
// are JSON replies: 400 for a bad query, 404 for an unknown session and 409
// ALREADY_CONNECTED when a client is attached and takeover=1 is absent.
// The handler returns when the socket closes.
func (m *Manager) Attach(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("sessionId")
	q, err := parseAttachQuery(r.URL.Query())
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	if !m.enter() {
		apierror.Write(w, r, errShuttingDown())
		return
	}
	defer m.wg.Done()
	s := m.lookup(id)
	if s == nil {
		apierror.Write(w, r, errNoSession(id))
		return
	}
	c := newClient(s)
	if err := s.reserve(c, q.takeover); err != nil {
		apierror.Write(w, r, err)
		return
	}
	// Origins are not checked: execd is reached through the lifecycle
	// server's proxy under hostnames it cannot know, and access control is
	// the execd access token checked before this handler.
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		s.release(c)
		m.log.DebugContext(r.Context(), "pty websocket upgrade failed", slog.String("session", id), slog.Any("err", err))
		return
	}
	conn.SetReadLimit(maxClientFrame)
	c.conn = conn
	s.activate(c, q)
	c.serve(r.Context())
}
