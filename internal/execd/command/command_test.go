package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/execd/proc"
	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
	"github.com/opensandbox-go/opensandbox/internal/testenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

type testEnv struct {
	m   *Manager
	url string
}

func newTestEnv(t *testing.T, opts Options) *testEnv {
	t.Helper()
	if opts.KillGrace == 0 {
		opts.KillGrace = 500 * time.Millisecond
	}
	m, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /command", m.Run)
	mux.HandleFunc("GET /command/status/{id}", m.Status)
	mux.HandleFunc("GET /logs/{id}", m.Logs)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &testEnv{m: m, url: srv.URL}
}

func (e *testEnv) post(t *testing.T, ctx context.Context, req any) *http.Response {
	t.Helper()
	body, _ := json.Marshal(req)
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/command", bytes.NewReader(body))
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatalf("POST /command: %v", err)
	}
	return resp
}

// run executes a command and returns all its events.
func (e *testEnv) run(t *testing.T, req sandbox.RunCommandRequest) []sandbox.StreamEvent {
	t.Helper()
	// A guard against a hung stream, not a speed check: 400k lines under
	// the race detector on a loaded 2-core machine took over 30 s once.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	resp := e.post(t, ctx, req)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /command %q: status %d %s", req.Command, resp.StatusCode, b)
	}
	return readAll(t, resp.Body)
}

func readAll(t *testing.T, r io.Reader) []sandbox.StreamEvent {
	t.Helper()
	er := sandbox.NewEventReader(r)
	var evs []sandbox.StreamEvent
	for {
		ev, err := er.Next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		if err != nil {
			t.Fatalf("reading stream: %v", err)
		}
		if ev.Timestamp == 0 {
			t.Errorf("event %+v has no timestamp", ev)
		}
		evs = append(evs, ev)
	}
}

// outcome summarises a stream: output lines per type and the exit code.
type outcome struct {
	id     string
	stdout []string
	stderr []string
	exit   int
	final  sandbox.StreamEvent
}

func summarize(t *testing.T, evs []sandbox.StreamEvent) outcome {
	t.Helper()
	if len(evs) < 2 || evs[0].Type != sandbox.EventInit {
		t.Fatalf("stream = %+v, want init first and a final event", evs)
	}
	o := outcome{id: evs[0].Text, final: evs[len(evs)-1]}
	for _, ev := range evs[1 : len(evs)-1] {
		switch ev.Type {
		case sandbox.EventStdout:
			o.stdout = append(o.stdout, ev.Text)
		case sandbox.EventStderr:
			o.stderr = append(o.stderr, ev.Text)
		case sandbox.EventPing:
		default:
			t.Fatalf("unexpected event in the middle of the stream: %+v", ev)
		}
	}
	switch o.final.Type {
	case sandbox.EventExecutionComplete:
	case sandbox.EventError:
		if o.final.Error.Name != sandbox.ErrNameCommandExec {
			t.Fatalf("error ename = %q, want %q", o.final.Error.Name, sandbox.ErrNameCommandExec)
		}
		n, err := strconv.Atoi(o.final.Error.Value)
		if err != nil {
			o.exit = -1
		} else {
			o.exit = n
		}
	default:
		t.Fatalf("final event = %+v, want execution_complete or error", o.final)
	}
	return o
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestGoldenFrames pins the exact bytes of a stream. stdout and stderr are
// separate pipes, so their relative order is not defined; each case writes
// to one of them only.
func TestGoldenFrames(t *testing.T) {
	e := newTestEnv(t, Options{})
	tests := []struct {
		name, cmd, want string
	}{
		{"stdout and exit code", "echo hi; echo; ls /nonexistent-path 2>&1", `{"type":"init","text":"ID","timestamp":T}

{"type":"stdout","text":"hi","timestamp":T}

{"type":"stdout","text":"\n","timestamp":T}

{"type":"stdout","text":"ls: cannot access '/nonexistent-path': No such file or directory","timestamp":T}

{"type":"error","timestamp":T,"error":{"ename":"CommandExecError","evalue":"2","traceback":["exit status 2"]}}

`},
		{"stderr and success", "echo oops >&2", `{"type":"init","text":"ID","timestamp":T}

{"type":"stderr","text":"oops","timestamp":T}

{"type":"execution_complete","execution_time":T,"timestamp":T}

`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.post(t, context.Background(), sandbox.RunCommandRequest{Command: tt.cmd})
			defer resp.Body.Close()
			for k, want := range map[string]string{
				"Content-Type":      "text/event-stream",
				"Cache-Control":     "no-cache",
				"X-Accel-Buffering": "no",
			} {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
			raw, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			norm := regexp.MustCompile(`"(timestamp|execution_time)":\d+`).ReplaceAllString(string(raw), `"$1":T`)
			norm = strings.Replace(norm, `{"type":"execution_complete","timestamp":T}`, `{"type":"execution_complete","execution_time":T,"timestamp":T}`, 1)
			norm = regexp.MustCompile(`cmd-[0-9a-f]+`).ReplaceAllString(norm, "ID")
			if norm != tt.want {
				t.Errorf("stream bytes:\n%s\nwant:\n%s", norm, tt.want)
			}
		})
	}
}

func TestExitCodesAndOutput(t *testing.T) {
	dir := t.TempDir()
	envFile := filepath.Join(dir, "env")
	os.WriteFile(envFile, []byte("FROM_FILE=file-value\nDERIVED=$FROM_FILE-x\n"), 0o600)
	e := newTestEnv(t, Options{Env: procenv.Builder{EnvFile: envFile}})
	home, _ := os.UserHomeDir()
	tests := []struct {
		name     string
		req      sandbox.RunCommandRequest
		wantOut  []string
		wantErr  []string
		wantExit int
	}{
		{"success", sandbox.RunCommandRequest{Command: "echo a; echo b"}, []string{"a", "b"}, nil, 0},
		{"exit code", sandbox.RunCommandRequest{Command: "echo x >&2; exit 7"}, nil, []string{"x"}, 7},
		{"killed by signal", sandbox.RunCommandRequest{Command: "kill -KILL $$"}, nil, nil, 137},
		{"partial last line", sandbox.RunCommandRequest{Command: "printf 'one\\ntwo'"}, []string{"one", "two"}, nil, 0},
		{"crlf and cr", sandbox.RunCommandRequest{Command: "printf 'a\\r\\nb\\rc\\n'"}, []string{"a", "b", "c"}, nil, 0},
		{"envs", sandbox.RunCommandRequest{Command: "echo $FOO", Envs: map[string]string{"FOO": "bar baz"}}, []string{"bar baz"}, nil, 0},
		{"env file", sandbox.RunCommandRequest{Command: "echo $FROM_FILE $DERIVED"}, []string{"file-value file-value-x"}, nil, 0},
		{"request env wins over file", sandbox.RunCommandRequest{Command: "echo $FROM_FILE", Envs: map[string]string{"FROM_FILE": "req"}}, []string{"req"}, nil, 0},
		{"cwd", sandbox.RunCommandRequest{Command: "pwd", Cwd: dir}, []string{dir}, nil, 0},
		{"cwd tilde", sandbox.RunCommandRequest{Command: "pwd", Cwd: "~"}, []string{home}, nil, 0},
		{"cwd variable", sandbox.RunCommandRequest{Command: "pwd", Cwd: "$MYDIR", Envs: map[string]string{"MYDIR": dir}}, []string{dir}, nil, 0},
		{"stdin is empty", sandbox.RunCommandRequest{Command: "cat; echo done"}, []string{"done"}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := summarize(t, e.run(t, tt.req))
			if !equal(o.stdout, tt.wantOut) || !equal(o.stderr, tt.wantErr) || o.exit != tt.wantExit {
				t.Errorf("run %q: stdout %q stderr %q exit %d; want %q %q %d", tt.req.Command, o.stdout, o.stderr, o.exit, tt.wantOut, tt.wantErr, tt.wantExit)
			}
			st, ok := e.m.Get(o.id)
			if !ok {
				t.Fatalf("command %s not registered", o.id)
			}
			s := st.Status()
			if s.Running || s.ExitCode == nil || *s.ExitCode != tt.wantExit || s.FinishedAt == nil || s.Content != tt.req.Command {
				t.Errorf("status = %+v, want finished with exit %d", s, tt.wantExit)
			}
		})
	}
}

func TestStartFailure(t *testing.T) {
	e := newTestEnv(t, Options{})
	evs := e.run(t, sandbox.RunCommandRequest{Command: "true", Cwd: "/does/not/exist"})
	if len(evs) != 2 || evs[0].Type != sandbox.EventInit || evs[1].Type != sandbox.EventError || !strings.Contains(evs[1].Error.Value, "/does/not/exist") {
		t.Fatalf("events = %+v, want init then error naming the directory", evs)
	}
}

func TestBadRequests(t *testing.T) {
	e := newTestEnv(t, Options{})
	for _, tt := range []struct {
		name string
		body string
	}{
		{"malformed", `{"command":`},
		{"no command", `{"cwd":"/"}`},
		{"negative timeout", `{"command":"true","timeout":-1}`},
		{"gid without uid", `{"command":"true","gid":0}`},
		{"negative uid", `{"command":"true","uid":-1}`},
		{"wrong type", `{"command":123}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(e.url+"/command", "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var er sandbox.ErrorResponse
			json.NewDecoder(resp.Body).Decode(&er)
			if resp.StatusCode != http.StatusBadRequest || er.Code != "INVALID_REQUEST_BODY" || er.Message == "" {
				t.Errorf("POST %s = %d %+v, want 400 INVALID_REQUEST_BODY", tt.body, resp.StatusCode, er)
			}
		})
	}
}

func TestLargeOutputInOrder(t *testing.T) {
	e := newTestEnv(t, Options{})
	const n = 200000 // about 1.3 MB of lines on each stream
	evs := e.run(t, sandbox.RunCommandRequest{Command: fmt.Sprintf("seq 1 %d; seq 1 %d >&2", n, n)})
	o := summarize(t, evs)
	if o.exit != 0 {
		t.Fatalf("exit = %d, want 0", o.exit)
	}
	for name, got := range map[string][]string{"stdout": o.stdout, "stderr": o.stderr} {
		if len(got) != n {
			t.Fatalf("%s lines = %d, want %d", name, len(got), n)
		}
		for i, line := range got {
			if line != strconv.Itoa(i+1) {
				t.Fatalf("%s line %d = %q, want %d", name, i, line, i+1)
			}
		}
	}
	// The log holds both streams completely too.
	st, _ := e.m.Get(o.id)
	data, _, err := st.readLog(0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(st.logPath); err != nil {
		t.Errorf("a %d-byte log should have moved to a file: %v", len(data), err)
	}
	if got := bytes.Count(data, []byte("\n")); got != 2*n {
		t.Errorf("log lines = %d, want %d", got, 2*n)
	}
}

func TestConcurrentCommands(t *testing.T) {
	e := newTestEnv(t, Options{})
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			body, _ := json.Marshal(sandbox.RunCommandRequest{Command: fmt.Sprintf("for j in 1 2 3; do echo %d-$j; done; exit %d", i, i%3)})
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/command", bytes.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err.Error()
				return
			}
			defer resp.Body.Close()
			var out []string
			var final sandbox.StreamEvent
			er := sandbox.NewEventReader(resp.Body)
			for {
				ev, err := er.Next()
				if err != nil {
					break
				}
				if ev.Type == sandbox.EventStdout {
					out = append(out, ev.Text)
				}
				final = ev
			}
			want := []string{fmt.Sprintf("%d-1", i), fmt.Sprintf("%d-2", i), fmt.Sprintf("%d-3", i)}
			wantFinal := sandbox.EventExecutionComplete
			if i%3 != 0 {
				wantFinal = sandbox.EventError
			}
			if !equal(out, want) || final.Type != wantFinal {
				errs <- fmt.Sprintf("command %d: stdout %q final %+v (error %+v); want %q %s", i, out, final, final.Error, want, wantFinal)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// startAndReadPIDs starts a command that prints pids on stdout, reads them, and
// returns the live response for the caller to finish.
func startAndReadPIDs(t *testing.T, e *testEnv, ctx context.Context, req sandbox.RunCommandRequest, n int) (*http.Response, *sandbox.EventReader, []int) {
	t.Helper()
	resp := e.post(t, ctx, req)
	er := sandbox.NewEventReader(resp.Body)
	var pids []int
	for len(pids) < n {
		ev, err := er.Next()
		if err != nil {
			t.Fatalf("stream ended before %d pids: %v", n, err)
		}
		if ev.Type == sandbox.EventStdout {
			pid, err := strconv.Atoi(ev.Text)
			if err != nil {
				t.Fatalf("stdout %q is not a pid", ev.Text)
			}
			pids = append(pids, pid)
		}
	}
	return resp, er, pids
}

func alive(pid int) bool {
	// A zombie has exited; it only waits for its parent to reap it.
	st, ok := proc.ReadStat(pid)
	return ok && st.State != 'Z'
}

func waitGone(t *testing.T, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still alive", pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

const treeCmd = "sleep 300 & echo $!; sh -c 'echo $$; exec sleep 300'"

func TestTimeoutKillsProcessTree(t *testing.T) {
	e := newTestEnv(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, er, pids := startAndReadPIDs(t, e, ctx, sandbox.RunCommandRequest{Command: treeCmd, Timeout: 300}, 2)
	defer resp.Body.Close()
	var final sandbox.StreamEvent
	for {
		ev, err := er.Next()
		if err != nil {
			break
		}
		final = ev
	}
	if final.Type != sandbox.EventError || final.Error.Value != "143" || !strings.Contains(final.Error.Traceback[0], "timed out") {
		t.Errorf("final event = %+v, want error 143 'timed out'", final)
	}
	waitGone(t, pids...)
}

func TestTimeoutEscalatesToKill(t *testing.T) {
	e := newTestEnv(t, Options{KillGrace: 100 * time.Millisecond})
	// The shell ignores SIGTERM, so only SIGKILL ends it.
	evs := e.run(t, sandbox.RunCommandRequest{Command: "trap '' TERM; while :; do sleep 0.05; done", Timeout: 200})
	o := summarize(t, evs)
	if o.exit != 137 {
		t.Errorf("exit = %d, want 137 (SIGKILL after grace)", o.exit)
	}
}

func TestInterrupt(t *testing.T) {
	e := newTestEnv(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, er, pids := startAndReadPIDs(t, e, ctx, sandbox.RunCommandRequest{Command: treeCmd}, 2)
	defer resp.Body.Close()
	var id string
	for _, c := range e.m.cmds {
		id = c.ID
	}
	if err := e.m.Interrupt(id); err != nil {
		t.Fatalf("Interrupt: %v", err)
	}
	var final sandbox.StreamEvent
	for {
		ev, err := er.Next()
		if err != nil {
			break
		}
		final = ev
	}
	if final.Type != sandbox.EventError || final.Error.Value != "143" {
		t.Errorf("final = %+v, want error 143", final)
	}
	waitGone(t, pids...)
	if err := e.m.Interrupt(id); err != nil {
		t.Errorf("second Interrupt of a finished command = %v, want nil", err)
	}
	if err := e.m.Interrupt("cmd-unknown"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Interrupt(unknown) = %v, want ErrNotFound", err)
	}
}

func TestClientDisconnectKillsCommand(t *testing.T) {
	e := newTestEnv(t, Options{})
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	resp, _, pids := startAndReadPIDs(t, e, ctx, sandbox.RunCommandRequest{Command: treeCmd}, 2)
	cancel()
	resp.Body.Close()
	waitGone(t, pids...)
	// Every goroutine of the command ends with it.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before+2 { // +2: the client's idle connection
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines = %d, started with %d\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBackgroundCommandOutlivesStreamAndStragglers(t *testing.T) {
	e := newTestEnv(t, Options{})
	marker := filepath.Join(t.TempDir(), "go")
	// The foreground shell leaves a straggler holding its output pipe; the
	// stream must end at once while the straggler lives on.
	cmd := fmt.Sprintf("(while [ ! -e %s ]; do sleep 0.01; done; echo late) & echo $!; echo now", marker)
	start := time.Now()
	o := summarize(t, e.run(t, sandbox.RunCommandRequest{Command: cmd}))
	elapsed := time.Since(start)
	if len(o.stdout) != 2 || o.stdout[1] != "now" || o.exit != 0 {
		t.Fatalf("stdout %q exit %d, want [pid now] 0", o.stdout, o.exit)
	}
	pid, _ := strconv.Atoi(o.stdout[0])
	if !alive(pid) {
		t.Fatalf("straggler %d died with the stream (after %v)", pid, elapsed)
	}
	// Its later output lands in the command's log.
	os.WriteFile(marker, nil, 0o600)
	waitGone(t, pid)
	st, _ := e.m.Get(o.id)
	deadline := time.Now().Add(5 * time.Second)
	for {
		data, _, _ := st.readLog(0, 1<<20)
		if strings.HasSuffix(string(data), "now\nlate\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log = %q, want it to end with now, late", data)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBackground(t *testing.T) {
	e := newTestEnv(t, Options{})
	marker := filepath.Join(t.TempDir(), "go")
	cmd := fmt.Sprintf("echo first; echo err >&2; while [ ! -e %s ]; do sleep 0.01; done; echo last; exit 3", marker)
	evs := e.run(t, sandbox.RunCommandRequest{Command: cmd, Background: true})
	if len(evs) != 2 || evs[0].Type != sandbox.EventInit || evs[1].Type != sandbox.EventExecutionComplete {
		t.Fatalf("background stream = %+v, want init, execution_complete", evs)
	}
	id := evs[0].Text
	status := func() sandbox.CommandStatus {
		resp, err := http.Get(e.url + "/command/status/" + id)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st sandbox.CommandStatus
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	logs := func(cursor string) (string, string) {
		u := e.url + "/logs/" + id
		if cursor != "" {
			u += "?cursor=" + cursor
		}
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d %s", u, resp.StatusCode, b)
		}
		return string(b), resp.Header.Get(sandbox.CommandLogsCursorHeader)
	}
	if st := status(); !st.Running || st.ExitCode != nil {
		t.Fatalf("status while running = %+v", st)
	}
	deadline := time.Now().Add(10 * time.Second)
	var text, cursor string
	for {
		text, cursor = logs("")
		if text == "first\nerr\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("logs = %q, want first, err", text)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if cursor != strconv.Itoa(len(text)) {
		t.Errorf("cursor = %s, want %d", cursor, len(text))
	}
	os.WriteFile(marker, nil, 0o600)
	for status().Running {
		if time.Now().After(deadline) {
			t.Fatal("background command did not finish")
		}
		time.Sleep(5 * time.Millisecond)
	}
	st := status()
	if st.ExitCode == nil || *st.ExitCode != 3 || st.FinishedAt == nil {
		t.Errorf("final status = %+v, want exit 3", st)
	}
	rest, next := logs(cursor)
	if rest != "last\n" || next != strconv.Itoa(len(text)+len(rest)) {
		t.Errorf("logs after cursor %s = %q (next %s), want \"last\\n\"", cursor, rest, next)
	}
	if rest, next2 := logs("99999"); rest != "" || next2 != next {
		t.Errorf("logs past the end = %q cursor %s, want empty and %s", rest, next2, next)
	}
	resp, _ := http.Get(e.url + "/logs/" + id + "?cursor=-1")
	if resp.StatusCode != 400 {
		t.Errorf("negative cursor status = %d, want 400", resp.StatusCode)
	}
	resp.Body.Close()
	resp, _ = http.Get(e.url + "/command/status/nope")
	if resp.StatusCode != 404 {
		t.Errorf("unknown status = %d, want 404", resp.StatusCode)
	}
	resp.Body.Close()
}

func TestBackgroundTimeout(t *testing.T) {
	e := newTestEnv(t, Options{})
	evs := e.run(t, sandbox.RunCommandRequest{Command: "sleep 300", Background: true, Timeout: 100})
	c, _ := e.m.Get(evs[0].Text)
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("background command outlived its timeout")
	}
	st := c.Status()
	if st.ExitCode == nil || *st.ExitCode != 143 || !strings.Contains(st.Error, "timed out") {
		t.Errorf("status = %+v, want exit 143 and a timeout error", st)
	}
}

func TestRunAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.NeedRoot(t, "switch users")
	}
	e := newTestEnv(t, Options{})
	uid, gid := uint32(65534), uint32(65533)
	o := summarize(t, e.run(t, sandbox.RunCommandRequest{Command: "id -u; id -g", UID: &uid}))
	if !equal(o.stdout, []string{"65534", "65534"}) {
		t.Errorf("uid only: %q, want nobody's uid and primary gid", o.stdout)
	}
	o = summarize(t, e.run(t, sandbox.RunCommandRequest{Command: "id -u; id -g", UID: &uid, GID: &gid}))
	if !equal(o.stdout, []string{"65534", "65533"}) {
		t.Errorf("uid+gid: %q, want [65534 65533]", o.stdout)
	}
}

func TestRetention(t *testing.T) {
	e := newTestEnv(t, Options{Retain: 2})
	var ids []string
	for range 4 {
		id := summarize(t, e.run(t, sandbox.RunCommandRequest{Command: "echo x", Background: true})).id
		c, _ := e.m.Get(id)
		<-c.Done()
		ids = append(ids, id)
	}
	for i, id := range ids {
		_, ok := e.m.Get(id)
		if want := i >= 2; ok != want {
			t.Errorf("command %d retained = %v, want %v", i, ok, want)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(e.m.opts.LogDir, "*.log"))
	if len(logs) != 2 {
		t.Errorf("log files = %d, want 2", len(logs))
	}
}

// sessionMembers returns the live processes whose session or process
// group is sid.
func sessionMembers(sid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := proc.ReadStat(pid); ok && (st.Session == sid || st.PGRP == sid) && st.State != 'Z' {
			out = append(out, pid)
		}
	}
	return out
}

func waitSessionEmpty(t *testing.T, sid int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		left := sessionMembers(sid)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes of the command's session still alive: %v", len(left), left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// `timeout` moves its child into a process group of its own; a timeout
// of the command must still end it (killing only the shell's group did not).
func TestTimeoutKillsProcessesInOtherGroups(t *testing.T) {
	e := newTestEnv(t, Options{KillGrace: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, er, pids := startAndReadPIDs(t, e, ctx, sandbox.RunCommandRequest{
		Command: "timeout 300 sh -c 'echo $$; exec sleep 300' & wait", Timeout: 300,
	}, 1)
	defer resp.Body.Close()
	for {
		if _, err := er.Next(); err != nil {
			break
		}
	}
	st, ok := proc.ReadStat(pids[0])
	if ok && st.PGRP == st.Session {
		t.Fatalf("test premise: sleep should be in a group other than the session's, got %+v", st)
	}
	waitGone(t, pids...)
}

// A fork bomb (bounded here by RLIMIT_NPROC of an unprivileged user, so
// the test cannot exhaust the host) ends with its command's timeout: the
// stream ends and nothing of the command is left alive.
func TestTimeoutEndsForkBomb(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the bomb as an unprivileged user with its own process limit")
	}
	e := newTestEnv(t, Options{KillGrace: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// RLIMIT_NPROC counts every process of the uid, zombies included: a
	// uid of this run's own, so neither an earlier run's unreaped bomb nor
	// another test's processes use up the limit before the bomb starts
	// (with nobody's uid the bomb sometimes never ran and the test passed
	// without testing anything).
	uid := uint32(200000 + rand.IntN(1<<20))
	resp := e.post(t, ctx, sandbox.RunCommandRequest{
		Command: "ulimit -u 300; timeout 20 bash -c ':(){ :|:& };:'",
		Timeout: 1500, UID: &uid,
	})
	defer resp.Body.Close()
	// The bomb backgrounds itself, so the shell exits at once and the
	// stream ends; the command's timeout still bounds what it left behind.
	o := summarize(t, readAll(t, resp.Body))
	c, ok := e.m.Get(o.id)
	if !ok {
		t.Fatalf("command %s unknown", o.id)
	}
	// Whatever happens, leave nothing running on the shared machine.
	t.Cleanup(func() { syscall.Kill(-c.pgid, syscall.SIGKILL) })
	// The premise: the bomb ran. Either the shell exited and the bomb runs
	// on (asked of the command's process group at once, which a walk of
	// /proc is not), or, on a loaded machine, the shell was still retrying
	// forks when the timeout ended the command.
	switch f := o.final; {
	case f.Type == sandbox.EventExecutionComplete && syscall.Kill(-c.pgid, 0) == nil:
	case f.Type == sandbox.EventError && f.Error != nil && len(f.Error.Traceback) > 0 && strings.Contains(f.Error.Traceback[0], "timed out"):
	default:
		t.Fatalf("test premise: the bomb should have run; final event %+v (error %+v), stderr %q", f, f.Error, o.stderr[:min(3, len(o.stderr))])
	}
	waitSessionEmpty(t, c.pgid)
}

// The caller's processes are the OOM killer's first choice, execd is not.
// The shell runs at execd's score until execd's write lands just after the
// start, so the values are read once the stream's init event, sent after
// the write, has arrived: the command waits for a file the test creates
// then. (Children forked before the write are fixed after it: see
// proc.TestSetUserOOMScoreAdjReachesEarlierChildren; one whose fork was
// still inside the kernel at that instant is not, so none is checked here.)
func TestCommandsGetHighOOMScoreAdj(t *testing.T) {
	e := newTestEnv(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gate := filepath.Join(t.TempDir(), "gate")
	resp := e.post(t, ctx, sandbox.RunCommandRequest{Command: "while [ ! -e " + gate + " ]; do sleep 0.01; done; " +
		"cat /proc/$$/oom_score_adj; cat /proc/self/oom_score_adj"})
	defer resp.Body.Close()
	er := sandbox.NewEventReader(resp.Body)
	if ev, err := er.Next(); err != nil || ev.Type != sandbox.EventInit {
		t.Fatalf("first event = %+v, %v; want init", ev, err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout []string
	for {
		ev, err := er.Next()
		if err != nil {
			break
		}
		if ev.Type == sandbox.EventStdout {
			stdout = append(stdout, ev.Text)
		}
	}
	want := strconv.Itoa(proc.UserOOMScoreAdj)
	if !equal(stdout, []string{want, want}) {
		t.Errorf("oom_score_adj of the shell and its child = %q, want %s", stdout, want)
	}
	self, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(self)) == want {
		t.Errorf("execd's own oom_score_adj changed to %s", want)
	}
}
