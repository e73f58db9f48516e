package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestMetricsEndpoint: GET /metrics needs the API key and shows the
// create, request, state, delete and failure metrics the API recorded.
func TestMetricsEndpoint(t *testing.T) {
	e := newEnv(t)
	id := e.createSandbox(createBody())
	if r := e.do("DELETE", "/v1/sandboxes/"+id, nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE = %s", r)
	}
	e.createSandbox(createBody())
	e.rt.mu.Lock()
	e.rt.createErr = fmt.Errorf("engine exploded")
	e.rt.mu.Unlock()
	e.do("POST", "/v1/sandboxes", createBody())

	wantError(t, "GET /metrics without the key", e.do("GET", "/metrics", nil, sandbox.APIKeyHeader, ""),
		http.StatusUnauthorized, apierror.CodeMissingAPIKey)
	r := e.do("GET", "/metrics", nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /metrics = %s", r)
	}
	text := string(r.body)
	for _, want := range []string{
		`opensandbox_sandbox_create_duration_seconds_count{outcome="ok"} 2`,
		`opensandbox_sandbox_create_duration_seconds_count{outcome="error"} 1`,
		`opensandbox_sandbox_delete_duration_seconds_count{outcome="ok",reason="user_delete"} 1`,
		`opensandbox_http_requests_total{code="202",method="POST",route="POST /v1/sandboxes"} 2`,
		`opensandbox_http_requests_total{code="204",method="DELETE",route="DELETE /v1/sandboxes/{sandboxId}"} 1`,
		`opensandbox_http_requests_total{code="401",method="GET",route="GET /metrics"} 1`,
		`opensandbox_http_request_duration_seconds_count{method="POST",route="POST /v1/sandboxes"} 3`,
		`opensandbox_sandboxes{state="Running"} 1`,
		`opensandbox_engine_errors_total{op="POST /v1/sandboxes"} 1`,
		`go_goroutines `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics has no %q:\n%s", want, grepLines(text, "opensandbox_"))
		}
	}
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
