package osbcli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/egress/api"
	"github.com/opensandbox-go/opensandbox/internal/egress/policy"
	"github.com/opensandbox-go/opensandbox/internal/egress/vault"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

const cliVaultSecret = "ghp_cli-test-secret-0001"

// fakeEgressServer is a lifecycle server knowing sandbox "eg-1", whose
// egress sidecar runs the real policy API and credential vault behind a
// token. It records the body of POST /v1/sandboxes.
type fakeEgressServer struct {
	env map[string]string

	mu      sync.Mutex
	created []byte
}

func newFakeEgressServer(t *testing.T) *fakeEgressServer {
	t.Helper()
	const token = "cli-egress-token"
	store, err := policy.NewStore(policy.DenyAll(policy.Options{}), policy.AlwaysFiles{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := api.New(api.Config{Store: store, Token: token, Vault: vault.Handler(vault.HandlerConfig{Store: vault.NewStore()})})
	if err != nil {
		t.Fatal(err)
	}
	sidecar := httptest.NewServer(a.Handler())
	t.Cleanup(sidecar.Close)

	f := &fakeEgressServer{}
	var srv *httptest.Server
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.created = b
		f.mu.Unlock()
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
	f.env = map[string]string{"OPEN_SANDBOX_DOMAIN": strings.TrimPrefix(srv.URL, "http://"), "OPEN_SANDBOX_API_KEY": "k"}
	return f
}

func TestEgressCommands(t *testing.T) {
	f := newFakeEgressServer(t)
	osb := func(stdin string, args ...string) (string, string) {
		t.Helper()
		code, out, errs := runOSBIn(t, stdin, f.env, args...)
		if code != 0 {
			t.Fatalf("osb %s: exit %d, stderr %q", strings.Join(args, " "), code, errs)
		}
		return out, errs
	}

	out, _ := osb("", "egress", "get", "eg-1")
	for _, want := range []string{"MODE", "deny_all", "DEFAULT", "deny", "RULES"} {
		if !strings.Contains(out, want) {
			t.Errorf("egress get: output lacks %q:\n%s", want, out)
		}
	}

	out, _ = osb("", "egress", "patch", "eg-1", "--rule", "allow=pypi.org", "--rule", "DENY=*.example.com")
	if !strings.Contains(out, "enforcing") || !strings.Contains(out, "allow pypi.org") || !strings.Contains(out, "deny *.example.com") {
		t.Errorf("egress patch: output lacks the new rules:\n%s", out)
	}

	out, _ = osb("", "egress", "get", "eg-1", "-o", "json")
	var st sandbox.PolicyStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("egress get -o json: %v\n%s", err, out)
	}
	if st.Policy == nil || len(st.Policy.Egress) != 2 || st.Policy.Egress[0] != (sandbox.NetworkRule{Action: "allow", Target: "pypi.org"}) {
		t.Errorf("egress get -o json = %+v, want the two patched rules, pypi.org first", st.Policy)
	}

	out, _ = osb("", "egress", "delete", "eg-1", "pypi.org")
	if strings.Contains(out, "pypi.org") || !strings.Contains(out, "*.example.com") {
		t.Errorf("egress delete pypi.org: output:\n%s", out)
	}

	out, _ = osb("defaultAction: allow\negress:\n  - {action: deny, target: ads.example}\n", "egress", "set", "eg-1", "--file", "-", "-o", "yaml")
	if !strings.Contains(out, "defaultAction: allow") || !strings.Contains(out, "target: ads.example") || strings.Contains(out, "example.com") {
		t.Errorf("egress set from stdin: output:\n%s", out)
	}
}

func TestCredentialVaultCommands(t *testing.T) {
	f := newFakeEgressServer(t)
	vaultYAML := `credentials:
  - name: github
    source: {type: inline, value: ` + cliVaultSecret + `}
bindings:
  - name: github-api
    match: {hosts: [api.github.com]}
    auth: {type: bearer, credential: github}
`
	var outputs []string
	osb := func(stdin string, wantCode int, args ...string) (string, string) {
		t.Helper()
		code, out, errs := runOSBIn(t, stdin, f.env, args...)
		outputs = append(outputs, out, errs)
		if code != wantCode {
			t.Fatalf("osb %s: exit %d, want %d; stderr %q", strings.Join(args, " "), code, wantCode, errs)
		}
		return out, errs
	}

	_, errs := osb("", 1, "credential-vault", "get", "eg-1")
	if !strings.Contains(errs, "404") || !strings.Contains(errs, "osb credential-vault create eg-1") {
		t.Errorf("credential-vault get before create: stderr %q, want 404 with a hint to create", errs)
	}

	out, _ := osb(vaultYAML, 0, "credential-vault", "create", "eg-1", "--file", "-")
	if !strings.Contains(out, "REVISION") || !strings.Contains(out, "github (inline, revision 1)") || !strings.Contains(out, "github-api: api.github.com -> bearer") {
		t.Errorf("credential-vault create: output:\n%s", out)
	}
	_, errs = osb(vaultYAML, 1, "credential-vault", "create", "eg-1", "--file", "-")
	if !strings.Contains(errs, "409") || !strings.Contains(errs, "already exists") {
		t.Errorf("second credential-vault create: stderr %q, want 409 already exists", errs)
	}

	out, _ = osb("", 0, "credential-vault", "credential", "list", "eg-1")
	if !strings.Contains(out, "NAME") || !strings.Contains(out, "github") {
		t.Errorf("credential list: output:\n%s", out)
	}
	out, _ = osb("", 0, "credential-vault", "binding", "get", "eg-1", "github-api", "-o", "json")
	var b sandbox.CredentialBindingMetadata
	if err := json.Unmarshal([]byte(out), &b); err != nil || b.Match == nil || len(b.Match.Ports) != 1 || b.Match.Ports[0] != 443 {
		t.Errorf("binding get -o json = %+v (%v), want port 443 filled in:\n%s", b, err, out)
	}

	patch := filepath.Join(t.TempDir(), "patch.json")
	os.WriteFile(patch, []byte(`{"credentials":{"replace":[{"name":"github","source":{"type":"inline","value":"`+cliVaultSecret+`2"}}]}}`), 0o600)
	_, errs = osb("", 1, "credential-vault", "patch", "eg-1", "--file", patch, "--expected-revision", "9")
	if !strings.Contains(errs, "409") {
		t.Errorf("patch with a stale revision: stderr %q, want 409", errs)
	}
	out, _ = osb("", 0, "credential-vault", "patch", "eg-1", "--file", patch, "--expected-revision", "1", "-o", "json")
	if !strings.Contains(out, `"revision": 2`) {
		t.Errorf("patch at revision 1: output:\n%s", out)
	}

	osb("", 0, "credential-vault", "delete", "eg-1")
	osb("", 1, "credential-vault", "binding", "list", "eg-1")

	for _, o := range outputs {
		if strings.Contains(o, cliVaultSecret) {
			t.Errorf("osb output leaks the secret value: %s", o)
		}
	}
}

func TestSandboxCreateEgressFlags(t *testing.T) {
	f := newFakeEgressServer(t)
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	os.WriteFile(policyFile, []byte("defaultAction: deny\negress:\n  - action: allow\n    target: pypi.org\n"), 0o600)
	code, _, errs := runOSBIn(t, "", f.env, "sandbox", "create", "-i", "python:3.12", "--network-policy-file", policyFile, "--credential-proxy")
	if code != 0 {
		t.Fatalf("sandbox create: exit %d, stderr %q", code, errs)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var req sandbox.CreateSandboxRequest
	if err := json.Unmarshal(f.created, &req); err != nil {
		t.Fatal(err)
	}
	if req.NetworkPolicy == nil || req.NetworkPolicy.DefaultAction != "deny" || len(req.NetworkPolicy.Egress) != 1 {
		t.Errorf("networkPolicy sent = %+v, want the file's", req.NetworkPolicy)
	}
	if req.CredentialProxy == nil || !req.CredentialProxy.Enabled {
		t.Errorf("credentialProxy sent = %+v, want enabled", req.CredentialProxy)
	}
}
