package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"
)

// TestRunStream checks the decoding of execution streams into an
// Execution and the order of handler calls.
func TestRunStream(t *testing.T) {
	s := newSDKServer(t)
	s.mux.HandleFunc("POST /execd/command", func(w http.ResponseWriter, r *http.Request) {
		var req RunCommandRequest
		decodeRequest(r, &req)
		events := []StreamEvent{{Type: EventInit, Text: "cmd-" + req.Command, Timestamp: 1}}
		switch req.Command {
		case "ok":
			events = append(events,
				StreamEvent{Type: EventStdout, Text: "one", Timestamp: 2},
				StreamEvent{Type: EventPing, Text: "pong", Timestamp: 3},
				StreamEvent{Type: EventStderr, Text: "warn", Timestamp: 4},
				StreamEvent{Type: "mystery", Text: "ignored", Timestamp: 5},
				StreamEvent{Type: EventStdout, Text: "\n", Timestamp: 6},
				StreamEvent{Type: EventStdout, Text: "three", Timestamp: 7},
				StreamEvent{Type: EventExecutionComplete, ExecutionTime: 12, Timestamp: 8})
		case "exit2":
			events = append(events, StreamEvent{Type: EventError, Timestamp: 2, Error: &StreamError{Name: ErrNameCommandExec, Value: "2", Traceback: []string{"exit status 2"}}})
		case "nostart":
			events = append(events, StreamEvent{Type: EventError, Timestamp: 2, Error: &StreamError{Name: ErrNameCommandExec, Value: "chdir /nope: no such file"}})
		case "truncated":
		}
		stream(w, events...)
	})
	sb := s.connect(t)
	ctx := testCtx(t)

	var calls []string
	h := &Handlers{
		OnInit:     func(id string) { calls = append(calls, "init:"+id) },
		OnStdout:   func(l OutputLine) { calls = append(calls, "out:"+l.Text) },
		OnStderr:   func(l OutputLine) { calls = append(calls, "err:"+l.Text) },
		OnComplete: func(d time.Duration) { calls = append(calls, "done:"+d.String()) },
		OnError:    func(e StreamError) { calls = append(calls, "error:"+e.Value) },
	}
	ex, err := sb.Run(ctx, "ok", RunOptions{Handlers: h, Cwd: "/tmp", Env: map[string]string{"A": "1"}, Timeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatalf("Run(ok): %v", err)
	}
	wantCalls := []string{"init:cmd-ok", "out:one", "err:warn", "out:", "out:three", "done:12ms"}
	if !reflect.DeepEqual(calls, wantCalls) {
		t.Errorf("handler calls = %q, want %q", calls, wantCalls)
	}
	if ex.ID != "cmd-ok" || ex.ExitCode != 0 || ex.Error != nil || ex.Elapsed != 12*time.Millisecond || ex.Text() != "one\n\nthree" {
		t.Errorf("Run(ok) = %+v (text %q)", ex, ex.Text())
	}
	if len(ex.Stderr) != 1 || ex.Stderr[0].Text != "warn" || !ex.Stderr[0].Timestamp.Equal(time.UnixMilli(4)) {
		t.Errorf("Stderr = %+v, want warn at 4ms", ex.Stderr)
	}
	var req RunCommandRequest
	decodeBody(t, s.requests("POST", "/execd/command")[0], &req)
	if want := (RunCommandRequest{Command: "ok", Cwd: "/tmp", Timeout: 1500, Envs: map[string]string{"A": "1"}}); !reflect.DeepEqual(req, want) {
		t.Errorf("command request = %+v, want %+v", req, want)
	}

	ex, err = sb.Run(ctx, "ok", RunOptions{DiscardOutput: true})
	if err != nil || ex.Stdout != nil || ex.Stderr != nil {
		t.Errorf("Run(DiscardOutput) = %+v, %v; want no accumulated output", ex, err)
	}

	calls = nil
	for cmd, want := range map[string]int{"exit2": 2, "nostart": -1} {
		ex, err := sb.Run(ctx, cmd, RunOptions{Handlers: h})
		if err != nil || ex.ExitCode != want || ex.Error == nil {
			t.Errorf("Run(%s) = %+v, %v; want exit %d with Error", cmd, ex, err, want)
		}
	}
	if _, err := sb.Run(ctx, "truncated", RunOptions{}); err == nil {
		t.Error("Run on a stream without an end = nil error")
	}
}

func TestRunRejected(t *testing.T) {
	s := newSDKServer(t)
	s.mux.HandleFunc("POST /execd/command", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 400, ErrorResponse{Code: "INVALID_REQUEST_BODY", Message: "gid without uid"})
	})
	sb := s.connect(t)
	_, err := sb.Run(testCtx(t), "x", RunOptions{GID: ptrTo[uint32](1)})
	var ae *APIError
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Code != "INVALID_REQUEST_BODY" {
		t.Errorf("Run rejected = %v, want a 400 APIError", err)
	}
}

// TestRunCancel checks that cancelling the context closes the stream: the
// server sees its request end, and Run returns the context's error.
func TestRunCancel(t *testing.T) {
	s := newSDKServer(t)
	gone := make(chan struct{})
	s.mux.HandleFunc("POST /execd/command", func(w http.ResponseWriter, r *http.Request) {
		stream(w, StreamEvent{Type: EventInit, Text: "long"}, StreamEvent{Type: EventStdout, Text: "started"})
		<-r.Context().Done()
		close(gone)
	})
	sb := s.connect(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	ex, err := sb.Run(ctx, "sleep 100", RunOptions{Handlers: &Handlers{OnStdout: func(OutputLine) { cancel() }}})
	if err != context.Canceled {
		t.Errorf("Run cancelled = %v, want context.Canceled", err)
	}
	if ex == nil || ex.ID != "long" {
		t.Errorf("Run cancelled returned %+v, want the partial execution", ex)
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the server never saw the stream close")
	}
}

func TestCommandStatusLogsInterrupt(t *testing.T) {
	s := newSDKServer(t)
	s.mux.HandleFunc("GET /execd/command/status/c1", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 200, CommandStatus{ID: "c1", Running: true})
	})
	s.mux.HandleFunc("GET /execd/command/c1/logs", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(CommandLogsCursorHeader, "17")
		fmt.Fprintf(w, "from %s", r.URL.Query().Get("cursor"))
	})
	s.mux.HandleFunc("DELETE /execd/command", func(w http.ResponseWriter, r *http.Request) {})
	sb := s.connect(t)
	ctx := testCtx(t)
	st, err := sb.CommandStatus(ctx, "c1")
	if err != nil || !st.Running {
		t.Errorf("CommandStatus = %+v, %v", st, err)
	}
	text, next, err := sb.CommandLogs(ctx, "c1", 5)
	if err != nil || text != "from 5" || next != 17 {
		t.Errorf("CommandLogs = %q, %d, %v; want \"from 5\", 17", text, next, err)
	}
	if err := sb.Interrupt(ctx, "c1"); err != nil {
		t.Errorf("Interrupt: %v", err)
	}
	if q := s.only(t, "DELETE", "/execd/command").RawQuery; q != "id=c1" {
		t.Errorf("interrupt query = %q, want id=c1", q)
	}
	if _, err := sb.CommandStatus(ctx, "nope"); !IsNotFound(err) {
		t.Errorf("CommandStatus(unknown) = %v, want IsNotFound", err)
	}
}
