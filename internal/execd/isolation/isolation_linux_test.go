//go:build linux

package isolation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
	"github.com/opensandbox-go/opensandbox/internal/testenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// These tests build real sessions: they need root (setpriv mode maps every
// id) and a kernel that allows user namespaces, and skip otherwise. The
// helper roles run in a cgo-free execd built once, because the test binary
// may use cgo (-race), under which AllThreadsSyscall is refused.

var helperExe string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "isolation-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	helperExe = filepath.Join(dir, "execd")
	build := exec.Command("go", "build", "-o", helperExe, "github.com/opensandbox-go/opensandbox/cmd/execd")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build execd: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

type harness struct {
	t   *testing.T
	m   *Manager
	url string
}

func newHarness(t *testing.T, base []string) *harness {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.NeedRoot(t, "isolated sessions in setpriv mode")
	}
	if base == nil {
		base = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	}
	m := New(Options{Exe: helperExe, Env: procenv.Builder{Base: base}})
	if caps := m.capabilities(); !caps.Available {
		m.Close(context.Background())
		// As root on Linux every piece sessions need is there (user,
		// mount and pid namespaces); a skip here once hid a regression
		// that made sessions unavailable. OSB_ISOLATION_OPTIONAL=1 is for
		// hosts that forbid user namespaces.
		if os.Getenv("OSB_ISOLATION_OPTIONAL") == "" {
			t.Fatalf("isolation unavailable as root: %s (set OSB_ISOLATION_OPTIONAL=1 on a host without user namespaces)", caps.Message)
		}
		t.Skipf("isolation unavailable here: %s", caps.Message)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/isolated/capabilities", m.Capabilities)
	mux.HandleFunc("POST /v1/isolated/session", m.Create)
	mux.HandleFunc("GET /v1/isolated/sessions", m.List)
	mux.HandleFunc("GET /v1/isolated/session/{sessionId}", m.Get)
	mux.HandleFunc("DELETE /v1/isolated/session/{sessionId}", m.Delete)
	mux.HandleFunc("POST /v1/isolated/session/{sessionId}/run", m.Run)
	mux.HandleFunc("GET /v1/isolated/session/{sessionId}/diff", m.NotSupported)
	for _, p := range []string{"GET /files/info", "DELETE /files", "POST /files/permissions", "POST /files/mv", "GET /files/search",
		"POST /files/replace", "POST /files/upload", "GET /files/download", "GET /directories/list", "POST /directories", "DELETE /directories"} {
		method, path, _ := strings.Cut(p, " ")
		mux.HandleFunc(method+" /v1/isolated/session/{sessionId}"+path, m.Files)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &harness{t: t, m: m, url: srv.URL}
}

func (h *harness) do(method, path string, body any) (int, []byte) {
	h.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, h.url+path, r)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// create makes a session and deletes it at the end of the test.
func (h *harness) create(req sandbox.CreateIsolatedSessionRequest) string {
	h.t.Helper()
	code, body := h.do(http.MethodPost, "/v1/isolated/session", req)
	if code != http.StatusCreated {
		h.t.Fatalf("create %+v: %d %s", req, code, body)
	}
	var info sandbox.IsolatedSessionInfo
	if err := json.Unmarshal(body, &info); err != nil || info.SessionID == "" {
		h.t.Fatalf("create: body %s: %v", body, err)
	}
	h.t.Cleanup(func() { h.do(http.MethodDelete, "/v1/isolated/session/"+info.SessionID, nil) })
	return info.SessionID
}

type result struct {
	stdout, stderr string
	exit           int
}

// run runs code in session id and collects its output and exit code.
func (h *harness) run(id, code string) result {
	h.t.Helper()
	b, _ := json.Marshal(sandbox.IsolatedRunRequest{Code: code})
	resp, err := http.Post(h.url+"/v1/isolated/session/"+id+"/run", "application/json", bytes.NewReader(b))
	if err != nil {
		h.t.Fatalf("run %q: %v", code, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		h.t.Fatalf("run %q: %s %s", code, resp.Status, body)
	}
	var res result
	res.exit = -1
	dec := json.NewDecoder(resp.Body)
	for {
		var ev sandbox.StreamEvent
		if err := dec.Decode(&ev); err == io.EOF {
			break
		} else if err != nil {
			h.t.Fatalf("run %q: decode: %v", code, err)
		}
		switch ev.Type {
		case sandbox.EventStdout:
			res.stdout += ev.Text + "\n"
		case sandbox.EventStderr:
			res.stderr += ev.Text + "\n"
		case sandbox.EventExecutionComplete:
			res.exit = 0
		case sandbox.EventError:
			res.exit, _ = strconv.Atoi(ev.Error.Value)
		}
	}
	return res
}

func TestCapabilities(t *testing.T) {
	h := newHarness(t, nil)
	code, body := h.do(http.MethodGet, "/v1/isolated/capabilities", nil)
	var caps sandbox.IsolatedCapabilities
	if code != 200 || json.Unmarshal(body, &caps) != nil || !caps.Available || !caps.SetprivAvailable || !caps.UsernsAvailable || caps.CommitSupported {
		t.Fatalf("capabilities = %d %s", code, body)
	}
}

// TestSessionsCannotSeeEachOther: a file and a process of one session are
// invisible to another, and the sessions have their own hostnames.
func TestSessionsCannotSeeEachOther(t *testing.T) {
	h := newHarness(t, nil)
	wsA, wsB := t.TempDir(), t.TempDir()
	a := h.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: wsA}})
	b := h.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: wsB}})

	if r := h.run(a, "echo secret-a > mine.txt && (sleep 300 & echo $!) && cat "+wsA+"/mine.txt"); r.exit != 0 || !strings.Contains(r.stdout, "secret-a") {
		t.Fatalf("session A: %+v", r)
	}
	if got, err := os.ReadFile(filepath.Join(wsA, "mine.txt")); err != nil || string(got) != "secret-a\n" {
		t.Errorf("A's rw workspace on the host: %q %v", got, err)
	}
	r := h.run(b, "ls "+wsA+"; cat "+wsA+"/mine.txt; ps -eo comm=; hostname")
	if strings.Contains(r.stdout, "secret-a") || strings.Contains(r.stdout, "mine.txt") {
		t.Errorf("session B sees session A's file: %+v", r)
	}
	if strings.Contains(r.stdout, "sleep") {
		t.Errorf("session B sees session A's sleep: %q", r.stdout)
	}
	if !strings.Contains(r.stdout, "bash") {
		t.Errorf("ps in session B shows not even its own init: %q", r.stdout)
	}
	hostB := lastLine(r.stdout)
	hostA := lastLine(h.run(a, "hostname").stdout)
	if hostA == hostB || !strings.HasPrefix(hostA, "isolated-") {
		t.Errorf("hostnames A %q B %q: want distinct isolated-* names", hostA, hostB)
	}
	// A's process is in A only: its pid namespace shows it.
	if r := h.run(a, "ps -eo comm="); !strings.Contains(r.stdout, "sleep") {
		t.Errorf("session A lost its own background sleep: %q", r.stdout)
	}
	// Every namespace kind differs between the sessions and from execd's.
	nsCmd := "for n in mnt pid ipc uts net user cgroup; do readlink /proc/self/ns/$n; done"
	nsA, nsB := h.run(a, nsCmd).stdout, h.run(b, nsCmd).stdout
	hostNS, err := exec.Command("sh", "-c", nsCmd).Output()
	if err != nil {
		t.Fatal(err)
	}
	for i, host := range strings.Split(strings.TrimSpace(string(hostNS)), "\n") {
		la, lb := strings.Split(nsA, "\n"), strings.Split(nsB, "\n")
		if i >= len(la) || i >= len(lb) || la[i] == lb[i] || la[i] == host || lb[i] == host {
			t.Errorf("namespace %s: host %s, A %q, B %q; want three different ones", strings.Fields(nsCmd)[3+i], host, la, lb)
		}
	}
	// The sandbox's other files are not there either.
	if r := h.run(b, "ls /root /home 2>&1; cat /etc/hostname >/dev/null; echo x > /etc/probe"); r.exit == 0 {
		t.Errorf("session B could write /etc: %+v", r)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func TestWorkspaceModes(t *testing.T) {
	h := newHarness(t, nil)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "orig.txt"), []byte("orig\n"), 0o644)

	ro := h.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: ws, Mode: sandbox.WorkspaceRO}})
	if r := h.run(ro, "cat orig.txt && echo new > new.txt"); r.exit == 0 || !strings.Contains(r.stdout, "orig") || !strings.Contains(r.stderr, "Read-only") {
		t.Errorf("ro workspace: %+v; want orig readable and the write refused", r)
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); err == nil {
		t.Errorf("ro session wrote new.txt on the host")
	}

	ov := h.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: ws, Mode: sandbox.WorkspaceOverlay}})
	if r := h.run(ov, "echo changed > orig.txt && echo new > new.txt && cat orig.txt new.txt"); r.exit != 0 || r.stdout != "changed\nnew\n" {
		t.Fatalf("overlay session: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "orig.txt")); string(b) != "orig\n" {
		t.Errorf("overlay write reached the host: orig.txt = %q", b)
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); err == nil {
		t.Errorf("overlay session created new.txt on the host")
	}
	// A new session on the same workspace starts from the original.
	h.do(http.MethodDelete, "/v1/isolated/session/"+ov, nil)
	ov2 := h.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: ws, Mode: sandbox.WorkspaceOverlay}})
	if r := h.run(ov2, "cat orig.txt; ls"); r.stdout != "orig\norig.txt\n" {
		t.Errorf("after the overlay session ended: %+v", r)
	}
}

func TestNetwork(t *testing.T) {
	h := newHarness(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello-from-host\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	probe := fmt.Sprintf("ip -o link | cut -d: -f2; (exec 3<>/dev/tcp/127.0.0.1/%d && cat <&3) 2>&1", port)

	isolated := h.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: t.TempDir()}})
	r := h.run(isolated, probe)
	if strings.Contains(r.stdout, "hello-from-host") || strings.TrimSpace(strings.Split(r.stdout, "\n")[0]) != "lo" {
		t.Errorf("share_net=false: %+v; want only lo and no route to the host's listener", r)
	}
	shared := h.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: t.TempDir()}, ShareNet: true})
	if r := h.run(shared, probe); !strings.Contains(r.stdout, "hello-from-host") {
		t.Errorf("share_net=true: %+v; want the host's listener reached", r)
	}
}

func TestIdleTimeoutReaps(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: t.TempDir()}, IdleTimeoutSeconds: 1})
	// A run longer than the timeout keeps the session alive.
	if r := h.run(id, "sleep 1.5; echo alive"); r.stdout != "alive\n" {
		t.Fatalf("run across the idle timeout: %+v", r)
	}
	code, body := h.do(http.MethodGet, "/v1/isolated/session/"+id, nil)
	var st sandbox.IsolatedSessionState
	if code != 200 || json.Unmarshal(body, &st) != nil || st.IdleRemainingSeconds == nil || st.LastRunAt == nil {
		t.Fatalf("get after run: %d %s", code, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := h.do(http.MethodGet, "/v1/isolated/session/"+id, nil)
		if code == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session still there 10s after a 1s idle timeout")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, body := h.do(http.MethodGet, "/v1/isolated/sessions", nil); strings.Contains(string(body), id) {
		t.Errorf("list still shows the reaped session: %s", body)
	}
}

// TestEndedSessionGoneOnlyWhenItsProcessesAre: a session answers 404 only
// once nothing of it runs (an e2e saw the idle reaper's 404 while the
// session's sleep still ran); while it is being ended it takes no runs.
func TestEndedSessionGoneOnlyWhenItsProcessesAre(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: t.TempDir()}})
	h.run(id, "(sleep 779 >/dev/null 2>&1 &)")
	h.m.mu.Lock()
	s := h.m.sessions[id]
	h.m.mu.Unlock()
	h.m.end(s)
	for {
		code, body := h.do(http.MethodPost, "/v1/isolated/session/"+id+"/run", sandbox.IsolatedRunRequest{Code: "true"})
		if code != http.StatusNotFound {
			t.Fatalf("run into a session being ended: %d %s", code, body)
		}
		if code, _ := h.do(http.MethodGet, "/v1/isolated/session/"+id, nil); code == http.StatusNotFound {
			break
		}
	}
	// Under the table's lock (which the waiter held to remove it), the
	// session's init must have been reaped already.
	h.m.mu.Lock()
	_, found := h.m.sessions[id]
	reaped := s.cmd.ProcessState != nil
	h.m.mu.Unlock()
	if found || !reaped {
		t.Fatalf("GET answered 404 with the session in the table (%v) or its init not reaped (%v)", found, reaped)
	}
	if out, _ := exec.Command("pgrep", "-f", "sleep 77[9]").Output(); len(out) != 0 {
		t.Errorf("the session's sleep outlived its init: pids %s", out)
	}
	if code, _ := h.do(http.MethodGet, "/v1/isolated/session/"+id, nil); code != http.StatusNotFound {
		t.Errorf("session still found after its init was reaped: %d", code)
	}
}

func TestEnvPassthrough(t *testing.T) {
	h := newHarness(t, []string{"PATH=/usr/bin:/bin", "SECRET=s3", "FOO=foo"})
	cases := []struct {
		pt         *sandbox.EnvPassthrough
		want, deny []string
	}{
		{nil, []string{"PATH=/usr/bin:/bin"}, []string{"SECRET", "FOO"}},
		{&sandbox.EnvPassthrough{Mode: "allow", Keys: []string{"FOO"}}, []string{"FOO=foo"}, []string{"SECRET"}},
		{&sandbox.EnvPassthrough{Mode: "deny", Keys: []string{"SECRET"}}, []string{"FOO=foo", "PATH="}, []string{"SECRET"}},
	}
	for i, c := range cases {
		id := h.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: t.TempDir()}, EnvPassthrough: c.pt})
		out := h.run(id, "env").stdout
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("case %d: env lacks %s: %q", i, w, out)
			}
		}
		for _, d := range c.deny {
			if strings.Contains(out, d+"=") {
				t.Errorf("case %d: env has %s: %q", i, d, out)
			}
		}
	}
}

func TestIdentity(t *testing.T) {
	h := newHarness(t, nil)
	ws := t.TempDir()
	os.Chmod(ws, 0o777)
	uid, gid := uint32(1234), uint32(2345)
	set := h.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: ws}, UID: &uid, GID: &gid})
	if r := h.run(set, "id -u; id -g; touch by-setpriv"); r.stdout != "1234\n2345\n" {
		t.Errorf("setpriv identity: %+v", r)
	}
	if fi, err := os.Stat(filepath.Join(ws, "by-setpriv")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 1234 {
		t.Errorf("file made by the setpriv session: %v %v; want owned by uid 1234 on the host", fi, err)
	}
	uns := h.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: ws}, UID: &uid, GID: &gid, UIDMode: sandbox.UIDModeUserns})
	if r := h.run(uns, "id -u; id -g; touch by-userns"); r.stdout != "1234\n2345\n" {
		t.Errorf("userns identity: %+v", r)
	}
	if fi, err := os.Stat(filepath.Join(ws, "by-userns")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
		t.Errorf("file made by the userns session: %v %v; want owned by execd's uid on the host", fi, err)
	}
}

func TestProfilesAndBinds(t *testing.T) {
	h := newHarness(t, nil)
	shared := t.TempDir()
	os.WriteFile(filepath.Join(shared, "data.txt"), []byte("shared\n"), 0o644)
	rw := t.TempDir()
	req := sandbox.CreateIsolatedSessionRequest{
		Workspace:     sandbox.IsolatedWorkspace{Path: t.TempDir()},
		Binds:         []sandbox.IsolatedBind{{Source: shared, Dest: "/mnt/shared", ReadOnly: true}},
		ExtraWritable: []string{rw},
	}
	strict := h.create(req)
	r := h.run(strict, "cat /mnt/shared/data.txt; echo x > /mnt/shared/new 2>/dev/null && echo wrote-ro; echo y > "+rw+"/out && echo wrote-rw; grep CapEff /proc/self/status; ls -d /opt 2>&1")
	if !strings.Contains(r.stdout, "shared") || strings.Contains(r.stdout, "wrote-ro") || !strings.Contains(r.stdout, "wrote-rw") {
		t.Errorf("binds in a strict session: %+v", r)
	}
	if !strings.Contains(r.stdout, "CapEff:\t0000000000000000") {
		t.Errorf("strict session holds capabilities: %q", r.stdout)
	}
	if b, _ := os.ReadFile(filepath.Join(rw, "out")); string(b) != "y\n" {
		t.Errorf("extra_writable write on the host: %q", b)
	}
	req.Profile = sandbox.IsolationBalanced
	bal := h.create(req)
	r = h.run(bal, "grep CapEff /proc/self/status; ls -d /opt; echo 1 > /proc/sys/kernel/sysrq || echo proc-ro")
	if strings.Contains(r.stdout, "CapEff:\t0000000000000000") || !strings.Contains(r.stdout, "/opt") || !strings.Contains(r.stdout, "proc-ro") {
		t.Errorf("balanced session: %+v; want some capabilities, /opt and a read-only /proc", r)
	}
}

func TestSessionFiles(t *testing.T) {
	h := newHarness(t, nil)
	ws := t.TempDir()
	id := h.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: ws, Mode: sandbox.WorkspaceOverlay}})
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	meta, _ := mw.CreateFormField("metadata")
	fmt.Fprintf(meta, `{"path":%q}`, ws+"/up.txt")
	f, _ := mw.CreateFormFile("file", "up.txt")
	f.Write([]byte("uploaded\n"))
	mw.Close()
	resp, err := http.Post(h.url+"/v1/isolated/session/"+id+"/files/upload", mw.FormDataContentType(), &buf)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("upload: %v %v", resp, err)
	}
	resp.Body.Close()
	if r := h.run(id, "cat up.txt"); r.stdout != "uploaded\n" {
		t.Errorf("uploaded file inside the session: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(ws, "up.txt")); err == nil {
		t.Errorf("upload into an overlay session reached the host")
	}
	h.run(id, "echo made-inside > inside.txt")
	code, body := h.do(http.MethodGet, "/v1/isolated/session/"+id+"/files/download?path="+ws+"/inside.txt", nil)
	if code != 200 || string(body) != "made-inside\n" {
		t.Errorf("download: %d %q", code, body)
	}
	// The other file operations act in the session's view too.
	steps := []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/directories", map[string]any{ws + "/d/e": map[string]any{"mode": 755}}},
		{http.MethodPost, "/files/mv", []map[string]string{{"src": ws + "/inside.txt", "dest": ws + "/d/moved.txt"}}},
		{http.MethodPost, "/files/replace", map[string]any{ws + "/d/moved.txt": map[string]string{"old": "inside", "new": "replaced"}}},
		{http.MethodPost, "/files/permissions", map[string]any{ws + "/d/moved.txt": map[string]any{"mode": 600}}},
	}
	for _, st := range steps {
		if code, body := h.do(st.method, "/v1/isolated/session/"+id+st.path, st.body); code != 200 {
			t.Fatalf("%s %s: %d %s", st.method, st.path, code, body)
		}
	}
	if code, body := h.do(http.MethodGet, "/v1/isolated/session/"+id+"/files/search?path="+ws+"&pattern=*.txt", nil); code != 200 || !strings.Contains(string(body), "moved.txt") {
		t.Errorf("search: %d %s", code, body)
	}
	if r := h.run(id, "cat d/moved.txt; stat -c %a d/moved.txt; ls -d d/e"); r.stdout != "made-replaced\n600\nd/e\n" {
		t.Errorf("after mkdir, mv, replace and chmod through the API: %+v", r)
	}
	if code, body := h.do(http.MethodDelete, "/v1/isolated/session/"+id+"/files?path="+ws+"/d/moved.txt", nil); code != 200 {
		t.Errorf("delete file: %d %s", code, body)
	}
	if code, body := h.do(http.MethodDelete, "/v1/isolated/session/"+id+"/directories?path="+ws+"/d", nil); code != 200 {
		t.Errorf("delete directory: %d %s", code, body)
	}
	if r := h.run(id, "ls"); r.stdout != "up.txt\n" {
		t.Errorf("workspace after the deletes: %+v", r)
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 0 {
		t.Errorf("the overlay session's file operations reached the host: %v", ents)
	}
	code, body = h.do(http.MethodGet, "/v1/isolated/session/"+id+"/files/info?path=/etc/hostname&path=/root", nil)
	if code != http.StatusNotFound && !strings.Contains(string(body), "etc/hostname") {
		t.Errorf("info: %d %s", code, body)
	}
}

func TestBadRequests(t *testing.T) {
	h := newHarness(t, nil)
	ws := t.TempDir()
	links := t.TempDir()
	procLink, sysLink := filepath.Join(links, "p"), filepath.Join(links, "s")
	os.Symlink("/proc/self", procLink)
	os.Symlink("/sys/kernel", sysLink)
	for name, req := range map[string]sandbox.CreateIsolatedSessionRequest{
		"no workspace":      {},
		"relative":          {Workspace: sandbox.IsolatedWorkspace{Path: "rel"}},
		"root":              {Workspace: sandbox.IsolatedWorkspace{Path: "/"}},
		"bad mode":          {Workspace: sandbox.IsolatedWorkspace{Path: ws, Mode: "rwx"}},
		"bad profile":       {Workspace: sandbox.IsolatedWorkspace{Path: ws}, Profile: "loose"},
		"proc bind":         {Workspace: sandbox.IsolatedWorkspace{Path: ws}, Binds: []sandbox.IsolatedBind{{Source: "/proc"}}},
		"sys bind":          {Workspace: sandbox.IsolatedWorkspace{Path: ws}, Binds: []sandbox.IsolatedBind{{Source: "/sys/kernel"}}},
		"missing source":    {Workspace: sandbox.IsolatedWorkspace{Path: ws}, Binds: []sandbox.IsolatedBind{{Source: ws + "/nope"}}},
		"bad uid mode":      {Workspace: sandbox.IsolatedWorkspace{Path: ws}, UIDMode: "sudo"},
		"negative idle":     {Workspace: sandbox.IsolatedWorkspace{Path: ws}, IdleTimeoutSeconds: -1},
		"bad passthrough":   {Workspace: sandbox.IsolatedWorkspace{Path: ws}, EnvPassthrough: &sandbox.EnvPassthrough{Mode: "some"}},
		"bind over the ws":  {Workspace: sandbox.IsolatedWorkspace{Path: ws}, Binds: []sandbox.IsolatedBind{{Source: "/usr", Dest: ws}}},
		"dest in /dev":      {Workspace: sandbox.IsolatedWorkspace{Path: ws}, Binds: []sandbox.IsolatedBind{{Source: "/usr", Dest: "/dev/x"}}},
		"workspace in proc": {Workspace: sandbox.IsolatedWorkspace{Path: "/proc/1"}},
		"link to proc":      {Workspace: sandbox.IsolatedWorkspace{Path: ws}, Binds: []sandbox.IsolatedBind{{Source: procLink}}},
		"link to sys ws":    {Workspace: sandbox.IsolatedWorkspace{Path: sysLink}},
		"ws in /usr":        {Workspace: sandbox.IsolatedWorkspace{Path: "/usr/local/iso-ws"}},
		"ws in /var/lib":    {Workspace: sandbox.IsolatedWorkspace{Path: "/var/lib/iso-ws"}},
		"rw bind in /etc":   {Workspace: sandbox.IsolatedWorkspace{Path: ws}, Binds: []sandbox.IsolatedBind{{Source: "/etc"}}},
		"extra in /opt":     {Workspace: sandbox.IsolatedWorkspace{Path: ws}, ExtraWritable: []string{"/opt"}},
		"anchor bind":       {Workspace: sandbox.IsolatedWorkspace{Path: ws}, Binds: []sandbox.IsolatedBind{{Source: "/run/opensandbox/isolation-proc"}}},
	} {
		code, body := h.do(http.MethodPost, "/v1/isolated/session", req)
		if code != http.StatusBadRequest || !strings.Contains(string(body), `"code":"INVALID_REQUEST_BODY"`) {
			t.Errorf("%s: %d %s; want 400 INVALID_REQUEST_BODY", name, code, body)
		}
		if name == "anchor bind" && !strings.Contains(string(body), "may not mount") {
			t.Errorf("anchor bind refused for another reason: %s", body)
		}
	}
	for _, p := range []string{"/v1/isolated/session/nope", "/v1/isolated/session/nope/diff"} {
		if code, body := h.do(http.MethodGet, p, nil); code != http.StatusNotFound || !strings.Contains(string(body), "SESSION_NOT_FOUND") {
			t.Errorf("GET %s: %d %s", p, code, body)
		}
	}
	id := h.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: ws}})
	if code, body := h.do(http.MethodPost, "/v1/isolated/session/"+id+"/run", sandbox.IsolatedRunRequest{Code: "  "}); code != http.StatusBadRequest {
		t.Errorf("run without code: %d %s", code, body)
	}
	if code, body := h.do(http.MethodGet, "/v1/isolated/session/"+id+"/diff", nil); code != http.StatusServiceUnavailable || !strings.Contains(string(body), "NOT_SUPPORTED") {
		t.Errorf("diff: %d %s", code, body)
	}
	if r := h.run(id, "exit 3"); r.exit != 3 {
		t.Errorf("exit code = %d, want 3", r.exit)
	}
}

// TestSetupTimeout: a session whose setup does not finish in time is
// killed and reported, and leaves no directory behind.
func TestSetupTimeout(t *testing.T) {
	h := newHarness(t, nil)
	h.m.opts.ReadyTimeout = time.Nanosecond
	code, body := h.do(http.MethodPost, "/v1/isolated/session", sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: t.TempDir()}})
	if code != http.StatusInternalServerError || !strings.Contains(string(body), "took longer") {
		t.Fatalf("create with a 1ns setup budget: %d %s", code, body)
	}
	ents, err := os.ReadDir(h.m.base)
	if err != nil || len(ents) != 0 {
		t.Errorf("isolation scratch after the failed create: %v %v", ents, err)
	}
}

// TestNoChrootEscape: the session's root is a mount moved over the
// sandbox's / (no pivot_root), so the sandbox's tree lies beneath it. A
// process that may chroot (a balanced root session holds CAP_SYS_CHROOT;
// any session gets every capability in a user namespace of its own) could
// chroot into a subdirectory while its working directory stays at /, walk
// ".." past the session's root into the sandbox's and chroot there: the
// classic chroot escape. No session may chroot at all.
func TestNoChrootEscape(t *testing.T) {
	if goruntime.GOARCH != "amd64" {
		t.Skip("the test calls unshare by its x86_64 number")
	}
	h := newHarness(t, nil)
	outside := t.TempDir()
	marker := filepath.Join(outside, "outside-marker")
	if err := os.WriteFile(marker, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// %s: unshare(CLONE_NEWUSER) in the same process (x86_64), which then
	// holds every capability in the new namespace until it execs.
	escape := `cd / && mkdir -p /tmp/jail && perl -e '%s chroot("/tmp/jail") or die "chroot: $!\n"; chdir("..") for 1..64; chroot(".") or die "chroot back: $!\n"; opendir(D, "/"); print join(" ", readdir(D)), "\n"; print -e "` + marker + `" ? "ESCAPED\n" : "contained\n"'`
	for _, tc := range []struct {
		name    string
		profile string
		wrap    string
	}{
		{"balanced root, CAP_SYS_CHROOT", sandbox.IsolationBalanced, ""},
		{"strict, nested user namespace", sandbox.IsolationStrict, `syscall(272, 0x10000000) == 0 or die "unshare: $!\n";`},
		{"balanced, nested user namespace", sandbox.IsolationBalanced, `syscall(272, 0x10000000) == 0 or die "unshare: $!\n";`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := h.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: t.TempDir()}, Profile: tc.profile})
			r := h.run(id, fmt.Sprintf(escape, tc.wrap))
			if strings.Contains(r.stdout, "ESCAPED") {
				t.Fatalf("a session left its root and reached the sandbox's files: %+v", r)
			}
			if testing.Verbose() {
				t.Logf("%+v", r)
			}
		})
	}
}

// TestSourceSwappedAfterCheck: a bind source or a workspace is checked
// when the session is asked for, but mounted later by its init, following
// symbolic links. Code that can write the parent directory (another
// session whose workspace holds it) may swap the checked directory for a
// link in between, to the private isolation directory (every session's
// server socket) or to /proc. The init must mount what it checked.
func TestSourceSwappedAfterCheck(t *testing.T) {
	h := newHarness(t, nil)
	caps := h.m.capabilities()
	for _, tc := range []struct {
		name   string
		target string
		bind   bool
	}{
		{"bind to the isolation directory", h.m.base, true},
		{"bind to /proc", "/proc", true},
		{"workspace to the isolation directory", h.m.base, false},
		{"workspace to /proc", "/proc", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shared := t.TempDir() // writable by a session that has it
			src := filepath.Join(shared, "out")
			if err := os.Mkdir(src, 0o755); err != nil {
				t.Fatal(err)
			}
			req := sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: t.TempDir()}}
			if tc.bind {
				req.Binds = []sandbox.IsolatedBind{{Source: src, Dest: "/mnt/out", ReadOnly: true}}
			} else {
				req.Workspace.Path = src
			}
			s, err := h.m.newSession(&req, caps)
			if err != nil {
				t.Fatalf("newSession: %v", err)
			}
			// The swap, between the check and the mount.
			if err := os.Remove(src); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(tc.target, src); err != nil {
				t.Fatal(err)
			}
			err = h.m.launch(context.Background(), s)
			if err == nil {
				t.Cleanup(func() { h.m.end(s); <-s.exited })
				dest := "/mnt/out"
				if !tc.bind {
					dest = src
				}
				r := h.run(s.id, "ls -a "+dest+" | head -20")
				t.Fatalf("the session was built on the swapped source %s: it sees %q", tc.target, r.stdout)
			}
			if !strings.Contains(err.Error(), "may not mount") && !strings.Contains(err.Error(), "isolation directory") && !strings.Contains(err.Error(), "pseudo filesystem") {
				t.Errorf("launch refused the swapped source for another reason: %v", err)
			}
		})
	}
}

// TestMountPointIsNoLink: a bind's destination inside the workspace (or
// inside another bind) is a path in a directory that a session sharing it
// may write. A symbolic link there, relative so that it resolves inside
// the new root, must not carry the bind onto the session's /etc (where a
// writable source would give the session files such as ld.so.preload
// chosen by the other session).
func TestMountPointIsNoLink(t *testing.T) {
	h := newHarness(t, nil)
	ws := t.TempDir()
	evil := t.TempDir()
	if err := os.WriteFile(filepath.Join(evil, "planted"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	up := strings.Repeat("../", strings.Count(ws, "/"))
	if err := os.Symlink(up+"etc", filepath.Join(ws, "sub")); err != nil {
		t.Fatal(err)
	}
	code, body := h.do(http.MethodPost, "/v1/isolated/session", sandbox.CreateIsolatedSessionRequest{
		Workspace: sandbox.IsolatedWorkspace{Path: ws},
		Binds:     []sandbox.IsolatedBind{{Source: evil, Dest: filepath.Join(ws, "sub")}},
	})
	if code == http.StatusCreated {
		var info sandbox.IsolatedSessionInfo
		json.Unmarshal(body, &info)
		t.Cleanup(func() { h.do(http.MethodDelete, "/v1/isolated/session/"+info.SessionID, nil) })
		r := h.run(info.SessionID, "ls /etc/planted 2>/dev/null && echo LANDED; ls /etc/passwd; ls -la "+ws)
		t.Logf("%+v", r)
		if strings.Contains(r.stdout, "LANDED") || !strings.Contains(r.stdout, "/etc/passwd") {
			t.Fatalf("the bind followed the link at its destination onto the session's /etc: %+v", r)
		}
		return
	}
	t.Logf("create: %d %s", code, body)
	if !strings.Contains(string(body), "symbolic link") {
		t.Errorf("create: %d %s; want the link at the destination named", code, body)
	}
}

// TestFilesProxyKeepsCredentials: the file endpoints of a session are
// passed to its in-session server, which runs with the session's identity
// (the session's code may read its memory, or accept on its socket). The
// request reaches execd with execd's access token (the lifecycle server's
// proxy adds it) and maybe other credentials: none of them may reach the
// session, or its code would own execd, and through it the sandbox.
func TestFilesProxyKeepsCredentials(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan http.Header, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.WriteHeader(http.StatusNoContent)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	tr, proxy := sessionProxy("sid", sock)
	defer tr.CloseIdleConnections()
	req := httptest.NewRequest(http.MethodGet, "/v1/isolated/session/sid/files/download?path=/w/f", nil)
	for k, v := range map[string]string{
		sandbox.AccessTokenHeader: "execd-secret", sandbox.APIKeyHeader: "api-secret", "Authorization": "Bearer x",
		"Cookie": "c=1", "Proxy-Authorization": "Basic y", "Range": "bytes=0-1", "If-Range": "Wed, 21 Oct 2015 07:28:00 GMT",
	} {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	proxy.ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent {
		t.Fatalf("proxy answered %d %s", rec.Code, rec.Body)
	}
	h := <-got
	for _, k := range []string{sandbox.AccessTokenHeader, sandbox.APIKeyHeader, "Authorization", "Cookie", "Proxy-Authorization"} {
		if v := h.Get(k); v != "" {
			t.Errorf("the session's server got %s: %q", k, v)
		}
	}
	if h.Get("Range") != "bytes=0-1" || h.Get("If-Range") == "" {
		t.Errorf("the headers the file API needs were lost: %v", h)
	}
}

// TestSessionCodeHoldsNoServerSocket: the session's code must not inherit
// the listening socket of its in-session server, or it could accept the
// requests execd sends to the server and answer them itself.
func TestSessionCodeHoldsNoServerSocket(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: t.TempDir()}})
	r := h.run(id, "for f in /proc/$$/fd/*; do echo \"$f $(readlink $f)\"; done")
	if r.exit != 0 || !strings.Contains(r.stdout, "/fd/0") {
		t.Fatalf("listing the shell's descriptors: %+v", r)
	}
	if strings.Contains(r.stdout, "socket:") {
		t.Errorf("the session's shell holds a socket: %s", r.stdout)
	}
}

// TestScratchOutsideSessionViews: execd's isolation directory holds every
// session's server socket, and a socket can be connected to through a
// read-only mount. It must not be inside the system directories that
// sessions see, even when TMPDIR (the sandbox's environment, set by the
// client) points there.
func TestScratchOutsideSessionViews(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.NeedRoot(t, "this test")
	}
	opt, err := os.MkdirTemp("/opt", "isolation-test-")
	if err != nil {
		t.Skipf("no writable /opt: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(opt) })
	ws := t.TempDir()
	t.Setenv("TMPDIR", opt)
	m := New(Options{Exe: helperExe, Env: procenv.Builder{Base: []string{"PATH=/usr/bin:/bin"}}})
	caps := m.capabilities()
	m.Close(context.Background())
	if !caps.Available {
		t.Fatalf("isolation unavailable with TMPDIR=%s: %s", opt, caps.Message)
	}
	h := newHarness(t, nil)
	for _, d := range append(append([]string(nil), systemDirs...), balancedDirs...) {
		if within(h.m.base, d) {
			t.Fatalf("the isolation directory %s is inside %s, which sessions see", h.m.base, d)
		}
	}
	id := h.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: ws}, Profile: sandbox.IsolationBalanced})
	if r := h.run(id, "ls "+opt); strings.Contains(r.stdout, "execd-isolation") {
		t.Errorf("a balanced session sees the isolation directory: %+v", r)
	}
}

// TestServerNotTraceable: the session's code runs with the identity of its
// in-session server, which holds execd's stderr (the sandbox's log stream)
// and sees every request execd passes on. The code must not ptrace it nor
// reach its descriptors or memory through /proc.
func TestServerNotTraceable(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: t.TempDir()}})
	r := h.run(id, `for p in /proc/[0-9]*; do [ "$(tr '\0' ' ' < $p/cmdline)" = "execd-isolated-serve " ] && srv=${p#/proc/}; done; echo "server $srv"; `+
		`readlink /proc/$srv/fd/2 >/dev/null 2>&1 && echo FDS; head -c1 /proc/$srv/environ >/dev/null 2>&1 && echo ENVIRON; echo forged >> /proc/$srv/fd/2 2>/dev/null && echo WROTE`)
	if !strings.Contains(r.stdout, "server ") || strings.Contains(r.stdout, "server \n") {
		t.Fatalf("the server process was not found: %+v", r)
	}
	for _, bad := range []string{"FDS", "ENVIRON", "WROTE"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("the session's code reaches its server: %s (%+v)", bad, r)
		}
	}
}

// TestFileBind: a bind whose source is a file gets a file mount point,
// read-only or writable as asked, at a new path or over one that exists
// in a read-only system directory (a directory bind too).
func TestFileBind(t *testing.T) {
	h := newHarness(t, nil)
	dir := t.TempDir()
	ro, rw := filepath.Join(dir, "ro.txt"), filepath.Join(dir, "rw.txt")
	os.WriteFile(ro, []byte("ro\n"), 0o644)
	os.WriteFile(rw, []byte("rw\n"), 0o644)
	id := h.create(sandbox.CreateIsolatedSessionRequest{
		Workspace: sandbox.IsolatedWorkspace{Path: t.TempDir()},
		Binds: []sandbox.IsolatedBind{{Source: ro, Dest: "/mnt/files/ro.txt", ReadOnly: true}, {Source: rw, Dest: "/mnt/files/rw.txt"},
			// Over a file that exists in a read-only system directory.
			{Source: ro, Dest: "/etc/hostname", ReadOnly: true}, {Source: dir, Dest: "/usr/share", ReadOnly: true}},
	})
	r := h.run(id, "cat /mnt/files/ro.txt /mnt/files/rw.txt; cat /etc/hostname; ls /usr/share/ro.txt; echo x >> /mnt/files/ro.txt 2>/dev/null && echo WROTE-RO; echo more >> /mnt/files/rw.txt && echo wrote-rw")
	if r.stdout != "ro\nrw\nro\n/usr/share/ro.txt\nwrote-rw\n" {
		t.Errorf("file binds: %+v", r)
	}
	if b, _ := os.ReadFile(rw); string(b) != "rw\nmore\n" {
		t.Errorf("the writable file bind on the host: %q", b)
	}
}

// TestWorkspaceCreatedWithoutLinks: a missing workspace is created as
// root by execd. It is created along the path that was checked, and a
// link met on the way (a directory swapped for one by whoever can write
// its parent, after the check) stops it, so no directory appears where
// the link points. A workspace below a link that was there when the
// request was checked is created where the link leads.
func TestWorkspaceCreatedWithoutLinks(t *testing.T) {
	shared, elsewhere := t.TempDir(), t.TempDir()
	// The checked path had shared/out as a directory; it is a link now.
	if err := os.Symlink(elsewhere, filepath.Join(shared, "out")); err != nil {
		t.Fatal(err)
	}
	err := mkdirChecked(filepath.Join(shared, "out", "ws"))
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("mkdirChecked through a link: %v, want it refused", err)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "ws")); err == nil {
		t.Errorf("a directory was created where the link points")
	}

	h := newHarness(t, nil)
	linked := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(elsewhere, linked); err != nil {
		t.Fatal(err)
	}
	id := h.create(sandbox.CreateIsolatedSessionRequest{Workspace: sandbox.IsolatedWorkspace{Path: filepath.Join(linked, "a", "b")}})
	if r := h.run(id, "pwd; echo hi > f"); r.exit != 0 {
		t.Errorf("a workspace below a link: %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(elsewhere, "a", "b", "f")); err != nil || string(b) != "hi\n" {
		t.Errorf("the workspace below a link is not where the link leads: %q %v", b, err)
	}
}
