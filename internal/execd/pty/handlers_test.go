//go:build linux

package pty

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func decodeAPIError(t *testing.T, call string, body []byte) apiError {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("%s body %q is not {code,message}: %v", call, body, err)
	}
	return e
}

func TestCreate(t *testing.T) {
	h := newHarness(t, Options{})
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		body     string
		wantCode int
		wantErr  string
	}{
		{"empty body", "", http.StatusCreated, ""},
		{"empty object", "{}", http.StatusCreated, ""},
		{"cwd and command", `{"cwd":"/tmp","command":"true"}`, http.StatusCreated, ""},
		{"home cwd", `{"cwd":"~"}`, http.StatusCreated, ""},
		{"missing cwd", `{"cwd":"/does/not/exist"}`, http.StatusBadRequest, "INVALID_REQUEST_BODY"},
		{"cwd is a file", `{"cwd":"` + file + `"}`, http.StatusBadRequest, "INVALID_REQUEST_BODY"},
		{"malformed JSON", `{"cwd":`, http.StatusBadRequest, "INVALID_REQUEST_BODY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := h.do(http.MethodPost, "/pty", tt.body)
			if code != tt.wantCode {
				t.Fatalf("POST /pty %s = %d %s, want %d", tt.body, code, body, tt.wantCode)
			}
			if tt.wantErr != "" {
				if e := decodeAPIError(t, "POST /pty", body); e.Code != tt.wantErr {
					t.Errorf("POST /pty %s code = %q, want %q", tt.body, e.Code, tt.wantErr)
				}
				return
			}
			var resp sandbox.CreatePTYResponse
			if err := json.Unmarshal(body, &resp); err != nil || resp.SessionID == "" {
				t.Fatalf("POST /pty %s body = %s, want {session_id}", tt.body, body)
			}
			if st := h.status(resp.SessionID); st.Running || st.OutputOffset != 0 {
				t.Errorf("GET /pty/%s before attach = %+v, want not running at offset 0", resp.SessionID, st)
			}
		})
	}
}

func TestUnknownSession(t *testing.T) {
	h := newHarness(t, Options{})
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		code, body := h.do(method, "/pty/nope", "")
		if code != http.StatusNotFound {
			t.Errorf("%s /pty/nope = %d %s, want 404", method, code, body)
			continue
		}
		if e := decodeAPIError(t, method+" /pty/nope", body); e.Code != "SESSION_NOT_FOUND" {
			t.Errorf("%s /pty/nope code = %q, want SESSION_NOT_FOUND", method, e.Code)
		}
	}
	_, resp, err := h.dialRaw("nope", "")
	if err == nil || resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("Dial /pty/nope/ws = (%v, %v), want a 404 response", resp, err)
	}
}

func TestAttachBadQuery(t *testing.T) {
	h := newHarness(t, Options{})
	id := h.create(sandbox.CreatePTYRequest{})
	for _, q := range []string{"since=-1", "since=abc", "pty=2", "takeover=yes"} {
		_, resp, err := h.dialRaw(id, q)
		if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("Dial ?%s = (%v, %v), want a 400 response", q, resp, err)
		}
	}
	if st := h.status(id); st.Running {
		t.Errorf("GET /pty/%s after refused attaches = %+v, want not running", id, st)
	}
}

func TestStatusOutputOffset(t *testing.T) {
	h := newHarness(t, Options{})
	id := h.create(sandbox.CreatePTYRequest{Command: "printf abcdef; read x; printf gh"})
	w := h.dial(id, "pty=0", modePipe)
	w.waitStdout("abcdef")
	if st := h.status(id); !st.Running || st.OutputOffset != 6 || st.SessionID != id {
		t.Errorf("GET /pty/%s while reading = %+v, want running at offset 6", id, st)
	}
	w.stdin("\n")
	if m := w.waitMsg("exit"); m.ExitCode == nil || *m.ExitCode != 0 {
		t.Errorf("exit frame = %+v, want exit_code 0", m)
	}
	if st := h.status(id); st.Running || st.OutputOffset != 8 {
		t.Errorf("GET /pty/%s after exit = %+v, want not running at offset 8", id, st)
	}
}

func TestDeleteKillsProcessTree(t *testing.T) {
	tests := []struct {
		name    string
		req     sandbox.CreatePTYRequest
		query   string
		mode    string
		trigger string // stdin that starts the background job
	}{
		// An interactive shell puts the job in a process group of its own.
		{"interactive job", sandbox.CreatePTYRequest{}, "", modePTY, "sleep 1000 & echo bg=$!\n"},
		{"command on pipes", sandbox.CreatePTYRequest{Command: "sleep 1000 & echo bg=$!; wait"}, "pty=0", modePipe, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			id := h.create(tt.req)
			w := h.dial(id, tt.query, tt.mode)
			if tt.trigger != "" {
				w.stdin(tt.trigger)
			}
			pid := waitPID(w, "bg=")
			code, body := h.do(http.MethodDelete, "/pty/"+id, "")
			if code != http.StatusOK || len(body) != 0 {
				t.Fatalf("DELETE /pty/%s = %d %q, want 200 with an empty body", id, code, body)
			}
			if m := w.waitMsg("error"); m.Code != "SESSION_GONE" {
				t.Errorf("error frame after delete = %+v, want code SESSION_GONE", m)
			}
			if ce := w.waitClosed(); ce.Reason != "SESSION_GONE" {
				t.Errorf("close after delete = %v, want reason SESSION_GONE", ce)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			waitGone(t, ctx, pid)
			if code, _ := h.do(http.MethodGet, "/pty/"+id, ""); code != http.StatusNotFound {
				t.Errorf("GET /pty/%s after delete = %d, want 404", id, code)
			}
			if code, _ := h.do(http.MethodDelete, "/pty/"+id, ""); code != http.StatusNotFound {
				t.Errorf("second DELETE /pty/%s = %d, want 404", id, code)
			}
		})
	}
}

func TestClose(t *testing.T) {
	h := newHarness(t, Options{})
	attached := h.create(sandbox.CreatePTYRequest{})
	w := h.dial(attached, "", modePTY)
	w.stdin("sleep 1000 & echo bg=$!\n")
	pid := waitPID(w, "bg=")
	idle := h.create(sandbox.CreatePTYRequest{})

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	// Close waits for the close handshake, so the client reads meanwhile.
	closed := make(chan error, 1)
	go func() { closed <- h.m.Close(ctx) }()
	if m := w.waitMsg("error"); m.Code != "SESSION_GONE" {
		t.Errorf("error frame at shutdown = %+v, want SESSION_GONE", m)
	}
	if ce := w.waitClosed(); ce.Code != 1001 {
		t.Errorf("close at shutdown = %v, want code 1001", ce)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Manager.Close: %v", err)
	}
	waitGone(t, ctx, pid)
	for _, id := range []string{attached, idle} {
		if code, _ := h.do(http.MethodGet, "/pty/"+id, ""); code != http.StatusNotFound {
			t.Errorf("GET /pty/%s after Close = %d, want 404", id, code)
		}
	}
	if code, body := h.do(http.MethodPost, "/pty", ""); code != http.StatusServiceUnavailable {
		t.Errorf("POST /pty after Close = %d %s, want 503", code, body)
	}
	if err := h.m.Close(ctx); err != nil {
		t.Errorf("second Manager.Close: %v", err)
	}
}

func TestStartFailed(t *testing.T) {
	h := newHarness(t, Options{})
	dir := filepath.Join(t.TempDir(), "work")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	id := h.create(sandbox.CreatePTYRequest{Cwd: dir})
	if err := os.Remove(dir); err != nil { // gone before the first attach
		t.Fatal(err)
	}
	w := h.dial(id, "", modePTY)
	if m := w.waitMsg("error"); m.Code != "START_FAILED" {
		t.Errorf("error frame = %+v, want START_FAILED", m)
	}
	if ce := w.waitClosed(); ce.Code != 1011 {
		t.Errorf("close after START_FAILED = %v, want 1011", ce)
	}
	if st := h.status(id); st.Running {
		t.Errorf("GET /pty/%s after START_FAILED = %+v, want not running", id, st)
	}
	// The next attach tries again.
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w = h.dial(id, "pty=0", modePipe)
	w.stdin("pwd\n")
	w.waitStdout(dir + "\n")
}
