package e2e

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestServerMetrics: after a create on a real server, GET /metrics (with
// the API key; 401 without) shows the create counted and the sandbox
// Running, and the Docker driver's own log line about the create carries
// the request's id.
func TestServerMetrics(t *testing.T) {
	s := startServer(t, serverOpts{})
	sb := s.create(t, sandbox.CreateSandboxRequest{Image: &sandbox.ImageSpec{URI: minimalImage(t)}, Entrypoint: []string{"sleep", "100000"}})

	resp, err := http.Get(s.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /metrics without the key = %d, want 401", resp.StatusCode)
	}
	resp, err = getWithKey(s.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`opensandbox_sandbox_create_duration_seconds_count{outcome="ok"} 1`,
		`opensandbox_http_requests_total{code="202",method="POST",route="POST /v1/sandboxes"} 1`,
		`opensandbox_sandboxes{state="Running"} `,
	} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(text, want) {
			t.Errorf("GET /metrics = %d without %q:\n%s", resp.StatusCode, want, text)
		}
	}

	logs, err := os.ReadFile(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(string(logs), "\n") {
		if strings.Contains(line, `msg="sandbox created"`) && strings.Contains(line, "sandbox="+sb.ID) &&
			strings.Contains(line, "elapsed=") { // the driver's line, not the API's
			found = true
			if strings.Count(line, "request_id=") != 1 {
				t.Errorf("the driver's create log line has no single request_id: %s", line)
			}
		}
	}
	if !found {
		t.Errorf("no driver log line for the create of %s", sb.ID)
	}
}
