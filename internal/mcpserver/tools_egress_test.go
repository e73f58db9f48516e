package mcpserver

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/egress/api"
	"github.com/opensandbox-go/opensandbox/internal/egress/policy"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// fakeEgressLifecycle is a lifecycle server knowing sandbox "eg-1", whose
// egress sidecar runs the real policy API behind a token. It keeps the
// body of the last POST /v1/sandboxes.
func fakeEgressLifecycle(t *testing.T) (srv *httptest.Server, created func() []byte) {
	t.Helper()
	const token = "mcp-egress-token"
	store, err := policy.NewStore(policy.DenyAll(policy.Options{}), policy.AlwaysFiles{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := api.New(api.Config{Store: store, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	sidecar := httptest.NewServer(a.Handler())
	t.Cleanup(sidecar.Close)

	var mu sync.Mutex
	var body []byte
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		body = b
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		json.NewEncoder(w).Encode(sandbox.CreateSandboxResponse{ID: "eg-1", Status: sandbox.SandboxStatus{State: sandbox.StateRunning}})
	})
	mux.HandleFunc("GET /v1/sandboxes/eg-1", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(sandbox.SandboxInfo{ID: "eg-1", Status: sandbox.SandboxStatus{State: sandbox.StateRunning}})
	})
	mux.HandleFunc("GET /v1/sandboxes/eg-1/endpoints/44772", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(sandbox.Endpoint{Endpoint: strings.TrimPrefix(srv.URL, "http://") + "/execd"})
	})
	mux.HandleFunc("GET /execd/ping", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("GET /v1/sandboxes/eg-1/endpoints/18080", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(sandbox.Endpoint{Endpoint: strings.TrimPrefix(sidecar.URL, "http://"), Headers: map[string]string{sandbox.EgressAuthHeader: token}})
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, func() []byte {
		mu.Lock()
		defer mu.Unlock()
		return body
	}
}

func TestEgressTools(t *testing.T) {
	srv, created := fakeEgressLifecycle(t)
	cs := connect(t, srv.URL, Config{})

	res := call(t, cs, "sandbox_create", map[string]any{
		"image":            "python:3.12",
		"network_policy":   map[string]any{"default_action": "deny", "egress": []any{map[string]any{"action": "allow", "target": "pypi.org"}}},
		"credential_proxy": true,
	})
	if res.IsError {
		t.Fatalf("sandbox_create: tool error %s", text(res))
	}
	var req sandbox.CreateSandboxRequest
	if err := json.Unmarshal(created(), &req); err != nil {
		t.Fatal(err)
	}
	if req.NetworkPolicy == nil || req.NetworkPolicy.DefaultAction != "deny" || len(req.NetworkPolicy.Egress) != 1 || req.CredentialProxy == nil || !req.CredentialProxy.Enabled {
		t.Errorf("sandbox_create sent networkPolicy %+v, credentialProxy %+v; want the policy and enabled", req.NetworkPolicy, req.CredentialProxy)
	}

	res = call(t, cs, "egress_get_policy", map[string]any{"sandbox_id": "eg-1"})
	if res.IsError {
		t.Fatalf("egress_get_policy: tool error %s", text(res))
	}
	var got EgressPolicyOut
	remarshal(t, res.StructuredContent, &got)
	if got.Mode != sandbox.EgressModeDenyAll || got.DefaultAction != "deny" || len(got.Egress) != 0 {
		t.Errorf("egress_get_policy = %+v, want deny_all with no rules", got)
	}

	res = call(t, cs, "egress_patch_policy", map[string]any{"sandbox_id": "eg-1", "rules": []any{
		map[string]any{"action": "Allow", "target": "pypi.org"},
		map[string]any{"action": "deny", "target": "*.example.com"},
	}})
	if res.IsError {
		t.Fatalf("egress_patch_policy: tool error %s", text(res))
	}
	remarshal(t, res.StructuredContent, &got)
	want := []EgressRuleIn{{Action: "allow", Target: "pypi.org"}, {Action: "deny", Target: "*.example.com"}}
	if got.Mode != sandbox.EgressModeEnforcing || len(got.Egress) != 2 || got.Egress[0] != want[0] || got.Egress[1] != want[1] {
		t.Errorf("egress_patch_policy = %+v, want enforcing with %v", got, want)
	}

	for _, tt := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"sandbox_id": "eg-1", "rules": []any{}}, "rules"},
		{map[string]any{"sandbox_id": "eg-1", "rules": []any{map[string]any{"action": "permit", "target": "a.com"}}}, "rules[0].action"},
		{map[string]any{"sandbox_id": "eg-1", "rules": []any{map[string]any{"action": "allow", "target": " "}}}, "rules[0].target"},
		{map[string]any{"sandbox_id": "nope", "rules": []any{map[string]any{"action": "allow", "target": "a.com"}}}, "no egress sidecar"},
	} {
		res := call(t, cs, "egress_patch_policy", tt.args)
		if !res.IsError || !strings.Contains(text(res), tt.want) {
			t.Errorf("egress_patch_policy(%v) = IsError %v %q, want a tool error mentioning %q", tt.args, res.IsError, text(res), tt.want)
		}
	}
	if res := call(t, cs, "sandbox_create", map[string]any{"image": "x", "credential_proxy": true}); !res.IsError || !strings.Contains(text(res), "network_policy") {
		t.Errorf("sandbox_create(credential_proxy without network_policy) = IsError %v %q, want a tool error", res.IsError, text(res))
	}
}
