package sandbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"
)

var pngHeader = []byte("\x89PNG\r\n\x1a\n")

// TestCreateCodeInterpreterDefaults checks the image, entrypoint and
// timeout CreateCodeInterpreter fills in, and that given ones are kept.
func TestCreateCodeInterpreterDefaults(t *testing.T) {
	s := newSDKServer(t)
	s.serveSandbox()
	s.mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 202, CreateSandboxResponse{ID: "sb1", Status: SandboxStatus{State: StateRunning}})
	})
	c := s.client(t)
	ci, err := c.CreateCodeInterpreter(testCtx(t), CreateOptions{})
	if err != nil {
		t.Fatalf("CreateCodeInterpreter: %v", err)
	}
	if ci.ID() != "sb1" || ci.Sandbox == nil {
		t.Errorf("CreateCodeInterpreter = %+v, want a handle on sb1", ci)
	}
	var req CreateSandboxRequest
	decodeBody(t, s.requests("POST", "/v1/sandboxes")[0], &req)
	if req.Image == nil || req.Image.URI != DefaultCodeInterpreterImage ||
		!slices.Equal(req.Entrypoint, DefaultCodeInterpreterEntrypoint) || req.Timeout == nil || *req.Timeout != 900 {
		t.Errorf("create request = %+v, want image %s, entrypoint %v, timeout 900", req, DefaultCodeInterpreterImage, DefaultCodeInterpreterEntrypoint)
	}

	if _, err := c.CreateCodeInterpreter(testCtx(t), CreateOptions{Image: "mine:1", Entrypoint: []string{"run"}, Timeout: time.Minute}); err != nil {
		t.Fatalf("CreateCodeInterpreter(custom): %v", err)
	}
	decodeBody(t, s.requests("POST", "/v1/sandboxes")[1], &req)
	if req.Image.URI != "mine:1" || !slices.Equal(req.Entrypoint, []string{"run"}) || *req.Timeout != 60 {
		t.Errorf("create request = %+v, want the given image, entrypoint and timeout", req)
	}
	if _, err := c.CreateCodeInterpreter(testCtx(t), CreateOptions{SnapshotID: "snap"}); err != nil {
		t.Fatalf("CreateCodeInterpreter(snapshot): %v", err)
	}
	var raw map[string]any
	decodeBody(t, s.requests("POST", "/v1/sandboxes")[2], &raw)
	if raw["image"] != nil || raw["snapshotId"] != "snap" {
		t.Errorf("create request from a snapshot = %v, want no image", raw)
	}
}

// TestCodeContexts checks the context calls' methods, paths, queries and
// bodies.
func TestCodeContexts(t *testing.T) {
	s := newSDKServer(t)
	s.mux.HandleFunc("POST /execd/code/context", func(w http.ResponseWriter, r *http.Request) {
		var req CodeContext
		decodeRequest(r, &req)
		req.ID = "ctx-" + req.Language
		replyJSON(w, 200, req)
	})
	s.mux.HandleFunc("GET /execd/code/contexts", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("language") == "go" {
			w.Write([]byte("[]"))
			return
		}
		replyJSON(w, 200, []CodeContext{{ID: "a", Language: "python"}, {ID: "b", Language: "bash"}})
	})
	s.mux.HandleFunc("GET /execd/code/contexts/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "a" {
			replyJSON(w, 404, ErrorResponse{Code: "CONTEXT_NOT_FOUND", Message: "no such context"})
			return
		}
		replyJSON(w, 200, CodeContext{ID: "a", Language: "python", Cwd: "/tmp"})
	})
	s.mux.HandleFunc("DELETE /execd/code/contexts/{id}", func(w http.ResponseWriter, r *http.Request) {})
	s.mux.HandleFunc("DELETE /execd/code/contexts", func(w http.ResponseWriter, r *http.Request) {})
	ci := NewCodeInterpreter(s.connect(t))
	ctx := testCtx(t)

	cc, err := ci.CreateContext(ctx, "python", "/tmp")
	if err != nil || cc != (CodeContext{ID: "ctx-python", Language: "python", Cwd: "/tmp"}) {
		t.Errorf("CreateContext = %+v, %v", cc, err)
	}
	var body map[string]any
	decodeBody(t, s.only(t, "POST", "/execd/code/context"), &body)
	if !reflect.DeepEqual(body, map[string]any{"language": "python", "cwd": "/tmp"}) {
		t.Errorf("create context body = %v", body)
	}
	if got := s.only(t, "POST", "/execd/code/context").Header.Get(AccessTokenHeader); got != sdkTestToken {
		t.Errorf("create context token header = %q", got)
	}
	if _, err := ci.CreateContext(ctx, "", ""); err == nil {
		t.Error("CreateContext without a language = nil error")
	}

	all, err := ci.ListContexts(ctx, "")
	if err != nil || len(all) != 2 || all[1].ID != "b" {
		t.Errorf("ListContexts(\"\") = %+v, %v", all, err)
	}
	none, err := ci.ListContexts(ctx, "go")
	if err != nil || none == nil || len(none) != 0 {
		t.Errorf("ListContexts(go) = %#v, %v; want an empty slice", none, err)
	}
	lists := s.requests("GET", "/execd/code/contexts")
	if lists[0].RawQuery != "" || lists[1].RawQuery != "language=go" {
		t.Errorf("list queries = %q, %q", lists[0].RawQuery, lists[1].RawQuery)
	}

	got, err := ci.GetContext(ctx, "a")
	if err != nil || got.Cwd != "/tmp" {
		t.Errorf("GetContext(a) = %+v, %v", got, err)
	}
	if _, err := ci.GetContext(ctx, "zz"); !IsNotFound(err) {
		t.Errorf("GetContext(unknown) = %v, want IsNotFound", err)
	}
	if err := ci.DeleteContext(ctx, "a"); err != nil {
		t.Errorf("DeleteContext: %v", err)
	}
	s.only(t, "DELETE", "/execd/code/contexts/a")
	if err := ci.DeleteContexts(ctx, "bash"); err != nil {
		t.Errorf("DeleteContexts: %v", err)
	}
	if q := s.only(t, "DELETE", "/execd/code/contexts").RawQuery; q != "language=bash" {
		t.Errorf("delete contexts query = %q", q)
	}
	if err := ci.DeleteContexts(ctx, ""); err == nil {
		t.Error("DeleteContexts(\"\") = nil error")
	}
}

// TestCodeRun checks the decoding of a code stream, the handler order and
// the request body.
func TestCodeRun(t *testing.T) {
	png := append(slices.Clone(pngHeader), 1, 2, 3)
	s := newSDKServer(t)
	s.mux.HandleFunc("POST /execd/code", func(w http.ResponseWriter, r *http.Request) {
		var req RunCodeRequest
		decodeRequest(r, &req)
		id := "default-" + req.Context.Language
		if req.Context.ID != "" {
			id = req.Context.ID
		}
		events := []StreamEvent{
			{Type: EventInit, Text: id, Timestamp: 1},
			{Type: EventStatus, Text: "busy", Timestamp: 1},
			{Type: EventExecutionCount, ExecutionCount: 7, Timestamp: 2},
		}
		switch req.Code {
		case "ok":
			events = append(events,
				StreamEvent{Type: EventStdout, Text: "a\n", Timestamp: 3},
				StreamEvent{Type: EventPing, Text: "pong", Timestamp: 3},
				StreamEvent{Type: EventStderr, Text: "warn\n", Timestamp: 4},
				StreamEvent{Type: EventStdout, Text: "b\n", Timestamp: 5},
				StreamEvent{Type: EventResult, Results: map[string]any{"text": "<Figure>", "image/png": base64.StdEncoding.EncodeToString(png)}, Timestamp: 6},
				StreamEvent{Type: EventResult, Results: map[string]any{"text": "4"}, Timestamp: 7},
				StreamEvent{Type: EventStatus, Text: "ok", Timestamp: 8},
				StreamEvent{Type: EventExecutionComplete, ExecutionTime: 9, Timestamp: 8})
		case "raise":
			events = append(events,
				StreamEvent{Type: EventError, Error: &StreamError{Name: "ZeroDivisionError", Value: "division by zero", Traceback: []string{"line 1"}}, Timestamp: 3},
				StreamEvent{Type: EventExecutionComplete, ExecutionTime: 2, Timestamp: 4})
		case "die":
			// An error and then the end of the stream, no completion.
			events = append(events, StreamEvent{Type: EventError, Error: &StreamError{Name: "DeadKernelError", Value: "kernel died"}, Timestamp: 3})
		case "cut":
		}
		stream(w, events...)
	})
	ci := NewCodeInterpreter(s.connect(t))
	ctx := testCtx(t)

	var calls []string
	h := &CodeHandlers{
		OnInit:           func(id string) { calls = append(calls, "init:"+id) },
		OnExecutionCount: func(n int) { calls = append(calls, "count:"+string(rune('0'+n))) },
		OnStdout:         func(l OutputLine) { calls = append(calls, "out:"+l.Text) },
		OnStderr:         func(l OutputLine) { calls = append(calls, "err:"+l.Text) },
		OnResult:         func(r Result) { calls = append(calls, "result:"+r.Text()) },
		OnError:          func(e StreamError) { calls = append(calls, "error:"+e.Name) },
		OnComplete:       func(d time.Duration) { calls = append(calls, "done:"+d.String()) },
	}
	ex, err := ci.Run(ctx, "ok", CodeRunOptions{ContextID: "c1", Handlers: h})
	if err != nil {
		t.Fatalf("Run(ok): %v", err)
	}
	want := []string{"init:c1", "count:7", "out:a\n", "err:warn\n", "out:b\n", "result:<Figure>", "result:4", "done:9ms"}
	if !reflect.DeepEqual(calls, want) {
		t.Errorf("handler calls = %q, want %q", calls, want)
	}
	if ex.ContextID != "c1" || ex.ExecutionCount != 7 || ex.Error != nil || ex.Elapsed != 9*time.Millisecond ||
		len(ex.Results) != 2 || ex.Text() != "4" || ex.StdoutText() != "a\nb\n" || ex.StderrText() != "warn\n" {
		t.Errorf("Run(ok) = %+v (text %q)", ex, ex.Text())
	}
	if !ex.Stdout[1].Timestamp.Equal(time.UnixMilli(5)) {
		t.Errorf("stdout timestamp = %v", ex.Stdout[1].Timestamp)
	}
	if b, ok := ex.Results[0].PNG(); !ok || !bytes.Equal(b, png) {
		t.Errorf("PNG() = %v, %v; want the decoded image", b, ok)
	}
	if _, ok := ex.Results[1].PNG(); ok {
		t.Error("PNG() of a text result = ok")
	}
	if got := ex.Results[0].MIMETypes(); !slices.Equal(got, []string{"image/png", "text/plain"}) {
		t.Errorf("MIMETypes() = %v", got)
	}
	var req map[string]any
	decodeBody(t, s.requests("POST", "/execd/code")[0], &req)
	if !reflect.DeepEqual(req, map[string]any{"code": "ok", "context": map[string]any{"id": "c1", "language": ""}}) &&
		!reflect.DeepEqual(req, map[string]any{"code": "ok", "context": map[string]any{"id": "c1"}}) {
		t.Errorf("run body = %v", req)
	}
	if acc := s.requests("POST", "/execd/code")[0].Header.Get("Accept"); acc != "text/event-stream" {
		t.Errorf("Accept = %q", acc)
	}

	// Without a context: the default language is python.
	ex, err = ci.Run(ctx, "raise", CodeRunOptions{})
	if err != nil || ex.ContextID != "default-python" || ex.Error == nil || ex.Error.Name != "ZeroDivisionError" ||
		ex.Error.Value != "division by zero" || ex.Elapsed != 2*time.Millisecond {
		t.Errorf("Run(raise) = %+v, %v; want a ZeroDivisionError in default-python", ex, err)
	}
	ex, err = ci.Run(ctx, "die", CodeRunOptions{Language: "bash"})
	if err != nil || ex.ContextID != "default-bash" || ex.Error == nil || ex.Error.Name != "DeadKernelError" {
		t.Errorf("Run(die) = %+v, %v; want DeadKernelError and a nil error", ex, err)
	}
	if ex.Text() != "" {
		t.Errorf("Text() of an empty run = %q", ex.Text())
	}
	if _, err := ci.Run(ctx, "cut", CodeRunOptions{}); err == nil {
		t.Error("Run on a stream without an end = nil error")
	}
}

func TestCodeRunRejected(t *testing.T) {
	s := newSDKServer(t)
	s.mux.HandleFunc("POST /execd/code", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 404, ErrorResponse{Code: "CONTEXT_NOT_FOUND", Message: "no context nope"})
	})
	ci := NewCodeInterpreter(s.connect(t))
	ex, err := ci.Run(testCtx(t), "1", CodeRunOptions{ContextID: "nope"})
	var ae *APIError
	if ex != nil || !errors.As(err, &ae) || ae.StatusCode != 404 || !IsNotFound(err) {
		t.Errorf("Run(unknown context) = %+v, %v; want a 404 APIError", ex, err)
	}
}

// TestCodeRunCancelInterrupts checks that cancelling Run closes the stream
// and interrupts the context it was running in.
func TestCodeRunCancelInterrupts(t *testing.T) {
	s := newSDKServer(t)
	gone := make(chan struct{})
	s.mux.HandleFunc("POST /execd/code", func(w http.ResponseWriter, r *http.Request) {
		stream(w, StreamEvent{Type: EventInit, Text: "c9"}, StreamEvent{Type: EventStdout, Text: "started\n"})
		<-r.Context().Done()
		close(gone)
	})
	s.mux.HandleFunc("DELETE /execd/code", func(w http.ResponseWriter, r *http.Request) {})
	ci := NewCodeInterpreter(s.connect(t))
	ctx, cancel := context.WithCancel(testCtx(t))
	ex, err := ci.Run(ctx, "while True: pass", CodeRunOptions{Handlers: &CodeHandlers{OnStdout: func(OutputLine) { cancel() }}})
	if err != context.Canceled {
		t.Errorf("Run cancelled = %v, want context.Canceled", err)
	}
	if ex == nil || ex.ContextID != "c9" || ex.StdoutText() != "started\n" {
		t.Errorf("Run cancelled returned %+v, want the partial execution", ex)
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the server never saw the stream close")
	}
	if q := s.only(t, "DELETE", "/execd/code").RawQuery; q != "id=c9" {
		t.Errorf("interrupt query = %q, want id=c9", q)
	}
}

func TestCodeInterrupt(t *testing.T) {
	s := newSDKServer(t)
	s.mux.HandleFunc("DELETE /execd/code", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("id") != "c1" {
			replyJSON(w, 404, ErrorResponse{Code: "CONTEXT_NOT_FOUND", Message: "no such context"})
		}
	})
	ci := NewCodeInterpreter(s.connect(t))
	if err := ci.Interrupt(testCtx(t), "c1"); err != nil {
		t.Errorf("Interrupt(c1): %v", err)
	}
	if err := ci.Interrupt(testCtx(t), "c2"); !IsNotFound(err) {
		t.Errorf("Interrupt(unknown) = %v, want IsNotFound", err)
	}
}

func TestResultAccessors(t *testing.T) {
	r := Result{Data: map[string]any{"text/plain": "x", "image/png": "!!not base64"}}
	if r.Text() != "x" {
		t.Errorf("Text() with text/plain = %q", r.Text())
	}
	if _, ok := r.PNG(); ok {
		t.Error("PNG() of bad base64 = ok")
	}
	wrapped := base64.StdEncoding.EncodeToString(pngHeader)
	r = Result{Data: map[string]any{"image/png": wrapped[:4] + "\n" + wrapped[4:]}}
	if b, ok := r.PNG(); !ok || !bytes.Equal(b, pngHeader) {
		t.Errorf("PNG() of line-wrapped base64 = %v, %v", b, ok)
	}
	ex := &CodeExecution{Stdout: []OutputLine{{Text: "a\n"}, {Text: "b"}}}
	if ex.Text() != "a\nb" {
		t.Errorf("Text() without results = %q, want stdout", ex.Text())
	}
}
