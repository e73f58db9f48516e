package vault

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/egress/inject"
)

const (
	secretA = "sk-live-AAAA-secret-value-0001"
	secretB = "dXNlcjpwYXNzLXNlY3JldC0wMDAy" // base64 user:pass-secret-0002
)

var secrets = []string{secretA, secretB}

func cred(name, value string) Credential {
	return Credential{Name: name, Source: CredentialSource{Type: SourceInline, Value: Secret(value)}}
}

func binding(name string, hosts []string, auth Auth) CredentialBinding {
	return CredentialBinding{Name: name, Match: RequestMatch{Hosts: hosts}, Auth: auth}
}

func validRequest() CreateRequest {
	return CreateRequest{
		Credentials: []Credential{cred("a", secretA), cred("b", secretB)},
		Bindings: []CredentialBinding{
			binding("gh", []string{"api.github.com"}, Auth{Type: AuthBearer, Credential: "a"}),
			binding("basic", []string{"*.example.com"}, Auth{Type: AuthBasic, Credential: "b"}),
		},
	}
}

// noSecrets fails the test when s contains any secret value.
func noSecrets(t *testing.T, what, s string) {
	t.Helper()
	for _, sec := range secrets {
		if strings.Contains(s, sec) {
			t.Fatalf("%s leaks a secret value: %s", what, s)
		}
	}
}

func TestValidation(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*CreateRequest)
		want   string // substring of the error
	}{
		{"unknown credential", func(r *CreateRequest) { r.Bindings[0].Auth.Credential = "nope" }, `auth.credential "nope" references an unknown credential`},
		{"duplicate credential", func(r *CreateRequest) { r.Credentials = append(r.Credentials, cred("a", secretA)) }, `credentials[2] "a": duplicate credential name`},
		{"duplicate binding", func(r *CreateRequest) {
			r.Bindings = append(r.Bindings, binding("gh", []string{"x.test"}, Auth{Type: AuthBearer, Credential: "a"}))
		}, `bindings[2] "gh": duplicate binding name`},
		{"bad credential name", func(r *CreateRequest) { r.Credentials[0].Name = "-x" }, `credentials[0] "-x": name`},
		{"unsupported source", func(r *CreateRequest) { r.Credentials[0].Source.Type = "env" }, `source.type "env" is not supported`},
		{"empty value", func(r *CreateRequest) { r.Credentials[0].Source.Value = "" }, `source.value is required`},
		{"header injection in value", func(r *CreateRequest) { r.Credentials[0].Source.Value = secretA + "\r\nX-Evil: 1" }, `source.value contains control characters`},
		{"hosts required", func(r *CreateRequest) { r.Bindings[0].Match.Hosts = nil }, `match.hosts is required`},
		{"bad host", func(r *CreateRequest) { r.Bindings[0].Match.Hosts = []string{"api.*.com"} }, `match.hosts: "api.*.com"`},
		{"host with port", func(r *CreateRequest) { r.Bindings[0].Match.Hosts = []string{"api.github.com:443"} }, `match.hosts: "api.github.com:443"`},
		{"bad scheme", func(r *CreateRequest) { r.Bindings[0].Match.Schemes = []string{"ftp"} }, `match.schemes: "ftp"`},
		{"bad port", func(r *CreateRequest) { r.Bindings[0].Match.Ports = []int{70000} }, `match.ports: 70000`},
		{"bad path", func(r *CreateRequest) { r.Bindings[0].Match.Paths = []string{"v1/*"} }, `"v1/*" must start with /`},
		{"inner star", func(r *CreateRequest) { r.Bindings[0].Match.Paths = []string{"/a/*/b"} }, `may contain * only as its last character`},
		{"bad method", func(r *CreateRequest) { r.Bindings[0].Match.Methods = []string{"GE T"} }, `match.methods: "GE T"`},
		{"unknown auth type", func(r *CreateRequest) { r.Bindings[0].Auth.Type = "oauth" }, `auth.type "oauth" is not one of`},
		{"apiKey without name", func(r *CreateRequest) { r.Bindings[0].Auth = Auth{Type: AuthAPIKey, Credential: "a"} }, `auth.name (the header name) is required`},
		{"apiKey bad header name", func(r *CreateRequest) { r.Bindings[0].Auth = Auth{Type: AuthAPIKey, Name: "X Key", Credential: "a"} }, `header name "X Key" is not a valid HTTP token`},
		{"apiKey forbidden header", func(r *CreateRequest) { r.Bindings[0].Auth = Auth{Type: AuthAPIKey, Name: "host", Credential: "a"} }, `header "Host" cannot be injected`},
		{"name on bearer", func(r *CreateRequest) { r.Bindings[0].Auth.Name = "X-Key" }, `auth.name applies only to type "apiKey"`},
		{"customHeaders empty", func(r *CreateRequest) { r.Bindings[0].Auth = Auth{Type: AuthCustomHeaders} }, `auth.headers needs at least one header`},
		{"customHeaders duplicate header", func(r *CreateRequest) {
			r.Bindings[0].Auth = Auth{Type: AuthCustomHeaders, Headers: []HeaderRef{{Name: "X-A", Credential: "a"}, {Name: "x-a", Credential: "b"}}}
		}, `auth.headers[1]: header "X-A" appears twice`},
		{"customHeaders unknown credential", func(r *CreateRequest) {
			r.Bindings[0].Auth = Auth{Type: AuthCustomHeaders, Headers: []HeaderRef{{Name: "X-A", Credential: "zz"}}}
		}, `auth.headers[0].credential "zz" references an unknown credential`},
		{"exact overlap", func(r *CreateRequest) {
			r.Bindings = append(r.Bindings, binding("gh2", []string{"API.github.com."}, Auth{Type: AuthBearer, Credential: "b"}))
		}, `bindings "gh" and "gh2" are ambiguous: both match GET https://api.github.com:443/*`},
		{"wildcard overlap", func(r *CreateRequest) {
			r.Bindings = append(r.Bindings, binding("deep", []string{"a.b.example.com"}, Auth{Type: AuthBearer, Credential: "a"}))
		}, `bindings "basic" and "deep" are ambiguous`},
		{"passthrough with credential", func(r *CreateRequest) { r.Bindings[0].Auth = Auth{Type: AuthPassthrough, Credential: "a"} }, `auth.credential does not apply to type "passthrough"`},
		{"substitution unknown credential", func(r *CreateRequest) {
			r.Bindings[0].Auth.Substitutions = []Substitution{{Credential: "zz", Placeholder: "P", In: []string{"header"}}}
		}, `auth.substitutions[0]: credential "zz" references an unknown credential`},
		{"substitution without placeholder", func(r *CreateRequest) {
			r.Bindings[0].Auth.Substitutions = []Substitution{{Credential: "a", In: []string{"header"}}}
		}, `auth.substitutions[0]: placeholder is required`},
		{"substitution placeholder with a space", func(r *CreateRequest) {
			r.Bindings[0].Auth.Substitutions = []Substitution{{Credential: "a", Placeholder: "MY KEY", In: []string{"header"}}}
		}, `placeholder must be printable ASCII without spaces`},
		{"substitution duplicate placeholder", func(r *CreateRequest) {
			r.Bindings[0].Auth.Substitutions = []Substitution{{Credential: "a", Placeholder: "P", In: []string{"header"}}, {Credential: "b", Placeholder: "P", In: []string{"body"}}}
		}, `auth.substitutions[1]: placeholder appears twice`},
		{"substitution without surface", func(r *CreateRequest) {
			r.Bindings[0].Auth.Substitutions = []Substitution{{Credential: "a", Placeholder: "P"}}
		}, `in needs at least one of path, query, header, body`},
		{"substitution unknown surface", func(r *CreateRequest) {
			r.Bindings[0].Auth.Substitutions = []Substitution{{Credential: "a", Placeholder: "P", In: []string{"cookie"}}}
		}, `in: "cookie" is not one of`},
		{"substitution duplicate surface", func(r *CreateRequest) {
			r.Bindings[0].Auth.Substitutions = []Substitution{{Credential: "a", Placeholder: "P", In: []string{"body", "body"}}}
		}, `in: "body" appears twice`},
		{"http overlaps http", func(r *CreateRequest) {
			r.Bindings[0].Match.Schemes = []string{"http"}
			b := binding("gh2", []string{"api.github.com"}, Auth{Type: AuthPassthrough})
			b.Match.Schemes = []string{"HTTP"}
			r.Bindings = append(r.Bindings, b)
		}, `both match GET http://api.github.com:80/*`},
		{"path overlap", func(r *CreateRequest) {
			b := binding("gh2", []string{"api.github.com"}, Auth{Type: AuthBearer, Credential: "b"})
			b.Match.Paths = []string{"/repos/*"}
			r.Bindings[0].Match.Paths = []string{"/repos/x/*"}
			r.Bindings = append(r.Bindings, b)
		}, `bindings "gh" and "gh2" are ambiguous`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := validRequest()
			tt.mutate(&req)
			_, err := NewStore().Create(req)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Create() error = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Create() error = %q, want it to contain %q", err, tt.want)
			}
			noSecrets(t, "validation error", err.Error())
		})
	}
}

func TestNonOverlappingBindingsAccepted(t *testing.T) {
	req := validRequest()
	split := func(name, path string, methods ...string) CredentialBinding {
		b := binding(name, []string{"api.github.com"}, Auth{Type: AuthBearer, Credential: "a"})
		b.Match.Paths, b.Match.Methods = []string{path}, methods
		return b
	}
	req.Bindings = []CredentialBinding{
		split("read", "/repos/*", "GET"),
		split("write", "/repos/*", "POST"),
		split("user", "/user", "GET"),
		binding("apex", []string{"example.com"}, Auth{Type: AuthBearer, Credential: "b"}), // *.example.com excludes the apex
		binding("wild", []string{"*.example.com"}, Auth{Type: AuthBearer, Credential: "b"}),
	}
	req.Bindings[0].Match.Ports = []int{443, 8443}
	if _, err := NewStore().Create(req); err != nil {
		t.Fatalf("Create() error = %v, want nil", err)
	}
}

// TestPortsFollowSchemes checks upstream's rule: a binding's ports follow
// from its schemes (https 443, http 80); standard ports given are ignored.
func TestPortsFollowSchemes(t *testing.T) {
	for _, tt := range []struct {
		schemes []string
		ports   []int
		want    []int
	}{
		{nil, nil, []int{443}},
		{[]string{"http"}, nil, []int{80}},
		{[]string{"http", "https"}, nil, []int{80, 443}},
		{[]string{"http"}, []int{443}, []int{80}}, // standard, ignored
		{[]string{"https"}, []int{8443}, []int{8443}},
	} {
		req := validRequest()
		req.Bindings[0].Match.Schemes, req.Bindings[0].Match.Ports = tt.schemes, tt.ports
		st, err := NewStore().Create(req)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(st.Bindings, func(b CredentialBindingMetadata) bool { return b.Name == "gh" })
		if got := st.Bindings[i].Match.Ports; !slices.Equal(got, tt.want) {
			t.Errorf("schemes %v ports %v: ports = %v, want %v", tt.schemes, tt.ports, got, tt.want)
		}
	}
}

// TestMatchSubstitutions checks that a matched request gets the binding's
// substitutions with the credential values, for every auth type including
// passthrough, and that the views never show them.
func TestMatchSubstitutions(t *testing.T) {
	s := NewStore()
	req := validRequest()
	plain := binding("plain", []string{"plain.test"}, Auth{Type: AuthPassthrough, Substitutions: []Substitution{
		{Credential: "a", Placeholder: "{{A}}", In: []string{"query", "body"}},
		{Credential: "b", Placeholder: "{{B}}", In: []string{"header", "path"}},
	}})
	plain.Match.Schemes = []string{"http"}
	req.Bindings = append(req.Bindings, plain)
	req.Bindings[0].Auth.Substitutions = []Substitution{{Credential: "b", Placeholder: "PH", In: []string{"header"}}}
	st, err := s.Create(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(st)
	noSecrets(t, "state", string(b))
	if strings.Contains(string(b), "{{A}}") || strings.Contains(string(b), "substitutions") {
		t.Errorf("state shows substitutions: %s", b)
	}
	p, ok := s.Match("http", "plain.test", 80, "GET", "/")
	if !ok || len(p.Headers) != 0 || len(p.Substitutions) != 2 {
		t.Fatalf("passthrough plan = %+v, %v; want no headers and two substitutions", p, ok)
	}
	want := []inject.Substitution{
		{Placeholder: "{{A}}", Value: secretA, In: inject.InQuery | inject.InBody},
		{Placeholder: "{{B}}", Value: secretB, In: inject.InHeader | inject.InPath},
	}
	if !slices.Equal(p.Substitutions, want) {
		t.Errorf("substitutions differ")
	}
	if _, ok := s.Match("https", "plain.test", 443, "GET", "/"); ok {
		t.Errorf("an http binding matched https")
	}
	if !s.MayMatch("http", "plain.test", 80) || s.MayMatch("https", "plain.test", 443) || s.MayMatch("http", "api.github.com", 80) {
		t.Errorf("MayMatch does not follow the schemes")
	}
	p, _ = s.Match("https", "api.github.com", 443, "GET", "/")
	if p.Headers.Get("Authorization") != "Bearer "+secretA || len(p.Substitutions) != 1 || p.Substitutions[0].Value != secretB {
		t.Errorf("bearer with a substitution: plan differs")
	}
	// A patch keeps the substitutions of bindings it does not touch.
	if _, err := s.Patch(PatchRequest{Credentials: &CredentialOps{Replace: []Credential{cred("a", secretA+"-2")}}}); err != nil {
		t.Fatal(err)
	}
	if p, _ = s.Match("http", "plain.test", 80, "POST", "/x"); p.Substitutions[0].Value != secretA+"-2" {
		t.Errorf("substitution after a credential rotation does not carry the new value")
	}
}

func TestMatch(t *testing.T) {
	s := NewStore()
	req := validRequest()
	key := binding("key", []string{"api.openai.com"}, Auth{Type: AuthAPIKey, Name: "x-api-key", Credential: "a"})
	key.Match.Paths = []string{"/v1/*"}
	key.Match.Methods = []string{"POST"}
	custom := binding("custom", []string{"10.0.0.7"}, Auth{Type: AuthCustomHeaders, Headers: []HeaderRef{{Name: "X-Id", Credential: "a"}, {Name: "X-Secret", Credential: "b"}}})
	custom.Match.Ports = []int{8443}
	req.Bindings = append(req.Bindings, key, custom)
	if _, err := s.Create(req); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		scheme, host string
		port         int
		method, path string
		want         http.Header // nil = no match
	}{
		{"https", "api.github.com", 443, "GET", "/user", http.Header{"Authorization": {"Bearer " + secretA}}},
		{"https", "API.GitHub.com.", 443, "DELETE", "/", http.Header{"Authorization": {"Bearer " + secretA}}},
		{"http", "api.github.com", 443, "GET", "/user", nil},
		{"https", "api.github.com", 80, "GET", "/user", nil},
		{"https", "api.github.com", 443, "HEAD", "/user", nil},
		{"https", "github.com", 443, "GET", "/", nil},
		{"https", "evil-api.github.com", 443, "GET", "/", nil},
		{"https", "x.example.com", 443, "PUT", "/a", http.Header{"Authorization": {"Basic " + secretB}}},
		{"https", "a.b.example.com", 443, "GET", "/a", http.Header{"Authorization": {"Basic " + secretB}}},
		{"https", "example.com", 443, "GET", "/", nil},
		{"https", "example.com.evil.test", 443, "GET", "/", nil},
		{"https", "api.openai.com", 443, "POST", "/v1/chat", http.Header{"X-Api-Key": {secretA}}},
		{"https", "api.openai.com", 443, "GET", "/v1/chat", nil},
		{"https", "api.openai.com", 443, "POST", "/v2/chat", nil},
		{"https", "api.openai.com", 443, "POST", "/v1", nil},
		{"https", "10.0.0.7", 8443, "GET", "/", http.Header{"X-Id": {secretA}, "X-Secret": {secretB}}},
		{"https", "10.0.0.7", 443, "GET", "/", nil},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s %s://%s:%d%s", tt.method, tt.scheme, tt.host, tt.port, tt.path)
		t.Run(name, func(t *testing.T) {
			plan, ok := s.Match(tt.scheme, tt.host, tt.port, tt.method, tt.path)
			if ok != (tt.want != nil) {
				t.Fatalf("Match() ok = %v, want %v", ok, tt.want != nil)
			}
			var got http.Header
			if plan != nil {
				got = plan.Headers
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("Match() headers differ (names %v, want %v)", headerNames(got), headerNames(tt.want))
			}
		})
	}
	// The caller owns the result.
	h, _ := s.Match("https", "api.github.com", 443, "GET", "/")
	h.Headers.Set("Authorization", "changed")
	if h2, _ := s.Match("https", "api.github.com", 443, "GET", "/"); h2.Headers.Get("Authorization") != "Bearer "+secretA {
		t.Errorf("Match() result shares storage with the store")
	}
	if err := s.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Match("https", "api.github.com", 443, "GET", "/"); ok {
		t.Errorf("Match() after Delete matched")
	}
}

func TestMayMatch(t *testing.T) {
	s := NewStore()
	if s.MayMatch("https", "api.github.com", 443) {
		t.Errorf("MayMatch() with no vault = true, want false")
	}
	req := validRequest()
	key := binding("key", []string{"api.openai.com"}, Auth{Type: AuthAPIKey, Name: "x-api-key", Credential: "a"})
	key.Match.Paths = []string{"/v1/*"}
	key.Match.Methods = []string{"POST"}
	ip := binding("ip", []string{"10.0.0.7", "fd00::7"}, Auth{Type: AuthBearer, Credential: "b"})
	ip.Match.Ports = []int{8443}
	req.Bindings = append(req.Bindings, key, ip)
	if _, err := s.Create(req); err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, host string, port int, want bool) {
		t.Helper()
		if got := s.MayMatch("https", host, port); got != want {
			t.Errorf("MayMatch(%q, %d) = %v, want %v", host, port, got, want)
		}
	}
	for _, tt := range []struct {
		host string
		port int
		want bool
	}{
		{"api.github.com", 443, true},
		{"API.GitHub.com.", 443, true},
		{"api.github.com", 8443, false}, // port mismatch
		{"github.com", 443, false},
		{"evil-api.github.com", 443, false},
		{"x.example.com", 443, true}, // wildcard
		{"a.b.example.com", 443, true},
		{"example.com", 443, false}, // wildcard excludes the apex
		{"example.com.evil.test", 443, false},
		{"api.openai.com", 443, true}, // whatever method and path
		{"10.0.0.7", 8443, true},
		{"10.0.0.7", 443, false},
		{"10.0.0.8", 8443, false},
		{"FD00::7", 8443, true},
		{"", 443, false},
	} {
		check(t, tt.host, tt.port, tt.want)
	}

	// A binding for plain http only could never match an https connection.
	plain := binding("plain", []string{"plain.test"}, Auth{Type: AuthBearer, Credential: "a"})
	plain.Match.Schemes = []string{"http"}
	if _, err := s.Patch(PatchRequest{Bindings: &BindingOps{Add: []CredentialBinding{plain}}}); err != nil {
		t.Fatal(err)
	}
	check(t, "plain.test", 443, false)

	// Patches apply at once.
	moved := binding("gh", []string{"api.github.com"}, Auth{Type: AuthBearer, Credential: "a"})
	moved.Match.Ports = []int{8443}
	if _, err := s.Patch(PatchRequest{Bindings: &BindingOps{Replace: []CredentialBinding{moved}, Delete: []string{"basic"}}}); err != nil {
		t.Fatal(err)
	}
	check(t, "api.github.com", 443, false)
	check(t, "api.github.com", 8443, true)
	check(t, "x.example.com", 443, false)
	if err := s.Delete(); err != nil {
		t.Fatal(err)
	}
	check(t, "api.openai.com", 443, false)
	check(t, "10.0.0.7", 8443, false)
}

func headerNames(h http.Header) []string {
	var n []string
	for k := range h {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}

func TestRevisions(t *testing.T) {
	s := NewStore()
	if _, err := s.Get(); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get() on empty store error = %v, want ErrNotFound", err)
	}
	if _, err := s.Patch(PatchRequest{Credentials: &CredentialOps{Delete: []string{"a"}}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Patch() on empty store error = %v, want ErrNotFound", err)
	}
	st, err := s.Create(validRequest())
	if err != nil {
		t.Fatal(err)
	}
	if st.Revision != 1 {
		t.Fatalf("Create() revision = %d, want 1", st.Revision)
	}
	if _, err := s.Create(validRequest()); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("second Create() error = %v, want ErrAlreadyExists", err)
	}
	stale := int64(0)
	if _, err := s.Patch(PatchRequest{ExpectedRevision: &stale, Credentials: &CredentialOps{Add: []Credential{cred("c", "v")}}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("Patch(stale) error = %v, want ErrConflict", err)
	}
	cur := int64(1)
	st, err = s.Patch(PatchRequest{
		ExpectedRevision: &cur,
		Credentials:      &CredentialOps{Replace: []Credential{cred("a", secretA+"-rotated")}, Add: []Credential{cred("c", "v")}},
	})
	if err != nil {
		t.Fatalf("Patch() error = %v", err)
	}
	revs := map[string]int64{}
	for _, c := range st.Credentials {
		revs[c.Name] = c.Revision
	}
	if st.Revision != 2 || revs["a"] != 2 || revs["b"] != 1 || revs["c"] != 2 {
		t.Errorf("after Patch: revision %d, credential revisions %v; want 2, map[a:2 b:1 c:2]", st.Revision, revs)
	}
	if h, _ := s.Match("https", "api.github.com", 443, "GET", "/"); h.Headers.Get("Authorization") != "Bearer "+secretA+"-rotated" {
		t.Errorf("Match() after rotating does not use the new value")
	}
	// Deleting a credential still in use fails and changes nothing.
	if _, err := s.Patch(PatchRequest{Credentials: &CredentialOps{Delete: []string{"a"}}}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"a" references an unknown credential`) {
		t.Fatalf("Patch(delete used credential) error = %v, want ErrInvalid naming the reference", err)
	}
	// Replace of a missing name, add of an existing one, a name twice.
	for _, p := range []PatchRequest{
		{Bindings: &BindingOps{Replace: []CredentialBinding{binding("zz", []string{"z.test"}, Auth{Type: AuthBearer, Credential: "a"})}}},
		{Bindings: &BindingOps{Add: []CredentialBinding{binding("gh", []string{"z.test"}, Auth{Type: AuthBearer, Credential: "a"})}}},
		{Credentials: &CredentialOps{Delete: []string{"c"}, Add: []Credential{cred("c", "v")}}},
		{},
	} {
		if _, err := s.Patch(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("Patch(%+v) error = %v, want ErrInvalid", p, err)
		}
	}
	st, err = s.Patch(PatchRequest{Bindings: &BindingOps{Delete: []string{"gh"}}, Credentials: &CredentialOps{Delete: []string{"a"}}})
	if err != nil {
		t.Fatalf("Patch(delete binding and its credential) error = %v", err)
	}
	if st.Revision != 3 || len(st.Bindings) != 1 || len(st.Credentials) != 2 {
		t.Errorf("after delete: %+v", st)
	}
	if err := s.Delete(); err != nil {
		t.Fatal(err)
	}
	st, err = s.Create(validRequest())
	if err != nil {
		t.Fatal(err)
	}
	if st.Revision <= 3 {
		t.Errorf("revision after Delete and Create = %d, want > 3 (monotonic)", st.Revision)
	}
}

func TestSecretFormatting(t *testing.T) {
	c := cred("a", secretA)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprintf("%s", c.Source.Value), fmt.Sprintf("%q", c.Source.Value), fmt.Sprintf("%x", c.Source.Value)} {
		noSecrets(t, "formatted credential", s)
	}
}
