package sandbox

import (
	"net/http"
	"testing"
	"time"
)

// TestExecdHeaders checks that the endpoint's token is forwarded on execd
// calls, and that proxy mode sends the API key instead of a token.
func TestExecdHeaders(t *testing.T) {
	s := newSDKServer(t)
	s.mux.HandleFunc("GET /execd/metrics", func(w http.ResponseWriter, r *http.Request) { replyJSON(w, 200, Metrics{CPUCount: 2}) })
	s.mux.HandleFunc("GET /sandboxes/sb1/proxy/44772/metrics", func(w http.ResponseWriter, r *http.Request) { replyJSON(w, 200, Metrics{CPUCount: 2}) })

	sb := s.connect(t, WithHeader("X-Extra", "e"))
	if sb.ExecdURL() != s.URL+"/execd" {
		t.Errorf("ExecdURL() = %q, want %q", sb.ExecdURL(), s.URL+"/execd")
	}
	h := sb.ExecdHeaders()
	if h.Get(AccessTokenHeader) != sdkTestToken || h.Get("X-Extra") != "e" {
		t.Errorf("ExecdHeaders() = %v, want the token and X-Extra", h)
	}
	if !sb.Healthy(testCtx(t)) {
		t.Error("Healthy() = false, want true")
	}
	if _, err := sb.Metrics(testCtx(t)); err != nil {
		t.Fatalf("Metrics: %v", err)
	}
	r := s.only(t, "GET", "/execd/metrics")
	if r.Header.Get(AccessTokenHeader) != sdkTestToken || r.Header.Get("X-Extra") != "e" || r.Header.Get("User-Agent") != defaultUserAgent {
		t.Errorf("execd request headers = %v, want token, X-Extra and User-Agent", r.Header)
	}
	if r.Header.Get(APIKeyHeader) != "" {
		t.Errorf("direct execd request carries the API key")
	}

	proxied, err := s.client(t, WithServerProxy(true)).Connect(testCtx(t), "sb1", ConnectOptions{})
	if err != nil {
		t.Fatalf("Connect through the proxy: %v", err)
	}
	if want := s.URL + "/sandboxes/sb1/proxy/44772"; proxied.ExecdURL() != want {
		t.Errorf("proxy ExecdURL() = %q, want %q", proxied.ExecdURL(), want)
	}
	if _, err := proxied.Metrics(testCtx(t)); err != nil {
		t.Fatalf("Metrics through the proxy: %v", err)
	}
	r = s.only(t, "GET", "/sandboxes/sb1/proxy/44772/metrics")
	if r.Header.Get(APIKeyHeader) != sdkTestKey || r.Header.Get(AccessTokenHeader) != "" {
		t.Errorf("proxied execd request headers = %v, want the API key and no token", r.Header)
	}
}

func TestSandboxLifecycleByID(t *testing.T) {
	s := newSDKServer(t)
	sb := s.connect(t)
	s.mux.HandleFunc("POST /v1/sandboxes/sb1/renew-expiration", func(w http.ResponseWriter, r *http.Request) {
		var req RenewSandboxExpirationRequest
		decodeRequest(r, &req)
		replyJSON(w, 200, RenewSandboxExpirationResponse{ExpiresAt: req.ExpiresAt})
	})
	s.mux.HandleFunc("DELETE /v1/sandboxes/sb1", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	ctx := testCtx(t)
	exp, err := sb.Renew(ctx, time.Hour)
	if err != nil || time.Until(exp) < 59*time.Minute || time.Until(exp) > time.Hour {
		t.Errorf("Renew(1h) = %v, %v; want about now+1h", exp, err)
	}
	if info, err := sb.Info(ctx); err != nil || info.ID != "sb1" {
		t.Errorf("Info = %+v, %v", info, err)
	}
	if err := sb.Kill(ctx); err != nil {
		t.Errorf("Kill: %v", err)
	}
}
