package kube

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// The server tests run the real opensandbox-server binary on the host with
// [runtime] type = "kubernetes" against the test cluster, each server
// limited to the test's namespace (where the test's own operator acts),
// and drive it through the lifecycle API as a client would.

// serverAPIKey is the API key of every server these tests start.
const serverAPIKey = "kube-e2e-server-key"

var (
	serverBuildOnce sync.Once
	serverBinPath   string
	serverBuildErr  error
)

// serverBinary builds cmd/opensandbox-server once per test process (as
// controllerBinary does the controller), so a run never tests a stale
// bin/opensandbox-server.
func serverBinary(t *testing.T) string {
	t.Helper()
	serverBuildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "osb-kube-e2e-server-")
		if err != nil {
			serverBuildErr = err
			return
		}
		serverBinPath = filepath.Join(dir, "opensandbox-server")
		cmd := exec.Command("go", "build", "-buildvcs=false", "-o", serverBinPath, "./cmd/opensandbox-server")
		cmd.Dir = openapitest.RepoPath(".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			serverBuildErr = fmt.Errorf("go build ./cmd/opensandbox-server: %v\n%s", err, out)
		}
	})
	if serverBuildErr != nil {
		t.Fatal(serverBuildErr)
	}
	return serverBinPath
}

// serverOpts are the settings of one server process beyond the common ones.
type serverOpts struct {
	// createTimeout is [kubernetes] sandbox_create_timeout_seconds; 0 = podTimeout.
	createTimeout int
}

// serverProc is one opensandbox-server process of a test.
type serverProc struct {
	t    *testing.T
	name string
	base string // http://127.0.0.1:port
	cfg  string
	log  string
	api  *http.Client // validates requests and replies against api/lifecycle.yaml
	raw  *http.Client // for the proxy and execd

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// startServer writes a kubernetes configuration for ns and starts the
// server binary on it; it returns once /ready answers (the runtime's
// informers have synced and the API server answers) and stops the process
// when the test ends, printing its log if the test failed.
func (c *cluster) startServer(t *testing.T, ns, name string, o serverOpts) *serverProc {
	t.Helper()
	if o.createTimeout == 0 {
		o.createTimeout = int(podTimeout / time.Second)
	}
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cfg := fmt.Sprintf(`[server]
host = "127.0.0.1"
port = %d
api_key = %q
min_sandbox_timeout_seconds = 1

[log]
level = "debug"

[runtime]
type = "kubernetes"
execd_image = %q

[kubernetes]
kubeconfig_path = %q
namespace = %q
sandbox_create_timeout_seconds = %d
`, port, serverAPIKey, execdImage, c.kubecfg, ns, o.createTimeout)
	p := &serverProc{
		t: t, name: name, base: "http://127.0.0.1:" + strconv.Itoa(port),
		cfg: filepath.Join(dir, "config.toml"), log: filepath.Join(dir, "server.log"),
		raw: &http.Client{Timeout: 2 * time.Minute},
	}
	if err := os.WriteFile(p.cfg, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := openapitest.Load(t, "api/lifecycle.yaml")
	p.api = &http.Client{Transport: spec.Transport(t, nil), Timeout: 2*podTimeout + time.Minute}
	p.start()
	t.Cleanup(func() {
		p.signal(syscall.SIGTERM)
		if t.Failed() {
			if data, err := os.ReadFile(p.log); err == nil {
				t.Logf("server %s log (%s):\n%s", p.name, p.log, tail(data, 150))
			}
		}
	})
	return p
}

func (p *serverProc) start() {
	t := p.t
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(serverBinary(t), "--config", p.cfg)
	// A HOME of its own: nothing of the user's (~/.sandbox.toml, log
	// directories) is read or written.
	cmd.Env = append(os.Environ(), "HOME="+filepath.Dir(p.cfg), "KUBECONFIG=")
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start opensandbox-server %s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var last string
	for {
		select {
		case <-done:
			p.cmd = nil
			data, _ := os.ReadFile(p.log)
			t.Fatalf("opensandbox-server %s exited before it was ready:\n%s", p.name, tail(data, 60))
		case <-ctx.Done():
			t.Fatalf("opensandbox-server %s not ready at %s within 2m (last: %s)", p.name, p.base, last)
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := http.Get(p.base + "/ready")
		if err != nil {
			last = err.Error()
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
		last = fmt.Sprintf("%s %s", resp.Status, body)
	}
}

// kill ends the process with SIGKILL: no graceful shutdown at all.
func (p *serverProc) kill() { p.signal(syscall.SIGKILL) }

func (p *serverProc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(45 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd = nil
}

// call sends a lifecycle API request with the API key and returns the
// status and body.
func (p *serverProc) call(method, path string, in any) (int, []byte) {
	p.t.Helper()
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			p.t.Fatal(err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, p.base+path, body)
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set(sandbox.APIKeyHeader, serverAPIKey)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.api.Do(req)
	if err != nil {
		p.t.Fatalf("server %s: %s %s: %v", p.name, method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatalf("server %s: %s %s: read the reply: %v", p.name, method, path, err)
	}
	return resp.StatusCode, data
}

// must is call that wants the status want and decodes the reply into out.
func (p *serverProc) must(method, path string, in any, want int, out any) {
	p.t.Helper()
	status, data := p.call(method, path, in)
	if status != want {
		p.t.Fatalf("server %s: %s %s = %d %s, want %d", p.name, method, path, status, data, want)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			p.t.Fatalf("server %s: %s %s: decode %s: %v", p.name, method, path, data, err)
		}
	}
}

// wantError checks that a request fails with status and code.
func (p *serverProc) wantError(method, path string, in any, status int, code string) sandbox.ErrorResponse {
	p.t.Helper()
	var er sandbox.ErrorResponse
	p.must(method, path, in, status, &er)
	if er.Code != code || er.Message == "" {
		p.t.Errorf("server %s: %s %s error %+v, want code %s with a message", p.name, method, path, er, code)
	}
	return er
}

// create makes a sandbox through the API and deletes it through the
// cluster when the test ends (the namespace's deletion would too, later).
func (p *serverProc) create(cl client.Client, ns string, req sandbox.CreateSandboxRequest) sandbox.CreateSandboxResponse {
	p.t.Helper()
	var out sandbox.CreateSandboxResponse
	p.must("POST", "/v1/sandboxes", req, http.StatusAccepted, &out)
	p.t.Cleanup(func() { removeSandbox(p.t, cl, ns, out.ID) })
	return out
}

func (p *serverProc) get(id string) (sandbox.SandboxInfo, int) {
	p.t.Helper()
	status, data := p.call("GET", "/v1/sandboxes/"+id, nil)
	var sb sandbox.SandboxInfo
	if status == http.StatusOK {
		if err := json.Unmarshal(data, &sb); err != nil {
			p.t.Fatalf("server %s: GET sandbox %s: decode %s: %v", p.name, id, data, err)
		}
	}
	return sb, status
}

func (p *serverProc) list() []sandbox.SandboxInfo {
	p.t.Helper()
	var l sandbox.ListSandboxesResponse
	p.must("GET", "/v1/sandboxes?pageSize=200", nil, http.StatusOK, &l)
	return l.Items
}

// runProxied runs a shell command in sandbox id through the server's proxy
// route to execd (the server adds execd's token).
func (p *serverProc) runProxied(ctx context.Context, id, cmd string) (string, bool) {
	p.t.Helper()
	return runCommand(ctx, p.t, p.raw, p.base+"/sandboxes/"+id+"/proxy/"+strconv.Itoa(sandbox.ExecdPort),
		map[string]string{sandbox.APIKeyHeader: serverAPIKey}, cmd)
}

// runDirect runs a shell command in sandbox id at the endpoint the server
// hands out for execd's port, with the headers it names (execd's token).
func (p *serverProc) runDirect(ctx context.Context, id, cmd string) (string, bool) {
	p.t.Helper()
	var ep sandbox.Endpoint
	p.must("GET", fmt.Sprintf("/v1/sandboxes/%s/endpoints/%d", id, sandbox.ExecdPort), nil, http.StatusOK, &ep)
	if ep.Headers[sandbox.AccessTokenHeader] == "" {
		p.t.Errorf("server %s: the endpoint of execd names no %s header: %+v", p.name, sandbox.AccessTokenHeader, ep)
	}
	return runCommand(ctx, p.t, p.raw, "http://"+ep.Endpoint, ep.Headers, cmd)
}

// runCommand POSTs /command to execd at base with headers and returns the
// command's stdout and whether it completed without an error.
func runCommand(ctx context.Context, t *testing.T, hc *http.Client, base string, headers map[string]string, cmd string) (string, bool) {
	t.Helper()
	body, _ := json.Marshal(sandbox.RunCommandRequest{Command: cmd})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/command", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("POST %s/command: %v", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s/command: %s %s", base, resp.Status, data)
	}
	var out strings.Builder
	ok, done := true, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev sandbox.StreamEvent
		if json.Unmarshal(bytes.TrimSpace(sc.Bytes()), &ev) != nil {
			continue
		}
		switch ev.Type {
		case sandbox.EventStdout:
			out.WriteString(ev.Text + "\n")
		case sandbox.EventError:
			ok = false
		case sandbox.EventExecutionComplete:
			done = true
		}
	}
	return out.String(), ok && done
}

// poll runs cond every interval until it reports true; it fails the test
// with what() when timeout passes first or cond fails.
func poll(t *testing.T, timeout time.Duration, cond func() (bool, error), what func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(context.Context) (bool, error) { return cond() })
	if err != nil {
		t.Fatalf("%s: %v", what(), err)
	}
}

// sandboxSummary is what two replicas must agree on about one sandbox.
func sandboxSummary(sb sandbox.SandboxInfo) string {
	exp := "none"
	if sb.ExpiresAt != nil {
		exp = sb.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	keys := slices.Sorted(maps.Keys(sb.Metadata))
	var md []string
	for _, k := range keys {
		md = append(md, k+"="+sb.Metadata[k])
	}
	img := ""
	if sb.Image != nil {
		img = sb.Image.URI
	}
	return fmt.Sprintf("id=%s state=%s image=%s entrypoint=%q created=%s expires=%s metadata=%s",
		sb.ID, sb.Status.State, img, sb.Entrypoint, sb.CreatedAt.UTC().Format(time.RFC3339Nano), exp, strings.Join(md, ","))
}

// TestServerTwoReplicas runs two servers on one namespace: a sandbox
// created through A with a short timeout and renewed through B outlives
// its original expiry on both (A armed its own timer at that time, and the
// operator's expireTime said so too), and A and B show the same sandbox:
// state, metadata patched through B, the renewed expiry.
func TestServerTwoReplicas(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	c.startOperator(t, ns)
	cl := c.sandboxClient(t)
	a := c.startServer(t, ns, "A", serverOpts{})
	b := c.startServer(t, ns, "B", serverOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*podTimeout)
	defer cancel()

	// Long enough for a cold create and the renew on a loaded machine;
	// checked below, so a slower create fails loudly instead of passing
	// for the wrong reason.
	const timeout = 30
	start := time.Now()
	created := a.create(cl, ns, sandbox.CreateSandboxRequest{
		Image: &sandbox.ImageSpec{URI: baseImage}, Entrypoint: []string{"sleep", "infinity"},
		Timeout: ptr(int64(timeout)), Metadata: map[string]string{"team": "kube-e2e"},
	})
	id := created.ID
	t.Logf("created %s through A in %s", id, time.Since(start).Round(time.Millisecond))
	if created.ExpiresAt == nil {
		t.Fatalf("create with a timeout: no expiresAt in %+v", created)
	}
	orig := *created.ExpiresAt
	if created.Status.State != sandbox.StateRunning {
		t.Errorf("create answered state %s, want Running", created.Status.State)
	}
	if out, ok := a.runProxied(ctx, id, "echo through-A; id -u"); !ok || out != "through-A\n0\n" {
		t.Errorf("command through A's proxy: %q (ok %v)", out, ok)
	}

	renewed := time.Now().Add(10 * time.Minute).UTC().Truncate(time.Second)
	var rr sandbox.RenewSandboxExpirationResponse
	b.must("POST", "/v1/sandboxes/"+id+"/renew-expiration", sandbox.RenewSandboxExpirationRequest{ExpiresAt: renewed}, http.StatusOK, &rr)
	if !rr.ExpiresAt.Equal(renewed) {
		t.Errorf("renew through B answered expiresAt %s, want %s", rr.ExpiresAt, renewed)
	}
	var patched sandbox.SandboxInfo
	b.must("PATCH", "/v1/sandboxes/"+id+"/metadata", map[string]any{"renewed-by": "B", "team": nil}, http.StatusOK, &patched)
	if time.Now().After(orig.Add(-2 * time.Second)) {
		t.Fatalf("the create took %s, too close to the %ds timeout: the renew came after the original expiry %s", time.Since(start), timeout, orig)
	}
	var bs sandboxv1alpha1.BatchSandbox
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: id}, &bs); err != nil {
		t.Fatalf("the sandbox's BatchSandbox: %v", err)
	}
	if bs.Spec.ExpireTime == nil || !bs.Spec.ExpireTime.Time.Equal(renewed) {
		t.Errorf("BatchSandbox spec.expireTime = %v after the renew through B, want %s", bs.Spec.ExpireTime, renewed)
	}

	// Until well past the original expiry (A's timer and the operator's
	// old expireTime both fire at it), both replicas keep the sandbox.
	until := orig.Add(15 * time.Second)
	t.Logf("original expiry %s; watching both replicas until %s", orig.Format(time.RFC3339), until.Format(time.RFC3339))
	for checks := 0; time.Now().Before(until) || checks == 0; checks++ {
		for _, p := range []*serverProc{a, b} {
			sb, status := p.get(id)
			if status != http.StatusOK || sb.Status.State != sandbox.StateRunning {
				t.Fatalf("%s after the original expiry %s: GET through %s = %d, state %q",
					time.Now().UTC().Format(time.RFC3339), orig.Format(time.RFC3339), p.name, status, sb.Status.State)
			}
		}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: id}, &bs); err != nil || bs.DeletionTimestamp != nil {
			t.Fatalf("the BatchSandbox at %s (original expiry %s): %v, deletion %v", time.Now().UTC().Format(time.RFC3339), orig.Format(time.RFC3339), err, bs.DeletionTimestamp)
		}
		time.Sleep(500 * time.Millisecond) // the wall clock, not readiness, is what the loop waits for
	}
	if out, ok := b.runDirect(ctx, id, "echo through-B"); !ok || out != "through-B\n" {
		t.Errorf("command at B's endpoint after the original expiry: %q (ok %v)", out, ok)
	}

	// Both replicas show the same sandbox: the renewed expiry and B's
	// metadata (A's informer may take a moment to see B's write).
	want := patched
	want.ExpiresAt = &renewed
	want.Metadata = map[string]string{"renewed-by": "B"}
	var sa, sb sandbox.SandboxInfo
	poll(t, time.Minute, func() (bool, error) {
		sa, _ = a.get(id)
		sb, _ = b.get(id)
		return sandboxSummary(sa) == sandboxSummary(sb) && sandboxSummary(sa) == sandboxSummary(want), nil
	}, func() string {
		return fmt.Sprintf("A and B disagree or differ from what B wrote:\nA:    %s\nB:    %s\nwant: %s", sandboxSummary(sa), sandboxSummary(sb), sandboxSummary(want))
	})
	for _, p := range []*serverProc{a, b} {
		items := p.list()
		if len(items) != 1 || sandboxSummary(items[0]) != sandboxSummary(want) {
			var got []string
			for _, it := range items {
				got = append(got, sandboxSummary(it))
			}
			t.Errorf("list through %s: %q, want [%s]", p.name, got, sandboxSummary(want))
		}
	}

	// A delete through B is seen by A.
	b.must("DELETE", "/v1/sandboxes/"+id, nil, http.StatusNoContent, nil)
	poll(t, time.Minute, func() (bool, error) {
		_, status := a.get(id)
		return status == http.StatusNotFound, nil
	}, func() string { return "A still serves the sandbox deleted through B" })
	if left := leftovers(t, c, cl, ns, id); len(left) > 0 {
		t.Errorf("the delete through B left %v", left)
	}
}

// TestServerExpiryAfterRestart creates a sandbox with a short timeout,
// kills every server replica (SIGKILL) and waits past the expiry: the
// sandbox and everything it was made of go all the same (the operator
// acts on spec.expireTime), and a newly started server knows nothing of it.
func TestServerExpiryAfterRestart(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	c.startOperator(t, ns)
	cl := c.sandboxClient(t)
	a := c.startServer(t, ns, "A", serverOpts{})
	b := c.startServer(t, ns, "B", serverOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*podTimeout)
	defer cancel()

	const timeout = 20
	created := a.create(cl, ns, sandbox.CreateSandboxRequest{
		Image: &sandbox.ImageSpec{URI: baseImage}, Entrypoint: []string{"sleep", "infinity"}, Timeout: ptr(int64(timeout)),
	})
	id := created.ID
	if created.ExpiresAt == nil {
		t.Fatalf("create with a timeout: no expiresAt in %+v", created)
	}
	exp := *created.ExpiresAt
	if out, ok := b.runProxied(ctx, id, "echo alive"); !ok || out != "alive\n" {
		t.Errorf("command through B's proxy: %q (ok %v)", out, ok)
	}
	a.kill()
	b.kill()
	if time.Now().After(exp) {
		t.Fatalf("the servers were killed after the expiry %s: the create was too slow for the %ds timeout", exp, timeout)
	}
	// What the sandbox is made of, before it expires: the test checks
	// these go, not just that something is missing.
	before := leftovers(t, c, cl, ns, id)
	if !slices.Contains(before, "batchsandbox/"+id) || !slices.Contains(before, "secret/"+id) ||
		!slices.ContainsFunc(before, func(s string) bool { return strings.HasPrefix(s, "pod/") }) {
		t.Fatalf("before the expiry the sandbox has %v; want its BatchSandbox, token Secret and pod", before)
	}
	t.Logf("killed both servers; %s has %v and expires at %s", id, before, exp.Format(time.RFC3339))

	var left []string
	var goneAt time.Time
	poll(t, time.Until(exp)+2*time.Minute, func() (bool, error) {
		var bs sandboxv1alpha1.BatchSandbox
		err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: id}, &bs)
		if goneAt.IsZero() && (apierrors.IsNotFound(err) || (err == nil && bs.DeletionTimestamp != nil)) {
			goneAt = time.Now()
		}
		left = leftovers(t, c, cl, ns, id)
		return len(left) == 0, nil
	}, func() string {
		return fmt.Sprintf("%s still has %v after its expiry %s with no server running", id, left, exp)
	})
	// expireTime is kept to the second, so the operator may act up to a
	// second before expiresAt; not earlier.
	if goneAt.Before(exp.Add(-time.Second)) {
		t.Errorf("the sandbox went at %s, before its expiry %s", goneAt.Format(time.RFC3339Nano), exp.Format(time.RFC3339Nano))
	}
	var cms corev1.ConfigMapList
	if err := cl.List(ctx, &cms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		if strings.Contains(cm.Name, id) {
			t.Errorf("ConfigMap %s of the expired sandbox is left", cm.Name)
		}
	}

	n := c.startServer(t, ns, "new", serverOpts{})
	n.wantError("GET", "/v1/sandboxes/"+id, nil, http.StatusNotFound, "SANDBOX_NOT_FOUND")
	if items := n.list(); len(items) != 0 {
		t.Errorf("a new server lists %d sandboxes, want none: %+v", len(items), items)
	}
}

// TestServerFailedCreateLeavesNothing makes creates that must fail — an
// image that cannot be pulled, an entrypoint that does not exist, a pod that
// cannot be scheduled within the create timeout — and checks each answers
// a clear error in time and leaves nothing in the namespace, although the
// create did make its objects first.
func TestServerFailedCreateLeavesNothing(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	c.startOperator(t, ns)
	cl := c.sandboxClient(t)
	const createTimeout = 40
	p := c.startServer(t, ns, "A", serverOpts{createTimeout: createTimeout})

	for _, tc := range []struct {
		name   string
		req    sandbox.CreateSandboxRequest
		status int
		code   string
		within time.Duration
		says   string // in the message
	}{
		{
			name:   "missing image",
			req:    sandbox.CreateSandboxRequest{Image: &sandbox.ImageSpec{URI: c.registry + "/opensandbox/no-such-image:" + token(t)}, Entrypoint: []string{"sleep", "infinity"}},
			status: http.StatusBadRequest, code: "IMAGE_PULL_FAILED", within: createTimeout * time.Second, says: "no-such-image",
		},
		{
			name:   "missing entrypoint",
			req:    sandbox.CreateSandboxRequest{Image: &sandbox.ImageSpec{URI: baseImage}, Entrypoint: []string{"/no/such/entrypoint"}},
			status: http.StatusInternalServerError, code: "SANDBOX_START_FAILED", within: createTimeout * time.Second, says: "exited with code 127",
		},
		{
			// More memory than the node has: the pod stays Pending
			// (Unschedulable) until the create timeout, which is a start
			// failure that says why, not "the engine is unavailable".
			name:   "unschedulable",
			req:    sandbox.CreateSandboxRequest{Image: &sandbox.ImageSpec{URI: baseImage}, Entrypoint: []string{"sleep", "infinity"}, ResourceLimits: map[string]string{"memory": "64Ti"}},
			status: http.StatusInternalServerError, code: "SANDBOX_START_FAILED", within: createTimeout*time.Second + time.Minute, says: "Unschedulable",
		},
	} {
		seen := watchNamespace(t, c, cl, ns)
		start := time.Now()
		tc.req.Timeout = ptr(int64(600))
		er := p.wantError("POST", "/v1/sandboxes", tc.req, tc.status, tc.code)
		took := time.Since(start)
		made := seen()
		t.Logf("%s: failed in %s with %s: %s; the create had made %v", tc.name, took.Round(time.Millisecond), er.Code, er.Message, made)
		if took > tc.within {
			t.Errorf("%s: the failed create took %s, want at most %s", tc.name, took, tc.within)
		}
		if tc.says != "" && !strings.Contains(er.Message, tc.says) {
			t.Errorf("%s: the error %q does not say %q", tc.name, er.Message, tc.says)
		}
		if !slices.ContainsFunc(made, func(s string) bool { return strings.HasPrefix(s, "batchsandbox/") }) {
			t.Errorf("%s: no BatchSandbox was seen during the create (saw %v): the create did not get as far as the test means", tc.name, made)
		}
		if left := namespaceObjects(t, c, cl, ns); len(left) > 0 {
			t.Errorf("%s: the failed create left %v", tc.name, left)
		}
		if items := p.list(); len(items) != 0 {
			t.Errorf("%s: the server lists %d sandboxes after the failed create", tc.name, len(items))
		}
	}
}

// namespaceObjects lists what a sandbox can be made of in ns: BatchSandboxes,
// pods, Secrets, PVCs and the server's record ConfigMaps. The namespace is
// the test's own, so anything there is the server's doing.
func namespaceObjects(t *testing.T, c *cluster, cl client.Client, ns string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	var bs sandboxv1alpha1.BatchSandboxList
	if err := cl.List(ctx, &bs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, b := range bs.Items {
		out = append(out, "batchsandbox/"+b.Name)
	}
	pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		out = append(out, "pod/"+p.Name)
	}
	secrets, err := c.client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		out = append(out, "secret/"+s.Name)
	}
	pvcs, err := c.client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pvcs.Items {
		out = append(out, "pvc/"+p.Name)
	}
	cms, err := c.client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "opensandbox.io/record"})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		out = append(out, "configmap/"+cm.Name)
	}
	return out
}

// watchNamespace polls the namespace's objects in the background until the
// returned func is called, which returns every object seen meanwhile.
func watchNamespace(t *testing.T, c *cluster, cl client.Client, ns string) func() []string {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	seen := map[string]bool{}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
			var bs sandboxv1alpha1.BatchSandboxList
			if cl.List(lctx, &bs, client.InNamespace(ns)) == nil {
				for _, b := range bs.Items {
					seen["batchsandbox/"+b.Name] = true
				}
			}
			if s, err := c.client.CoreV1().Secrets(ns).List(lctx, metav1.ListOptions{}); err == nil {
				for _, x := range s.Items {
					seen["secret/"+x.Name] = true
				}
			}
			if p, err := c.client.CoreV1().Pods(ns).List(lctx, metav1.ListOptions{}); err == nil {
				for _, x := range p.Items {
					seen["pod/"+x.Name] = true
				}
			}
			lcancel()
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	stopped := false
	stop := func() []string {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
		return slices.Sorted(maps.Keys(seen))
	}
	t.Cleanup(func() { stop() })
	return stop
}

// TestServerVolumes mounts a claim through the API: made by the server
// (createIfNotExists) and deleted with the sandbox
// (deleteOnSandboxTermination), mounted read-write at /data and read-only
// at a subPath of it; a file written through one mount is read through the
// other, the read-only one refuses writes, and the claim goes with the
// sandbox. The cluster has no provisioner: the test offers a hostPath
// PersistentVolume of a storage class of its own.
func TestServerVolumes(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	c.startOperator(t, ns)
	cl := c.sandboxClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*podTimeout)
	defer cancel()
	class := ns + "-local"
	dir := filepath.Join(t.TempDir(), "pv")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o777); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: class, Labels: map[string]string{testLabel: "kube-e2e"}},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              class,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
		},
	}
	if _, err := c.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	p := c.startServer(t, ns, "A", serverOpts{})

	claim := "data-" + token(t)
	pvc := func() *sandbox.PVCVol {
		return &sandbox.PVCVol{ClaimName: claim, CreateIfNotExists: ptr(true), DeleteOnSandboxTermination: true,
			StorageClass: class, Storage: "1Mi", AccessModes: []string{"ReadWriteOnce"}}
	}
	created := p.create(cl, ns, sandbox.CreateSandboxRequest{
		Image: &sandbox.ImageSpec{URI: baseImage}, Entrypoint: []string{"sleep", "infinity"}, Timeout: ptr(int64(600)),
		Volumes: []sandbox.Volume{
			{Name: "data", PVC: pvc(), MountPath: "/data"},
			{Name: "ro", PVC: pvc(), MountPath: "/ro", SubPath: "sub", ReadOnly: true},
		},
	})
	id := created.ID
	got, err := c.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the claim the create should have made: %v", err)
	}
	if ref := metav1.GetControllerOf(got); !slices.ContainsFunc(got.OwnerReferences, func(r metav1.OwnerReference) bool {
		return r.Kind == "BatchSandbox" && r.Name == id
	}) {
		t.Errorf("claim %s is not owned by the sandbox's BatchSandbox: %+v (controller %v)", claim, got.OwnerReferences, ref)
	}

	if out, ok := p.runProxied(ctx, id, "echo shared > /data/sub/f && cat /ro/f"); !ok || out != "shared\n" {
		t.Errorf("write through /data, read through the read-only subPath mount /ro: %q (ok %v)", out, ok)
	}
	if out, ok := p.runProxied(ctx, id, "echo x > /ro/g"); ok {
		t.Errorf("writing to the read-only mount succeeded: %q", out)
	}
	if out, ok := p.runProxied(ctx, id, "ls /data/sub"); !ok || out != "f\n" {
		t.Errorf("ls /data/sub after the refused write: %q (ok %v), want only f", out, ok)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "sub", "f")); err != nil || string(data) != "shared\n" {
		t.Errorf("the file on the volume's host path: %q, %v", data, err)
	}

	p.must("DELETE", "/v1/sandboxes/"+id, nil, http.StatusNoContent, nil)
	p.wantError("GET", "/v1/sandboxes/"+id, nil, http.StatusNotFound, "SANDBOX_NOT_FOUND")
	poll(t, time.Minute, func() (bool, error) {
		_, err := c.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}, func() string {
		return "the deleteOnSandboxTermination claim " + claim + " is still there after the delete"
	})
	if left := leftovers(t, c, cl, ns, id); len(left) > 0 {
		t.Errorf("the delete left %v", left)
	}
}
