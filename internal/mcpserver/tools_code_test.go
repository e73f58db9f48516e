package mcpserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// fakeCodeSandbox is a lifecycle server knowing sandbox "ci-1", whose execd
// (under /execd on the same server) answers /code like a Python kernel.
func fakeCodeSandbox(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	var srv *httptest.Server
	mux.HandleFunc("GET /v1/sandboxes/ci-1", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(sandbox.SandboxInfo{ID: "ci-1", Status: sandbox.SandboxStatus{State: sandbox.StateRunning}})
	})
	mux.HandleFunc("GET /v1/sandboxes/ci-1/endpoints/44772", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(sandbox.Endpoint{Endpoint: strings.TrimPrefix(srv.URL, "http://") + "/execd"})
	})
	mux.HandleFunc("GET /execd/ping", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("POST /execd/code/context", func(w http.ResponseWriter, r *http.Request) {
		var req sandbox.CodeContext
		json.NewDecoder(r.Body).Decode(&req)
		req.ID = "ctx-" + req.Language
		json.NewEncoder(w).Encode(req)
	})
	mux.HandleFunc("POST /execd/code", func(w http.ResponseWriter, r *http.Request) {
		var req sandbox.RunCodeRequest
		json.NewDecoder(r.Body).Decode(&req)
		id := req.Context.ID
		if id == "" {
			id = "default-" + req.Context.Language
		}
		events := []sandbox.StreamEvent{
			{Type: sandbox.EventInit, Text: id},
			{Type: sandbox.EventExecutionCount, ExecutionCount: 3},
		}
		switch req.Code {
		case "chatty":
			events = append(events, sandbox.StreamEvent{Type: sandbox.EventStdout, Text: strings.Repeat("x", 5000)})
		case "plot":
			events = append(events,
				sandbox.StreamEvent{Type: sandbox.EventStdout, Text: "a\n"},
				sandbox.StreamEvent{Type: sandbox.EventResult, Results: map[string]any{"text": "<Figure>", "image/png": "iVBORw0KGgo="}},
				sandbox.StreamEvent{Type: sandbox.EventResult, Results: map[string]any{"text": "4"}})
		case "raise":
			events = append(events, sandbox.StreamEvent{Type: sandbox.EventError, Error: &sandbox.StreamError{
				Name: "NameError", Value: "name 'x' is not defined", Traceback: []string{"\x1b[0;31mNameError\x1b[0m: name 'x' is not defined"}}})
			for _, ev := range events {
				b, _ := json.Marshal(ev)
				w.Write(append(b, '\n', '\n'))
			}
			return
		}
		events = append(events, sandbox.StreamEvent{Type: sandbox.EventExecutionComplete, ExecutionTime: 5})
		for _, ev := range events {
			b, _ := json.Marshal(ev)
			w.Write(append(b, '\n', '\n'))
		}
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestCodeTools(t *testing.T) {
	srv := fakeCodeSandbox(t)
	cs := connect(t, srv.URL, Config{OutputLimit: 1000})
	run := func(args map[string]any) CodeRunOut {
		t.Helper()
		args["sandbox_id"] = "ci-1"
		args["connect_if_missing"] = true
		res := call(t, cs, "code_run", args)
		if res.IsError {
			t.Fatalf("code_run(%v): tool error %s", args, text(res))
		}
		var out CodeRunOut
		remarshal(t, res.StructuredContent, &out)
		return out
	}
	out := run(map[string]any{"code": "plot"})
	if out.ContextID != "default-python" || out.ExecutionCount != 3 || out.Stdout != "a\n" || out.Error != nil || out.ElapsedMS != 5 ||
		len(out.Results) != 2 || out.Results[1].Text != "4" || !slices.Equal(out.Results[0].MIMETypes, []string{"image/png", "text/plain"}) {
		t.Errorf("code_run(plot) = %+v", out)
	}
	out = run(map[string]any{"code": "raise", "context_id": "c7"})
	if out.ContextID != "c7" || out.Error == nil || out.Error.Name != "NameError" || !slices.Equal(out.Error.Traceback, []string{"NameError: name 'x' is not defined"}) {
		t.Errorf("code_run(raise) = %+v, want a NameError without colour codes", out)
	}
	out = run(map[string]any{"code": "chatty", "language": "bash"})
	if out.ContextID != "default-bash" || !out.StdoutTruncated || len(out.Stdout) > 1200 {
		t.Errorf("code_run(chatty) stdout %d bytes, truncated %v; want capped", len(out.Stdout), out.StdoutTruncated)
	}

	res := call(t, cs, "code_context_create", map[string]any{"sandbox_id": "ci-1", "language": "javascript"})
	var created CodeContextCreateOut
	remarshal(t, res.StructuredContent, &created)
	if res.IsError || created.ContextID != "ctx-javascript" || created.Language != "javascript" {
		t.Errorf("code_context_create = %s", text(res))
	}
	for _, args := range []map[string]any{
		{"sandbox_id": "ci-1", "code": "  "},
		{"sandbox_id": "ci-1"},
		{"sandbox_id": "nope", "code": "1"},
	} {
		if res := call(t, cs, "code_run", args); !res.IsError {
			t.Errorf("code_run(%v) = %s, want a tool error", args, text(res))
		}
	}
	if res := call(t, cs, "code_context_delete", map[string]any{"sandbox_id": "ci-1"}); !res.IsError || !strings.Contains(text(res), "context_id") {
		t.Errorf("code_context_delete without context_id or language = %s, want a tool error", text(res))
	}
}
