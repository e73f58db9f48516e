package server

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func TestEndpoints(t *testing.T) {
	tests := []struct {
		name, publicHost, path, host string
		want                         sandbox.Endpoint
	}{
		{"execd direct, through its own /proxy", "", "/v1/sandboxes/sb1/endpoints/44772", "",
			sandbox.Endpoint{Endpoint: "10.0.0.5:40772/proxy/44772", Headers: map[string]string{"X-EXECD-ACCESS-TOKEN": "token-sb1"}}},
		{"http port direct, no execd header", "", "/v1/sandboxes/sb1/endpoints/8080", "",
			sandbox.Endpoint{Endpoint: "10.0.0.5:40080"}},
		{"other port through execd proxy", "", "/v1/sandboxes/sb1/endpoints/3000", "",
			sandbox.Endpoint{Endpoint: "10.0.0.5:40772/proxy/3000", Headers: map[string]string{"X-EXECD-ACCESS-TOKEN": "token-sb1"}}},
		{"public host replaces runtime host", "sandbox.example", "/v1/sandboxes/sb1/endpoints/3000", "",
			sandbox.Endpoint{Endpoint: "sandbox.example:40772/proxy/3000", Headers: map[string]string{"X-EXECD-ACCESS-TOKEN": "token-sb1"}}},
		{"server proxy uses request host", "", "/v1/sandboxes/sb1/endpoints/44772?use_server_proxy=true", "api.internal:8080",
			sandbox.Endpoint{Endpoint: "api.internal:8080/sandboxes/sb1/proxy/44772"}},
		{"server proxy, 1 means true", "", "/v1/sandboxes/sb1/endpoints/3000?use_server_proxy=1", "api.internal:8080",
			sandbox.Endpoint{Endpoint: "api.internal:8080/sandboxes/sb1/proxy/3000"}},
		{"server proxy, True means true", "", "/sandboxes/sb1/endpoints/3000?use_server_proxy=True", "api.internal",
			sandbox.Endpoint{Endpoint: "api.internal/sandboxes/sb1/proxy/3000"}},
		{"server proxy with public host keeps the request's port", "sandbox.example", "/v1/sandboxes/sb1/endpoints/44772?use_server_proxy=true", "127.0.0.1:8080",
			sandbox.Endpoint{Endpoint: "sandbox.example:8080/sandboxes/sb1/proxy/44772"}},
		{"server proxy with public host behind port 443", "https://sandbox.example", "/v1/sandboxes/sb1/endpoints/44772?use_server_proxy=true", "sandbox.example",
			sandbox.Endpoint{Endpoint: "sandbox.example/sandboxes/sb1/proxy/44772"}},
		{"use_server_proxy=false is direct", "", "/v1/sandboxes/sb1/endpoints/8080?use_server_proxy=false", "",
			sandbox.Endpoint{Endpoint: "10.0.0.5:40080"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.PublicHost = tc.publicHost })
			e.rt.add(fakeSandbox("sb1"))
			var r reply
			if tc.host != "" {
				r = e.doHost(tc.host, tc.path)
			} else {
				r = e.do("GET", tc.path, nil)
			}
			if r.status != http.StatusOK {
				t.Fatalf("GET %s = %s", tc.path, r)
			}
			if got := decode[sandbox.Endpoint](t, r); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("GET %s = %+v, want %+v", tc.path, got, tc.want)
			}
		})
	}
}

// TestEndpointExecdWithoutPrefix: a runtime that reaches execd on a port
// of its own (Docker host mode) gives that address as is, with the token.
func TestEndpointExecdWithoutPrefix(t *testing.T) {
	e := newEnv(t)
	e.rt.add(fakeSandbox("sb1"))
	e.rt.address = func(id string, port int) (runtime.Address, error) {
		return runtime.Address{Host: "10.0.0.5", Port: 45001}, nil
	}
	r := e.do("GET", "/v1/sandboxes/sb1/endpoints/44772", nil)
	want := sandbox.Endpoint{Endpoint: "10.0.0.5:45001", Headers: map[string]string{"X-EXECD-ACCESS-TOKEN": "token-sb1"}}
	if r.status != http.StatusOK {
		t.Fatalf("GET endpoint 44772 = %s", r)
	}
	if got := decode[sandbox.Endpoint](t, r); !reflect.DeepEqual(got, want) {
		t.Errorf("GET endpoint 44772 = %+v, want %+v", got, want)
	}
}

func TestEndpointErrors(t *testing.T) {
	e := newEnv(t)
	e.rt.add(fakeSandbox("sb1"))
	paused := fakeSandbox("paused")
	paused.State = sandbox.StatePaused
	e.rt.add(paused)
	tests := []struct {
		path   string
		status int
		code   string
		want   string
	}{
		{"/v1/sandboxes/sb1/endpoints/0", 400, apierror.CodeInvalidRequest, "1 to 65535"},
		{"/v1/sandboxes/sb1/endpoints/65536", 400, apierror.CodeInvalidRequest, "1 to 65535"},
		{"/v1/sandboxes/sb1/endpoints/http", 400, apierror.CodeInvalidRequest, "port"},
		{"/v1/sandboxes/sb1/endpoints/80?use_server_proxy=maybe", 400, apierror.CodeInvalidRequest, "use_server_proxy"},
		{"/v1/sandboxes/sb1/endpoints/80?expires=1893456000", 400, apierror.CodeAPINotSupported, "ingress gateway"},
		{"/v1/sandboxes/sb1/endpoints/80?expires=1893456000&use_server_proxy=true", 400, apierror.CodeInvalidRequest, "cannot be combined"},
		{"/v1/sandboxes/nope/endpoints/80", 404, apierror.CodeSandboxNotFound, "nope"},
		{"/v1/sandboxes/paused/endpoints/44772", 409, apierror.CodeSandboxNotRunning, "Paused"},
		{"/v1/sandboxes/paused/endpoints/44772?use_server_proxy=true", 409, apierror.CodeSandboxNotRunning, "Paused"},
	}
	for _, tc := range tests {
		wantError(t, "GET "+tc.path, e.do("GET", tc.path, nil), tc.status, tc.code, tc.want)
	}
}

func TestDirectEndpointFormatting(t *testing.T) {
	tests := []struct {
		public string
		addr   runtimeAddress
		want   string
	}{
		{"", runtimeAddress{Host: "127.0.0.1", Port: 41000}, "127.0.0.1:41000"},
		{"", runtimeAddress{Host: "::1", Port: 41000, PathPrefix: "/proxy/80"}, "[::1]:41000/proxy/80"},
		{"h.example", runtimeAddress{Host: "127.0.0.1", Port: 41000, PathPrefix: "/proxy/80"}, "h.example:41000/proxy/80"},
	}
	for _, tc := range tests {
		if got := directEndpoint(tc.public, tc.addr); got != tc.want {
			t.Errorf("directEndpoint(%q, %+v) = %q, want %q", tc.public, tc.addr, got, tc.want)
		}
	}
}
