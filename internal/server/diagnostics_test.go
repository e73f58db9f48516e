package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

func TestDiagnostics(t *testing.T) {
	e := newEnv(t)
	e.rt.add(fakeSandbox("sb1"))
	e.rt.logs = []byte("line one\nline two\n")
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	e.rt.events = []runtime.Event{{Time: at, Action: "create"}, {Time: at.Add(time.Second), Action: "start", Message: "exitCode=0"}}

	legacy := []struct {
		path, want string
	}{
		{"/v1/sandboxes/sb1/diagnostics/logs?tail=10&since=10m", "line one\nline two\n"},
		{"/v1/sandboxes/sb1/diagnostics/events?limit=5", "2026-06-01T12:00:00Z create\n2026-06-01T12:00:01Z start exitCode=0\n"},
		{"/v1/sandboxes/sb1/diagnostics/inspect", `{"Id":"sb1"}`},
	}
	for _, tc := range legacy {
		r := e.do("GET", tc.path, nil)
		if r.status != http.StatusOK || string(r.body) != tc.want {
			t.Errorf("GET %s = %s, want 200 %q", tc.path, r, tc.want)
		}
		if ct, dep := r.header.Get("Content-Type"), r.header.Get("Deprecation"); !strings.HasPrefix(ct, "text/plain") || dep != "true" {
			t.Errorf("GET %s Content-Type %q Deprecation %q, want text/plain and true", tc.path, ct, dep)
		}
	}

	r := e.do("GET", "/v1/sandboxes/sb1/diagnostics/summary?tail=5&event_limit=1", nil)
	for _, want := range []string{"State: Running (CONTAINER_RUNNING)", "start exitCode=0", "line two", "Expires: never"} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("summary lacks %q:\n%s", want, r.body)
		}
	}
	if strings.Contains(string(r.body), " create\n") {
		t.Errorf("summary with event_limit=1 shows the older event:\n%s", r.body)
	}

	for _, scope := range []string{"container", "all", "Container"} {
		r := e.do("GET", "/v1/sandboxes/sb1/diagnostics/logs?scope="+scope, nil)
		d := decode[diagnosticContent](t, r)
		want := diagnosticContent{SandboxID: "sb1", Kind: "logs", Scope: strings.ToLower(scope), Delivery: "inline",
			ContentType: "text/plain; charset=utf-8", Content: "line one\nline two\n", ContentLength: 18, Warnings: []string{}}
		if r.status != http.StatusOK || d.SandboxID != want.SandboxID || d.Kind != want.Kind || d.Scope != want.Scope ||
			d.Delivery != want.Delivery || d.Content != want.Content || d.ContentLength != want.ContentLength || d.Truncated || d.Warnings == nil {
			t.Errorf("GET logs?scope=%s = %s, want %+v", scope, r, want)
		}
	}
	d := decode[diagnosticContent](t, e.do("GET", "/v1/sandboxes/sb1/diagnostics/events?scope=container&limit=1", nil))
	if d.Kind != "events" || d.Content != "2026-06-01T12:00:01Z start exitCode=0\n" {
		t.Errorf("events?scope=container = %+v", d)
	}

	bad := []struct{ path, want string }{
		{"/v1/sandboxes/sb1/diagnostics/logs?scope=network", "container, all"},
		{"/v1/sandboxes/sb1/diagnostics/events?scope=", "container, all"},
		{"/v1/sandboxes/sb1/diagnostics/logs?tail=0", "tail"},
		{"/v1/sandboxes/sb1/diagnostics/logs?tail=10001", "tail"},
		{"/v1/sandboxes/sb1/diagnostics/logs?since=yesterday", "since"},
		{"/v1/sandboxes/sb1/diagnostics/logs?since=-5m", "since"},
		{"/v1/sandboxes/sb1/diagnostics/events?limit=501", "limit"},
		{"/v1/sandboxes/sb1/diagnostics/summary?event_limit=0", "event_limit"},
	}
	for _, tc := range bad {
		wantError(t, "GET "+tc.path, e.do("GET", tc.path, nil), 400, apierror.CodeInvalidRequest, tc.want)
	}
	for _, kind := range []string{"logs", "events", "inspect", "summary"} {
		path := "/v1/sandboxes/nope/diagnostics/" + kind
		wantError(t, "GET "+path, e.do("GET", path, nil), 404, apierror.CodeSandboxNotFound)
	}
}

func TestDiagnosticTruncation(t *testing.T) {
	e := newEnv(t)
	e.rt.add(fakeSandbox("sb1"))
	e.rt.logs = []byte(strings.Repeat("0123456789abcdef\n", (maxInlineDiagnostic/17)+100))
	d := decode[diagnosticContent](t, e.do("GET", "/v1/sandboxes/sb1/diagnostics/logs?scope=all", nil))
	if !d.Truncated || d.ContentLength > maxInlineDiagnostic || d.ContentLength != len(d.Content) || !strings.HasPrefix(d.Content, "0123") {
		t.Errorf("truncated descriptor: truncated %v length %d (content %d bytes, starts %q); want truncated at a line, at most %d",
			d.Truncated, d.ContentLength, len(d.Content), d.Content[:8], maxInlineDiagnostic)
	}
}

func TestParseSince(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, true},
		{"10m", 10 * time.Minute, true},
		{"1h30m", 90 * time.Minute, true},
		{"300", 300 * time.Second, true},
		{"0", 0, false},
		{"-1h", 0, false},
		{"soon", 0, false},
	}
	for _, tc := range tests {
		got, err := parseSince(map[string][]string{"since": {tc.in}})
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseSince(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
