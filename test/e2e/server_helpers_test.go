package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

const testAPIKey = "e2e-test-key"

// serverProc is a running opensandbox-server binary with its own config,
// store and a validating client.
type serverProc struct {
	t       *testing.T
	cmd     *osexec.Cmd
	base    string
	cfgPath string
	logPath string
	client  *http.Client
	exited  chan struct{}
}

type serverOpts struct {
	minTimeout int // seconds; default 1
	extraTOML  string
	serverTOML string // more keys of the [server] table
	dockerTOML string // more keys of the [docker] table
	storeDir   string // reuse a store across restarts
	addr       string // reuse an address across restarts
}

func startServer(t *testing.T, o serverOpts) *serverProc {
	t.Helper()
	bin := binPath(t, "opensandbox-server")
	execd := binPath(t, "execd")
	if o.minTimeout == 0 {
		o.minTimeout = 1
	}
	if o.storeDir == "" {
		o.storeDir = t.TempDir()
	}
	if o.addr == "" {
		o.addr = freeAddr(t)
	}
	host, port, _ := strings.Cut(o.addr, ":")
	dir := t.TempDir()
	cfg := fmt.Sprintf(`[server]
host = %q
port = %s
api_key = %q
min_sandbox_timeout_seconds = %d
%s
[log]
level = "debug"

[runtime]
type = "docker"
execd_path = %q

[docker]
network_mode = "bridge"
host_ip = "127.0.0.1"
%s
[store]
path = %q
%s
`, host, port, testAPIKey, o.minTimeout, o.serverTOML, execd, o.dockerTOML, filepath.Join(o.storeDir, "store.db"), o.extraTOML)
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &serverProc{t: t, base: "http://" + o.addr, cfgPath: cfgPath, logPath: filepath.Join(dir, "server.log"), exited: make(chan struct{})}
	p.start(bin)
	spec := openapitest.Load(t, "api/lifecycle.yaml")
	p.client = &http.Client{Transport: spec.Transport(t, http.DefaultTransport)}
	t.Cleanup(func() {
		p.stop(syscall.SIGTERM)
		if t.Failed() {
			b, _ := os.ReadFile(p.logPath)
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			t.Logf("server log (tail):\n%s", b)
		}
	})
	return p
}

func (p *serverProc) start(bin string) {
	t := p.t
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = osexec.Command(bin, "--config", p.cfgPath)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start server: %v", err)
	}
	p.exited = make(chan struct{})
	go func() { p.cmd.Wait(); logf.Close(); close(p.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-p.exited:
			b, _ := os.ReadFile(p.logPath)
			t.Fatalf("server exited during start:\n%s", b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server never answered /health: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *serverProc) stop(sig syscall.Signal) {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

func (p *serverProc) restart() {
	p.stop(syscall.SIGKILL)
	p.start(p.cmd.Path)
}

// api sends a JSON request with the API key; want is the expected status.
func (p *serverProc) api(t *testing.T, method, path string, in any, want int, out any) http.Header {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, p.base+path, body)
	req.Header.Set(sandbox.APIKeyHeader, testAPIKey)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, data, want)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
	return resp.Header
}

func (p *serverProc) apiError(t *testing.T, method, path string, in any, want int, code string) {
	t.Helper()
	var er sandbox.ErrorResponse
	p.api(t, method, path, in, want, &er)
	if er.Code != code || er.Message == "" {
		t.Errorf("%s %s error = %+v, want code %s with a message", method, path, er, code)
	}
}

func (p *serverProc) create(t *testing.T, req sandbox.CreateSandboxRequest) sandbox.CreateSandboxResponse {
	t.Helper()
	var out sandbox.CreateSandboxResponse
	p.api(t, "POST", "/v1/sandboxes", req, 202, &out)
	t.Cleanup(func() {
		// Best effort: the test may have deleted it already.
		r, _ := http.NewRequest("DELETE", p.base+"/v1/sandboxes/"+out.ID, nil)
		r.Header.Set(sandbox.APIKeyHeader, testAPIKey)
		if resp, err := http.DefaultClient.Do(r); err == nil {
			resp.Body.Close()
		}
	})
	return out
}

// execd returns a client for the sandbox's execd through the endpoint the
// server hands out (with its headers), validating against api/execd.yaml.
func (p *serverProc) execd(t *testing.T, id string, serverProxy bool) *execdProc {
	t.Helper()
	var ep sandbox.Endpoint
	p.api(t, "GET", fmt.Sprintf("/v1/sandboxes/%s/endpoints/44772?use_server_proxy=%v", id, serverProxy), nil, 200, &ep)
	if strings.Contains(ep.Endpoint, "://") {
		t.Fatalf("endpoint %q carries a scheme", ep.Endpoint)
	}
	e := &execdProc{base: "http://" + ep.Endpoint, exited: make(chan struct{})}
	e.token = ep.Headers[sandbox.AccessTokenHeader]
	if serverProxy {
		// Paths carry the proxy prefix here, so api/execd.yaml cannot route
		// them; the direct endpoint checks the same replies. The proxy
		// needs the API key.
		e.apiKey = testAPIKey
		e.client = &http.Client{Transport: &tokenTransport{p: e}, Timeout: 60 * time.Second}
		return e
	}
	// A Docker bridge endpoint puts execd under /proxy/44772: the document
	// names its routes without that prefix.
	u, err := url.Parse(e.base)
	if err != nil {
		t.Fatalf("endpoint %q: %v", ep.Endpoint, err)
	}
	spec := openapitest.Load(t, "api/execd.yaml")
	e.client = &http.Client{Transport: spec.TransportUnder(t, u.EscapedPath(), &tokenTransport{p: e}), Timeout: 60 * time.Second}
	return e
}

func (p *serverProc) sandboxState(t *testing.T, id string) string {
	t.Helper()
	var sb sandbox.SandboxInfo
	p.api(t, "GET", "/v1/sandboxes/"+id, nil, 200, &sb)
	return sb.Status.State
}

// containersWithLabel counts containers of this test run that Docker still has.
func containersWithLabel(t *testing.T, label string) []string {
	t.Helper()
	out, err := osexec.Command("docker", "ps", "-aq", "--filter", "label="+label).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

// ensureBaseImage builds opensandbox/base from Debian packages when its
// recipe changed (a no-op otherwise) and returns its name.
func ensureBaseImage(t *testing.T) string {
	t.Helper()
	cmd := osexec.Command("bash", openapitest.RepoPath("images/build.sh"), "base")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("images/build.sh base: %v\n%s", err, out)
	}
	return "opensandbox/base:latest"
}

// getWithKey is http.Get with the API key (the server proxy needs it).
func getWithKey(url string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(sandbox.APIKeyHeader, testAPIKey)
	return http.DefaultClient.Do(req)
}
