package openapitest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	egressapi "github.com/opensandbox-go/opensandbox/internal/egress/api"
	"github.com/opensandbox-go/opensandbox/internal/egress/policy"
	"github.com/opensandbox-go/opensandbox/internal/egress/vault"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

const egressDoc = "api/egress.yaml"

// egressOps is every operation the egress document must describe.
var egressOps = map[string][]string{
	"/policy":                       {"GET", "POST", "PUT", "PATCH", "DELETE"},
	"/healthz":                      {"GET"},
	"/credential-vault":             {"GET", "POST", "PATCH", "DELETE"},
	"/credential-vault/credentials": {"GET"},
	"/credential-vault/credentials/{credential_name}": {"GET"},
	"/credential-vault/bindings":                      {"GET"},
	"/credential-vault/bindings/{binding_name}":       {"GET"},
	"/credential-vault/_active":                       {"GET"},
}

func TestEgressDocumentIsValid(t *testing.T) {
	full := RepoPath(egressDoc)
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
	for path, methods := range egressOps {
		item := doc.Paths.Value(path)
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
			if open != (path == "/healthz") {
				t.Errorf("%s %s: open (security: []) = %v", m, path, open)
			}
			if !open && op.Responses.Value("401") == nil {
				t.Errorf("%s %s: no 401 response", m, path)
			}
		}
		if n, want := len(item.Operations()), len(methods); n != want {
			t.Errorf("%s has %d operations, test knows %d: update the test", path, n, want)
		}
	}
	if n := doc.Paths.Len(); n != len(egressOps) {
		t.Errorf("document has %d paths, test knows %d: update the test", n, len(egressOps))
	}
	// Writes of the vault carry secrets: each documents the 426 answer.
	for _, m := range []string{"POST", "PATCH", "DELETE"} {
		if op := doc.Paths.Value("/credential-vault").GetOperation(m); op != nil && op.Responses.Value("426") == nil {
			t.Errorf("%s /credential-vault: no 426 response", m)
		}
	}
}

// The credential's secret is write-only, and no reply of the document can
// carry a secret: no schema reachable from a response has a writeOnly
// property or one called "value".
func TestEgressDocumentSecretsAreWriteOnly(t *testing.T) {
	s := Load(t, egressDoc)
	src := s.Doc.Components.Schemas["CredentialSource"]
	if src == nil || src.Value.Properties["value"] == nil || !src.Value.Properties["value"].Value.WriteOnly {
		t.Fatal("CredentialSource.value is not writeOnly")
	}
	reqCred := s.Doc.Paths.Value("/credential-vault").Post.RequestBody.Value.Content.Get("application/json").Schema
	if !reaches(reqCred, src.Value, map[*openapi3.Schema]bool{}) {
		t.Error("POST /credential-vault's body does not use CredentialSource")
	}
	for path, item := range s.Doc.Paths.Map() {
		for method, op := range item.Operations() {
			for code, resp := range op.Responses.Map() {
				for mt, media := range resp.Value.Content {
					walkSchema(media.Schema, "", map[*openapi3.Schema]bool{}, func(where string, sc *openapi3.Schema) {
						for name, p := range sc.Properties {
							if name == "value" || p.Value.WriteOnly {
								t.Errorf("%s %s %s %s: reply schema has property %s%s (writeOnly %v)", method, path, code, mt, where, name, p.Value.WriteOnly)
							}
						}
					})
				}
			}
		}
	}
}

// walkSchema calls fn on ref's schema and every schema below it.
func walkSchema(ref *openapi3.SchemaRef, where string, seen map[*openapi3.Schema]bool, fn func(string, *openapi3.Schema)) {
	if ref == nil || ref.Value == nil || seen[ref.Value] {
		return
	}
	sc := ref.Value
	seen[sc] = true
	fn(where, sc)
	for name, p := range sc.Properties {
		walkSchema(p, where+name+".", seen, fn)
	}
	walkSchema(sc.Items, where+"[].", seen, fn)
	if sc.AdditionalProperties.Schema != nil {
		walkSchema(sc.AdditionalProperties.Schema, where+"*.", seen, fn)
	}
	for _, l := range []openapi3.SchemaRefs{sc.OneOf, sc.AnyOf, sc.AllOf} {
		for _, r := range l {
			walkSchema(r, where, seen, fn)
		}
	}
}

func reaches(ref *openapi3.SchemaRef, target *openapi3.Schema, seen map[*openapi3.Schema]bool) bool {
	found := false
	walkSchema(ref, "", seen, func(_ string, sc *openapi3.Schema) { found = found || sc == target })
	return found
}

// vaultCreate creates a vault of one credential and one binding.
const vaultCreate = `{"credentials":[{"name":"key","source":{"type":"inline","value":"s3cret-value"}}],
	"bindings":[{"name":"svc","match":{"hosts":["pypi.org"]},"auth":{"type":"apiKey","name":"X-Api-Key","credential":"key"}}]}`

// Real replies of the egress API, successes and errors, satisfy the
// document.
func TestEgressDocumentMatchesServer(t *testing.T) {
	s := Load(t, egressDoc)
	p, err := policy.Parse([]byte(`{"egress":[{"action":"allow","target":"pypi.org"}]}`), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	store, err := policy.NewStore(p, policy.AlwaysFiles{})
	if err != nil {
		t.Fatal(err)
	}
	var applyErr, readyErr error
	proxyReady := true
	a, err := egressapi.New(egressapi.Config{
		Store:   store,
		Options: policy.Options{MaxRules: 3},
		Token:   "tok",
		Apply:   func(context.Context, *policy.Policy) error { return applyErr },
		Ready:   func(context.Context) error { return readyErr },
		Reason:  func() string { return "dns only" },
		Vault: vault.Handler(vault.HandlerConfig{
			Store: vault.NewStore(),
			Ready: func() bool { return proxyReady },
		}),
		MaxBodyBytes: 256,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	rec := newRecorder(t)
	client := &http.Client{Transport: s.Transport(rec, srv.Client().Transport)}

	cases := []struct {
		name, method, path, body, token string
		status                          int
		applyFails, notReady            bool
		proxyNotReady                   bool
	}{
		{name: "get", method: "GET", path: "/policy", status: 200},
		{name: "post", method: "POST", path: "/policy", body: `{"defaultAction":"Allow","egress":[{"target":"10.0.0.0/8"}]}`, status: 200},
		{name: "put empty", method: "PUT", path: "/policy", status: 200},
		{name: "patch", method: "PATCH", path: "/policy", body: `[{"action":"allow","target":"*.example.com"}]`, status: 200},
		{name: "delete", method: "DELETE", path: "/policy", body: `["*.example.com"]`, status: 200},
		{name: "bad request", method: "POST", path: "/policy", body: `{"defaultAction":"maybe"}`, status: 400},
		{name: "unauthorized", method: "GET", path: "/policy", token: "wrong", status: 401},
		{name: "too many rules", method: "PATCH", path: "/policy", body: `[{"target":"a.b"},{"target":"c.d"},{"target":"e.f"},{"target":"g.h"}]`, status: 413},
		{name: "too large", method: "PUT", path: "/policy", body: `{"egress":[` + strings.Repeat(" ", 300) + `]}`, status: 413},
		{name: "not applied", method: "DELETE", path: "/policy", body: `["pypi.org"]`, status: 500, applyFails: true},
		{name: "healthz", method: "GET", path: "/healthz", token: "-", status: 200},
		{name: "not ready", method: "GET", path: "/healthz", token: "-", status: 503, notReady: true},
		{name: "vault unauthorized", method: "GET", path: "/credential-vault", token: "-", status: 401},
		{name: "no vault", method: "GET", path: "/credential-vault", status: 404},
		{name: "vault proxy not ready", method: "POST", path: "/credential-vault", body: vaultCreate, status: 412, proxyNotReady: true},
		{name: "vault create", method: "POST", path: "/credential-vault", body: vaultCreate, status: 201},
		{name: "vault exists", method: "POST", path: "/credential-vault", body: vaultCreate, status: 409},
		{name: "vault get", method: "GET", path: "/credential-vault", status: 200},
		{name: "vault credentials", method: "GET", path: "/credential-vault/credentials", status: 200},
		{name: "vault credential", method: "GET", path: "/credential-vault/credentials/key", status: 200},
		{name: "vault bindings", method: "GET", path: "/credential-vault/bindings", status: 200},
		{name: "vault binding", method: "GET", path: "/credential-vault/bindings/svc", status: 200},
		{name: "vault no binding", method: "GET", path: "/credential-vault/bindings/nope", status: 404},
		{name: "vault active", method: "GET", path: "/credential-vault/_active", status: 403},
		{name: "vault patch", method: "PATCH", path: "/credential-vault", body: `{"expectedRevision":1,"bindings":{"delete":["svc"]}}`, status: 200},
		{name: "vault stale patch", method: "PATCH", path: "/credential-vault", body: `{"expectedRevision":1,"credentials":{"delete":["key"]}}`, status: 409},
		{name: "vault bad patch", method: "PATCH", path: "/credential-vault", body: `{"credentials":{"delete":["nope"]}}`, status: 400},
		{name: "vault delete", method: "DELETE", path: "/credential-vault", status: 204},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			applyErr, readyErr, proxyReady = nil, nil, !tc.proxyNotReady
			if tc.applyFails {
				applyErr = errors.New("nft unavailable")
			}
			if tc.notReady {
				readyErr = errors.New("starting")
			}
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			switch tc.token {
			case "":
				req.Header.Set(sandbox.EgressAuthHeader, "tok")
			case "-":
			default:
				req.Header.Set(sandbox.EgressAuthHeader, tc.token)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("%s %s = %d %s, want %d", tc.method, tc.path, resp.StatusCode, body, tc.status)
			}
		})
	}
	rec.expect(t)

	// The checker notices a reply that breaks the document.
	bad := newRecorder(t)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	s.CheckResponse(bad, httptest.NewRequest("GET", "/policy", nil), 200, h, []byte(`{"status":"ok","mode":"weird","enforcementMode":"dns"}`))
	bad.expect(t, "mode")

	// A credential reply that carried its value would be noticed.
	leak := newRecorder(t)
	s.CheckResponse(leak, httptest.NewRequest("GET", "/credential-vault/credentials/key", nil), 200, h,
		[]byte(`{"name":"key","sourceType":"inline","revision":1,"value":"s3cret-value"}`))
	leak.expect(t, "value")
}
