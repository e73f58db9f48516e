package osbcli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// fakeCodeServer is a lifecycle server knowing sandbox "ci-1", whose execd
// (under /execd on the same server) answers POST /code by the code sent.
func fakeCodeServer(t *testing.T) *httptest.Server {
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
	mux.HandleFunc("POST /execd/code", func(w http.ResponseWriter, r *http.Request) {
		var req sandbox.RunCodeRequest
		json.NewDecoder(r.Body).Decode(&req)
		events := []sandbox.StreamEvent{{Type: sandbox.EventInit, Text: "ctx/1"}, {Type: sandbox.EventExecutionCount, ExecutionCount: 2}}
		switch strings.TrimSpace(req.Code) {
		case "plot":
			events = append(events,
				sandbox.StreamEvent{Type: sandbox.EventStdout, Text: "drawing\n"},
				sandbox.StreamEvent{Type: sandbox.EventStderr, Text: "warn\n"},
				sandbox.StreamEvent{Type: sandbox.EventResult, Results: map[string]any{"text": "<Figure>", "image/png": "iVBORw0KGgo="}},
				sandbox.StreamEvent{Type: sandbox.EventResult, Results: map[string]any{"text": "4"}},
				sandbox.StreamEvent{Type: sandbox.EventResult, Results: map[string]any{"application/json": map[string]any{}}},
				sandbox.StreamEvent{Type: sandbox.EventExecutionComplete})
		case "raise":
			events = append(events,
				sandbox.StreamEvent{Type: sandbox.EventStdout, Text: "before\n"},
				sandbox.StreamEvent{Type: sandbox.EventError, Error: &sandbox.StreamError{Name: "ZeroDivisionError", Value: "division by zero",
					Traceback: []string{"\x1b[0;31mTraceback (most recent call last)\x1b[0m", "  line 1"}}})
		}
		for _, ev := range events {
			b, _ := json.Marshal(ev)
			w.Write(append(b, '\n', '\n'))
		}
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func runOSBIn(t *testing.T, stdin string, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, stdio{in: strings.NewReader(stdin), out: &out, err: &errb}, envOf(env), t.TempDir())
	return code, out.String(), errb.String()
}

func TestCodeRun(t *testing.T) {
	srv := fakeCodeServer(t)
	env := map[string]string{"OPEN_SANDBOX_DOMAIN": strings.TrimPrefix(srv.URL, "http://"), "OPEN_SANDBOX_API_KEY": "k"}

	code, out, errs := runOSBIn(t, "plot", env, "code", "run", "ci-1")
	if code != 0 || out != "drawing\n[image/png, 8 bytes]\n4\n[application/json]\n" || errs != "warn\n" {
		t.Errorf("osb code run (plot): exit %d, stdout %q, stderr %q", code, out, errs)
	}

	dir := filepath.Join(t.TempDir(), "imgs")
	file := filepath.Join(t.TempDir(), "cell.py")
	os.WriteFile(file, []byte("plot"), 0o644)
	code, out, errs = runOSBIn(t, "", env, "code", "run", "ci-1", file, "--save-images", dir)
	saved := filepath.Join(dir, "ctx_1-2-1.png")
	if b, err := os.ReadFile(saved); code != 0 || err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) || !strings.Contains(out, "[image/png, 8 bytes: "+saved+"]") {
		t.Errorf("osb code run --save-images: exit %d, stdout %q, stderr %q, file %v", code, out, errs, err)
	}

	code, out, errs = runOSBIn(t, "raise", env, "code", "run", "ci-1", "-")
	if code != 1 || out != "before\n" || errs != "Traceback (most recent call last)\n  line 1\nZeroDivisionError: division by zero\n" {
		t.Errorf("osb code run (raise): exit %d, stdout %q, stderr %q; want exit 1 and the traceback without colour", code, out, errs)
	}

	// -o json: the whole run as one document; a raise still exits 1.
	code, out, errs = runOSBIn(t, "plot", env, "code", "run", "ci-1", "-o", "json")
	var res codeResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || errs != "" {
		t.Fatalf("osb code run -o json: exit %d, %q (%v), stderr %q", code, out, err, errs)
	}
	if res.ContextID != "ctx/1" || res.ExecutionCount != 2 || res.Stdout != "drawing\n" || res.Stderr != "warn\n" ||
		len(res.Results) != 3 || res.Results[1]["text"] != "4" || res.Results[0]["image/png"] != "iVBORw0KGgo=" || res.Error != nil {
		t.Errorf("osb code run -o json = %+v", res)
	}
	code, out, _ = runOSBIn(t, "raise", env, "code", "run", "ci-1", "-o", "json")
	res = codeResult{}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 || res.Error == nil || res.Error.Name != "ZeroDivisionError" {
		t.Errorf("osb code run -o json (raise): exit %d, %q (%v); want exit 1 and the error in the document", code, out, err)
	}

	if code, _, errs := runOSBIn(t, " \n", env, "code", "run", "ci-1"); code != 2 || !strings.Contains(errs, "no code") {
		t.Errorf("osb code run (empty stdin): exit %d, stderr %q; want a usage error", code, errs)
	}
	if code, _, _ := runOSBIn(t, "", env, "code", "context", "delete", "ci-1"); code != 2 {
		t.Errorf("osb code context delete without ids or --language: exit %d, want 2", code)
	}
}
