package e2e

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
)

// TestExampleCodingAgent runs examples/coding-agent against a real server:
// Claude Code, in a sandbox from opensandbox/coding-agent that may reach
// only the API host, answers a prompt through the credential proxy, which
// adds the real key; the program then finds the key nowhere in the
// sandbox. The API host is a stand-in for the Anthropic Messages API
// (api.anthropic.test) on the host's address on the sandbox network, with
// its own CA given to the sidecar as upstream_ca_file; nothing leaves the
// machine.
//
// The image is built by CI (images/build.sh coding-agent, which needs the
// npm registry); the test fails when it is missing or stale.
func TestExampleCodingAgent(t *testing.T) {
	binPath(t, "opensandbox-server") // skips unless OSB_E2E=1
	image := requireCodingAgentImage(t)

	const apiHost = "api.anthropic.test"
	key := "sk-ant-e2e-" + rand.Text()
	gw := sandboxNetworkGateway(t)
	// The world's resolver answers the API host with the gateway; its own
	// HTTPS origin is not used (any port), the stand-in takes 443.
	world := startEgressWorld(t, gw, "0", "0", map[string]string{apiHost: gw}, hostListen)
	api := startMessagesStandIn(t, gw, apiHost, key)
	s := startServer(t, serverOpts{extraTOML: fmt.Sprintf(`
[egress]
mode = "dns+nft"
dns_upstream = [%q]
upstream_ca_file = %q
`, world.dnsAddr, api.caFile)})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := osexec.CommandContext(ctx, "go", "run", "./examples/coding-agent")
	cmd.Dir = openapitest.RepoPath(".")
	cmd.Env = append(os.Environ(),
		"OPEN_SANDBOX_DOMAIN="+strings.TrimPrefix(s.base, "http://"),
		"OPEN_SANDBOX_API_KEY="+testAPIKey,
		"EXAMPLE_IMAGE="+image,
		"ANTHROPIC_BASE_URL=https://"+apiHost,
		"ANTHROPIC_API_KEY="+key)
	start := time.Now()
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	t.Logf("go run ./examples/coding-agent (%v):\n%s", time.Since(start).Round(time.Millisecond), out)
	reqs := api.requests()
	for i, r := range reqs {
		t.Logf("stand-in request %d: %s %s stream=%v model=%q user-agent=%q x-api-key %s → %d",
			i+1, r.method, r.target, r.stream, r.model, r.userAgent, r.keyState(key), r.status)
	}
	if err != nil {
		t.Fatalf("go run ./examples/coding-agent: %v", err)
	}
	if strings.Contains(out, key) {
		t.Errorf("the program printed the key")
	}
	if !regexp.MustCompile(`answered in \S+:\n` + regexp.QuoteMeta(standInAnswer) + `\n`).MatchString(out) {
		t.Errorf("output does not carry the stand-in's answer %q", standInAnswer)
	}
	if !strings.Contains(out, "key scan: canary found in /tmp/coding-agent-canary.txt") ||
		!strings.Contains(out, "key scan: API key found nowhere in the sandbox") {
		t.Errorf("output does not report a scan that found the canary and not the key")
	}
	messages := 0
	for _, r := range reqs {
		if r.method == http.MethodPost && r.path == "/v1/messages" {
			messages++
			if r.apiKey != key {
				t.Errorf("POST %s reached the API with x-api-key %s; want the real key, injected by the sidecar", r.target, r.keyState(key))
			}
		}
	}
	if messages == 0 {
		t.Errorf("the stand-in got no POST /v1/messages")
	}
}

// requireCodingAgentImage fails the test unless opensandbox/coding-agent is
// in the engine and built from the current recipe.
func requireCodingAgentImage(t *testing.T) string {
	t.Helper()
	const image = "opensandbox/coding-agent:latest"
	got, err := osexec.Command("docker", "image", "inspect", "--format", `{{index .Config.Labels "io.opensandbox.recipe"}}`, image).Output()
	if err != nil {
		t.Fatalf("image %s is missing: build it with `sudo images/build.sh coding-agent` (docker image inspect: %v)", image, err)
	}
	want, err := osexec.Command("bash", openapitest.RepoPath("images/build.sh"), "--hash", "coding-agent").Output()
	if err != nil {
		t.Fatalf("images/build.sh --hash coding-agent: %v", err)
	}
	if g, w := strings.TrimSpace(string(got)), strings.TrimSpace(string(want)); g != w {
		t.Fatalf("image %s is of recipe %q, not the current %q: rebuild it with `sudo images/build.sh coding-agent`", image, g, w)
	}
	return image
}

// standInAnswer is what the stand-in answers to the example's default
// prompt, "What is 6 times 7? ...".
const standInAnswer = "6 × 7 = 42"

// messagesStandIn is a stand-in for the Anthropic Messages API: POST
// /v1/messages with x-api-key equal to the key it was given gets a message,
// as server-sent events when the request asks for a stream and as JSON
// otherwise; a wrong key gets 401, anything else 404, as the API answers
// them. It records every request.
type messagesStandIn struct {
	caFile string
	apiKey string // the only x-api-key accepted

	mu   sync.Mutex
	seen []standInRequest
}

type standInRequest struct {
	method, target, path string
	apiKey, userAgent    string
	model                string
	stream               bool
	status               int
}

// keyState describes the x-api-key a request carried without printing it.
func (r standInRequest) keyState(key string) string {
	switch r.apiKey {
	case key:
		return "= the real key"
	case "":
		return "missing"
	default:
		return fmt.Sprintf("%q (not the real key)", r.apiKey)
	}
}

func (a *messagesStandIn) requests() []standInRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]standInRequest(nil), a.seen...)
}

// startMessagesStandIn serves the stand-in for host on ip:443 with a
// certificate from a CA of its own (caFile).
func startMessagesStandIn(t *testing.T, ip, host, key string) *messagesStandIn {
	t.Helper()
	a := &messagesStandIn{caFile: filepath.Join(t.TempDir(), "anthropic-standin-ca.pem"), apiKey: key}
	ca, caKey := newTestCA(t)
	if err := os.WriteFile(a.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	leaf := newLeaf(t, ca, caKey, []string{host}, ip)
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "443"))
	if err != nil {
		t.Fatalf("stand-in for %s: %v", host, err)
	}
	srv := &http.Server{
		Handler:           a,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{leaf}},
		ReadHeaderTimeout: 10 * time.Second,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.ServeTLS(l, "", "")
	}()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return a
}

func (a *messagesStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := standInRequest{method: r.Method, target: r.URL.RequestURI(), path: r.URL.Path,
		apiKey: r.Header.Get("X-Api-Key"), userAgent: r.Header.Get("User-Agent")}
	defer func() {
		a.mu.Lock()
		a.seen = append(a.seen, rec)
		a.mu.Unlock()
	}()
	fail := func(status int, typ, msg string) {
		rec.status = status
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	}
	if r.URL.Path != "/v1/messages" {
		fail(http.StatusNotFound, "not_found_error", "Not found")
		return
	}
	if r.Method != http.MethodPost {
		fail(http.StatusMethodNotAllowed, "invalid_request_error", "Method not allowed")
		return
	}
	var req struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Stream    bool   `json:"stream"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	rec.model, rec.stream = req.Model, req.Stream
	switch {
	case rec.apiKey != a.apiKey:
		fail(http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	case err != nil:
		fail(http.StatusBadRequest, "invalid_request_error", "body: "+err.Error())
		return
	case req.Model == "" || req.MaxTokens <= 0 || len(req.Messages) == 0:
		fail(http.StatusBadRequest, "invalid_request_error", "model, max_tokens and messages are required")
		return
	}
	// The prompt is in the last user message (Claude Code puts a system
	// message after it).
	prompt := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			prompt = userText(m.Content)
		}
	}
	text := "The stand-in knows only what 6 times 7 is."
	if strings.Contains(prompt, "6 times 7") {
		text = standInAnswer
	}
	rec.status = http.StatusOK
	id := "msg_standin_" + rand.Text()
	usage := map[string]int{"input_tokens": len(body) / 4, "output_tokens": len(text)}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": req.Model,
			"content":     []any{map[string]string{"type": "text", "text": text}},
			"stop_reason": "end_turn", "stop_sequence": nil, "usage": usage,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	event := func(name string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": usage["input_tokens"], "output_tokens": 1},
	}})
	event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]string{"type": "text", "text": ""}})
	event("ping", map[string]string{"type": "ping"})
	event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": text}})
	event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": usage["output_tokens"]}})
	event("message_stop", map[string]string{"type": "message_stop"})
}

// userText is the text of a message's content: a string, or the text
// blocks of a list of blocks.
func userText(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var blocks []struct {
		Type, Text string
	}
	_ = json.Unmarshal(content, &blocks)
	var b strings.Builder
	for _, bl := range blocks {
		if bl.Type == "text" {
			b.WriteString(bl.Text)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
