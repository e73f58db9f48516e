package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// cliEnv runs the built osb binary against one server, with a home
// directory of its own and the connection given by environment.
type cliEnv struct {
	t    *testing.T
	bin  string
	srv  *serverProc
	home string
	env  map[string]string
}

func newCLI(t *testing.T) *cliEnv {
	t.Helper()
	bin := binPath(t, "osb")
	srv := startServer(t, serverOpts{})
	return &cliEnv{t: t, bin: bin, srv: srv, home: t.TempDir(), env: map[string]string{
		"OPEN_SANDBOX_DOMAIN":  strings.TrimPrefix(srv.base, "http://"),
		"OPEN_SANDBOX_API_KEY": testAPIKey,
	}}
}

type cliResult struct {
	code           int
	stdout, stderr string
}

// run runs osb with args, stdin and extra environment (a value of ""
// removes the variable).
func (c *cliEnv) run(stdin string, extraEnv map[string]string, args ...string) cliResult {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := osexec.CommandContext(ctx, c.bin, args...)
	env := []string{"HOME=" + c.home, "PATH=" + os.Getenv("PATH"), "NO_COLOR=1"}
	merged := map[string]string{}
	for k, v := range c.env {
		merged[k] = v
	}
	for k, v := range extraEnv {
		merged[k] = v
	}
	for k, v := range merged {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := cliResult{stdout: out.String(), stderr: errb.String()}
	var ee *osexec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	default:
		c.t.Fatalf("osb %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// ok runs osb and fails the test unless it exits 0.
func (c *cliEnv) ok(stdin string, args ...string) string {
	c.t.Helper()
	r := c.run(stdin, nil, args...)
	if r.code != 0 {
		c.t.Fatalf("osb %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// fails runs osb and checks its exit code and that stderr holds want.
func (c *cliEnv) fails(code int, want string, args ...string) cliResult {
	c.t.Helper()
	r := c.run("", nil, args...)
	if r.code != code || !strings.Contains(r.stderr, want) || !strings.HasPrefix(r.stderr, "osb: ") {
		c.t.Errorf("osb %s: exit %d, stderr %q; want exit %d and \"osb: ...\" mentioning %q", strings.Join(args, " "), r.code, r.stderr, code, want)
	}
	return r
}

// createSandbox creates a sandbox with osb and returns its id; the test
// deletes it at the end.
func (c *cliEnv) createSandbox() string {
	c.t.Helper()
	image := ensureBaseImage(c.t)
	out := c.ok("", "sandbox", "create", "-i", image, "-t", "10m", "-m", "suite=cli", "-o", "json")
	var info sandbox.SandboxInfo
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.ID == "" {
		c.t.Fatalf("sandbox create -o json = %q: %v", out, err)
	}
	if info.Status.State != sandbox.StateRunning || info.Metadata["suite"] != "cli" {
		c.t.Errorf("created sandbox = %+v, want Running with metadata suite=cli", info)
	}
	c.t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, c.srv.base+"/v1/sandboxes/"+info.ID, nil)
		req.Header.Set(sandbox.APIKeyHeader, testAPIKey)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	return info.ID
}

func TestCLISandboxLifecycle(t *testing.T) {
	c := newCLI(t)
	id := c.createSandbox()

	// list: table and json (other tests' sandboxes may be listed too).
	if out := c.ok("", "sandbox", "list"); !strings.Contains(out, id) || !strings.HasPrefix(out, "ID ") || !strings.Contains(out, "suite=cli") {
		t.Errorf("sandbox list table =\n%s\nwant a header and a row for %s", out, id)
	}
	var list sandbox.ListSandboxesResponse
	if err := json.Unmarshal([]byte(c.ok("", "sandbox", "list", "-m", "suite=cli", "-s", "running", "-o", "json")), &list); err != nil {
		t.Fatalf("sandbox list -o json: %v", err)
	}
	found := false
	for _, it := range list.Items {
		found = found || it.ID == id
	}
	if !found {
		t.Errorf("sandbox list -o json = %+v, want %s in it", list, id)
	}

	if out := c.ok("", "sandbox", "get", id, "-o", "yaml"); !strings.Contains(out, "id: "+id) || !strings.Contains(out, "state: Running") {
		t.Errorf("sandbox get -o yaml =\n%s", out)
	}
	if out := c.ok("", "sandbox", "get", id); !strings.Contains(out, "STATE") || !strings.Contains(out, "Running") {
		t.Errorf("sandbox get =\n%s", out)
	}

	var m sandbox.Metrics
	if err := json.Unmarshal([]byte(c.ok("", "sandbox", "metrics", id, "-o", "json")), &m); err != nil || m.MemTotalMiB <= 0 || m.CPUCount <= 0 {
		t.Errorf("sandbox metrics -o json = %+v, %v", m, err)
	}
	var ep sandbox.Endpoint
	if err := json.Unmarshal([]byte(c.ok("", "sandbox", "endpoint", id, "-p", "44772", "-o", "json")), &ep); err != nil || ep.Endpoint == "" || ep.Headers[sandbox.AccessTokenHeader] == "" {
		t.Errorf("sandbox endpoint -o json = %+v, %v; want an endpoint and the execd token header", ep, err)
	}
	if out := c.ok("", "sandbox", "health", id); strings.TrimSpace(out) != "healthy" {
		t.Errorf("sandbox health = %q", out)
	}

	var renewed struct {
		ExpiresAt time.Time `json:"expiresAt"`
	}
	if err := json.Unmarshal([]byte(c.ok("", "sandbox", "renew", id, "-t", "30m", "-o", "json")), &renewed); err != nil {
		t.Fatalf("sandbox renew -o json: %v", err)
	}
	if d := time.Until(renewed.ExpiresAt); d < 25*time.Minute || d > 31*time.Minute {
		t.Errorf("renewed expiresAt %v is %v away, want about 30m", renewed.ExpiresAt, d)
	}

	c.ok("", "sandbox", "pause", id)
	if st := c.srv.sandboxState(t, id); st != sandbox.StatePaused {
		t.Errorf("state after pause = %s", st)
	}
	c.fails(1, "osb sandbox resume "+id, "command", "run", id, "--", "true")
	c.ok("", "sandbox", "resume", id)
	if out := c.ok("", "command", "run", id, "--", "echo", "back"); out != "back\n" {
		t.Errorf("command after resume = %q", out)
	}

	if out := c.ok("", "diagnostics", "logs", id, "--scope", "container"); !strings.Contains(out, "execd") {
		t.Errorf("diagnostics logs = %q, want execd's start lines", out)
	}
	var d struct{ Kind, Scope, Content string }
	if err := json.Unmarshal([]byte(c.ok("", "diagnostics", "events", id, "-s", "all", "-o", "json")), &d); err != nil || d.Kind != "events" || d.Scope != "all" || !strings.Contains(d.Content, "pause") {
		t.Errorf("diagnostics events -o json = %+v, %v", d, err)
	}
	if out := c.ok("", "devops", "summary", id); !strings.Contains(out, id) {
		t.Errorf("devops summary = %q", out)
	}
	if out := c.ok("", "devops", "events", id, "-l", "5"); !strings.Contains(out, "unpause") {
		t.Errorf("devops events = %q", out)
	}

	c.ok("", "sandbox", "kill", id)
	c.fails(1, "osb sandbox list", "sandbox", "get", id)
}

func TestCLICommands(t *testing.T) {
	c := newCLI(t)
	id := c.createSandbox()

	r := c.run("", nil, "command", "run", id, "--", "sh", "-c", "echo out1; echo err1 >&2; echo out2; exit 3")
	if r.code != 3 || r.stdout != "out1\nout2\n" || r.stderr != "err1\n" {
		t.Errorf("command run = exit %d, stdout %q, stderr %q; want 3, \"out1\\nout2\\n\", \"err1\\n\"", r.code, r.stdout, r.stderr)
	}
	if r := c.run("", nil, "command", "run", id, "--", "sh -c 'exit 7'"); r.code != 7 || r.stderr != "" {
		t.Errorf("exit 7: exit %d, stderr %q", r.code, r.stderr)
	}
	if out := c.ok("", "command", "run", id, "-w", "/etc", "-e", "GREETING=hello there", "--", "echo $GREETING; pwd"); out != "hello there\n/etc\n" {
		t.Errorf("command run with -w and -e = %q", out)
	}

	var bg struct{ ID string }
	if err := json.Unmarshal([]byte(c.ok("", "command", "run", "-d", id, "-o", "json", "--", "echo bg-line; sleep 0.2; exit 5")), &bg); err != nil || bg.ID == "" {
		t.Fatalf("command run -d -o json: %+v, %v", bg, err)
	}
	var st sandbox.CommandStatus
	poll(t, "background command to end", func() bool {
		if err := json.Unmarshal([]byte(c.ok("", "command", "status", id, bg.ID, "-o", "json")), &st); err != nil {
			t.Fatalf("command status -o json: %v", err)
		}
		return !st.Running
	})
	if st.ExitCode == nil || *st.ExitCode != 5 {
		t.Errorf("status of background command = %+v, want exit code 5", st)
	}
	lr := c.run("", nil, "command", "logs", id, bg.ID)
	if lr.code != 0 || lr.stdout != "bg-line\n" || !strings.Contains(lr.stderr, "cursor: ") {
		t.Errorf("command logs = exit %d, %q, stderr %q", lr.code, lr.stdout, lr.stderr)
	}
	c.fails(1, "", "command", "status", id, "no-such-command")

	sid := strings.TrimSpace(c.ok("", "command", "session", "create", id, "-w", "/tmp"))
	if sid == "" {
		t.Fatal("session create printed no id")
	}
	c.ok("", "command", "session", "run", id, sid, "--", "export X=42; cd /etc")
	if out := c.ok("", "command", "session", "run", id, sid, "--", "echo $X; pwd"); out != "42\n/etc\n" {
		t.Errorf("session state did not carry over: %q", out)
	}
	if r := c.run("", nil, "command", "session", "run", id, sid, "--", "false"); r.code != 1 {
		t.Errorf("failing session command: exit %d", r.code)
	}
	c.ok("", "command", "session", "delete", id, sid)
	c.fails(1, "", "command", "session", "run", id, sid, "--", "true")
}

func TestCLIFiles(t *testing.T) {
	c := newCLI(t)
	id := c.createSandbox()

	c.ok("line one\nline two\n", "file", "write", id, "/tmp/notes.txt")
	if out := c.ok("", "file", "cat", id, "/tmp/notes.txt"); out != "line one\nline two\n" {
		t.Errorf("file cat = %q", out)
	}
	c.ok("", "file", "write", id, "/tmp/inline.txt", "-c", "inline", "--mode", "600")

	var infos map[string]sandbox.FileInfo
	if err := json.Unmarshal([]byte(c.ok("", "file", "info", id, "/tmp/inline.txt", "/tmp", "-o", "json")), &infos); err != nil {
		t.Fatalf("file info -o json: %v", err)
	}
	if fi := infos["/tmp/inline.txt"]; fi.Type != "file" || fi.Size != 6 || fi.Mode != 600 {
		t.Errorf("info of inline.txt = %+v, want a 6-byte file with mode 600", fi)
	}
	if fi := infos["/tmp"]; fi.Type != "directory" {
		t.Errorf("info of /tmp = %+v", fi)
	}
	if out := c.ok("", "file", "info", id, "/tmp/notes.txt"); !strings.Contains(out, "PATH") || !strings.Contains(out, "/tmp/notes.txt") {
		t.Errorf("file info table =\n%s", out)
	}

	// Upload and download a binary file of a few hundred KiB.
	blob := make([]byte, 700<<10)
	rand.Read(blob)
	local := filepath.Join(t.TempDir(), "blob.bin")
	os.WriteFile(local, blob, 0o640)
	c.ok("", "file", "upload", id, local, "/tmp/blob.bin")
	back := filepath.Join(t.TempDir(), "back.bin")
	c.ok("", "file", "download", id, "/tmp/blob.bin", back)
	if got, err := os.ReadFile(back); err != nil || !bytes.Equal(got, blob) {
		t.Errorf("downloaded %d bytes (%v), want the %d bytes uploaded", len(got), err, len(blob))
	}
	if out := c.ok("", "file", "download", id, "/tmp/blob.bin", "-"); out != string(blob) {
		t.Errorf("download to stdout: %d bytes, want %d", len(out), len(blob))
	}

	c.ok("", "file", "mkdir", id, "/tmp/a/b/c", "/tmp/x")
	c.ok("", "file", "mv", id, "/tmp/notes.txt", "/tmp/a/b/c/notes.md")
	var found []sandbox.FileInfo
	if err := json.Unmarshal([]byte(c.ok("", "file", "search", id, "/tmp/a", "-p", "*.md", "-o", "json")), &found); err != nil {
		t.Fatalf("file search -o json: %v", err)
	}
	if len(found) != 1 || found[0].Path != "/tmp/a/b/c/notes.md" {
		t.Errorf("search = %+v, want /tmp/a/b/c/notes.md", found)
	}
	c.ok("", "file", "chmod", id, "/tmp/a/b/c/notes.md", "--mode", "755")
	if err := json.Unmarshal([]byte(c.ok("", "file", "info", id, "/tmp/a/b/c/notes.md", "-o", "json")), &infos); err != nil || infos["/tmp/a/b/c/notes.md"].Mode != 755 {
		t.Errorf("mode after chmod = %+v, %v", infos, err)
	}
	if out := c.ok("", "file", "replace", id, "/tmp/a/b/c/notes.md", "--old", "line", "--new", "row"); !strings.Contains(out, "2 replaced") {
		t.Errorf("file replace = %q", out)
	}
	if out := c.ok("", "file", "cat", id, "/tmp/a/b/c/notes.md"); out != "row one\nrow two\n" {
		t.Errorf("after replace = %q", out)
	}
	c.ok("", "file", "rm", id, "/tmp/a/b/c/notes.md", "/tmp/inline.txt")
	c.fails(1, "FILE_NOT_FOUND", "file", "cat", id, "/tmp/inline.txt")
	c.ok("", "file", "rmdir", id, "/tmp/a", "/tmp/x")
	c.fails(1, "", "file", "info", id, "/tmp/a")
}

func TestCLIShellPipeMode(t *testing.T) {
	c := newCLI(t)
	id := c.createSandbox()

	r := c.run("echo hi; echo oops >&2; exit 4\n", nil, "shell", id)
	if r.code != 4 || !strings.Contains(r.stdout, "hi") || !strings.Contains(r.stderr, "oops") {
		t.Errorf("shell = exit %d, stdout %q, stderr %q; want 4 with hi on stdout and oops on stderr", r.code, r.stdout, r.stderr)
	}
	// Without an exit the end of input ends the shell.
	r = c.run("cd /etc\npwd\n", nil, "shell", id)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "/etc" {
		t.Errorf("shell to end of input = exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = c.run("", nil, "shell", id, "--cwd", "/usr", "--command", "pwd; exit 2")
	if r.code != 2 || strings.TrimSpace(r.stdout) != "/usr" {
		t.Errorf("shell --command = exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// -o json: the session as one document at the end, same exit code.
	r = c.run("echo hi; echo oops >&2; exit 4\n", nil, "shell", id, "-o", "json")
	var doc struct {
		SandboxID      string
		ExitCode       int `json:"exit_code"`
		Stdout, Stderr string
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != 4 || doc.ExitCode != 4 || doc.SandboxID != id ||
		!strings.Contains(doc.Stdout, "hi") || !strings.Contains(doc.Stderr, "oops") {
		t.Errorf("shell -o json = exit %d, %q (%v); want exit 4 and one document with hi and oops", r.code, r.stdout, err)
	}
}

func TestCLIConfig(t *testing.T) {
	c := newCLI(t)
	domain := c.env["OPEN_SANDBOX_DOMAIN"]
	c.env = map[string]string{} // from here on only the config file connects

	path := strings.TrimSpace(c.ok("", "config", "init"))
	if path != filepath.Join(c.home, ".opensandbox", "config.toml") {
		t.Errorf("config init wrote %q", path)
	}
	c.fails(1, "--force", "config", "init")
	c.ok("", "config", "init", "--force")
	c.ok("", "config", "set", "connection.domain", domain)
	c.ok("", "config", "set", "api_key", testAPIKey)
	c.ok("", "config", "set", "defaults.image", ensureBaseImage(t))
	c.fails(1, "want http or https", "config", "set", "connection.protocol", "gopher")
	c.fails(1, "unknown key", "config", "set", "connection.colour", "true")

	out := c.ok("", "config", "show")
	for _, w := range []string{domain, "****", "file", "defaults.image"} {
		if !strings.Contains(out, w) {
			t.Errorf("config show lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, testAPIKey) {
		t.Errorf("config show prints the API key:\n%s", out)
	}
	// Precedence: env beats the file, a flag beats env.
	r := c.run("", map[string]string{"OPEN_SANDBOX_DOMAIN": "env-host:1"}, "--request-timeout", "7", "config", "show", "-o", "json")
	var shown struct {
		Settings []struct{ Key, Value, Source string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil {
		t.Fatalf("config show -o json = %q: %v", r.stdout, err)
	}
	want := map[string][2]string{
		"connection.domain":          {"env-host:1", "env"},
		"connection.request_timeout": {"7", "flag"},
		"defaults.image":             {ensureBaseImage(t), "file"},
	}
	for _, s := range shown.Settings {
		if w, ok := want[s.Key]; ok && (s.Value != w[0] || s.Source != w[1]) {
			t.Errorf("%s = %q from %s, want %q from %s", s.Key, s.Value, s.Source, w[0], w[1])
		}
	}

	// The file alone connects; create takes the default image from it.
	var info sandbox.SandboxInfo
	if err := json.Unmarshal([]byte(c.ok("", "sandbox", "create", "-o", "json")), &info); err != nil || info.ID == "" {
		t.Fatalf("sandbox create with the config defaults: %+v %v", info, err)
	}
	c.ok("", "sandbox", "kill", info.ID)

	// Unknown keys in the file are an error naming them.
	os.WriteFile(path, []byte("[connection]\ndomian = \"x\"\n"), 0o600)
	c.fails(1, "connection.domian", "sandbox", "list")
}

func TestCLIErrors(t *testing.T) {
	c := newCLI(t)
	r := c.run("", map[string]string{"OPEN_SANDBOX_API_KEY": "wrong-key"}, "sandbox", "list")
	if r.code != 1 || !strings.Contains(r.stderr, "401") || !strings.Contains(r.stderr, "check --api-key / OPEN_SANDBOX_API_KEY") {
		t.Errorf("wrong API key: exit %d, stderr %q", r.code, r.stderr)
	}
	c.fails(1, "list sandboxes with: osb sandbox list", "sandbox", "get", "00000000-0000-0000-0000-000000000000")
	c.fails(1, "list sandboxes with: osb sandbox list", "command", "run", "00000000-0000-0000-0000-000000000000", "--", "true")
	c.fails(2, "unknown flag", "sandbox", "list", "--no-such-flag")
	c.fails(2, "unknown command", "sandbox", "explode")
	c.fails(2, "<sandbox-id>", "sandbox", "get")
	c.fails(2, "--output", "sandbox", "list", "-o", "xml")
	r = c.run("", map[string]string{"OPEN_SANDBOX_DOMAIN": freeAddr(t)}, "--request-timeout", "5", "sandbox", "list")
	if r.code != 1 || !strings.Contains(r.stderr, "is opensandbox-server running at") {
		t.Errorf("no server: exit %d, stderr %q", r.code, r.stderr)
	}
	if out := c.ok("", "completion", "bash"); !strings.Contains(out, "__start_osb") {
		t.Errorf("completion bash does not look like a bash completion script")
	}
}

// TestCLIEgress drives a sandbox behind the egress sidecar with osb: create
// with a policy file and the credential proxy, read and patch the policy,
// fill the vault from stdin and read it back without secrets.
func TestCLIEgress(t *testing.T) {
	c := newCLI(t)
	image := ensureBaseImage(t)
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte("defaultAction: deny\negress:\n  - action: allow\n    target: pypi.org\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := c.ok("", "sandbox", "create", "-i", image, "-t", "10m", "--network-policy-file", policy, "--credential-proxy", "-o", "json")
	var info sandbox.SandboxInfo
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.ID == "" {
		t.Fatalf("sandbox create -o json = %q: %v", out, err)
	}
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, c.srv.base+"/v1/sandboxes/"+info.ID, nil)
		req.Header.Set(sandbox.APIKeyHeader, testAPIKey)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	var st sandbox.PolicyStatus
	if err := json.Unmarshal([]byte(c.ok("", "egress", "get", info.ID, "-o", "json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Policy == nil || len(st.Policy.Egress) != 1 || st.Policy.Egress[0].Target != "pypi.org" {
		t.Fatalf("egress get = %+v", st)
	}
	c.ok("", "egress", "patch", info.ID, "--rule", "allow=files.pythonhosted.org", "--rule", "deny=*.example.com")
	if got := c.ok("", "egress", "get", info.ID, "-o", "json"); !strings.Contains(got, "files.pythonhosted.org") || !strings.Contains(got, "*.example.com") {
		t.Fatalf("egress get after patch = %s", got)
	}
	const secret = "cli-s3cret-value-42"
	vault := "credentials:\n  - name: pypi\n    source: {type: inline, value: " + secret + "}\n" +
		"bindings:\n  - name: pypi\n    match: {hosts: [pypi.org]}\n    auth: {type: bearer, credential: pypi}\n"
	if got := c.ok(vault, "credential-vault", "create", info.ID, "--file", "-", "-o", "json"); strings.Contains(got, secret) {
		t.Fatalf("vault create printed the secret: %s", got)
	}
	for _, args := range [][]string{{"credential-vault", "get", info.ID, "-o", "json"}, {"credential-vault", "credential", "list", info.ID}, {"credential-vault", "binding", "get", info.ID, "pypi", "-o", "json"}} {
		got := c.ok("", args...)
		if strings.Contains(got, secret) || !strings.Contains(got, "pypi") {
			t.Fatalf("osb %v = %s", args, got)
		}
	}
	// A sandbox without a policy has no sidecar: a clear error.
	plain := c.createSandbox()
	c.fails(1, "--network-policy-file", "egress", "get", plain)
}

// TestCLIOutputFormats runs the commands that used to have no -o against a
// real server with -o json and parses what they print; it also walks
// upstream's CLI quickstart (osb exec, file write, file cat).
func TestCLIOutputFormats(t *testing.T) {
	c := newCLI(t)
	id := c.createSandbox()
	jsonOf := func(v any, args ...string) {
		t.Helper()
		out := c.ok("", args...)
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("osb %s = %q: not JSON: %v", strings.Join(args, " "), out, err)
		}
	}
	type action struct {
		ID, SandboxID, Status     string
		Path, Source, Destination string
		Paths                     []string
		Size                      *int64
		Mode                      int
		Healthy                   *bool
	}
	sessionOf := func(m map[string]any) string { s, _ := m["session_id"].(string); return s }

	// Upstream's quickstart, steps 4 to 6.
	var list sandbox.ListSandboxesResponse
	jsonOf(&list, "-o", "json", "sandbox", "list", "-m", "suite=cli")
	if len(list.Items) == 0 {
		t.Errorf("osb -o json sandbox list: no sandboxes")
	}
	if out := c.ok("", "exec", id, "--", "echo", "hello world"); out != "hello world\n" {
		t.Errorf("osb exec = %q, want hello world", out)
	}
	if out := c.ok("", "file", "write", id, "/tmp/test.txt", "-c", "hello"); !strings.Contains(out, "5 bytes") {
		t.Errorf("osb file write = %q", out)
	}
	if out := c.ok("", "file", "cat", id, "/tmp/test.txt"); out != "hello" {
		t.Errorf("osb file cat = %q, want the bytes unchanged", out)
	}

	var a action
	jsonOf(&a, "sandbox", "health", id, "-o", "json")
	if a.ID != id || a.Healthy == nil || !*a.Healthy {
		t.Errorf("sandbox health -o json = %+v", a)
	}
	var run struct {
		ID       string
		ExitCode int `json:"exit_code"`
		Stdout   string
		Stderr   string
	}
	r := c.run("", nil, "exec", id, "-o", "json", "--", "sh", "-c", "echo out; echo err >&2; exit 4")
	if err := json.Unmarshal([]byte(r.stdout), &run); err != nil || r.code != 4 || run.ExitCode != 4 || run.Stdout != "out\n" || run.Stderr != "err\n" || run.ID == "" {
		t.Errorf("exec -o json: exit %d, %q (%v); want exit 4 and the whole run as one object", r.code, r.stdout, err)
	}

	a = action{}
	jsonOf(&a, "file", "write", id, "/tmp/o/x.txt", "-c", "one two", "--mode", "600", "-o", "json")
	if a.SandboxID != id || a.Path != "/tmp/o/x.txt" || a.Size == nil || *a.Size != 7 || a.Mode != 600 || a.Status != "written" {
		t.Errorf("file write -o json = %+v", a)
	}
	var content struct{ Path, Encoding, Content string }
	jsonOf(&content, "file", "cat", id, "/tmp/o/x.txt", "-o", "json")
	if content.Encoding != "utf-8" || content.Content != "one two" {
		t.Errorf("file cat -o json = %+v", content)
	}
	a = action{}
	jsonOf(&a, "file", "mkdir", id, "/tmp/o/d1", "/tmp/o/d2", "-o", "json")
	if len(a.Paths) != 2 || a.Status != "created" {
		t.Errorf("file mkdir -o json = %+v", a)
	}
	a = action{}
	jsonOf(&a, "file", "mv", id, "/tmp/o/x.txt", "/tmp/o/d1/y.txt", "-o", "json")
	if a.Source != "/tmp/o/x.txt" || a.Destination != "/tmp/o/d1/y.txt" || a.Status != "moved" {
		t.Errorf("file mv -o json = %+v", a)
	}
	a = action{}
	jsonOf(&a, "file", "chmod", id, "/tmp/o/d1/y.txt", "--mode", "640", "-o", "json")
	var infos map[string]sandbox.FileInfo
	jsonOf(&infos, "file", "info", id, "/tmp/o/d1/y.txt", "-o", "json")
	if a.Status != "changed" || infos["/tmp/o/d1/y.txt"].Mode != 640 {
		t.Errorf("file chmod -o json = %+v, then mode %d", a, infos["/tmp/o/d1/y.txt"].Mode)
	}
	a = action{}
	jsonOf(&a, "file", "rm", id, "/tmp/o/d1/y.txt", "-o", "json")
	if len(a.Paths) != 1 || a.Status != "deleted" {
		t.Errorf("file rm -o json = %+v", a)
	}
	c.fails(1, "FILE_NOT_FOUND", "file", "cat", id, "/tmp/o/d1/y.txt")
	a = action{}
	jsonOf(&a, "file", "rmdir", id, "/tmp/o", "-o", "json")
	if a.Status != "deleted" {
		t.Errorf("file rmdir -o json = %+v", a)
	}

	var created map[string]any
	jsonOf(&created, "command", "session", "create", id, "-o", "json")
	sid := sessionOf(created)
	var srun map[string]any
	jsonOf(&srun, "command", "session", "run", id, sid, "-o", "json", "--", "export X=9; echo $X")
	if sessionOf(srun) != sid || srun["stdout"] != "9\n" || srun["exit_code"] != 0.0 {
		t.Errorf("session run -o json = %v", srun)
	}
	var sdel map[string]any
	jsonOf(&sdel, "command", "session", "delete", id, sid, "-o", "json")
	if sessionOf(sdel) != sid || sdel["status"] != "deleted" {
		t.Errorf("session delete -o json = %v", sdel)
	}

	var bg struct{ ID string }
	jsonOf(&bg, "command", "run", "-d", id, "-o", "json", "--", "sleep 300")
	a = action{}
	jsonOf(&a, "command", "interrupt", id, bg.ID, "-o", "json")
	if a.ID != bg.ID || a.SandboxID != id || a.Status != "interrupted" {
		t.Errorf("command interrupt -o json = %+v", a)
	}
	poll(t, "interrupted command to stop", func() bool {
		var st sandbox.CommandStatus
		jsonOf(&st, "command", "status", id, bg.ID, "-o", "json")
		return !st.Running
	})

	var report struct{ SandboxID, Kind, Content string }
	jsonOf(&report, "devops", "inspect", id, "-o", "json")
	if report.SandboxID != id || report.Kind != "inspect" || !strings.Contains(report.Content, id) {
		t.Errorf("devops inspect -o json = %+v", report)
	}

	a = action{}
	jsonOf(&a, "sandbox", "pause", id, "-o", "json")
	if a.ID != id || a.Status != "paused" || c.srv.sandboxState(t, id) != sandbox.StatePaused {
		t.Errorf("sandbox pause -o json = %+v", a)
	}
	a = action{}
	jsonOf(&a, "sandbox", "resume", id, "-o", "json")
	if a.ID != id || a.Status != "resumed" {
		t.Errorf("sandbox resume -o json = %+v", a)
	}
	var killed []action
	jsonOf(&killed, "sandbox", "kill", id, "-o", "json")
	if len(killed) != 1 || killed[0].ID != id || killed[0].Status != "killed" {
		t.Errorf("sandbox kill -o json = %+v", killed)
	}

	// config init and set, in a home of their own.
	c.env = map[string]string{}
	var cfg struct{ Path, Status, Key, Value string }
	jsonOf(&cfg, "config", "init", "-o", "json")
	if cfg.Status != "created" || !strings.HasSuffix(cfg.Path, "config.toml") {
		t.Errorf("config init -o json = %+v", cfg)
	}
	cfg = struct{ Path, Status, Key, Value string }{}
	jsonOf(&cfg, "config", "set", "api_key", testAPIKey, "-o", "json")
	if cfg.Key != "connection.api_key" || cfg.Value == testAPIKey || !strings.HasSuffix(cfg.Value, testAPIKey[len(testAPIKey)-4:]) {
		t.Errorf("config set -o json = %+v; want the key named and its value masked", cfg)
	}
}

// TestServerInitConfigPathFirst runs upstream's quickstart command with
// the path before the flags and checks the key is where the output says.
func TestServerInitConfigPathFirst(t *testing.T) {
	bin := binPath(t, "opensandbox-server")
	home := t.TempDir()
	path := filepath.Join(home, ".sandbox.toml")
	cmd := osexec.Command(bin, "init-config", path, "--example", "docker")
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("opensandbox-server init-config %s --example docker: %v\n%s", path, err, out)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("init-config wrote %v (%v), want %s with mode 0600", fi, err, path)
	}
	if !strings.Contains(string(out), "api_key in the [server] table of "+path) {
		t.Errorf("init-config output does not say where the key is:\n%s", out)
	}
	var export string
	for _, l := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(l), "export "); ok {
			export = s
		}
	}
	key, err := osexec.Command("sh", "-c", export+` && printf %s "$OPEN_SANDBOX_API_KEY"`).Output()
	if export == "" || err != nil || len(key) < 20 {
		t.Fatalf("the printed command %q gave %q, %v; want the key", export, key, err)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), `api_key = "`+string(key)+`"`) {
		t.Errorf("the key the printed command reads is not the file's api_key")
	}
	// The same order again refuses to overwrite; --force after the path works.
	if out, err := osexec.Command(bin, "init-config", path, "--example", "docker").CombinedOutput(); err == nil || !strings.Contains(string(out), "--force") {
		t.Errorf("second init-config: %v %s; want a refusal naming --force", err, out)
	}
	if out, err := osexec.Command(bin, "init-config", path, "--example", "k8s", "--force").CombinedOutput(); err != nil {
		t.Errorf("init-config PATH --example k8s --force: %v %s", err, out)
	}
}
