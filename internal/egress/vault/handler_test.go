package vault

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
)

// egressDoc is the OpenAPI document every reply of the handler must satisfy.
const egressDoc = "api/egress.yaml"

func TestHandler(t *testing.T) {
	var logs bytes.Buffer
	srv := httptest.NewServer(Handler(HandlerConfig{Store: NewStore(), Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	defer srv.Close()
	// Every exchange, success or error, is checked against the document.
	client := &http.Client{Transport: openapitest.Load(t, egressDoc).Transport(t, srv.Client().Transport)}

	body := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// JSON wire form of a request, with the secrets in clear as a client
	// (the SDK) sends them.
	create := body(validRequest())
	if !strings.Contains(create, secretA) || !strings.Contains(create, secretB) {
		t.Fatalf("request body lacks the secret values the SDK must send: %s", create)
	}

	steps := []struct {
		method, path, body string
		want               int
		contains           string
	}{
		{"GET", "/credential-vault", "", 404, "not found"},
		{"POST", "/credential-vault", create, 201, `"revision":1`},
		{"POST", "/credential-vault", create, 409, "already exists"},
		{"GET", "/credential-vault", "", 200, `"sourceType":"inline"`},
		{"GET", "/credential-vault/credentials", "", 200, `"name":"a"`},
		{"GET", "/credential-vault/credentials/b", "", 200, `"revision":1`},
		{"GET", "/credential-vault/credentials/zz", "", 404, `credential "zz"`},
		{"GET", "/credential-vault/bindings", "", 200, `"hosts":["api.github.com"]`},
		{"GET", "/credential-vault/bindings/gh", "", 200, `"auth":{"type":"bearer"}`},
		{"GET", "/credential-vault/bindings/zz", "", 404, `binding "zz"`},
		{"GET", "/credential-vault/_active", "", 403, "not served over HTTP"},
		{"PATCH", "/credential-vault", `{"expectedRevision":7,"credentials":{"delete":["b"]}}`, 409, "expected revision 7"},
		{"PATCH", "/credential-vault", `{"credentials":{"replace":[{"name":"a","source":{"type":"inline","value":"` + secretA + `x"}}]}}`, 200, `"revision":2`},
		{"PATCH", "/credential-vault", `{"credentials":{"add":[{"name":"bad","source":{"type":"inline","value":"` + secretB + `\r\n"}}]}}`, 400, "control characters"},
		{"PATCH", "/credential-vault", `{"credentials":{"add":[{"name":"c","source":{"type":"inline","value":"` + secretB + `"}}]}, "extra":1}`, 400, `unknown field "extra"`},
		{"PATCH", "/credential-vault", `{"credentials":{"add":[{"name":"c","source":{"type":"inline","value":12}}]}}`, 400, "must be string"},
		{"PATCH", "/credential-vault", `{"credentials":`, 400, "unexpected EOF"},
		{"DELETE", "/credential-vault", "", 204, ""},
		{"GET", "/credential-vault", "", 404, ""},
	}
	for _, s := range steps {
		req, err := http.NewRequest(s.method, srv.URL+s.path, strings.NewReader(s.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", s.method, s.path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != s.want || !strings.Contains(string(b), s.contains) {
			t.Errorf("%s %s = %d %q, want %d containing %q", s.method, s.path, resp.StatusCode, b, s.want, s.contains)
		}
		noSecrets(t, s.method+" "+s.path+" response", string(b))
		noSecrets(t, s.method+" "+s.path+" response headers", strings.Join(headerNames(resp.Header), ","))
		for _, v := range resp.Header {
			noSecrets(t, "response header", strings.Join(v, ","))
		}
	}
	noSecrets(t, "log", logs.String())
}

func TestHandlerWritesNeedSecureTransport(t *testing.T) {
	spec := openapitest.Load(t, egressDoc)
	gateway := netip.MustParseAddr("172.17.0.1")
	h := Handler(HandlerConfig{Store: NewStore(), TrustedPeer: func(a netip.Addr) bool { return a == gateway }})
	tests := []struct {
		method, remote string
		tls            bool
		want           int
	}{
		{"POST", "172.17.0.1:40000", false, http.StatusCreated}, // the trusted peer
		{"POST", "172.17.0.9:40000", false, http.StatusUpgradeRequired},
		{"POST", "203.0.113.5:40000", false, http.StatusUpgradeRequired},
		{"PATCH", "10.0.0.2:40000", false, http.StatusUpgradeRequired},
		{"DELETE", "[2001:db8::1]:40000", false, http.StatusUpgradeRequired},
		{"POST", "203.0.113.5:40000", true, http.StatusCreated},
		{"DELETE", "[::1]:40000", false, http.StatusNotFound}, // accepted from loopback; no vault to delete
		{"POST", "[::ffff:127.0.0.1]:40000", false, http.StatusCreated},
		{"GET", "203.0.113.5:40000", false, http.StatusNotFound}, // reads carry no secret: not 426
	}
	for _, tt := range tests {
		body := `{"credentials":[{"name":"a","source":{"type":"inline","value":"` + secretA + `"}}],"bindings":[]}`
		r := httptest.NewRequest(tt.method, "/credential-vault", strings.NewReader(body))
		r.RemoteAddr = tt.remote
		if !tt.tls {
			r.TLS = nil
		}
		if tt.tls && r.TLS == nil {
			r.TLS = &tls.ConnectionState{}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		spec.CheckResponse(t, r, w.Code, w.Header(), w.Body.Bytes())
		if w.Code != tt.want {
			t.Errorf("%s from %s (tls %v) = %d %q, want %d", tt.method, tt.remote, tt.tls, w.Code, w.Body, tt.want)
		}
		if w.Code == http.StatusUpgradeRequired && strings.TrimSpace(w.Body.String()) != "credential vault writes require TLS or loopback transport" {
			t.Errorf("426 body = %q", w.Body)
		}
		if tt.method == "POST" && w.Code == http.StatusCreated {
			httpDelete(t, spec, h)
		}
	}
}

func httpDelete(t *testing.T, spec *openapitest.Spec, h http.Handler) {
	t.Helper()
	r := httptest.NewRequest("DELETE", "/credential-vault", nil)
	r.RemoteAddr = "127.0.0.1:1"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	spec.CheckResponse(t, r, w.Code, w.Header(), w.Body.Bytes())
	if w.Code != http.StatusNoContent {
		t.Fatalf("DELETE = %d", w.Code)
	}
}

// The answers TestHandler cannot reach (proxy not ready, body too large,
// bindings refused by the network policy) are documented too.
func TestHandlerOtherErrors(t *testing.T) {
	ready := false
	srv := httptest.NewServer(Handler(HandlerConfig{
		Store: NewStore(),
		Ready: func() bool { return ready },
		CheckBindings: func(bs []CredentialBinding) error {
			for _, b := range bs {
				if slices.Contains(b.Match.Hosts, "blocked.example") {
					return errors.New("host blocked.example is not allowed by the network policy")
				}
			}
			return nil
		},
	}))
	defer srv.Close()
	client := &http.Client{Transport: openapitest.Load(t, egressDoc).Transport(t, srv.Client().Transport)}

	create := `{"credentials":[{"name":"a","source":{"type":"inline","value":"` + secretA + `"}}],"bindings":[]}`
	blocked := `{"credentials":[{"name":"a","source":{"type":"inline","value":"` + secretA + `"}}],
		"bindings":[{"name":"x","match":{"hosts":["blocked.example"]},"auth":{"type":"bearer","credential":"a"}}]}`
	steps := []struct {
		method, path, body string
		ready              bool
		want               int
		contains           string
	}{
		{"POST", "/credential-vault", create, false, 412, "not ready"},
		{"POST", "/credential-vault", blocked, true, 400, "not allowed by the network policy"},
		{"POST", "/credential-vault", `{"credentials":[],"bindings":[],"pad":"` + strings.Repeat("x", maxBodyBytes) + `"}`, true, 413, "larger than"},
		{"PATCH", "/credential-vault", `{"credentials":{"delete":["a"]}}`, true, 404, "not found"},
		{"GET", "/credential-vault/credentials", "", true, 404, "not found"},
		{"GET", "/credential-vault/bindings", "", true, 404, "not found"},
		{"DELETE", "/credential-vault", "", true, 404, "not found"},
		{"POST", "/credential-vault", `{"credentials":[{"name":"a","source":{"type":"inline","value":"` + secretA + `"}}],
			"bindings":[{"name":"k","match":{"hosts":["api.example"],"schemes":["HTTP"],"ports":[8080]},
			"auth":{"type":"customHeaders","headers":[{"name":"x-key","credential":"a"}]}}]}`, true, 201, `"schemes":["http"]`},
		{"GET", "/credential-vault/bindings/k", "", true, 200, `"auth":{"type":"customHeaders"}`},
		{"PATCH", "/credential-vault", `{"bindings":{"add":[{"name":"x","match":{"hosts":["blocked.example"]},"auth":{"type":"bearer","credential":"a"}}]}}`, true, 400, "not allowed"},
		{"PATCH", "/credential-vault", `{}`, true, 400, "no operations"},
		{"PATCH", "/credential-vault", `{"credentials":{"delete":["a"]}} {}`, true, 400, "trailing data"},
	}
	for _, s := range steps {
		ready = s.ready
		req, err := http.NewRequest(s.method, srv.URL+s.path, strings.NewReader(s.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", s.method, s.path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != s.want || !strings.Contains(string(b), s.contains) {
			t.Errorf("%s %s = %d %q, want %d containing %q", s.method, s.path, resp.StatusCode, b, s.want, s.contains)
		}
		noSecrets(t, s.method+" "+s.path+" response", string(b))
	}
}
