package server

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

const (
	claimToken   = "pool-claim-token-0123456789"
	claimedToken = "sandbox-token-after-claim-42"
)

// send makes one request with token (none when "") and returns status and body.
func send(t *testing.T, method, u, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set(sandbox.AccessTokenHeader, token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func claimBody(token string, env map[string]string) string {
	b, _ := json.Marshal(claimRequest{AccessToken: token, Env: env})
	return string(b)
}

// An execd started for a pool serves nothing until claimed; the claim
// sets the sandbox's token and environment, works once, and the claim
// token opens nothing else.
func TestClaim(t *testing.T) {
	const envKey = "OSB_CLAIM_TEST_VAR"
	t.Cleanup(func() { os.Unsetenv(envKey) })
	srv, _ := startServerWith(t, func(c *Config) { c.AccessToken, c.ClaimToken = "", claimToken })
	u := srv.URL

	for _, tok := range []string{"", claimToken, claimedToken} {
		if code, body := send(t, "GET", u+"/ping", tok, ""); code != http.StatusUnauthorized {
			t.Errorf("unclaimed GET /ping with %q = %d %s, want 401", tok, code, body)
		}
	}
	if code, _ := send(t, "POST", u+"/command", claimToken, `{"command":"true"}`); code != http.StatusUnauthorized {
		t.Errorf("unclaimed POST /command with the claim token = %d, want 401", code)
	}
	if code, _ := send(t, "POST", u+ClaimPath, "wrong", claimBody(claimedToken, nil)); code != http.StatusUnauthorized {
		t.Errorf("claim with a wrong token = %d, want 401", code)
	}
	for name, body := range map[string]string{
		"short token":  claimBody("short", nil),
		"bad env name": claimBody(claimedToken, map[string]string{"A=B": "x"}),
		"unknown key":  `{"accessToken":"` + claimedToken + `","extra":1}`,
		"not json":     `{`,
	} {
		if code, resp := send(t, "POST", u+ClaimPath, claimToken, body); code != http.StatusBadRequest || !strings.Contains(resp, "INVALID_REQUEST_BODY") {
			t.Errorf("claim with %s = %d %s, want 400 INVALID_REQUEST_BODY", name, code, resp)
		}
	}
	// Bad claims changed nothing: still unclaimed.
	if code, _ := send(t, "GET", u+"/ping", claimedToken, ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /ping after refused claims = %d, want 401", code)
	}

	// Two claims at once: exactly one wins.
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Go(func() {
			codes[i], _ = send(t, "POST", u+ClaimPath, claimToken, claimBody(claimedToken, map[string]string{envKey: "from-the-claim"}))
		})
	}
	wg.Wait()
	if !(codes[0] == http.StatusNoContent && codes[1] == http.StatusConflict || codes[1] == http.StatusNoContent && codes[0] == http.StatusConflict) {
		t.Fatalf("two concurrent claims = %v, want one 204 and one 409", codes)
	}
	if code, body := send(t, "POST", u+ClaimPath, claimToken, claimBody("another-token-0123456789", nil)); code != http.StatusConflict || !strings.Contains(body, CodeAlreadyClaimed) {
		t.Errorf("a later claim = %d %s, want 409 %s", code, body, CodeAlreadyClaimed)
	}

	if code, _ := send(t, "GET", u+"/ping", claimToken, ""); code != http.StatusUnauthorized {
		t.Errorf("GET /ping with the claim token after the claim = %d, want 401", code)
	}
	if code, body := send(t, "GET", u+"/ping", claimedToken, ""); code != http.StatusOK {
		t.Errorf("GET /ping with the claimed token = %d %s, want 200", code, body)
	}
	code, body := send(t, "POST", u+"/command", claimedToken, `{"command":"echo $`+envKey+`"}`)
	if code != http.StatusOK || !strings.Contains(body, "from-the-claim") {
		t.Errorf("a command after the claim = %d %s, want the claim's environment in its output", code, body)
	}
}

// An execd started with its own token has nothing to claim.
func TestClaimWithoutPool(t *testing.T) {
	srv, _ := startServer(t)
	if code, body := send(t, "POST", srv.URL+ClaimPath, testToken, claimBody(claimedToken, nil)); code != http.StatusNotFound {
		t.Errorf("claim of an execd with its own token = %d %s, want 404", code, body)
	}
	if code, _ := send(t, "GET", srv.URL+"/ping", testToken, ""); code != http.StatusOK {
		t.Errorf("GET /ping with its token = %d, want 200", code)
	}
}
