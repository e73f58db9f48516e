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
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

const egressDoc = "api/egress.yaml"

// egressOps is every operation the egress document must describe.
var egressOps = map[string][]string{
	"/policy":  {"GET", "POST", "PUT", "PATCH", "DELETE"},
	"/healthz": {"GET"},
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
}

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
	a, err := egressapi.New(egressapi.Config{
		Store:        store,
		Options:      policy.Options{MaxRules: 3},
		Token:        "tok",
		Apply:        func(context.Context, *policy.Policy) error { return applyErr },
		Ready:        func(context.Context) error { return readyErr },
		Reason:       func() string { return "dns only" },
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
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			applyErr, readyErr = nil, nil
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
}
