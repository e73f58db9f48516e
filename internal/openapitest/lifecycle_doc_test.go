package openapitest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/opensandbox-go/opensandbox/api"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

const lifecycleDoc = "api/lifecycle.yaml"

// lifecycleOps is every operation the lifecycle document must describe.
var lifecycleOps = map[string][]string{
	"/v1/sandboxes":                                 {"GET", "POST"},
	"/v1/sandboxes/{sandboxId}":                     {"GET", "DELETE"},
	"/v1/sandboxes/{sandboxId}/metadata":            {"PATCH"},
	"/v1/sandboxes/{sandboxId}/pause":               {"POST"},
	"/v1/sandboxes/{sandboxId}/resume":              {"POST"},
	"/v1/sandboxes/{sandboxId}/renew-expiration":    {"POST"},
	"/v1/sandboxes/{sandboxId}/endpoints/{port}":    {"GET"},
	"/v1/sandboxes/{sandboxId}/snapshots":           {"POST"},
	"/v1/snapshots":                                 {"GET"},
	"/v1/metrics/events":                            {"POST"},
	"/v1/metrics":                                   {"GET"},
	"/v1/snapshots/{snapshotId}":                    {"GET", "DELETE"},
	"/v1/pools":                                     {"GET", "POST"},
	"/v1/pools/{poolName}":                          {"GET", "PUT", "DELETE"},
	"/v1/sandboxes/{sandboxId}/diagnostics/logs":    {"GET"},
	"/v1/sandboxes/{sandboxId}/diagnostics/events":  {"GET"},
	"/v1/sandboxes/{sandboxId}/diagnostics/inspect": {"GET"},
	"/v1/sandboxes/{sandboxId}/diagnostics/summary": {"GET"},
	"/health":                             {"GET"},
	"/ready":                              {"GET"},
	"/openapi.json":                       {"GET"},
	"/sandboxes/{sandboxId}/proxy/{port}": proxyMethods,
	"/sandboxes/{sandboxId}/proxy/{port}/{path}": proxyMethods,
}

var proxyMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// openLifecyclePaths are the routes that need no API key.
func openLifecyclePath(path string) bool {
	return path == "/health" || path == "/ready" || path == "/openapi.json"
}

func TestLifecycleDocumentIsValid(t *testing.T) {
	full := RepoPath(lifecycleDoc)
	doc, err := openapi3.NewLoader().LoadFromFile(full)
	if err != nil {
		t.Fatalf("load %s: %v", full, err)
	}
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi = %q, want 3.0.3", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("validate %s: %v", full, err)
	}

	s := Load(t, lifecycleDoc)
	for path, methods := range lifecycleOps {
		item := s.Doc.Paths.Value(path)
		if item == nil {
			t.Errorf("path %s missing", path)
			continue
		}
		for _, m := range methods {
			op := item.GetOperation(m)
			if op == nil {
				t.Errorf("%s %s missing", m, path)
				continue
			}
			open := op.Security != nil && len(*op.Security) == 0
			if open != openLifecyclePath(path) {
				t.Errorf("%s %s: open (security: []) = %v, want %v", m, path, open, !open)
			}
			if !open && op.Responses.Value("401") == nil {
				t.Errorf("%s %s: no 401 response", m, path)
			}
		}
		if n, want := len(item.Operations()), len(methods); n != want {
			t.Errorf("%s has %d operations, test knows %d: update the test", path, n, want)
		}
	}
	if n := s.Doc.Paths.Len(); n != len(lifecycleOps) {
		t.Errorf("document has %d paths, test knows %d: update the test", n, len(lifecycleOps))
	}
}

// Every response of every operation, errors and relayed proxy replies
// included, declares the X-Request-ID header as required.
func TestLifecycleResponsesDeclareRequestID(t *testing.T) {
	s := Load(t, lifecycleDoc)
	for _, path := range s.Doc.Paths.InMatchingOrder() {
		for method, op := range s.Doc.Paths.Value(path).Operations() {
			codes := make([]string, 0, op.Responses.Len())
			for code := range op.Responses.Map() {
				codes = append(codes, code)
			}
			sort.Strings(codes)
			for _, code := range codes {
				resp := op.Responses.Value(code)
				if resp == nil || resp.Value == nil {
					t.Errorf("%s %s %s: unresolved response", method, path, code)
					continue
				}
				h := resp.Value.Headers[sandbox.RequestIDHeader]
				switch {
				case h == nil || h.Value == nil:
					t.Errorf("%s %s %s: no %s header", method, path, code, sandbox.RequestIDHeader)
				case !h.Value.Required:
					t.Errorf("%s %s %s: %s header not required", method, path, code, sandbox.RequestIDHeader)
				}
			}
		}
	}
}

// The embedded copy is the file, and it loads.
func TestLifecycleDocumentEmbedded(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.LifecycleYAML)
	if err != nil {
		t.Fatalf("load embedded lifecycle document: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("validate embedded lifecycle document: %v", err)
	}
	if len(api.ExecdYAML) == 0 {
		t.Error("embedded execd document is empty")
	}
}

// Replies built from the Go wire types satisfy the document, and the
// checker notices a missing X-Request-ID.
func TestLifecycleDocumentMatchesWireTypes(t *testing.T) {
	s := Load(t, lifecycleDoc)
	now := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	later := now.Add(time.Hour)
	running := sandbox.SandboxStatus{State: sandbox.StateRunning, Reason: "CONTAINER_RUNNING", LastTransitionAt: &now}
	full := sandbox.SandboxInfo{
		ID:         "3c2e0d4a-1111-4222-8333-444455556666",
		Image:      &sandbox.ImageSpec{URI: "python:3.12-slim"},
		Platform:   &sandbox.PlatformSpec{OS: "linux", Arch: "amd64"},
		Status:     running,
		Metadata:   map[string]string{"team": "data"},
		Entrypoint: []string{"tail", "-f", "/dev/null"},
		ExpiresAt:  &later,
		CreatedAt:  now,
	}
	minimal := sandbox.SandboxInfo{
		ID:         "s-2",
		SnapshotID: "snap-1",
		Status:     sandbox.SandboxStatus{State: "SomethingNew"},
		Entrypoint: []string{"sh"},
		CreatedAt:  now,
	}
	snap := sandbox.Snapshot{ID: "snap-1", SandboxID: full.ID, Status: sandbox.SnapshotStatus{State: sandbox.SnapshotCreating}, CreatedAt: now}
	page := sandbox.PaginationInfo{Page: 1, PageSize: 20, TotalItems: 2, TotalPages: 1}
	pool := map[string]any{
		"name":         "warm",
		"template":     map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "sandbox", "image": "busybox"}}}},
		"capacitySpec": map[string]int{"bufferMax": 3, "bufferMin": 1, "poolMax": 5, "poolMin": 0},
		"status":       map[string]any{"total": 2, "allocated": 1, "available": 1, "revision": "abc"},
		"createdAt":    now,
	}

	type exchange struct {
		name, method, path string
		status             int
		body               any // JSON-encoded; nil for no body
		noRequestID        bool
		want               []string
	}
	cases := []exchange{
		{name: "get full", method: "GET", path: "/v1/sandboxes/" + full.ID, status: 200, body: full},
		{name: "get minimal", method: "GET", path: "/v1/sandboxes/s-2", status: 200, body: minimal},
		{name: "list", method: "GET", path: "/v1/sandboxes", status: 200,
			body: sandbox.ListSandboxesResponse{Items: []sandbox.SandboxInfo{full, minimal}, Pagination: page}},
		{name: "list with null items", method: "GET", path: "/v1/sandboxes", status: 200,
			body: sandbox.ListSandboxesResponse{Pagination: page}, want: []string{"items"}},
		{name: "create", method: "POST", path: "/v1/sandboxes", status: 202, body: sandbox.CreateSandboxResponse{
			ID: full.ID, Status: running, Entrypoint: full.Entrypoint, CreatedAt: now}},
		{name: "renew", method: "POST", path: "/v1/sandboxes/s-2/renew-expiration", status: 200,
			body: sandbox.RenewSandboxExpirationResponse{ExpiresAt: later}},
		{name: "endpoint", method: "GET", path: "/v1/sandboxes/s-2/endpoints/44772", status: 200,
			body: sandbox.Endpoint{Endpoint: "10.0.0.5:41234/proxy/44772", Headers: map[string]string{"X": "y"}}},
		{name: "snapshot", method: "POST", path: "/v1/sandboxes/s-2/snapshots", status: 202, body: snap},
		{name: "snapshots", method: "GET", path: "/v1/snapshots?state=Ready&state=Creating", status: 200,
			body: sandbox.ListSnapshotsResponse{Items: []sandbox.Snapshot{snap}, Pagination: page}},
		{name: "pause", method: "POST", path: "/v1/sandboxes/s-2/pause", status: 202},
		{name: "delete", method: "DELETE", path: "/v1/snapshots/snap-1", status: 204},
		{name: "error", method: "GET", path: "/v1/sandboxes/nope", status: 404,
			body: map[string]string{"code": "SANDBOX_NOT_FOUND", "message": "no sandbox nope"}},
		{name: "unauthorized", method: "DELETE", path: "/v1/sandboxes/s-2", status: 401,
			body: map[string]string{"code": "MISSING_API_KEY", "message": "missing header"}},
		{name: "error without message", method: "GET", path: "/v1/sandboxes/nope", status: 404,
			body: map[string]string{"code": "SANDBOX_NOT_FOUND"}, want: []string{"message"}},
		{name: "pool", method: "GET", path: "/v1/pools/warm", status: 200, body: pool},
		{name: "pool created", method: "POST", path: "/v1/pools", status: 201, body: pool},
		{name: "pools", method: "GET", path: "/v1/pools", status: 200, body: map[string]any{"items": []any{pool}}},
		{name: "pool capacity", method: "PUT", path: "/v1/pools/warm", status: 200, body: pool},
		{name: "pool deleted", method: "DELETE", path: "/v1/pools/warm", status: 204},
		{name: "pools not supported", method: "GET", path: "/v1/pools", status: 501,
			body: map[string]string{"code": "POOL_NOT_SUPPORTED", "message": "no pools"}},
		{name: "pool without status", method: "GET", path: "/v1/pools/warm", status: 200,
			body: map[string]any{"name": "warm", "capacitySpec": pool["capacitySpec"], "createdAt": now}, want: []string{"status"}},
		{name: "pool with a negative capacity", method: "GET", path: "/v1/pools/warm", status: 200,
			body: map[string]any{"name": "warm", "capacitySpec": map[string]int{"bufferMax": -1, "bufferMin": 0, "poolMax": 1, "poolMin": 0},
				"status": pool["status"], "createdAt": now}, want: []string{"bufferMax"}},
		{name: "health", method: "GET", path: "/health", status: 200, body: map[string]string{"status": "healthy"}},
		{name: "missing request id", method: "GET", path: "/v1/sandboxes/s-2", status: 200, body: minimal,
			noRequestID: true, want: []string{sandbox.RequestIDHeader}},
		{name: "undocumented status", method: "POST", path: "/v1/sandboxes/s-2/pause", status: 200, want: []string{"status"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder(t)
			header := http.Header{}
			if !tc.noRequestID {
				header.Set(sandbox.RequestIDHeader, "req-1")
			}
			var body []byte
			if tc.body != nil {
				var err error
				if body, err = json.Marshal(tc.body); err != nil {
					t.Fatal(err)
				}
				header.Set("Content-Type", "application/json")
			}
			req := httptest.NewRequest(tc.method, tc.path, nil)
			s.CheckResponse(rec, req, tc.status, header, body)
			rec.expect(t, tc.want...)
		})
	}
}

// The diagnostics routes accept both the legacy text and the JSON descriptor.
func TestLifecycleDiagnosticsForms(t *testing.T) {
	s := Load(t, lifecycleDoc)
	text := http.Header{}
	text.Set(sandbox.RequestIDHeader, "r")
	text.Set("Content-Type", "text/plain; charset=utf-8")
	text.Set("Deprecation", "true")
	rec := newRecorder(t)
	s.CheckResponse(rec, httptest.NewRequest("GET", "/v1/sandboxes/s/diagnostics/logs?tail=5", nil), 200, text, []byte("line\n"))
	rec.expect(t)

	js := http.Header{}
	js.Set(sandbox.RequestIDHeader, "r")
	js.Set("Content-Type", "application/json")
	good := `{"sandboxId":"s","kind":"events","scope":"lifecycle","delivery":"inline",` +
		`"contentType":"text/plain; charset=utf-8","content":"x\n","truncated":false,"warnings":[]}`
	rec = newRecorder(t)
	s.CheckResponse(rec, httptest.NewRequest("GET", "/v1/sandboxes/s/diagnostics/events?scope=lifecycle", nil), 200, js, []byte(good))
	rec.expect(t)

	rec = newRecorder(t)
	bad := strings.Replace(good, `"kind":"events"`, `"kind":"metrics"`, 1)
	s.CheckResponse(rec, httptest.NewRequest("GET", "/v1/sandboxes/s/diagnostics/events?scope=lifecycle", nil), 200, js, []byte(bad))
	rec.expect(t, "kind")
}
