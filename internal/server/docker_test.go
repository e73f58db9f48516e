package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/internal/runtime/docker"
	"github.com/opensandbox-go/opensandbox/internal/testenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// dockerEnv is a server over the real Docker driver, or a skip reason.
// Everything it makes carries the label io.opensandbox.test.run=<run>.
func dockerEnv(t *testing.T, mod func(*Config)) (*testEnv, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("Docker flow skipped with -short")
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		testenv.Missing(t, "static busybox not installed (apt-get install busybox-static)")
	}
	run := randomHex(4)
	dir := t.TempDir()
	execd := filepath.Join(dir, "execd")
	build := exec.Command("go", "build", "-o", execd, "github.com/opensandbox-go/opensandbox/cmd/execd")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build execd: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rt, err := docker.New(ctx, docker.Options{
		ExecdPath:    execd,
		StartTimeout: 15 * time.Second,
		Labels:       map[string]string{"io.opensandbox.test": "server", "io.opensandbox.test.run": run},
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if errors.Is(err, runtime.ErrUnavailable) {
		testenv.Missing(t, "Docker engine not reachable: %v", err)
	}
	if err != nil {
		t.Fatalf("docker.New: %v", err)
	}
	t.Cleanup(func() { removeRun(run) })
	image := busyboxImage(t, dir, run)

	e := &testEnv{t: t, store: openStore(t), logs: &syncBuffer{}}
	cfg := Config{
		Runtime:    rt,
		Store:      e.store,
		APIKey:     testAPIKey,
		MinTimeout: time.Second,
		Logger:     slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mod != nil {
		mod(&cfg)
	}
	if e.srv, err = New(cfg); err != nil {
		t.Fatalf("New: %v", err)
	}
	e.http = newHTTPTestServer(t, e.srv.Handler())
	e.run()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// What the server and the sandboxes' execd said, for failures
		// that do not reproduce on demand.
		logs := e.logs.String()
		if len(logs) > 16000 {
			logs = logs[len(logs)-16000:]
		}
		t.Logf("server log (tail):\n%s", logs)
		ids, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=io.opensandbox.test.run="+run).Output()
		for _, id := range strings.Fields(string(ids)) {
			out, _ := exec.Command("docker", "logs", "--tail", "40", id).CombinedOutput()
			t.Logf("container %s logs (tail):\n%s", id, out)
		}
	})
	return e, image
}

// busyboxImage imports an image holding only a static busybox.
func busyboxImage(t *testing.T, dir, run string) string {
	t.Helper()
	root := filepath.Join(dir, "rootfs")
	os.MkdirAll(filepath.Join(root, "bin"), 0o755)
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "bin", "busybox"), bb, 0o755)
	for _, a := range []string{"sh", "sleep", "echo", "mkdir", "httpd", "tail", "cat"} {
		os.Symlink("busybox", filepath.Join(root, "bin", a))
	}
	tag := "opensandbox-test/server-busybox:" + run
	script := fmt.Sprintf(`tar -C %s -c . | docker import --change 'ENV PATH=/bin' --change 'LABEL io.opensandbox.test.run=%s' - %s`, root, run, tag)
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("docker import: %v\n%s", err, out)
	}
	return tag
}

// removeRun removes the containers and images a run left behind.
func removeRun(run string) {
	f := "label=io.opensandbox.test.run=" + run
	for _, args := range [][]string{{"ps", "-aq", "--filter", f}, {"images", "-q", "--filter", f}} {
		out, _ := exec.Command("docker", args...).Output()
		ids := strings.Fields(string(out))
		if len(ids) == 0 {
			continue
		}
		if args[0] == "ps" {
			exec.Command("docker", append([]string{"rm", "-f", "-v"}, ids...)...).Run()
		} else {
			exec.Command("docker", append([]string{"rmi", "-f"}, ids...)...).Run()
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// getURL fetches url with the given headers and returns status and body.
func getURL(t *testing.T, method, url, body string, headers map[string]string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// TestDockerFlow drives the whole lifecycle against the real engine:
// create, get, list, endpoints (direct and through the server proxy, to
// execd and to a user port), a command streamed through the proxy,
// pause/resume, a snapshot and a sandbox restored from it, TTL expiry and
// delete.
func TestDockerFlow(t *testing.T) {
	e, image := dockerEnv(t, nil)
	// Docker has no pools (yet).
	wantError(t, "GET /v1/pools on Docker", e.do("GET", "/v1/pools", nil), http.StatusNotImplemented, "POOL_NOT_SUPPORTED")
	body := map[string]any{
		"image": map[string]any{"uri": image},
		"entrypoint": []string{"sh", "-c",
			"mkdir -p /www && echo hello > /www/index.html && httpd -p 3000 -h /www && exec sleep 100000"},
		"timeout":        600,
		"metadata":       map[string]string{"suite": "server"},
		"resourceLimits": map[string]string{"cpu": "500m", "memory": "128Mi"},
	}
	r := e.do("POST", "/v1/sandboxes", body)
	if r.status != http.StatusAccepted {
		t.Fatalf("create = %s", r)
	}
	created := decode[sandbox.CreateSandboxResponse](t, r)
	id := created.ID
	if created.Status.State != sandbox.StateRunning || created.ExpiresAt == nil || len(created.Entrypoint) != 3 {
		t.Errorf("create reply = %+v, want Running with expiresAt and the user's entrypoint", created)
	}
	got := decode[sandbox.SandboxInfo](t, e.do("GET", "/v1/sandboxes/"+id, nil))
	if got.Image == nil || got.Image.URI != image || got.Metadata["suite"] != "server" {
		t.Errorf("GET = %+v", got)
	}
	list := decode[sandbox.ListSandboxesResponse](t, e.do("GET", "/v1/sandboxes?metadata=suite%3Dserver&state=running", nil))
	if len(list.Items) != 1 || list.Items[0].ID != id {
		t.Errorf("list by metadata = %+v, want just %s", list.Items, id)
	}

	// Direct endpoints: execd's port and a user port, both reached through
	// execd's /proxy (upstream's bridge shape), both with execd's token.
	var token string
	for _, port := range []int{44772, 3000} {
		ep := decode[sandbox.Endpoint](t, e.do("GET", fmt.Sprintf("/v1/sandboxes/%s/endpoints/%d", id, port), nil))
		token = ep.Headers[sandbox.AccessTokenHeader]
		if want := fmt.Sprintf("/proxy/%d", port); !strings.HasSuffix(ep.Endpoint, want) {
			t.Errorf("endpoint %d = %q, want it to end in %s", port, ep.Endpoint, want)
		}
		if ep.Headers[sandbox.AccessTokenHeader] == "" {
			t.Errorf("endpoint %d = %+v, want execd's token header", port, ep)
		}
		path := "/ping"
		if port == 3000 {
			path = "/index.html"
		}
		if status, text := getURL(t, "GET", "http://"+ep.Endpoint+path, "", ep.Headers); status != http.StatusOK || (port == 3000 && text != "hello\n") {
			t.Errorf("GET http://%s%s = %d %q", ep.Endpoint, path, status, text)
		}
		if status, _ := getURL(t, "GET", "http://"+ep.Endpoint+path, "", nil); status != http.StatusUnauthorized {
			t.Errorf("GET http://%s%s without the token = %d, want 401", ep.Endpoint, path, status)
		}
	}
	// Server proxy: the API key is all it takes, the proxy adds the token.
	ep := decode[sandbox.Endpoint](t, e.do("GET", "/v1/sandboxes/"+id+"/endpoints/44772?use_server_proxy=true", nil))
	withKey := map[string]string{sandbox.APIKeyHeader: testAPIKey}
	if status, _ := getURL(t, "GET", "http://"+ep.Endpoint+"/ping", "", withKey); status != http.StatusOK {
		t.Errorf("GET http://%s/ping through the server proxy = %d", ep.Endpoint, status)
	}
	status, stream := getURL(t, "POST", "http://"+ep.Endpoint+"/command", `{"command":"echo from-proxy"}`, withKey)
	if status != http.StatusOK || !strings.Contains(stream, `"text":"from-proxy"`) {
		t.Errorf("command through the server proxy = %d %q", status, stream)
	}
	if status, text := getURL(t, "GET", e.http.URL+"/sandboxes/"+id+"/proxy/3000/index.html", "", withKey); status != http.StatusOK || text != "hello\n" {
		t.Errorf("user port through the server proxy = %d %q", status, text)
	}

	// Pause/resume.
	if r := e.do("POST", "/v1/sandboxes/"+id+"/pause", nil); r.status != http.StatusAccepted {
		t.Fatalf("pause = %s", r)
	}
	if st := decode[sandbox.SandboxInfo](t, e.do("GET", "/v1/sandboxes/"+id, nil)).Status.State; st != sandbox.StatePaused {
		t.Errorf("state after pause = %s", st)
	}
	wantError(t, "endpoint of paused", e.do("GET", "/v1/sandboxes/"+id+"/endpoints/44772", nil), 409, "SANDBOX_NOT_RUNNING")
	wantError(t, "pause of paused", e.do("POST", "/v1/sandboxes/"+id+"/pause", nil), 409, "SANDBOX_NOT_RUNNING")
	if r := e.do("POST", "/v1/sandboxes/"+id+"/resume", nil); r.status != http.StatusAccepted {
		t.Fatalf("resume = %s", r)
	}
	wantError(t, "resume of running", e.do("POST", "/v1/sandboxes/"+id+"/resume", nil), 409, "SANDBOX_NOT_PAUSED")

	// Diagnostics.
	if r := e.do("GET", "/v1/sandboxes/"+id+"/diagnostics/inspect", nil); r.status != http.StatusOK || token == "" || strings.Contains(string(r.body), token) {
		t.Errorf("inspect = %d (token known: %v), want 200 without execd's token", r.status, token != "")
	}
	if r := e.do("GET", "/v1/sandboxes/"+id+"/diagnostics/logs?scope=container", nil); r.status != http.StatusOK {
		t.Errorf("logs?scope=container = %s", r)
	}

	// Snapshot and restore.
	snap := decode[sandbox.Snapshot](t, e.do("POST", "/v1/sandboxes/"+id+"/snapshots", map[string]string{"name": "www"}))
	waitFor(t, "snapshot Ready", 15*time.Second, func() bool {
		return snapshotState(t, e, snap.ID).Status.State != sandbox.SnapshotCreating
	})
	if st := snapshotState(t, e, snap.ID).Status; st.State != sandbox.SnapshotReady {
		t.Fatalf("snapshot status = %+v, want Ready", st)
	}
	restored := e.createSandbox(map[string]any{"snapshotId": snap.ID})
	ep = decode[sandbox.Endpoint](t, e.do("GET", "/v1/sandboxes/"+restored+"/endpoints/44772?use_server_proxy=true", nil))
	status, stream = getURL(t, "POST", "http://"+ep.Endpoint+"/command", `{"command":"cat /www/index.html"}`, withKey)
	if status != http.StatusOK || !strings.Contains(stream, `"text":"hello"`) {
		t.Errorf("file from the snapshot in the restored sandbox = %d %q", status, stream)
	}
	wantError(t, "delete snapshot in use", e.do("DELETE", "/v1/snapshots/"+snap.ID, nil), 409, "INVALID_STATE")
	if r := e.do("DELETE", "/v1/sandboxes/"+restored, nil); r.status != http.StatusNoContent {
		t.Errorf("delete restored = %s", r)
	}
	if r := e.do("DELETE", "/v1/snapshots/"+snap.ID, nil); r.status != http.StatusNoContent {
		t.Errorf("delete snapshot = %s", r)
	}

	// Delete.
	if r := e.do("DELETE", "/v1/sandboxes/"+id, nil); r.status != http.StatusNoContent {
		t.Errorf("delete = %s", r)
	}
	wantError(t, "GET deleted", e.do("GET", "/v1/sandboxes/"+id, nil), 404, "SANDBOX_NOT_FOUND")
	wantError(t, "proxy to deleted", e.do("GET", "/sandboxes/"+id+"/proxy/44772/ping", nil), 404, "SANDBOX_NOT_FOUND")
}

// TestDockerExpiry checks that a sandbox with a short timeout is removed
// from the engine by the server's expiry timer.
func TestDockerExpiry(t *testing.T) {
	e, image := dockerEnv(t, nil)
	id := e.createSandbox(map[string]any{
		"image": map[string]any{"uri": image}, "entrypoint": []string{"sleep", "100000"}, "timeout": 1,
	})
	waitFor(t, "expiry of "+id, 15*time.Second, func() bool {
		return e.do("GET", "/v1/sandboxes/"+id, nil).status == http.StatusNotFound
	})
}
