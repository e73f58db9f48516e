package sandbox

import (
	"net/http"
	"testing"
	"time"
)

func TestSessions(t *testing.T) {
	s := newSDKServer(t)
	s.mux.HandleFunc("POST /execd/session", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 200, CreateSessionResponse{SessionID: "session-1"})
	})
	s.mux.HandleFunc("POST /execd/session/session-1/run", func(w http.ResponseWriter, r *http.Request) {
		stream(w, StreamEvent{Type: EventInit, Text: "session-1"}, StreamEvent{Type: EventStdout, Text: "/tmp"},
			StreamEvent{Type: EventExecutionComplete, ExecutionTime: 3})
	})
	s.mux.HandleFunc("DELETE /execd/session/session-1", func(w http.ResponseWriter, r *http.Request) {})
	sb := s.connect(t)
	ctx := testCtx(t)
	id, err := sb.CreateSession(ctx, "/tmp")
	if err != nil || id != "session-1" {
		t.Fatalf("CreateSession = %q, %v", id, err)
	}
	var creq CreateSessionRequest
	decodeBody(t, s.only(t, "POST", "/execd/session"), &creq)
	if creq.Cwd != "/tmp" {
		t.Errorf("session request cwd = %q, want /tmp", creq.Cwd)
	}
	var lines []string
	ex, err := sb.RunInSession(ctx, id, "pwd", SessionRunOptions{Cwd: "/tmp", Timeout: 2 * time.Second,
		Handlers: &Handlers{OnStdout: func(l OutputLine) { lines = append(lines, l.Text) }}})
	if err != nil || ex.ID != "session-1" || ex.Text() != "/tmp" || len(lines) != 1 {
		t.Fatalf("RunInSession = %+v, %v (handler saw %q)", ex, err, lines)
	}
	var rreq RunInSessionRequest
	decodeBody(t, s.only(t, "POST", "/execd/session/session-1/run"), &rreq)
	if rreq != (RunInSessionRequest{Command: "pwd", Cwd: "/tmp", Timeout: 2000}) {
		t.Errorf("run request = %+v", rreq)
	}
	if err := sb.DeleteSession(ctx, id); err != nil {
		t.Errorf("DeleteSession: %v", err)
	}
}
