package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/egress/api"
	"github.com/opensandbox-go/opensandbox/internal/egress/policy"
	"github.com/opensandbox-go/opensandbox/internal/egress/vault"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

const (
	egressToken  = "egress-token-1"
	vaultSecretA = "sk-live-egress-sdk-secret-A"
	vaultSecretB = "sk-live-egress-sdk-secret-B"
)

// egressEnv is a lifecycle server whose sandbox "sb1" has an egress sidecar
// served by the real policy API and credential vault, behind the token.
type egressEnv struct {
	client    *sandbox.Client
	endpoints atomic.Int32 // endpoint calls for port 18080

	mu      sync.Mutex
	bodies  []string // every reply body the sidecar sent
	sent    []string // every request body the sidecar received
	queries []string // raw queries of the endpoint calls
}

func newEgressEnv(t *testing.T, opts ...sandbox.Option) *egressEnv {
	t.Helper()
	env := &egressEnv{}
	store, err := policy.NewStore(policy.DenyAll(policy.Options{}), policy.AlwaysFiles{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := api.New(api.Config{
		Store: store,
		Token: egressToken,
		Vault: vault.Handler(vault.HandlerConfig{Store: vault.NewStore()}),
	})
	if err != nil {
		t.Fatal(err)
	}
	sidecar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(in))
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, r)
		env.mu.Lock()
		env.sent = append(env.sent, string(in))
		env.bodies = append(env.bodies, rec.Body.String())
		env.mu.Unlock()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(sidecar.Close)
	sidecarHost := strings.TrimPrefix(sidecar.URL, "http://")

	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(sandbox.SandboxInfo{ID: r.PathValue("id"), Status: sandbox.SandboxStatus{State: sandbox.StateRunning}})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/endpoints/44772", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(sandbox.Endpoint{Endpoint: "127.0.0.1:1/execd"})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/endpoints/18080", func(w http.ResponseWriter, r *http.Request) {
		env.endpoints.Add(1)
		env.mu.Lock()
		env.queries = append(env.queries, r.URL.RawQuery)
		env.mu.Unlock()
		token := egressToken
		switch r.PathValue("id") {
		case "wrong-token":
			token = "not-the-token"
		case "sb1":
		default:
			http.Error(w, `{"code":"SANDBOX::NOT_FOUND","message":"no such sandbox"}`, http.StatusNotFound)
			return
		}
		json.NewEncoder(w).Encode(sandbox.Endpoint{Endpoint: sidecarHost, Headers: map[string]string{sandbox.EgressAuthHeader: token}})
	})
	lifecycle := httptest.NewServer(mux)
	t.Cleanup(lifecycle.Close)
	c, err := sandbox.NewClient(append([]sandbox.Option{sandbox.WithDomain(lifecycle.URL), sandbox.WithAPIKey("k")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	env.client = c
	return env
}

func apiStatus(t *testing.T, call string, err error, want int) *sandbox.APIError {
	t.Helper()
	var ae *sandbox.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("%s: err = %v, want *APIError with status %d", call, err, want)
	}
	if ae.StatusCode != want {
		t.Fatalf("%s: status %d (%v), want %d", call, ae.StatusCode, err, want)
	}
	return ae
}

func TestEgressPolicy(t *testing.T) {
	ctx := context.Background()
	env := newEgressEnv(t)
	sb, err := env.client.Connect(ctx, "sb1", sandbox.ConnectOptions{SkipHealthCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	eg := sb.Egress()
	if sb.Egress() != eg {
		t.Error("Sandbox.Egress returned a new client on the second call")
	}
	if err := eg.Health(ctx); err != nil {
		t.Fatalf("Health: %v", err)
	}

	st, err := eg.GetPolicy(ctx)
	if err != nil {
		t.Fatalf("GetPolicy: %v", err)
	}
	if st.Mode != sandbox.EgressModeDenyAll {
		t.Errorf("GetPolicy mode = %q, want %q", st.Mode, sandbox.EgressModeDenyAll)
	}

	st, err = eg.SetPolicy(ctx, &sandbox.NetworkPolicy{DefaultAction: "deny", Egress: []sandbox.NetworkRule{{Action: "allow", Target: "pypi.org"}}})
	if err != nil {
		t.Fatalf("SetPolicy: %v", err)
	}
	if st.Mode != sandbox.EgressModeEnforcing || len(st.Policy.Egress) != 1 {
		t.Errorf("SetPolicy = %+v, want enforcing with one rule", st)
	}

	st, err = eg.PatchPolicy(ctx, []sandbox.NetworkRule{{Action: "deny", Target: "*.example.com"}, {Action: "allow", Target: "files.pythonhosted.org"}})
	if err != nil {
		t.Fatalf("PatchPolicy: %v", err)
	}
	want := []sandbox.NetworkRule{{Action: "deny", Target: "*.example.com"}, {Action: "allow", Target: "files.pythonhosted.org"}, {Action: "allow", Target: "pypi.org"}}
	if got := st.Policy.Egress; !equalRules(got, want) {
		t.Errorf("PatchPolicy rules = %v, want %v", got, want)
	}

	st, err = eg.DeletePolicyRules(ctx, []string{"pypi.org", "*.example.com", "never.there"})
	if err != nil {
		t.Fatalf("DeletePolicyRules: %v", err)
	}
	if got, want := st.Policy.Egress, []sandbox.NetworkRule{{Action: "allow", Target: "files.pythonhosted.org"}}; !equalRules(got, want) || st.Policy.DefaultAction != "deny" {
		t.Errorf("DeletePolicyRules = %+v, want %v with default deny", st.Policy, want)
	}
	if st, err = eg.GetPolicy(ctx); err != nil || !equalRules(st.Policy.Egress, []sandbox.NetworkRule{{Action: "allow", Target: "files.pythonhosted.org"}}) {
		t.Errorf("GetPolicy after changes = %+v, %v", st, err)
	}

	_, err = eg.PatchPolicy(ctx, []sandbox.NetworkRule{{Action: "allow", Target: ""}})
	ae := apiStatus(t, "PatchPolicy with an empty target", err, http.StatusBadRequest)
	if ae.Code != "EGRESS::BAD_REQUEST" || ae.Message == "" || strings.HasPrefix(ae.Message, "{") {
		t.Errorf("PatchPolicy with an empty target: code %q message %q, want EGRESS::BAD_REQUEST and the sidecar's text", ae.Code, ae.Message)
	}
	if _, err := eg.PatchPolicy(ctx, nil); err == nil {
		t.Error("PatchPolicy(nil) succeeded, want an error")
	}

	if n := env.endpoints.Load(); n != 1 {
		t.Errorf("endpoint of port 18080 resolved %d times, want 1 (cached)", n)
	}
}

func equalRules(a, b []sandbox.NetworkRule) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestEgressToken(t *testing.T) {
	ctx := context.Background()
	env := newEgressEnv(t)
	_, err := env.client.Egress("wrong-token").GetPolicy(ctx)
	ae := apiStatus(t, "GetPolicy with a wrong token", err, http.StatusUnauthorized)
	if !sandbox.IsUnauthorized(err) || ae.Code != "EGRESS::UNAUTHORIZED" || ae.Message != "unauthorized" {
		t.Errorf("GetPolicy with a wrong token = %#v, want EGRESS::UNAUTHORIZED \"unauthorized\"", ae)
	}
	_, err = env.client.Egress("gone").GetPolicy(ctx)
	if ae := apiStatus(t, "GetPolicy of an unknown sandbox", err, http.StatusNotFound); ae.Code != "SANDBOX::NOT_FOUND" {
		t.Errorf("GetPolicy of an unknown sandbox: code %q, want the lifecycle server's", ae.Code)
	}
}

func TestEgressServerProxy(t *testing.T) {
	env := newEgressEnv(t, sandbox.WithServerProxy(true))
	if _, err := env.client.Egress("sb1").GetPolicy(context.Background()); err != nil {
		t.Fatal(err)
	}
	env.mu.Lock()
	defer env.mu.Unlock()
	if len(env.queries) != 1 || env.queries[0] != "use_server_proxy=true" {
		t.Errorf("endpoint queries = %q, want [use_server_proxy=true]", env.queries)
	}
}

func TestCredentialVault(t *testing.T) {
	ctx := context.Background()
	env := newEgressEnv(t)
	sb, err := env.client.Connect(ctx, "sb1", sandbox.ConnectOptions{SkipHealthCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	v := sb.CredentialVault()

	_, err = v.Get(ctx)
	if !sandbox.IsNotFound(err) {
		t.Fatalf("Get before Create: err = %v, want 404", err)
	}
	req := sandbox.CreateCredentialVaultRequest{
		Credentials: []sandbox.Credential{
			{Name: "gh", Source: sandbox.CredentialSource{Type: sandbox.CredentialSourceInline, Value: vaultSecretA}},
		},
		Bindings: []sandbox.CredentialBinding{
			{Name: "github", Match: sandbox.CredentialMatch{Hosts: []string{"api.github.com"}}, Auth: sandbox.CredentialAuth{Type: sandbox.CredentialAuthBearer, Credential: "gh"}},
		},
	}
	st, err := v.Create(ctx, req)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if st.Revision != 1 || len(st.Credentials) != 1 || st.Credentials[0].SourceType != "inline" {
		t.Errorf("Create = %+v, want revision 1 with credential gh", st)
	}
	_, err = v.Create(ctx, req)
	if !sandbox.IsConflict(err) {
		t.Errorf("second Create: err = %v, want 409", err)
	}

	if st, err = v.Get(ctx); err != nil || st.Revision != 1 {
		t.Errorf("Get = %+v, %v; want revision 1", st, err)
	}
	creds, err := v.ListCredentials(ctx)
	if err != nil || len(creds.Credentials) != 1 || creds.Credentials[0].Name != "gh" {
		t.Errorf("ListCredentials = %+v, %v", creds, err)
	}
	cm, err := v.GetCredential(ctx, "gh")
	if err != nil || cm.Name != "gh" || cm.Revision != 1 {
		t.Errorf("GetCredential(gh) = %+v, %v", cm, err)
	}
	if _, err := v.GetCredential(ctx, "nope"); !sandbox.IsNotFound(err) {
		t.Errorf("GetCredential(nope): err = %v, want 404", err)
	}
	binds, err := v.ListBindings(ctx)
	if err != nil || len(binds.Bindings) != 1 {
		t.Errorf("ListBindings = %+v, %v", binds, err)
	}
	bm, err := v.GetBinding(ctx, "github")
	if err != nil || bm.Auth == nil || bm.Auth.Type != sandbox.CredentialAuthBearer || bm.Match == nil || len(bm.Match.Ports) == 0 {
		t.Errorf("GetBinding(github) = %+v, %v; want bearer with defaults filled in", bm, err)
	}

	stale := int64(7)
	_, err = v.Patch(ctx, sandbox.PatchCredentialVaultRequest{ExpectedRevision: &stale, Credentials: &sandbox.CredentialMutations{Delete: []string{"gh"}}})
	if ae := apiStatus(t, "Patch with a stale revision", err, http.StatusConflict); ae.Code != "EGRESS::CONFLICT" {
		t.Errorf("Patch with a stale revision: code %q, want EGRESS::CONFLICT", ae.Code)
	}
	cur := int64(1)
	st, err = v.Patch(ctx, sandbox.PatchCredentialVaultRequest{ExpectedRevision: &cur, Credentials: &sandbox.CredentialMutations{
		Replace: []sandbox.Credential{{Name: "gh", Source: sandbox.CredentialSource{Type: sandbox.CredentialSourceInline, Value: vaultSecretB}}},
	}})
	if err != nil || st.Revision != 2 {
		t.Fatalf("Patch at revision 1 = %+v, %v; want revision 2", st, err)
	}
	_, err = v.Patch(ctx, sandbox.PatchCredentialVaultRequest{Bindings: &sandbox.CredentialBindingMutations{
		Add: []sandbox.CredentialBinding{{Name: "x", Match: sandbox.CredentialMatch{Hosts: []string{"x.test"}}, Auth: sandbox.CredentialAuth{Type: sandbox.CredentialAuthBearer, Credential: "missing"}}},
	}})
	apiStatus(t, "Patch with an unknown credential", err, http.StatusBadRequest)

	if err := v.Delete(ctx); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := v.Get(ctx); !sandbox.IsNotFound(err) {
		t.Errorf("Get after Delete: err = %v, want 404", err)
	}

	env.mu.Lock()
	defer env.mu.Unlock()
	for _, b := range env.bodies {
		if strings.Contains(b, vaultSecretA) || strings.Contains(b, vaultSecretB) {
			t.Errorf("a sidecar reply leaks a secret value: %s", b)
		}
	}
	if len(env.bodies) < 10 {
		t.Errorf("sidecar saw %d requests, want every vault call", len(env.bodies))
	}
}

// TestCredentialVaultCreateSendsArrays checks that nil slices go out as
// [] (the contract's arrays are not nullable).
func TestCredentialVaultCreateSendsArrays(t *testing.T) {
	ctx := context.Background()
	env := newEgressEnv(t)
	sb, err := env.client.Connect(ctx, "sb1", sandbox.ConnectOptions{SkipHealthCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.CredentialVault().Create(ctx, sandbox.CreateCredentialVaultRequest{}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	env.mu.Lock()
	defer env.mu.Unlock()
	if got := env.sent[len(env.sent)-1]; got != `{"credentials":[],"bindings":[]}` {
		t.Fatalf("request body = %s", got)
	}
}
