package code

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
	"sync"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
	"github.com/opensandbox-go/opensandbox/internal/testenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

type harness struct {
	m   *Manager
	srv *httptest.Server
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessEnv(t, procenv.Builder{})
}

func newHarnessEnv(t *testing.T, env procenv.Builder) *harness {
	t.Helper()
	return newHarnessOpts(t, Options{Env: env})
}

func newHarnessOpts(t *testing.T, opts Options) *harness {
	t.Helper()
	m := New(opts)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /code", m.Run)
	mux.HandleFunc("DELETE /code", m.InterruptHTTP)
	mux.HandleFunc("POST /code/context", m.CreateContext)
	mux.HandleFunc("GET /code/contexts", m.ListContexts)
	mux.HandleFunc("DELETE /code/contexts", m.DeleteContexts)
	mux.HandleFunc("GET /code/contexts/{context_id}", m.GetContext)
	mux.HandleFunc("DELETE /code/contexts/{context_id}", m.DeleteContext)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &harness{m: m, srv: srv}
}

func need(t *testing.T, lang string) {
	t.Helper()
	var d detector
	env, _ := procenv.Builder{}.Environ(nil)
	if _, err := d.interpreter(lang, env); err != nil {
		testenv.Missing(t, "no %s interpreter here (scripts/ensure-deps.sh installs it)", lang)
	}
}

func (h *harness) call(t *testing.T, method, path string, in any, want int, out any) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, h.srv.URL+path, body)
	resp, err := http.DefaultClient.Do(req)
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
}

func (h *harness) create(t *testing.T, lang string) string {
	t.Helper()
	var c sandbox.CodeContext
	h.call(t, "POST", "/code/context", sandbox.CreateCodeContextRequest{Language: lang}, 200, &c)
	if c.ID == "" || c.Language != lang {
		t.Fatalf("created context = %+v, want an id and language %s", c, lang)
	}
	return c.ID
}

// cell is the outcome of one run.
type cell struct {
	events []sandbox.StreamEvent
}

func (c cell) stdout() string { return c.text(sandbox.EventStdout) }
func (c cell) stderr() string { return c.text(sandbox.EventStderr) }

func (c cell) text(typ string) string {
	var b strings.Builder
	for _, ev := range c.events {
		if ev.Type == typ {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

func (c cell) results() []map[string]any {
	var out []map[string]any
	for _, ev := range c.events {
		if ev.Type == sandbox.EventResult {
			out = append(out, ev.Results)
		}
	}
	return out
}

func (c cell) last() sandbox.StreamEvent { return c.events[len(c.events)-1] }

func (c cell) ok() bool { return c.last().Type == sandbox.EventExecutionComplete }

func (c cell) err() *sandbox.StreamError {
	if l := c.last(); l.Type == sandbox.EventError {
		return l.Error
	}
	return nil
}

func (h *harness) run(t *testing.T, ctxID, lang, code string) cell {
	t.Helper()
	req := sandbox.RunCodeRequest{Code: code}
	if ctxID != "" || lang != "" {
		req.Context = &sandbox.CodeContext{ID: ctxID, Language: lang}
	}
	b, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hreq, _ := http.NewRequestWithContext(ctx, "POST", h.srv.URL+"/code", bytes.NewReader(b))
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatalf("POST /code %q: %v", code, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /code %q = %d %s", code, resp.StatusCode, data)
	}
	var c cell
	er := sandbox.NewEventReader(resp.Body)
	for {
		ev, err := er.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("POST /code %q: %v", code, err)
		}
		if ev.Timestamp == 0 {
			t.Errorf("event %+v has no timestamp", ev)
		}
		if ev.Type != sandbox.EventPing {
			c.events = append(c.events, ev)
		}
	}
	if len(c.events) < 2 || c.events[0].Type != sandbox.EventInit || c.events[0].Text == "" {
		t.Fatalf("POST /code %q: stream %+v must start with init carrying the context id", code, c.events)
	}
	if ctxID != "" && c.events[0].Text != ctxID {
		t.Errorf("init text = %q, want context id %s", c.events[0].Text, ctxID)
	}
	if l := c.last().Type; l != sandbox.EventExecutionComplete && l != sandbox.EventError {
		t.Fatalf("POST /code %q: stream ends with %s: %+v", code, l, c.events)
	}
	return c
}

// interruptWhen interrupts context id once the cell has created marker
// (a file it makes just before the part to interrupt).
func (h *harness) interruptWhen(t *testing.T, id, marker string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cell never created %s", marker)
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.call(t, "DELETE", "/code?id="+id, nil, 200, nil)
}

func TestPythonBasics(t *testing.T) {
	need(t, sandbox.LanguagePython)
	h := newHarness(t)
	id := h.create(t, sandbox.LanguagePython)

	c := h.run(t, id, "", "print(1); 2 + 2")
	if !c.ok() {
		t.Fatalf("2 + 2 failed: %+v", c.events)
	}
	if got := c.stdout(); got != "1\n" {
		t.Errorf("stdout = %q, want the raw chunk %q", got, "1\n")
	}
	if r := c.results(); len(r) != 1 || r[0]["text"] != "4" {
		t.Errorf("results = %v, want one {text: 4}", r)
	}
	var order []string
	for _, ev := range c.events {
		order = append(order, ev.Type)
		if ev.Type == sandbox.EventExecutionCount && ev.ExecutionCount != 1 {
			t.Errorf("execution_count = %d, want 1", ev.ExecutionCount)
		}
	}
	if got := strings.Join(order, ","); got != "init,execution_count,stdout,result,status,execution_complete" {
		t.Errorf("event order = %s", got)
	}

	// State persists; stdout is sent as the kernel chunks it, not split.
	h.run(t, id, "", "x = 41")
	c = h.run(t, id, sandbox.LanguagePython, "print('a\\nb'); x + 1")
	if c.stdout() != "a\nb\n" || c.results()[0]["text"] != "42" {
		t.Errorf("x + 1: stdout %q results %v", c.stdout(), c.results())
	}

	c = h.run(t, id, "", "import sys; print('oops', file=sys.stderr)")
	if c.stderr() != "oops\n" {
		t.Errorf("stderr = %q", c.stderr())
	}

	c = h.run(t, id, "", "def f(:\n  pass")
	e := c.err()
	if e == nil || e.Name != "SyntaxError" || e.Value == "" || len(e.Traceback) == 0 {
		t.Errorf("syntax error: %+v", c.events)
	}
	for _, ev := range c.events {
		if ev.Type == sandbox.EventExecutionComplete {
			t.Errorf("execution_complete after an error: %+v", c.events)
		}
	}
	c = h.run(t, id, "", "undefined_name")
	if e := c.err(); e == nil || e.Name != "NameError" || !strings.Contains(e.Value, "undefined_name") {
		t.Errorf("NameError: %+v", c.events)
	}
	// A rich result: text/html kept beside text.
	c = h.run(t, id, "", "from IPython.display import HTML; HTML('<b>x</b>')")
	if r := c.results(); len(r) != 1 || r[0]["text/html"] != "<b>x</b>" || r[0]["text"] == nil {
		t.Errorf("HTML result = %v", r)
	}
}

func TestPythonContextsIsolatedAndConcurrent(t *testing.T) {
	need(t, sandbox.LanguagePython)
	h := newHarness(t)
	a, b := h.create(t, sandbox.LanguagePython), h.create(t, sandbox.LanguagePython)
	h.run(t, a, "", "v = 'a'")
	h.run(t, b, "", "v = 'b'")
	if got := h.run(t, a, "", "v").results()[0]["text"]; got != "'a'" {
		t.Errorf("context a sees v = %v", got)
	}
	// Each context sleeps 1 s; run together they take well under 2 s.
	start := time.Now()
	var wg sync.WaitGroup
	for _, id := range []string{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c := h.run(t, id, "", "import time; time.sleep(1); v"); !c.ok() {
				t.Errorf("sleep in %s: %+v", id, c.events)
			}
		}()
	}
	wg.Wait()
	if d := time.Since(start); d > 1900*time.Millisecond {
		t.Errorf("two contexts sleeping 1 s took %v: not concurrent", d)
	}
	// Runs in one context are queued: the second starts after the first.
	start = time.Now()
	var second cell
	wg.Add(2)
	go func() { defer wg.Done(); h.run(t, a, "", "import time; time.sleep(0.5); n = 1") }()
	go func() {
		defer wg.Done()
		time.Sleep(100 * time.Millisecond) // let the first one queue first
		second = h.run(t, a, "", "n")
	}()
	wg.Wait()
	if !second.ok() || second.results()[0]["text"] != "1" {
		t.Errorf("queued run saw %+v, want n = 1 from the run before it", second.events)
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Errorf("queued runs finished in %v, want >= 500ms", d)
	}
}

func TestPythonMatplotlib(t *testing.T) {
	need(t, sandbox.LanguagePython)
	// Images set MPLBACKEND=Agg for scripts; kernels still give plots.
	h := newHarnessEnv(t, procenv.Builder{Base: append(os.Environ(), "MPLBACKEND=Agg")})
	for _, code := range []string{
		"import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()",
		"import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nfig = plt.figure()\nplt.plot([1, 2])\ndisplay(fig)",
	} {
		c := h.run(t, "", "", code)
		if !c.ok() {
			if e := c.err(); e != nil && e.Name == "ModuleNotFoundError" {
				testenv.Missing(t, "matplotlib is not installed")
			}
			t.Fatalf("plot failed: %+v (error %+v)", c.events, c.err())
		}
		found := false
		for _, r := range c.results() {
			if png, ok := r["image/png"].(string); ok && strings.HasPrefix(png, "iVBOR") {
				found = true
			}
		}
		if !found {
			t.Errorf("%q: no image/png result in %+v", code, c.results())
		}
	}
}

func TestPythonInterrupt(t *testing.T) {
	need(t, sandbox.LanguagePython)
	h := newHarness(t)
	id := h.create(t, sandbox.LanguagePython)
	h.run(t, id, "", "kept = 7")
	done := make(chan cell)
	marker := t.TempDir() + "/looping"
	go func() {
		done <- h.run(t, id, "", "open("+strconv.Quote(marker)+", 'w').close()\nwhile True: pass")
	}()
	h.interruptWhen(t, id, marker)
	var got cell
	select {
	case got = <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("while True: pass not interrupted within 2 s")
	}
	if e := got.err(); e == nil || e.Name != "KeyboardInterrupt" {
		t.Errorf("interrupted cell ended with %+v, want KeyboardInterrupt", got.last())
	}
	if c := h.run(t, id, "", "kept"); !c.ok() || c.results()[0]["text"] != "7" {
		t.Errorf("after interrupt the context answered %+v, want its state (7)", c.events)
	}
	// Interrupting an idle context succeeds and changes nothing.
	h.call(t, "DELETE", "/code?id="+id, nil, 200, nil)
	if r := h.run(t, id, "", "kept + 1").results(); len(r) != 1 || r[0]["text"] != "8" {
		t.Errorf("after an idle interrupt: %v", r)
	}
}

func TestPythonKernelDeath(t *testing.T) {
	need(t, sandbox.LanguagePython)
	h := newHarness(t)
	id := h.create(t, sandbox.LanguagePython)
	h.run(t, id, "", "state = 1")
	c := h.run(t, id, "", "import os; os._exit(3)")
	e := c.err()
	if e == nil || e.Name != sandbox.ErrNameKernelDied || !strings.Contains(e.Value, "3") {
		t.Fatalf("os._exit(3) ended with %+v, want KernelDied naming status 3", c.events)
	}
	c = h.run(t, id, "", "'state' in globals(), 5 * 5")
	if !c.ok() || c.results()[0]["text"] != "(False, 25)" {
		t.Errorf("after kernel death: %+v, want a fresh kernel answering (False, 25)", c.events)
	}
	var got sandbox.CodeContext
	h.call(t, "GET", "/code/contexts/"+id, nil, 200, &got)
	if got.ID != id {
		t.Errorf("context after restart = %+v", got)
	}
}

func TestJavaScript(t *testing.T) {
	need(t, sandbox.LanguageJavaScript)
	h := newHarness(t)
	id := h.create(t, sandbox.LanguageJavaScript)
	h.run(t, id, "", "var a = 1")
	if c := h.run(t, id, "", "a + 1"); !c.ok() || c.results()[0]["text"] != "2" {
		t.Errorf("a + 1: %+v", c.events)
	}
	h.run(t, id, "", "let b = 2; const f = (x) => x * 2")
	if c := h.run(t, id, "", "f(b)"); !c.ok() || c.results()[0]["text"] != "4" {
		t.Errorf("let/const across cells: %+v", c.events)
	}
	c := h.run(t, id, "", "console.log('hi', {k: 1}); console.error('err'); process.stdout.write('raw')")
	if c.stdout() != "hi { k: 1 }\nraw" || c.stderr() != "err\n" {
		t.Errorf("console: stdout %q stderr %q", c.stdout(), c.stderr())
	}
	if c := h.run(t, id, "", "undefined"); !c.ok() || len(c.results()) != 0 {
		t.Errorf("undefined gives a result: %+v", c.events)
	}
	c = h.run(t, id, "", "throw new TypeError('bad thing')")
	if e := c.err(); e == nil || e.Name != "TypeError" || e.Value != "bad thing" || len(e.Traceback) == 0 {
		t.Errorf("throw: %+v", c.events)
	}
	c = h.run(t, id, "", "new Promise(r => setTimeout(() => r(6 * 7), 50))")
	if !c.ok() || c.results()[0]["text"] != "42" {
		t.Errorf("promise result: %+v", c.events)
	}
	c = h.run(t, id, "", "const v = await Promise.resolve(3); console.log(v)")
	if !c.ok() || c.stdout() != "3\n" {
		t.Errorf("top-level await: %+v", c.events)
	}

	done := make(chan cell)
	marker := t.TempDir() + "/looping"
	go func() {
		done <- h.run(t, id, "", "require('fs').writeFileSync("+strconv.Quote(marker)+", ''); while (true) {}")
	}()
	h.interruptWhen(t, id, marker)
	select {
	case c = <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("while (true) {} not interrupted within 2 s")
	}
	if e := c.err(); e == nil || e.Name != sandbox.ErrNameInterrupted || !strings.Contains(e.Value, "state is lost") {
		t.Errorf("interrupted loop: %+v", c.events)
	}
	if c := h.run(t, id, "", "typeof a"); !c.ok() || c.results()[0]["text"] != "'undefined'" {
		t.Errorf("after restart: %+v, want a fresh context", c.events)
	}
}

func TestBash(t *testing.T) {
	need(t, sandbox.LanguageBash)
	h := newHarness(t)
	dir := t.TempDir()
	var c sandbox.CodeContext
	h.call(t, "POST", "/code/context", sandbox.CreateCodeContextRequest{Language: "bash", Cwd: dir}, 200, &c)
	if c.Cwd != dir {
		t.Errorf("context cwd = %q, want %q", c.Cwd, dir)
	}
	if r := h.run(t, c.ID, "", "pwd; export GREETING=hi; count=3"); r.stdout() != dir+"\n" {
		t.Errorf("pwd = %q", r.stdout())
	}
	r := h.run(t, c.ID, "", "echo $GREETING $count; bash -c 'echo $GREETING'; printf end")
	if !r.ok() || r.stdout() != "hi 3\nhi\nend" {
		t.Errorf("state across runs: %+v", r.events)
	}
	r = h.run(t, c.ID, "", "echo out; exit_code() { return 4; }; exit_code")
	if e := r.err(); e == nil || e.Name != sandbox.ErrNameCommandExec || e.Value != "4" {
		t.Errorf("exit code: %+v", r.events)
	}
	// Interrupt stops the command, not the shell.
	done := make(chan cell)
	marker := t.TempDir() + "/sleeping"
	go func() { done <- h.run(t, c.ID, "", "touch "+marker+"; sleep 30") }()
	h.interruptWhen(t, c.ID, marker)
	select {
	case r = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("sleep 30 not interrupted")
	}
	if r.err() == nil {
		t.Errorf("interrupted sleep: %+v", r.events)
	}
	if r := h.run(t, c.ID, "", "echo $GREETING"); r.stdout() != "hi\n" {
		t.Errorf("after interrupt: %q", r.stdout())
	}
	// exit ends the shell; the context restarts it, state lost.
	h.run(t, c.ID, "", "exit 2")
	if r := h.run(t, c.ID, "", "echo ${GREETING:-none}"); !r.ok() || r.stdout() != "none\n" {
		t.Errorf("after exit: %+v", r.events)
	}
}

func TestContextsAPI(t *testing.T) {
	need(t, sandbox.LanguageBash)
	need(t, sandbox.LanguageJavaScript)
	h := newHarness(t)
	var list []sandbox.CodeContext
	h.call(t, "GET", "/code/contexts", nil, 200, &list)
	if list == nil || len(list) != 0 {
		t.Errorf("empty list = %#v, want []", list)
	}
	b1, b2 := h.create(t, "bash"), h.create(t, "bash")
	js := h.create(t, "javascript")
	// Default context of a language: created on first use, then reused.
	d1 := h.run(t, "", "bash", "echo $$").events[0].Text
	d2 := h.run(t, "", "bash", "true").events[0].Text
	if d1 != d2 || d1 == b1 || d1 == b2 {
		t.Errorf("default bash context ids %s, %s (created %s %s)", d1, d2, b1, b2)
	}
	h.call(t, "GET", "/code/contexts?language=bash", nil, 200, &list)
	if len(list) != 3 {
		t.Errorf("bash contexts = %+v, want 3", list)
	}
	h.call(t, "GET", "/code/contexts", nil, 200, &list)
	if len(list) != 4 {
		t.Errorf("all contexts = %+v, want 4", list)
	}
	var got sandbox.CodeContext
	h.call(t, "GET", "/code/contexts/"+js, nil, 200, &got)
	if got.ID != js || got.Language != "javascript" {
		t.Errorf("get = %+v", got)
	}
	h.call(t, "GET", "/code/contexts/nope", nil, 404, nil)
	h.call(t, "DELETE", "/code/contexts/nope", nil, 404, nil)
	h.call(t, "DELETE", "/code?id=nope", nil, 404, nil)
	h.call(t, "DELETE", "/code", nil, 400, nil)
	h.call(t, "POST", "/code", sandbox.RunCodeRequest{Context: &sandbox.CodeContext{ID: "nope"}, Code: "1"}, 404, nil)
	h.call(t, "POST", "/code", sandbox.RunCodeRequest{Context: &sandbox.CodeContext{ID: b1, Language: "javascript"}, Code: "1"}, 400, nil)
	h.call(t, "POST", "/code", sandbox.RunCodeRequest{Context: &sandbox.CodeContext{Language: "bash"}}, 400, nil)
	var er sandbox.ErrorResponse
	h.call(t, "POST", "/code/context", sandbox.CreateCodeContextRequest{Language: "cobol"}, 400, &er)
	if er.Code != "NOT_SUPPORTED" || !strings.Contains(er.Message, "bash") {
		t.Errorf("unknown language: %+v, want NOT_SUPPORTED naming the available ones", er)
	}
	h.call(t, "POST", "/code/context", sandbox.CreateCodeContextRequest{Language: "bash", Cwd: "/nonexistent-dir"}, 400, nil)

	h.call(t, "DELETE", "/code/contexts/"+b1, nil, 200, nil)
	h.call(t, "GET", "/code/contexts/"+b1, nil, 404, nil)
	h.call(t, "DELETE", "/code/contexts", nil, 400, &er)
	if er.Code != "MISSING_QUERY" {
		t.Errorf("delete without language: %+v", er)
	}
	h.call(t, "DELETE", "/code/contexts?language=bash", nil, 200, nil)
	h.call(t, "GET", "/code/contexts", nil, 200, &list)
	if len(list) != 1 || list[0].ID != js {
		t.Errorf("after deleting bash contexts: %+v", list)
	}
	// The default context is made again on next use.
	if d3 := h.run(t, "", "bash", "true").events[0].Text; d3 == d1 {
		t.Errorf("deleted default context %s reused", d1)
	}
}

func TestDeleteKillsInterpreter(t *testing.T) {
	need(t, sandbox.LanguageBash)
	h := newHarness(t)
	id := h.create(t, "bash")
	pidfile := t.TempDir() + "/pid"
	h.run(t, id, "", "echo $$ > "+pidfile)
	h.call(t, "DELETE", "/code/contexts/"+id, nil, 200, nil)
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/" + strings.TrimSpace(string(b))); err == nil {
		t.Errorf("shell %s still runs after delete", b)
	}
}

// TestBoundPorts: the kernel rewrites its connection file in place with
// the ports it bound; a file still holding zeros, or half written, is read
// again; an exited kernel or an expired start ends the wait.
func TestBoundPorts(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kernel.json")
	os.WriteFile(file, []byte(`{"shell_port": 0, "iopub_port": 0, "stdin_port": 0, "control_port": 0, "hb_port": 0}`), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan []int, 1)
	go func() {
		ports, err := boundPorts(ctx, file, nil)
		if err != nil {
			t.Errorf("boundPorts: %v", err)
		}
		got <- ports
	}()
	os.WriteFile(file, []byte(`{"shell_port": 41, "iopub_port": 42, "std`), 0o600) // half written
	os.WriteFile(file, []byte(`{"shell_port": 41, "iopub_port": 42, "stdin_port": 43, "control_port": 44, "hb_port": 45, "key": "k"}`), 0o600)
	if ports := <-got; fmt.Sprint(ports) != "[41 42 43 44 45]" {
		t.Fatalf("ports = %v", ports)
	}

	os.WriteFile(file, []byte(`{"shell_port": 0}`), 0o600)
	exited := make(chan struct{})
	close(exited)
	if _, err := boundPorts(ctx, file, exited); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("boundPorts after the kernel exited: %v", err)
	}
	short, cancelShort := context.WithCancel(context.Background())
	cancelShort()
	if _, err := boundPorts(short, file, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("boundPorts after the start expired: %v", err)
	}
}
