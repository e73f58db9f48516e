package e2e

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
	"net/textproto"
	"net/url"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/opensandbox-go/opensandbox/internal/testenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func q(s string) string { return url.QueryEscape(s) }

func TestExecdCommands(t *testing.T) {
	p := startExecd(t, execdOpts{})
	p.call(t, "GET", "/ping", nil, 200, nil)

	ex := p.stream(t, "/command", sandbox.RunCommandRequest{Command: "echo hi; echo oops >&2; exit 4"})
	if joined(ex.stdout) != "hi" || joined(ex.stderr) != "oops" || ex.exit != 4 {
		t.Errorf("command: stdout %q stderr %q exit %d", ex.stdout, ex.stderr, ex.exit)
	}
	id := ex.events[0].Text
	var st sandbox.CommandStatus
	p.call(t, "GET", "/command/status/"+id, nil, 200, &st)
	if st.Running || st.ExitCode == nil || *st.ExitCode != 4 {
		t.Errorf("status = %+v, want finished with 4", st)
	}
	logs := p.call(t, "GET", "/command/"+id+"/logs", nil, 200, nil)
	if string(logs) != "hi\noops\n" && string(logs) != "oops\nhi\n" {
		t.Errorf("logs = %q", logs)
	}

	// Background command, then interrupt it through DELETE /command.
	bg := p.stream(t, "/command", sandbox.RunCommandRequest{Command: "echo started; exec sleep 300", Background: true})
	bgID := bg.events[0].Text
	if len(bg.events) != 2 || bg.events[1].Type != sandbox.EventExecutionComplete {
		t.Fatalf("background stream = %+v", bg.events)
	}
	poll(t, "background output", func() bool {
		return string(p.call(t, "GET", "/command/"+bgID+"/logs?cursor=0", nil, 200, nil)) == "started\n"
	})
	p.call(t, "DELETE", "/command?id="+bgID, nil, 200, nil)
	poll(t, "background command to stop", func() bool {
		p.call(t, "GET", "/command/status/"+bgID, nil, 200, &st)
		return !st.Running
	})
	if *st.ExitCode != 143 {
		t.Errorf("interrupted background exit = %d, want 143", *st.ExitCode)
	}

	p.wantError(t, "DELETE", "/command", nil, 400, "MISSING_QUERY")
	p.wantError(t, "DELETE", "/command?id=nope", nil, 404, "COMMAND_NOT_FOUND")
	p.wantError(t, "GET", "/command/status/nope", nil, 404, "COMMAND_NOT_FOUND")
	p.wantError(t, "GET", "/command/nope/logs", nil, 404, "COMMAND_NOT_FOUND")
	p.wantError(t, "POST", "/command", map[string]any{"command": ""}, 400, "INVALID_REQUEST_BODY")
	p.wantError(t, "POST", "/command", map[string]any{"command": "id", "gid": 1}, 400, "INVALID_REQUEST_BODY")
}

func TestExecdSessions(t *testing.T) {
	p := startExecd(t, execdOpts{})
	var cs sandbox.CreateSessionResponse
	p.call(t, "POST", "/session", map[string]string{"cwd": "/tmp"}, 200, &cs)
	run := func(cmd string) execution {
		return p.stream(t, "/session/"+cs.SessionID+"/run", sandbox.RunInSessionRequest{Command: cmd})
	}
	run("export A=1; cd /")
	if ex := run("echo $A; pwd"); joined(ex.stdout) != "1|/" {
		t.Errorf("session state: %q, want 1|/", ex.stdout)
	}
	if ex := run("false"); ex.exit != 1 {
		t.Errorf("session exit = %d, want 1", ex.exit)
	}
	// DELETE /command?id=<session> interrupts the run but keeps the session.
	done := make(chan execution, 1)
	go func() { done <- run("sleep 300") }()
	poll(t, "session run to start", func() bool {
		return processRunningUnder(p.cmd.Process.Pid, "sleep", "300")
	})
	p.call(t, "DELETE", "/command?id="+cs.SessionID, nil, 200, nil)
	if ex := <-done; ex.exit != 143 {
		t.Errorf("interrupted session run exit = %d, want 143", ex.exit)
	}
	if ex := run("echo $A"); joined(ex.stdout) != "1" {
		t.Errorf("session after interrupt: %q", ex.stdout)
	}
	p.call(t, "DELETE", "/session/"+cs.SessionID, nil, 200, nil)
	p.wantError(t, "DELETE", "/session/"+cs.SessionID, nil, 404, "SESSION_NOT_FOUND")
	p.wantError(t, "POST", "/session/nope/run", sandbox.RunInSessionRequest{Command: "true"}, 404, "SESSION_NOT_FOUND")
	// An empty body is allowed on create.
	p.call(t, "POST", "/session", nil, 200, &cs)
}

// processRunningUnder reports whether a descendant of the process root has
// exactly this command line. Only descendants count: another test (or a
// second checkout's run) may have the same command running elsewhere on
// the machine, and seeing that one made an interrupt land before this
// test's command had started.
func processRunningUnder(root int, argv ...string) bool {
	want := strings.Join(argv, "\x00") + "\x00"
	parent := map[int]int{}
	var matches []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name in stat is parenthesised and may hold spaces;
		// the parent pid is the second field after its closing paren.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 1 {
				parent[pid], _ = strconv.Atoi(f[1])
			}
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && string(b) == want {
			matches = append(matches, pid)
		}
	}
	for _, pid := range matches {
		for seen := 0; pid > 1 && seen < len(parent); seen++ {
			if pid = parent[pid]; pid == root {
				return true
			}
		}
	}
	return false
}

func multipartUpload(t *testing.T, files map[string]string, mode int) (string, io.Reader) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for path, content := range files {
		meta, _ := json.Marshal(sandbox.FileMetadata{Path: path, Mode: mode})
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="metadata"; filename="metadata"`)
		h.Set("Content-Type", "application/json")
		w, _ := mw.CreatePart(h)
		w.Write(meta)
		fw, _ := mw.CreateFormFile("file", filepath.Base(path))
		fw.Write([]byte(content))
	}
	mw.Close()
	return mw.FormDataContentType(), &buf
}

func TestExecdFiles(t *testing.T) {
	p := startExecd(t, execdOpts{})
	dir := t.TempDir()
	a, b := filepath.Join(dir, "sub", "a.txt"), filepath.Join(dir, "b.py")
	ct, body := multipartUpload(t, map[string]string{a: "hello world\nhello\n", b: "print(1)\n"}, 640)
	resp, err := p.do(context.Background(), "POST", "/files/upload", ct, body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("upload: %v %v", resp, err)
	}
	resp.Body.Close()

	var infos map[string]sandbox.FileInfo
	p.call(t, "GET", "/files/info?path="+q(a)+"&path="+q(b), nil, 200, &infos)
	if infos[a].Size != 18 || infos[a].Mode != 640 || infos[a].Type != "file" {
		t.Errorf("info %s = %+v, want size 18 mode 640", a, infos[a])
	}
	p.wantError(t, "GET", "/files/info?path="+q(dir+"/missing"), nil, 404, "FILE_NOT_FOUND")

	// Range download.
	req, _ := http.NewRequest("GET", p.base+"/files/download?path="+q(a), nil)
	req.Header.Set("Range", "bytes=6-10")
	resp, err = p.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 206 || string(got) != "world" || resp.Header.Get("Content-Range") != "bytes 6-10/18" {
		t.Errorf("range download = %d %q %q", resp.StatusCode, got, resp.Header.Get("Content-Range"))
	}
	req.Header.Set("Range", "bytes=100-")
	resp, _ = p.client.Do(req)
	resp.Body.Close()
	if resp.StatusCode != 416 {
		t.Errorf("unsatisfiable range = %d, want 416", resp.StatusCode)
	}

	// Line-based read, as newer SDKs ask for part of a text file.
	if got := p.call(t, "GET", "/files/download?path="+q(a)+"&offset=2&limit=1", nil, 200, nil); string(got) != "hello\n" {
		t.Errorf("line-based download = %q, want the second line", got)
	}

	var found []sandbox.FileInfo
	p.call(t, "GET", "/files/search?path="+q(dir)+"&pattern="+q("*.txt"), nil, 200, &found)
	if len(found) != 1 || found[0].Path != a {
		t.Errorf("search = %+v, want only %s", found, a)
	}
	var counts map[string]sandbox.ReplaceFileContentResult
	p.call(t, "POST", "/files/replace?verbose=true", map[string]sandbox.ReplaceFileContentItem{a: {Old: "hello", New: "bye"}}, 200, &counts)
	if counts[a].ReplacedCount != 2 {
		t.Errorf("replace counts = %+v, want 2", counts)
	}
	p.call(t, "POST", "/files/permissions", map[string]sandbox.Permission{b: {Mode: 755}}, 200, nil)
	moved := filepath.Join(dir, "sub", "b.py")
	p.call(t, "POST", "/files/mv", []sandbox.RenameFileItem{{Src: b, Dest: moved}}, 200, nil)
	p.call(t, "GET", "/files/info?path="+q(moved), nil, 200, &infos)
	if infos[moved].Mode != 755 {
		t.Errorf("mode after chmod+mv = %d, want 755", infos[moved].Mode)
	}
	p.call(t, "POST", "/directories", map[string]sandbox.Permission{filepath.Join(dir, "x", "y"): {Mode: 700}}, 200, nil)
	var list []sandbox.FileInfo
	p.call(t, "GET", "/directories/list?path="+q(dir)+"&depth=2", nil, 200, &list)
	var names []string
	for _, fi := range list {
		names = append(names, strings.TrimPrefix(fi.Path, dir+"/"))
	}
	if joined(names) != "sub|sub/a.txt|sub/b.py|x|x/y" {
		t.Errorf("listing = %q", names)
	}
	p.call(t, "DELETE", "/files?path="+q(moved), nil, 200, nil)
	p.call(t, "DELETE", "/directories?path="+q(filepath.Join(dir, "x")), nil, 200, nil)
	p.call(t, "GET", "/directories/list?path="+q(dir), nil, 200, &list)
	if len(list) != 1 || list[0].Path != filepath.Join(dir, "sub") {
		t.Errorf("after deletes = %+v", list)
	}
	data, _ := os.ReadFile(a)
	if string(data) != "bye world\nbye\n" {
		t.Errorf("file after replace = %q", data)
	}
}

func TestExecdMetrics(t *testing.T) {
	p := startExecd(t, execdOpts{})
	var m sandbox.Metrics
	p.call(t, "GET", "/metrics", nil, 200, &m)
	if m.CPUCount <= 0 || m.MemTotalMiB <= 0 || m.MemUsedMiB > m.MemTotalMiB || m.Timestamp == 0 {
		t.Errorf("metrics = %+v", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := p.do(ctx, "GET", "/metrics/watch", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(resp.Body)
	for i := range 2 {
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("watch frame %d: %v", i, err)
		}
	}
	cancel()
	resp.Body.Close()
}

func TestExecdPTY(t *testing.T) {
	p := startExecd(t, execdOpts{})
	var created sandbox.CreatePTYResponse
	p.call(t, "POST", "/pty", sandbox.CreatePTYRequest{Command: "read line; echo got:$line; exit 5"}, 201, &created)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(p.base, "http")+"/pty/"+created.SessionID+"/ws?pty=0", nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	typ, msg, err := c.Read(ctx)
	if err != nil || typ != websocket.MessageText || !strings.Contains(string(msg), `"connected"`) {
		t.Fatalf("first frame = %v %s %v", typ, msg, err)
	}
	if err := c.Write(ctx, websocket.MessageBinary, append([]byte{0}, "ping-pong\n"...)); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	exitCode := -1
	for exitCode < 0 {
		typ, msg, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v (output so far %q)", err, out.String())
		}
		if typ == websocket.MessageBinary && len(msg) > 0 && msg[0] == 1 {
			out.Write(msg[1:])
			continue
		}
		var ctl struct {
			Type     string `json:"type"`
			ExitCode int    `json:"exit_code"`
		}
		if json.Unmarshal(msg, &ctl) == nil && ctl.Type == "exit" {
			exitCode = ctl.ExitCode
		}
	}
	if out.String() != "got:ping-pong\n" || exitCode != 5 {
		t.Errorf("pty output %q exit %d, want got:ping-pong and 5", out.String(), exitCode)
	}
	var st sandbox.PTYStatus
	p.call(t, "GET", "/pty/"+created.SessionID, nil, 200, &st)
	p.wantError(t, "GET", "/pty/nope", nil, 404, p.ptyNotFoundCode(t))
}

func (p *execdProc) ptyNotFoundCode(t *testing.T) string {
	t.Helper()
	var er sandbox.ErrorResponse
	p.call(t, "GET", "/pty/nope", nil, 404, &er)
	return er.Code
}

func TestExecdProxy(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "path=%s query=%s token=%q", r.URL.Path, r.URL.RawQuery, r.Header.Get(sandbox.AccessTokenHeader))
	}))
	defer backend.Close()
	port := backend.Listener.Addr().(*net.TCPAddr).Port
	p := startExecd(t, execdOpts{args: []string{"--access-token", "s3cret"}})
	p.token = "s3cret"
	body := p.call(t, "GET", fmt.Sprintf("/proxy/%d/a/b?x=1", port), nil, 200, nil)
	if string(body) != `path=/a/b query=x=1 token=""` {
		t.Errorf("proxied reply = %q", body)
	}
	p.wantError(t, "GET", "/proxy/0/", nil, 400, "INVALID_PORT")
}

func TestExecdAuth(t *testing.T) {
	p := startExecd(t, execdOpts{env: []string{"EXECD_ACCESS_TOKEN=tok"}})
	resp, err := p.do(context.Background(), "GET", "/ping", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]string
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(body["error"], sandbox.AccessTokenHeader) {
		t.Errorf("no token: %d %v, want 401 with an error naming the header", resp.StatusCode, body)
	}
	p.token = "wrong"
	resp, _ = p.do(context.Background(), "GET", "/ping", "", nil)
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("wrong token: %d, want 401", resp.StatusCode)
	}
	p.token = "tok"
	p.call(t, "GET", "/ping", nil, 200, nil)
}

func TestExecdRoutesAnswerJSON(t *testing.T) {
	p := startExecd(t, execdOpts{})
	// Not in the document, so bypass the validating client.
	for _, tt := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/nope", 404, "NOT_FOUND"},
		{"PUT", "/command", 405, "METHOD_NOT_ALLOWED"},
	} {
		req, _ := http.NewRequest(tt.method, p.base+tt.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var er sandbox.ErrorResponse
		json.NewDecoder(resp.Body).Decode(&er)
		resp.Body.Close()
		if resp.StatusCode != tt.status || er.Code != tt.code {
			t.Errorf("%s %s = %d %+v, want %d %s", tt.method, tt.path, resp.StatusCode, er, tt.status, tt.code)
		}
	}
}

func TestExecdAsNonRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.NeedRoot(t, "start execd as another user")
	}
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chown(dir, 65534, 65534)
	p := startExecd(t, execdOpts{cred: &syscall.Credential{Uid: 65534, Gid: 65534}, dir: dir, env: []string{"HOME=" + dir}})
	ex := p.stream(t, "/command", sandbox.RunCommandRequest{Command: "id -u; touch f; ls"})
	if joined(ex.stdout) != "65534|f" {
		t.Errorf("non-root command output = %q", ex.stdout)
	}
	// Asking for another user is a clear start failure, not a crash.
	uid := uint32(0)
	ex = p.stream(t, "/command", sandbox.RunCommandRequest{Command: "id -u", UID: &uid})
	last := ex.events[len(ex.events)-1]
	if last.Type != sandbox.EventError || !strings.Contains(last.Error.Value, "root") {
		t.Errorf("uid 0 from non-root execd: %+v", last)
	}
	var list []sandbox.FileInfo
	p.call(t, "GET", "/directories/list?path="+q(dir), nil, 200, &list)
	if len(list) != 1 || list[0].Owner != "nobody" {
		t.Errorf("listing = %+v, want f owned by nobody", list)
	}
}

// TestExecdIdleRSS is a memory budget: execd lives in every sandbox, so its
// resident set when idle must stay small. Raise the budget only with a
// reason in the commit message.
func TestExecdIdleRSS(t *testing.T) {
	const budgetMiB = 15
	p := startExecd(t, execdOpts{})
	for range 20 {
		p.stream(t, "/command", sandbox.RunCommandRequest{Command: "echo hi"})
	}
	p.call(t, "GET", "/metrics", nil, 200, nil)
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			t.Logf("execd idle RSS: %.1f MiB", float64(kb)/1024)
			if kb > budgetMiB*1024 {
				t.Errorf("execd idle RSS = %d KiB, budget %d MiB", kb, budgetMiB)
			}
			return
		}
	}
	t.Fatal("no VmRSS line")
}

func TestExecdSupervisesEntrypoint(t *testing.T) {
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	// The entrypoint records that it runs, and exits 7 when asked to stop.
	script := fmt.Sprintf(`trap 'echo stopping >> %[1]s; exit 7' TERM; echo $$ > %[1]s; while :; do sleep 0.05; done`, started)
	p := startExecd(t, execdOpts{entrypoint: []string{"bash", "-c", script}, env: []string{"EXECD_ACCESS_TOKEN=tok"}})
	p.token = "tok"
	poll(t, "entrypoint to start", func() bool {
		b, _ := os.ReadFile(started)
		return len(b) > 0
	})
	// The API works (with the token) while the entrypoint runs; neither
	// commands nor the entrypoint see the supervisor's marker or the token.
	ex := p.stream(t, "/command", sandbox.RunCommandRequest{Command: "echo ${EXECD_SUPERVISED_SERVER:-unset} ${EXECD_ACCESS_TOKEN:-unset}; tr '\\0' '\\n' < /proc/$(cat " + started + " | head -1)/environ | grep -c EXECD_ACCESS_TOKEN"})
	if joined(ex.stdout) != "unset unset|0" {
		t.Errorf("command and entrypoint environment leak: %q, want [unset unset, 0]", ex.stdout)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("execd did not exit after SIGTERM")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 7 {
		t.Errorf("execd exit code = %d, want the entrypoint's 7", code)
	}
	b, _ := os.ReadFile(started)
	if !strings.Contains(string(b), "stopping") {
		t.Errorf("entrypoint did not get SIGTERM: %q", b)
	}
}

func TestExecdEntrypointExitEndsExecd(t *testing.T) {
	// The entrypoint reads execd's stdin (empty here) and exits 3 at once;
	// execd stops its server and exits with the same code.
	cmd := osexec.Command(binPath(t, "execd"), "--addr", freeAddr(t), "--", "sh", "-c", "read x; exit 3")
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 3 {
		t.Errorf("execd exit code = %d, want 3\n%s", code, out)
	}
}

func TestExecdMissingEntrypoint(t *testing.T) {
	addr := freeAddr(t)
	cmd := osexec.Command(binPath(t, "execd"), "--addr", addr, "--", "/no/such/binary")
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 127 {
		t.Errorf("execd with a missing entrypoint: %v, want exit 127\n%s", err, out)
	}
}

func TestExecdBadConfig(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--port", "70000"}, "", "out of range"},
		{nil, "EXECD_PORT=abc", "EXECD_PORT"},
		{nil, "EXECD_API_GRACE_SHUTDOWN=soon", "EXECD_API_GRACE_SHUTDOWN"},
		{[]string{"stray"}, "", "put the entrypoint after --"},
	} {
		cmd := osexec.Command(binPath(t, "execd"), tt.args...)
		cmd.Env = append(os.Environ(), tt.env)
		out, _ := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), tt.want) {
			t.Errorf("execd %v %s: exit %d %q, want exit 2 mentioning %q", tt.args, tt.env, cmd.ProcessState.ExitCode(), out, tt.want)
		}
	}
}
