package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/egress/policy"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

const token = "s3cret"

type fixture struct {
	srv   *httptest.Server
	store *policy.Store
	apply func(context.Context, *policy.Policy) error // replaceable per test
	ready error
}

func newFixture(t *testing.T, initial string, mod func(*Config)) *fixture {
	t.Helper()
	p, err := policy.Parse([]byte(initial), policy.Options{MaxRules: 3})
	if err != nil {
		t.Fatal(err)
	}
	store, err := policy.NewStore(p, policy.AlwaysFiles{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: store}
	cfg := Config{
		Store:   store,
		Options: policy.Options{MaxRules: 3},
		Token:   token,
		Apply: func(ctx context.Context, p *policy.Policy) error {
			if f.apply != nil {
				return f.apply(ctx, p)
			}
			return nil
		},
		Ready:        func(context.Context) error { return f.ready },
		MaxBodyBytes: 512,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if mod != nil {
		mod(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(a.Handler())
	t.Cleanup(f.srv.Close)
	return f
}

// do sends a request with the token (unless auth is "none") and returns
// status, Content-Type and body.
func (f *fixture) do(t *testing.T, method, path, body string, auth ...string) (int, string, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	tok := token
	if len(auth) > 0 {
		tok = auth[0]
	}
	if tok != "none" {
		req.Header.Set(sandbox.EgressAuthHeader, tok)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func decodeStatus(t *testing.T, body string) sandbox.PolicyStatus {
	t.Helper()
	var st sandbox.PolicyStatus
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("decode PolicyStatus %q: %v", body, err)
	}
	return st
}

func rulesString(np *sandbox.NetworkPolicy) string {
	if np == nil {
		return "<nil>"
	}
	parts := []string{np.DefaultAction + ";"}
	for _, r := range np.Egress {
		parts = append(parts, r.Action+":"+r.Target)
	}
	return strings.Join(parts, " ")
}

func TestGetPolicy(t *testing.T) {
	f := newFixture(t, `{"defaultAction":"deny","egress":[{"action":"allow","target":"PyPI.org"}]}`, func(c *Config) {
		c.EnforcementMode = sandbox.EgressEnforcementDNSNft
		c.Reason = func() string { return "ipv6 rules not enforced" }
	})
	code, ct, body := f.do(t, "GET", "/policy", "")
	if code != 200 || ct != "application/json" {
		t.Fatalf("GET /policy = %d %s %s", code, ct, body)
	}
	st := decodeStatus(t, body)
	if st.Status != "ok" || st.Mode != sandbox.EgressModeEnforcing || st.EnforcementMode != "dns+nft" ||
		st.Reason != "ipv6 rules not enforced" || rulesString(st.Policy) != "deny; allow:pypi.org" {
		t.Errorf("GET /policy = %+v, policy %s", st, rulesString(st.Policy))
	}

	f = newFixture(t, "", nil)
	_, _, body = f.do(t, "GET", "/policy", "")
	if st := decodeStatus(t, body); st.Mode != sandbox.EgressModeDenyAll || st.EnforcementMode != "dns" || st.Reason != "" ||
		rulesString(st.Policy) != "deny;" || strings.Contains(body, "reason") {
		t.Errorf("GET /policy of deny-all = %s", body)
	}
}

func TestReplacePolicy(t *testing.T) {
	tests := []struct {
		name, body, mode, rules string
	}{
		{"full", `{"defaultAction":"allow","egress":[{"action":"DENY","target":"*.Evil.com."}]}`, "enforcing", "allow; deny:*.evil.com"},
		{"allow all", `{"defaultAction":"allow"}`, "allow_all", "allow;"},
		{"empty body", ``, "deny_all", "deny;"},
		{"empty object", `{}`, "deny_all", "deny;"},
		{"null", `null`, "deny_all", "deny;"},
		{"ip and cidr", `{"egress":[{"action":"allow","target":"10.0.0.0/8"},{"action":"allow","target":"::1"}]}`, "enforcing", "deny; allow:10.0.0.0/8 allow:::1"},
	}
	for _, method := range []string{"POST", "PUT"} {
		for _, tc := range tests {
			t.Run(method+" "+tc.name, func(t *testing.T) {
				f := newFixture(t, `{"defaultAction":"allow","egress":[{"action":"deny","target":"old.com"}]}`, nil)
				code, _, body := f.do(t, method, "/policy", tc.body)
				if code != 200 {
					t.Fatalf("%s /policy = %d %s", method, code, body)
				}
				st := decodeStatus(t, body)
				if st.Status != "ok" || st.Mode != tc.mode || rulesString(st.Policy) != tc.rules {
					t.Errorf("%s /policy = mode %s, policy %s; want %s, %s", method, st.Mode, rulesString(st.Policy), tc.mode, tc.rules)
				}
				if got := rulesString(f.store.Current().Wire()); got != tc.rules {
					t.Errorf("store holds %s, want %s", got, tc.rules)
				}
			})
		}
	}
}

func TestPatchPolicy(t *testing.T) {
	f := newFixture(t, `{"defaultAction":"allow","egress":[{"action":"allow","target":"a.com"},{"action":"deny","target":"b.com"}]}`, nil)
	code, _, body := f.do(t, "PATCH", "/policy", `[{"action":"allow","target":"b.com"},{"action":"deny","target":"B.com"}]`)
	if code != 200 {
		t.Fatalf("PATCH /policy = %d %s", code, body)
	}
	if got, want := rulesString(decodeStatus(t, body).Policy), "allow; allow:b.com allow:a.com"; got != want {
		t.Errorf("PATCH /policy policy = %s, want %s", got, want)
	}
	if f.store.Current().Decide("b.com") != policy.Allow {
		t.Error("patch not in force")
	}
}

func TestDeletePolicy(t *testing.T) {
	f := newFixture(t, `{"defaultAction":"allow","egress":[{"action":"deny","target":"a.com"},{"action":"deny","target":"*.b.com"}]}`, nil)
	code, _, body := f.do(t, "DELETE", "/policy", `["A.com.","unknown.org"]`)
	if code != 200 {
		t.Fatalf("DELETE /policy = %d %s", code, body)
	}
	st := decodeStatus(t, body)
	if got, want := rulesString(st.Policy), "allow; deny:*.b.com"; got != want || st.Mode != "enforcing" {
		t.Errorf("DELETE /policy = mode %s policy %s, want enforcing %s", st.Mode, got, want)
	}
	_, _, body = f.do(t, "DELETE", "/policy", `["*.b.com"]`)
	if st := decodeStatus(t, body); st.Mode != "allow_all" || rulesString(st.Policy) != "allow;" {
		t.Errorf("DELETE last rule = %s", body)
	}
}

func TestErrors(t *testing.T) {
	big := `{"egress":[` + strings.Repeat(`{"action":"allow","target":"a.com"},`, 20) + `{"target":"b.com"}]}`
	tests := []struct {
		name, method, path, body string
		auth                     string // "" = the right token
		code                     int
		sub                      string
	}{
		{"no token", "GET", "/policy", "", "none", 401, "unauthorized"},
		{"wrong token", "PATCH", "/policy", `[{"action":"allow","target":"a.com"}]`, "nope", 401, "unauthorized"},
		{"token prefix", "GET", "/policy", "", "s3cre", 401, "unauthorized"},
		{"bad json", "POST", "/policy", `{"defaultAction":`, "", 400, "not a JSON NetworkPolicy"},
		{"bad default", "PUT", "/policy", `{"defaultAction":"block"}`, "", 400, `defaultAction: invalid egress policy: action "block"`},
		{"empty target", "POST", "/policy", `{"egress":[{"action":"allow","target":" "}]}`, "", 400, "egress[0]: invalid egress policy: empty target"},
		{"bad target", "POST", "/policy", `{"egress":[{"action":"allow","target":"http://x"}]}`, "", 400, "bad CIDR"},
		{"too many rules", "POST", "/policy", `{"egress":[{"target":"a.com"},{"target":"b.com"},{"target":"c.com"},{"target":"d.com"}]}`, "", 413, "4 rules, the limit is 3"},
		{"body too large", "POST", "/policy", big, "", 413, "larger than 512 bytes"},
		{"patch empty body", "PATCH", "/policy", "", "", 400, "JSON array of rules"},
		{"patch empty array", "PATCH", "/policy", `[]`, "", 400, "at least one rule"},
		{"patch null", "PATCH", "/policy", `null`, "", 400, "at least one rule"},
		{"patch object", "PATCH", "/policy", `{"action":"allow","target":"a.com"}`, "", 400, "JSON array of rules"},
		{"patch bad action", "PATCH", "/policy", `[{"action":"permit","target":"a.com"}]`, "", 400, "egress[0]"},
		{"patch missing target", "PATCH", "/policy", `[{"action":"allow"}]`, "", 400, "empty target"},
		{"patch over cap", "PATCH", "/policy", `[{"target":"x.com"},{"target":"y.com"},{"target":"z.com"}]`, "", 413, "limit is 3"},
		{"patch too large", "PATCH", "/policy", "[" + strings.Repeat(" ", 600) + "]", "", 413, "larger than"},
		{"delete empty array", "DELETE", "/policy", `[]`, "", 400, "at least one target"},
		{"delete no body", "DELETE", "/policy", "", "", 400, "JSON array of target strings"},
		{"delete numbers", "DELETE", "/policy", `[1]`, "", 400, "JSON array of target strings"},
		{"delete empty target", "DELETE", "/policy", `["a.com",""]`, "", 400, "target 1 is empty"},
		{"unknown path", "HEAD", "/healthz/x", "", "", 404, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, `{"egress":[{"action":"allow","target":"keep.com"}]}`, nil)
			auth := []string{}
			if tc.auth != "" {
				auth = append(auth, tc.auth)
			}
			code, ct, body := f.do(t, tc.method, tc.path, tc.body, auth...)
			if code != tc.code || !strings.Contains(body, tc.sub) {
				t.Errorf("%s %s = %d %q; want %d containing %q", tc.method, tc.path, code, body, tc.code, tc.sub)
			}
			if tc.method != "HEAD" && !strings.HasPrefix(ct, "text/plain") {
				t.Errorf("%s %s: Content-Type %q, want text/plain", tc.method, tc.path, ct)
			}
			if got := rulesString(f.store.Current().Wire()); got != "deny; allow:keep.com" {
				t.Errorf("failed request changed the policy to %s", got)
			}
		})
	}
}

func TestApplyFailureKeepsPolicy(t *testing.T) {
	f := newFixture(t, `{"egress":[{"action":"allow","target":"keep.com"}]}`, nil)
	var applied []string
	f.apply = func(_ context.Context, p *policy.Policy) error {
		applied = append(applied, p.Mode())
		return errors.New("nft: Operation not permitted")
	}
	for _, req := range []struct{ method, body string }{
		{"POST", `{"defaultAction":"allow"}`},
		{"PUT", `{}`},
		{"PATCH", `[{"action":"deny","target":"x.com"}]`},
		{"DELETE", `["keep.com"]`},
	} {
		code, ct, body := f.do(t, req.method, "/policy", req.body)
		if code != 500 || !strings.HasPrefix(ct, "text/plain") || !strings.Contains(body, "Operation not permitted") ||
			!strings.Contains(body, "previous policy still in force") {
			t.Errorf("%s /policy with failing apply = %d %s %q; want 500 text naming the cause", req.method, code, ct, body)
		}
	}
	if len(applied) != 4 {
		t.Errorf("apply called %d times, want 4", len(applied))
	}
	if got := rulesString(f.store.Current().Wire()); got != "deny; allow:keep.com" {
		t.Errorf("policy after failed applies = %s", got)
	}

	// The hook sees the policy that then becomes current.
	var seen *policy.Policy
	f.apply = func(_ context.Context, p *policy.Policy) error { seen = p; return nil }
	if code, _, body := f.do(t, "PATCH", "/policy", `[{"action":"deny","target":"x.com"}]`); code != 200 {
		t.Fatalf("PATCH = %d %s", code, body)
	}
	if seen == nil || seen != f.store.Current() {
		t.Error("apply hook did not receive the new current policy")
	}
}

func TestHealthz(t *testing.T) {
	f := newFixture(t, "", nil)
	// Open even without a token.
	code, ct, body := f.do(t, "GET", "/healthz", "", "none")
	if code != 200 || body != "ok" || !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("GET /healthz = %d %s %q; want 200 text ok", code, ct, body)
	}
	f.ready = errors.New("credential proxy not started")
	code, ct, body = f.do(t, "GET", "/healthz", "", "none")
	if code != 503 || body != "not ready: credential proxy not started\n" || !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("GET /healthz not ready = %d %s %q", code, ct, body)
	}

	f = newFixture(t, "", func(c *Config) { c.Ready = nil; c.Token = "" })
	if code, _, body := f.do(t, "GET", "/healthz", "", "none"); code != 200 || body != "ok" {
		t.Errorf("GET /healthz without Ready = %d %q", code, body)
	}
}

func TestNoToken(t *testing.T) {
	f := newFixture(t, "", func(c *Config) { c.Token = "" })
	if code, _, body := f.do(t, "GET", "/policy", "", "none"); code != 200 {
		t.Errorf("GET /policy without configured token = %d %s", code, body)
	}
}

func TestRouting(t *testing.T) {
	f := newFixture(t, "", nil)
	if code, _, _ := f.do(t, "GET", "/nope", ""); code != 404 {
		t.Errorf("GET /nope = %d, want 404", code)
	}
	if code, _, _ := f.do(t, "POST", "/healthz", ""); code != 405 {
		t.Errorf("POST /healthz = %d, want 405", code)
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New without Store: no error")
	}
}

func TestVaultMountedBehindToken(t *testing.T) {
	f := newFixture(t, "", func(c *Config) {
		c.Vault = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "vault "+r.URL.Path) })
	})
	for _, path := range []string{"/credential-vault", "/credential-vault/bindings/x"} {
		if code, _, _ := f.do(t, "GET", path, "", "wrong"); code != 401 {
			t.Errorf("GET %s with a wrong token = %d, want 401", path, code)
		}
		if code, _, body := f.do(t, "GET", path, ""); code != 200 || body != "vault "+path {
			t.Errorf("GET %s = %d %q", path, code, body)
		}
	}
}
