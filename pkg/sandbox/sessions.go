package sandbox

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// CreateSession starts a persistent bash session in cwd (execd's working
// directory when empty) and returns its id. Directory changes, variables
// and functions persist from one RunInSession to the next.
func (s *Sandbox) CreateSession(ctx context.Context, cwd string) (string, error) {
	cl := s.execdCall(http.MethodPost, "/session")
	cl.body = CreateSessionRequest{Cwd: cwd}
	var out CreateSessionResponse
	_, err := s.c.do(ctx, cl, &out)
	return out.SessionID, wrap(err, "create session")
}

// SessionRunOptions configure RunInSession. Zero fields leave the session's
// directory alone and set no timeout.
type SessionRunOptions struct {
	// Cwd changes the session's directory before the run (and it stays).
	Cwd string
	// Timeout kills the run (not the session) when it passes; 0 means none.
	Timeout time.Duration
	// Handlers receive events as they arrive.
	Handlers *Handlers
}

// RunInSession runs command in the session, queued after any run in
// progress, and streams its events like Run. The Execution's ID is the
// session id.
func (s *Sandbox) RunInSession(ctx context.Context, sessionID, command string, opts SessionRunOptions) (*Execution, error) {
	cl := s.execdCall(http.MethodPost, "/session/"+url.PathEscape(sessionID)+"/run")
	cl.body = RunInSessionRequest{Command: command, Cwd: opts.Cwd, Timeout: opts.Timeout.Milliseconds()}
	ex, err := s.runStream(ctx, cl, opts.Handlers, false)
	return ex, wrap(err, "run in session %s", sessionID)
}

// DeleteSession ends the session's shell and everything it started.
func (s *Sandbox) DeleteSession(ctx context.Context, sessionID string) error {
	_, err := s.c.do(ctx, s.execdCall(http.MethodDelete, "/session/"+url.PathEscape(sessionID)), nil)
	return wrap(err, "delete session %s", sessionID)
}
