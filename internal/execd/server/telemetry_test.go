package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func scrape(t *testing.T, base string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(testContext(t), "GET", base+"/metrics/prometheus", nil)
	req.Header.Set("X-EXECD-ACCESS-TOKEN", testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics/prometheus = %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return string(b)
}

func wantLine(t *testing.T, text, line string) {
	t.Helper()
	for _, l := range strings.Split(text, "\n") {
		if l == line {
			return
		}
	}
	t.Errorf("exposition lacks %q", line)
}

// The Prometheus exposition counts requests by route pattern and code,
// bytes both ways, and what execd runs; /metrics stays the sandbox's
// resource usage.
func TestPrometheusExposition(t *testing.T) {
	srv, _ := startServer(t)
	do(t, "GET", srv.URL+"/ping", "")
	do(t, "GET", srv.URL+"/ping", "")
	do(t, "GET", srv.URL+"/no/such/route", "")
	do(t, "GET", srv.URL+"/command/status/cmd-unknown", "")
	if code, body := do(t, "POST", srv.URL+"/command", `{"command":"sleep 30","background":true}`); code != 200 {
		t.Fatalf("background command: %d %s", code, body)
	}
	if code, body := do(t, "POST", srv.URL+"/session", `{}`); code != 200 {
		t.Fatalf("session: %d %s", code, body)
	}
	if code, body := do(t, "POST", srv.URL+"/command", `{"command":"printf hello"}`); code != 200 || !strings.Contains(body, "hello") {
		t.Fatalf("command: %d %s", code, body)
	}
	resp, err := http.Get(srv.URL + "/ping") // no token
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	text := scrape(t, srv.URL)
	wantLine(t, text, `execd_http_requests_total{code="200",route="GET /ping"} 2`)
	wantLine(t, text, `execd_http_requests_total{code="404",route="none"} 1`)
	wantLine(t, text, `execd_http_requests_total{code="401",route="none"} 1`)
	wantLine(t, text, `execd_http_requests_total{code="404",route="GET /command/{a}/{b}"} 1`)
	wantLine(t, text, `execd_http_requests_total{code="200",route="POST /command"} 2`)
	wantLine(t, text, `execd_http_request_duration_seconds_count{route="GET /ping"} 2`)
	wantLine(t, text, `execd_commands_running 1`)
	wantLine(t, text, `execd_sessions 1`)
	wantLine(t, text, `execd_code_contexts 0`)
	wantLine(t, text, `execd_terminals 0`)
	for _, prefix := range []string{
		`execd_http_request_body_bytes_total{route="POST /command"} `,
		`execd_http_response_body_bytes_total{route="POST /command"} `,
		`go_goroutines `,
		`process_resident_memory_bytes `,
	} {
		if !strings.Contains(text, "\n"+prefix) {
			t.Errorf("exposition lacks %q", prefix)
		}
	}
	// The contract's /metrics is unchanged: sandbox resource usage as JSON.
	if code, body := do(t, "GET", srv.URL+"/metrics", ""); code != 200 || !strings.Contains(body, `"cpu_count"`) {
		t.Errorf("GET /metrics = %d %s, want the sandbox metrics JSON", code, body)
	}
}
