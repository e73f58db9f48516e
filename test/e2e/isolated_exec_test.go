package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	osexec "os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/jscompat"
	"github.com/opensandbox-go/opensandbox/internal/openapitest"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// onRequestTOML grants isolated execution to sandboxes that ask for it
// with the create extension ("always" is covered by the driver's tests).
const onRequestTOML = "isolated_execution = \"on-request\"\n"

// presentBaseImage returns the base image, which must exist already; this
// test does not build images.
func presentBaseImage(t *testing.T) string {
	t.Helper()
	if out, err := osexec.Command("docker", "image", "inspect", "--format", "{{.Id}}", baseImageRef).CombinedOutput(); err != nil {
		t.Fatalf("%s is missing (build it with images/build.sh base): %v\n%s", baseImageRef, err, out)
	}
	return baseImageRef
}

// isoClient speaks execd's /v1/isolated API of one sandbox over raw HTTP,
// checking every exchange against api/execd.yaml.
type isoClient struct {
	t      *testing.T
	sb     *sandbox.Sandbox
	client *http.Client
}

func newIsoClient(t *testing.T, sb *sandbox.Sandbox) *isoClient {
	spec := openapitest.Load(t, "api/execd.yaml")
	return &isoClient{t: t, sb: sb, client: &http.Client{Transport: spec.Transport(t, http.DefaultTransport)}}
}

func (c *isoClient) do(method, path string, body any) (int, []byte) {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, c.sb.ExecdURL()+path, r)
	for k, v := range c.sb.ExecdHeaders() {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (c *isoClient) create(req sandbox.CreateIsolatedSessionRequest) string {
	c.t.Helper()
	code, body := c.do(http.MethodPost, "/v1/isolated/session", req)
	var info sandbox.IsolatedSessionInfo
	if code != http.StatusCreated || json.Unmarshal(body, &info) != nil || info.SessionID == "" {
		c.t.Fatalf("create session %+v: %d %s", req, code, body)
	}
	return info.SessionID
}

// run returns the session's stdout and its exit code.
func (c *isoClient) run(id, code string) (string, int) {
	c.t.Helper()
	status, body := c.do(http.MethodPost, "/v1/isolated/session/"+id+"/run", sandbox.IsolatedRunRequest{Code: code, TimeoutSeconds: 30})
	if status != http.StatusOK {
		c.t.Fatalf("run %q: %d %s", code, status, body)
	}
	var out strings.Builder
	exit := -1
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		var ev sandbox.StreamEvent
		if err := dec.Decode(&ev); err == io.EOF {
			break
		} else if err != nil {
			c.t.Fatalf("run %q: %v in %s", code, err, body)
		}
		switch ev.Type {
		case sandbox.EventStdout:
			out.WriteString(ev.Text + "\n")
		case sandbox.EventExecutionComplete:
			exit = 0
		case sandbox.EventError:
			exit, _ = strconv.Atoi(ev.Error.Value)
		}
	}
	return out.String(), exit
}

// TestIsolatedExecution runs real isolated sessions in a Docker sandbox
// that asked for them on a server with docker.isolated_execution =
// "on-request", and shows what they keep
// apart: files and processes between sessions, writes of ro and overlay
// workspaces, the network without share_net, and that idle sessions end
// with all their processes.
func TestIsolatedExecution(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{dockerTOML: onRequestTOML})
	c := sdkClient(t, s, false)
	sb := sdkCreate(t, c, sandbox.CreateOptions{Image: presentBaseImage(t),
		Extensions: map[string]string{sandbox.ExtIsolatedExecution: "true"}})
	iso := newIsoClient(t, sb)

	code, body := iso.do(http.MethodGet, "/v1/isolated/capabilities", nil)
	var caps sandbox.IsolatedCapabilities
	if code != 200 || json.Unmarshal(body, &caps) != nil || !caps.Available || !caps.SetprivAvailable {
		t.Fatalf("capabilities: %d %s", code, body)
	}
	// The sandbox's own processes never hold CAP_SYS_ADMIN.
	if ex := runIn(t, sb, "grep -h CapBnd /proc/1/status /proc/self/status"); len(ex.Stdout) != 2 {
		t.Fatalf("CapBnd lines: %+v", ex.Stdout)
	} else {
		for _, l := range ex.Stdout {
			v, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(l.Text, "CapBnd:")), 16, 64)
			if err != nil || v&(1<<21) != 0 {
				t.Errorf("a sandbox process may gain CAP_SYS_ADMIN: %q (%v)", l.Text, err)
			}
		}
	}

	a := iso.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: "/work/a"}})
	b := iso.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: "/work/b"}})

	t.Run("sessions cannot see each other", func(t *testing.T) {
		if out, exit := iso.run(a, "echo secret > /work/a/s.txt; (sleep 600 >/dev/null 2>&1 &); ps -eo comm= | grep -c sleep"); exit != 0 || out != "1\n" {
			t.Fatalf("session a: %q exit %d", out, exit)
		}
		out, _ := iso.run(b, "cat /work/a/s.txt 2>&1; ls /work 2>&1; ps -eo comm= | grep -c sleep")
		if strings.Contains(out, "secret") || strings.Contains(out, "\na\n") || !strings.HasSuffix(out, "\n0\n") {
			t.Errorf("session b sees session a's file or process: %q", out)
		}
		// The sandbox itself sees a's file (rw workspace).
		if ex := runIn(t, sb, "cat /work/a/s.txt"); len(ex.Stdout) != 1 || ex.Stdout[0].Text != "secret" {
			t.Errorf("a's rw workspace from the sandbox: %+v", ex.Stdout)
		}
	})

	t.Run("ro workspace cannot be written", func(t *testing.T) {
		ro := iso.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: "/work/a", Mode: sandbox.WorkspaceRO}})
		defer iso.do(http.MethodDelete, "/v1/isolated/session/"+ro, nil)
		if out, exit := iso.run(ro, "cat s.txt; echo x > s.txt"); exit == 0 || out != "secret\n" {
			t.Errorf("ro session: %q exit %d; want the file readable and the write refused", out, exit)
		}
	})

	t.Run("overlay writes vanish", func(t *testing.T) {
		ov := iso.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: "/work/a", Mode: sandbox.WorkspaceOverlay}})
		if out, exit := iso.run(ov, "echo changed > s.txt; echo new > n.txt; cat s.txt n.txt"); exit != 0 || out != "changed\nnew\n" {
			t.Fatalf("overlay session: %q exit %d", out, exit)
		}
		if code, body := iso.do(http.MethodDelete, "/v1/isolated/session/"+ov, nil); code != 200 {
			t.Fatalf("delete: %d %s", code, body)
		}
		if ex := runIn(t, sb, "cat /work/a/s.txt; ls /work/a"); len(ex.Stdout) != 2 || ex.Stdout[0].Text != "secret" || ex.Stdout[1].Text != "s.txt" {
			t.Errorf("workspace after the overlay session: %+v", ex.Stdout)
		}
	})

	t.Run("no network without share_net", func(t *testing.T) {
		// A listener of the sandbox itself, on its loopback.
		runIn(t, sb, "nohup python3 -m http.server --bind 127.0.0.1 18765 >/dev/null 2>&1 &")
		probe := "ip -o link | cut -d: -f2 | tr -d ' '; curl -s -o /dev/null -w '%{http_code}\\n' --max-time 3 http://127.0.0.1:18765/ || echo unreachable"
		shared := iso.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: "/work/net"}, ShareNet: true})
		pollUntil(t, "the sandbox's listener", 20*time.Second, func() bool {
			out, _ := iso.run(shared, probe)
			return strings.HasSuffix(out, "200\n")
		})
		isolated := iso.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: "/work/net"}})
		if out, _ := iso.run(isolated, probe); out != "lo\n000\nunreachable\n" {
			t.Errorf("session without share_net: %q; want only lo and the listener unreachable", out)
		}
	})

	t.Run("no writable proc or sysfs anywhere", func(t *testing.T) {
		// User namespaces are allowed now, in the sandbox and in sessions;
		// root in them is root on the host for /proc/sysrq-trigger and
		// /proc/sys, so no proc may be mounted writable, nor a sysfs.
		probe := `unshare -Urmpf sh -c 'mount -t proc proc /proc && echo MOUNTED-RW; echo h > /proc/sysrq-trigger && echo SYSRQ; echo 1 > /proc/sys/kernel/sysrq && echo SYSCTL'; ` +
			`unshare -Urmn sh -c 'mount -t sysfs sysfs /sys && echo SYSFS'; echo done`
		check := func(where, out string) {
			for _, bad := range []string{"MOUNTED-RW", "SYSRQ", "SYSCTL", "SYSFS"} {
				if strings.Contains(out, bad) {
					t.Errorf("%s: %s happened: %q", where, bad, out)
				}
			}
			if !strings.HasSuffix(out, "done\n") {
				t.Errorf("%s: the probe did not finish: %q", where, out)
			}
		}
		var sandboxOut strings.Builder
		for _, l := range runIn(t, sb, probe).Stdout {
			sandboxOut.WriteString(l.Text + "\n")
		}
		check("the sandbox", sandboxOut.String())
		root := iso.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: "/work/root"}, Profile: sandbox.IsolationBalanced})
		defer iso.do(http.MethodDelete, "/v1/isolated/session/"+root, nil)
		out, _ := iso.run(root, probe)
		check("a balanced root session", out)
	})

	t.Run("idle timeout reaps", func(t *testing.T) {
		id := iso.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: "/work/idle"}, IdleTimeoutSeconds: 2})
		iso.run(id, "(sleep 777 >/dev/null 2>&1 &)")
		if ex := runIn(t, sb, "pgrep -f 'sleep 77[7]' | wc -l"); len(ex.Stdout) == 0 || ex.Stdout[0].Text != "1" {
			t.Fatalf("the session's sleep from the sandbox: %+v", ex.Stdout)
		}
		pollUntil(t, "the idle session to be reaped", 20*time.Second, func() bool {
			code, _ := iso.do(http.MethodGet, "/v1/isolated/session/"+id, nil)
			return code == http.StatusNotFound
		})
		if ex := runIn(t, sb, "pgrep -f 'sleep 77[7]' | wc -l"); len(ex.Stdout) == 0 || ex.Stdout[0].Text != "0" {
			t.Errorf("processes of the reaped session left: %+v", ex.Stdout)
		}
	})

	t.Run("sessions end with their execd", func(t *testing.T) {
		id := iso.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: "/work/crash"}})
		iso.run(id, "(sleep 888 >/dev/null 2>&1 &)")
		// Kill execd's API server (the supervisor starts a new one) from a
		// detached process, after this command's stream has ended.
		runIn(t, sb, `for p in $(pgrep -P 1); do [ "$(readlink /proc/$p/exe)" = /opt/opensandbox/execd ] && srv=$p; done; `+
			`setsid sh -c "sleep 0.3; kill -9 $srv" >/dev/null 2>&1 < /dev/null & echo killing $srv`)
		pollUntil(t, "the session's processes to die with execd", 30*time.Second, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			ex, err := sb.Run(ctx, "pgrep -f 'sleep 88[8]' | wc -l", sandbox.RunOptions{})
			return err == nil && len(ex.Stdout) == 1 && ex.Stdout[0].Text == "0"
		})
		if code, _ := iso.do(http.MethodGet, "/v1/isolated/session/"+id, nil); code != http.StatusNotFound {
			t.Errorf("the new execd knows the old session: %d", code)
		}
	})

	// a and b were made by the execd killed above: gone with it.
	for _, id := range []string{a, b} {
		if code, body := iso.do(http.MethodDelete, "/v1/isolated/session/"+id, nil); code != http.StatusNotFound {
			t.Errorf("delete %s after execd restarted: %d %s", id, code, body)
		}
	}
}

// TestIsolatedExecutionOff: a sandbox that did not ask for isolated
// execution (on a server that grants it on request) answers the API
// honestly: unavailable, and creating a session is refused with 503. On a
// server with it off, asking for it fails the create.
func TestIsolatedExecutionOff(t *testing.T) {
	t.Parallel()
	off := startServer(t, serverOpts{})
	_, err := sdkClient(t, off, false).Create(sdkCtx(t), sandbox.CreateOptions{Image: presentBaseImage(t),
		Resources:  map[string]string{"cpu": "1", "memory": "512Mi"},
		Extensions: map[string]string{sandbox.ExtIsolatedExecution: "true"}})
	if err == nil || !strings.Contains(err.Error(), "isolated execution is not enabled") {
		t.Errorf("create asking for isolated execution on a server without it: %v; want refused", err)
	}
	s := startServer(t, serverOpts{dockerTOML: onRequestTOML})
	sb := sdkCreate(t, sdkClient(t, s, false), sandbox.CreateOptions{Image: presentBaseImage(t)})
	iso := newIsoClient(t, sb)
	code, body := iso.do(http.MethodGet, "/v1/isolated/capabilities", nil)
	var caps sandbox.IsolatedCapabilities
	if code != 200 || json.Unmarshal(body, &caps) != nil || caps.Available || caps.Message == "" {
		t.Errorf("capabilities: %d %s; want available=false with a reason", code, body)
	}
	code, body = iso.do(http.MethodPost, "/v1/isolated/session", sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: "/work/x"}})
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "NOT_SUPPORTED") {
		t.Errorf("create: %d %s; want 503 NOT_SUPPORTED", code, body)
	}
}

// TestIsolatedExecutionCompatJSSDK runs compat.mjs against a server that
// grants isolated execution on request; its main sandbox asks for it with
// the create extension through the official SDK, and the isolation steps
// drive real sessions through sandbox.isolation (TestCompatJSSDK runs the
// same script with the option off).
func TestIsolatedExecutionCompatJSSDK(t *testing.T) {
	binPath(t, "opensandbox-server") // skips unless OSB_E2E=1
	node := jscompat.Node(t)
	s := startServer(t, serverOpts{dockerTOML: onRequestTOML})
	image := presentBaseImage(t)
	runID := fmt.Sprintf("compat-isolation-%d", time.Now().UnixNano())
	t.Cleanup(func() { deleteByMetadata(t, s, "compat", runID) })
	out, err := runCompatScript(node, s, image, runID, "COMPAT_ISOLATION=1")
	if err != nil {
		t.Fatalf("node compat.mjs with COMPAT_ISOLATION=1: %v\n%s", err, out)
	}
	for _, step := range []string{"isolation-run", "isolation-files", "isolation-separation", "isolation-run-once", "isolation-delete"} {
		for _, mode := range []string{"direct", "proxy"} {
			if !strings.Contains(string(out), "ok "+mode+"/"+step+" ") {
				t.Errorf("compat.mjs did not pass %s/%s", mode, step)
			}
		}
	}
	t.Logf("node compat.mjs:\n%s", out)
}
