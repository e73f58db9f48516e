package server

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

var hex32 = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestAuth(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.OpenAPIJSON = []byte(`{}`) })
	e.rt.add(fakeSandbox("sb1"))
	tests := []struct {
		name, method, path, key string
		status                  int
		code                    string
	}{
		{"missing key", "GET", "/v1/sandboxes", "", http.StatusUnauthorized, apierror.CodeMissingAPIKey},
		{"wrong key", "GET", "/v1/sandboxes", "nope", http.StatusUnauthorized, apierror.CodeInvalidAPIKey},
		{"wrong key, same length", "GET", "/sandboxes/sb1", "test-kez", http.StatusUnauthorized, apierror.CodeInvalidAPIKey},
		{"missing key on delete", "DELETE", "/v1/sandboxes/sb1", "", http.StatusUnauthorized, apierror.CodeMissingAPIKey},
		{"missing key on snapshots", "GET", "/snapshots", "", http.StatusUnauthorized, apierror.CodeMissingAPIKey},
		{"good key", "GET", "/v1/sandboxes/sb1", testAPIKey, http.StatusOK, ""},
		{"health is open", "GET", "/health", "", http.StatusOK, ""},
		{"health under v1 is open", "GET", "/v1/health", "", http.StatusOK, ""},
		{"openapi is open", "GET", "/openapi.json", "", http.StatusOK, ""},
		// The proxy needs the key by default; with it the request goes on
		// and fails further on (no backend).
		{"missing key on the proxy", "GET", "/sandboxes/sb1/proxy/8080/x", "", http.StatusUnauthorized, apierror.CodeMissingAPIKey},
		{"wrong key on the proxy under v1", "GET", "/v1/sandboxes/sb1/proxy/8080", "nope", http.StatusUnauthorized, apierror.CodeInvalidAPIKey},
		{"missing key on a proxied upgrade path", "GET", "/v1/sandboxes/sb1/proxy/44772/pty/s1/ws", "", http.StatusUnauthorized, apierror.CodeMissingAPIKey},
		{"good key on the proxy", "GET", "/sandboxes/sb1/proxy/8080/x", testAPIKey, http.StatusBadGateway, apierror.CodeBadGateway},
	}
	e.rt.address = func(id string, port int) (runtimeAddress, error) {
		return runtimeAddress{Host: "127.0.0.1", Port: closedPort(t)}, nil
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.path, nil, sandbox.APIKeyHeader, tc.key)
			call := tc.method + " " + tc.path
			if tc.code == "" {
				if r.status != tc.status {
					t.Errorf("%s = %s, want %d", call, r, tc.status)
				}
				return
			}
			wantError(t, call, r, tc.status, tc.code)
		})
	}
}

func TestNoAuthWhenNoKey(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.APIKey = "" })
	if r := e.do("GET", "/v1/sandboxes", nil, sandbox.APIKeyHeader, ""); r.status != http.StatusOK {
		t.Errorf("GET /v1/sandboxes without key on an open server = %s, want 200", r)
	}
}

func TestRequestID(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, method, path, key, sent string
		status                        int
		echo                          bool
	}{
		{"success echoes", "GET", "/v1/sandboxes", testAPIKey, "abc-123", http.StatusOK, true},
		{"success generates", "GET", "/v1/sandboxes", testAPIKey, "", http.StatusOK, false},
		{"auth error echoes", "GET", "/v1/sandboxes", "", "req-1", http.StatusUnauthorized, true},
		{"404 echoes", "GET", "/v1/nothing", testAPIKey, "req-2", http.StatusNotFound, true},
		{"404 generates", "GET", "/nothing", "", "", http.StatusNotFound, false},
		{"405 echoes", "PUT", "/v1/sandboxes", testAPIKey, "req-3", http.StatusMethodNotAllowed, true},
		{"handler error echoes", "GET", "/v1/sandboxes/missing", testAPIKey, "req-4", http.StatusNotFound, true},
		{"too long is replaced", "GET", "/health", "", strings.Repeat("a", 129), http.StatusOK, false},
		{"longest kept", "GET", "/health", "", strings.Repeat("a", 128), http.StatusOK, true},
		{"control char is replaced", "GET", "/health", "", "a\tb", http.StatusOK, false},
		{"non-ASCII is replaced", "GET", "/health", "", "é", http.StatusOK, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.path, nil, sandbox.APIKeyHeader, tc.key, sandbox.RequestIDHeader, tc.sent)
			got := r.header.Get(sandbox.RequestIDHeader)
			if r.status != tc.status {
				t.Errorf("%s %s = %d, want %d", tc.method, tc.path, r.status, tc.status)
			}
			if tc.echo && got != tc.sent {
				t.Errorf("%s %s X-Request-ID = %q, want the sent %q", tc.method, tc.path, got, tc.sent)
			}
			if !tc.echo && !hex32.MatchString(got) {
				t.Errorf("%s %s X-Request-ID = %q, want a fresh 32-hex-digit id", tc.method, tc.path, got)
			}
		})
	}
	if !strings.Contains(e.logs.String(), "request_id=req-4") {
		t.Errorf("logs do not carry the request id req-4:\n%s", e.logs.String())
	}
}

func TestUnknownRouteAndMethod(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"GET", "/v1/nothing", http.StatusNotFound, apierror.CodeRouteNotFound, ""},
		{"GET", "/v2/sandboxes", http.StatusNotFound, apierror.CodeRouteNotFound, ""},
		{"PUT", "/v1/sandboxes", http.StatusMethodNotAllowed, apierror.CodeMethodNotAllowed, "GET, POST, HEAD"},
		{"POST", "/sandboxes/x", http.StatusMethodNotAllowed, apierror.CodeMethodNotAllowed, "GET, DELETE, HEAD"},
		{"GET", "/v1/sandboxes/x/pause", http.StatusMethodNotAllowed, apierror.CodeMethodNotAllowed, "POST"},
		{"POST", "/health", http.StatusMethodNotAllowed, apierror.CodeMethodNotAllowed, "GET, HEAD"},
	}
	for _, tc := range tests {
		r := e.do(tc.method, tc.path, nil)
		call := tc.method + " " + tc.path
		wantError(t, call, r, tc.status, tc.code)
		if got := strings.Join(r.header.Values("Allow"), ", "); got != tc.allow {
			t.Errorf("%s Allow = %q, want %q", call, got, tc.allow)
		}
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s Content-Type = %q, want application/json", call, ct)
		}
	}
}

func TestHealthAndOpenAPI(t *testing.T) {
	doc := []byte(`{"openapi":"3.0.3"}`)
	e := newEnv(t, func(c *Config) { c.OpenAPIJSON = doc })
	r := e.do("GET", "/health", nil)
	if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"status":"healthy"}` {
		t.Errorf("GET /health = %s, want 200 {\"status\":\"healthy\"}", r)
	}
	r = e.do("GET", "/openapi.json", nil)
	if r.status != http.StatusOK || string(r.body) != string(doc) || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("GET /openapi.json = %s (%s), want the configured document as application/json", r, r.header.Get("Content-Type"))
	}
}

func TestPanicBecomes500(t *testing.T) {
	e := newEnv(t)
	e.rt.address = func(id string, port int) (runtimeAddress, error) { panic("boom") }
	e.rt.add(fakeSandbox("sb1"))
	r := e.do("GET", "/v1/sandboxes/sb1/endpoints/9000", nil, sandbox.RequestIDHeader, "p-1")
	wantError(t, "GET endpoint with panicking runtime", r, http.StatusInternalServerError, apierror.CodeInternal)
	if got := r.header.Get(sandbox.RequestIDHeader); got != "p-1" {
		t.Errorf("X-Request-ID after panic = %q, want p-1", got)
	}
	if strings.Contains(string(r.body), "boom") {
		t.Errorf("500 body %s leaks the panic value", r.body)
	}
}

// TestOpenProxy: with OpenProxy the proxy route lets a caller without the
// key through (upstream's behaviour); the other routes still need it.
func TestOpenProxy(t *testing.T) {
	p := newProxyEnv(t, nil, func(c *Config) { c.OpenProxy = true })
	if r := p.do("GET", "/sandboxes/sb1/proxy/8080/x", nil, sandbox.APIKeyHeader, ""); r.status != http.StatusOK {
		t.Errorf("GET proxy without the key on an open proxy = %s, want 200", r)
	}
	wantError(t, "GET /v1/sandboxes without the key", p.do("GET", "/v1/sandboxes", nil, sandbox.APIKeyHeader, ""),
		http.StatusUnauthorized, apierror.CodeMissingAPIKey)
}

// TestProxyNeedsKeyByDefault: without OpenProxy a proxied request without
// the key never reaches the sandbox.
func TestProxyNeedsKeyByDefault(t *testing.T) {
	p := newProxyEnv(t, nil)
	wantError(t, "GET proxy without the key", p.do("GET", "/sandboxes/sb1/proxy/8080/x", nil, sandbox.APIKeyHeader, ""),
		http.StatusUnauthorized, apierror.CodeMissingAPIKey)
	if n := p.hits.Load(); n != 0 {
		t.Errorf("an unauthenticated proxied request reached the sandbox %d times", n)
	}
}
