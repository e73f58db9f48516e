package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/execd/proc"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

type testEnv struct {
	m   *Manager
	url string
}

func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	m := New(Options{KillGrace: 300 * time.Millisecond})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /session", m.Create)
	mux.HandleFunc("POST /session/{sessionId}/run", m.Run)
	mux.HandleFunc("DELETE /session/{sessionId}", m.Delete)
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

func (e *testEnv) create(t *testing.T, body string) string {
	t.Helper()
	resp, err := http.Post(e.url+"/session", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out sandbox.CreateSessionResponse
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /session %q = %d %s", body, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.SessionID == "" {
		t.Fatalf("create session: %+v %v", out, err)
	}
	return out.SessionID
}

type result struct {
	stdout, stderr []string
	exit           int
	final          sandbox.StreamEvent
}

func (e *testEnv) run(t *testing.T, ctx context.Context, id string, req sandbox.RunInSessionRequest) result {
	t.Helper()
	body, _ := json.Marshal(req)
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/session/"+id+"/run", bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatalf("run %q: %v", req.Command, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("run %q: status %d %s", req.Command, resp.StatusCode, b)
	}
	er := sandbox.NewEventReader(resp.Body)
	var r result
	first := true
	for {
		ev, err := er.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if first && (ev.Type != sandbox.EventInit || ev.Text != id) {
			t.Fatalf("first event = %+v, want init with the session id", ev)
		}
		first = false
		switch ev.Type {
		case sandbox.EventStdout:
			r.stdout = append(r.stdout, ev.Text)
		case sandbox.EventStderr:
			r.stderr = append(r.stderr, ev.Text)
		}
		r.final = ev
	}
	switch r.final.Type {
	case sandbox.EventExecutionComplete:
	case sandbox.EventError:
		r.exit, _ = strconv.Atoi(r.final.Error.Value)
	default:
		t.Fatalf("run %q ended with %+v", req.Command, r.final)
	}
	return r
}

func eq(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) && len(a) == len(b) }

func TestStatePersists(t *testing.T) {
	e := newTestEnv(t)
	dir := t.TempDir()
	id := e.create(t, fmt.Sprintf(`{"cwd":%q}`, dir))
	ctx := context.Background()
	steps := []struct {
		cmd      string
		cwd      string
		wantOut  []string
		wantErr  []string
		wantExit int
	}{
		{"pwd", "", []string{dir}, nil, 0},
		{"export GREETING=hello; LOCAL=1; mkdir sub && cd sub", "", nil, nil, 0},
		{"pwd; echo $GREETING $LOCAL", "", []string{dir + "/sub", "hello 1"}, nil, 0},
		{"sh -c 'echo $GREETING'", "", []string{"hello"}, nil, 0},
		{"echo out; echo err >&2; false", "", []string{"out"}, []string{"err"}, 1},
		{"printf 'no newline'", "", []string{"no newline"}, nil, 0},
		{"printf 'a\\n\\n'", "", []string{"a", "\n"}, nil, 0},
		{"pwd", "/", []string{"/"}, nil, 0},
		{"(exit 42)", "", nil, nil, 42},
		{"read x; echo \"got[$x]\"", "", []string{"got[]"}, nil, 0},
		{"echo 'unterminated", "", nil, nil, 2},
		{"echo still alive", "", []string{"still alive"}, nil, 0},
	}
	for _, s := range steps {
		r := e.run(t, ctx, id, sandbox.RunInSessionRequest{Command: s.cmd, Cwd: s.cwd})
		if !eq(r.stdout, s.wantOut) || r.exit != s.wantExit {
			t.Errorf("run %q: stdout %q exit %d, want %q %d", s.cmd, r.stdout, r.exit, s.wantOut, s.wantExit)
		}
		if s.wantErr != nil && !eq(r.stderr, s.wantErr) {
			t.Errorf("run %q: stderr %q, want %q", s.cmd, r.stderr, s.wantErr)
		}
	}
}

func TestLargeOutput(t *testing.T) {
	e := newTestEnv(t)
	id := e.create(t, "")
	const n = 50000
	r := e.run(t, context.Background(), id, sandbox.RunInSessionRequest{Command: fmt.Sprintf("seq 1 %d", n)})
	if len(r.stdout) != n {
		t.Fatalf("lines = %d, want %d", len(r.stdout), n)
	}
	for i, l := range r.stdout {
		if l != strconv.Itoa(i+1) {
			t.Fatalf("line %d = %q", i, l)
		}
	}
}

func TestExitEndsSession(t *testing.T) {
	e := newTestEnv(t)
	id := e.create(t, "")
	r := e.run(t, context.Background(), id, sandbox.RunInSessionRequest{Command: "echo bye; exit 3"})
	if r.exit != 3 || !eq(r.stdout, []string{"bye"}) || !strings.Contains(r.final.Error.Traceback[0], "session") {
		t.Errorf("exit run: %+v, want exit 3 and a note that the session closed", r)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := e.m.get(id); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("session still registered after its shell exited")
		}
		time.Sleep(5 * time.Millisecond)
	}
	body, _ := json.Marshal(sandbox.RunInSessionRequest{Command: "true"})
	resp, _ := http.Post(e.url+"/session/"+id+"/run", "application/json", bytes.NewReader(body))
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("run in closed session = %d, want 404", resp.StatusCode)
	}
}

func TestTimeoutKeepsSession(t *testing.T) {
	e := newTestEnv(t)
	id := e.create(t, "")
	e.run(t, context.Background(), id, sandbox.RunInSessionRequest{Command: "export KEEP=yes"})
	start := time.Now()
	r := e.run(t, context.Background(), id, sandbox.RunInSessionRequest{Command: "sleep 300", Timeout: 200})
	if r.exit != 143 || !strings.Contains(r.final.Error.Traceback[0], "timed out") {
		t.Errorf("timed out run = exit %d %+v, want 143 timed out", r.exit, r.final)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("timeout took %v", d)
	}
	r = e.run(t, context.Background(), id, sandbox.RunInSessionRequest{Command: "echo $KEEP"})
	if !eq(r.stdout, []string{"yes"}) {
		t.Errorf("after timeout stdout = %q, want [yes]", r.stdout)
	}
}

func TestInterruptAndDisconnect(t *testing.T) {
	e := newTestEnv(t)
	id := e.create(t, "")
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() {
		done <- e.run(t, ctx, id, sandbox.RunInSessionRequest{Command: "sleep 300 & echo $! > " + pidFile + "; wait $!"})
	}()
	pid := waitPID(t, pidFile)
	if err := e.m.Interrupt(id); err != nil {
		t.Fatalf("Interrupt: %v", err)
	}
	r := <-done
	if r.exit == 0 {
		t.Errorf("interrupted run exit = 0, want non-zero")
	}
	waitGone(t, pid)

	// A client that goes away stops the run but not the session.
	os.Remove(pidFile)
	go func() {
		defer func() { recover() }()
		body, _ := json.Marshal(sandbox.RunInSessionRequest{Command: "sleep 300 & echo $! > " + pidFile + "; wait $!"})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/session/"+id+"/run", bytes.NewReader(body))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	pid = waitPID(t, pidFile)
	cancel()
	waitGone(t, pid)
	r = e.run(t, context.Background(), id, sandbox.RunInSessionRequest{Command: "echo ok"})
	if !eq(r.stdout, []string{"ok"}) {
		t.Errorf("after disconnect stdout = %q, want [ok]", r.stdout)
	}
	if err := e.m.Interrupt("session-nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Interrupt(unknown) = %v, want ErrNotFound", err)
	}
}

func waitPID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err == nil {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st, ok := proc.ReadStat(pid); !ok || st.State == 'Z' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDeleteAndErrors(t *testing.T) {
	e := newTestEnv(t)
	id := e.create(t, "{}")
	sh, _ := e.m.get(id)
	req, _ := http.NewRequest(http.MethodDelete, e.url+"/session/"+id, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("DELETE session = %v %v", resp, err)
	}
	select {
	case <-sh.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("shell still running after delete")
	}
	resp, _ = http.DefaultClient.Do(req)
	if resp.StatusCode != 404 {
		t.Errorf("second DELETE = %d, want 404", resp.StatusCode)
	}
	for _, tt := range []struct {
		path, body string
		want       int
	}{
		{"/session", `{"cwd":"/does/not/exist"}`, 400},
		{"/session", `{"cwd":`, 400},
		{"/session/nope/run", `{"command":"true"}`, 404},
	} {
		resp, err := http.Post(e.url+tt.path, "application/json", strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		var er sandbox.ErrorResponse
		json.NewDecoder(resp.Body).Decode(&er)
		resp.Body.Close()
		if resp.StatusCode != tt.want || er.Code == "" {
			t.Errorf("POST %s %s = %d %+v, want %d with a code", tt.path, tt.body, resp.StatusCode, er, tt.want)
		}
	}
	id = e.create(t, "")
	for _, body := range []string{`{}`, `{"command":"true","timeout":-5}`, `nope`} {
		resp, _ := http.Post(e.url+"/session/"+id+"/run", "application/json", strings.NewReader(body))
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("run with body %s = %d, want 400", body, resp.StatusCode)
		}
	}
}
