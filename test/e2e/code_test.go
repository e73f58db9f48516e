package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/testenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// codeLanguages asks execd which languages it serves (the NOT_SUPPORTED
// reply names them) and skips the test unless every one of want is there.
func codeLanguages(t *testing.T, p *execdProc, want ...string) {
	t.Helper()
	var er sandbox.ErrorResponse
	p.call(t, "POST", "/code/context", sandbox.CreateCodeContextRequest{Language: "no-such-language"}, 400, &er)
	if er.Code != "NOT_SUPPORTED" {
		t.Fatalf("unknown language: %+v, want NOT_SUPPORTED", er)
	}
	_, avail, _ := strings.Cut(er.Message, "available: ")
	for _, l := range want {
		if !strings.Contains(", "+avail+",", ", "+l+",") {
			testenv.Missing(t, "execd here has no %s interpreter (available: %s); scripts/ensure-deps.sh installs them", l, avail)
		}
	}
}

func codeRun(t *testing.T, p *execdProc, id, lang, code string) execution {
	t.Helper()
	req := sandbox.RunCodeRequest{Code: code}
	if id != "" || lang != "" {
		req.Context = &sandbox.CodeContext{ID: id, Language: lang}
	}
	return p.stream(t, "/code", req)
}

func lastEvent(ex execution) sandbox.StreamEvent { return ex.events[len(ex.events)-1] }

func resultTexts(ex execution) []string {
	var out []string
	for _, ev := range ex.events {
		if ev.Type == sandbox.EventResult {
			s, _ := ev.Results["text"].(string)
			out = append(out, s)
		}
	}
	return out
}

func TestExecdCodePython(t *testing.T) {
	p := startExecd(t, execdOpts{})
	codeLanguages(t, p, "python")

	// No context at all: the default python context.
	ex := codeRun(t, p, "", "", "print(1); 2 + 2")
	var types []string
	for _, ev := range ex.events {
		if ev.Type != sandbox.EventPing {
			types = append(types, ev.Type)
		}
	}
	if got := strings.Join(types, ","); got != "init,execution_count,stdout,result,status,execution_complete" {
		t.Errorf("events = %s", got)
	}
	if joined(ex.stdout) != "1\n" || joined(resultTexts(ex)) != "4" {
		t.Errorf("stdout %q results %q", ex.stdout, resultTexts(ex))
	}
	def := ex.events[0].Text

	var c sandbox.CodeContext
	p.call(t, "POST", "/code/context", sandbox.CreateCodeContextRequest{Language: "python", Cwd: "/tmp"}, 200, &c)
	if c.ID == "" || c.ID == def || c.Language != "python" || c.Cwd != "/tmp" {
		t.Fatalf("created context = %+v", c)
	}
	codeRun(t, p, c.ID, "", "import os; x = 20")
	if ex := codeRun(t, p, c.ID, "", "x * 2, os.getcwd()"); joined(resultTexts(ex)) != "(40, '/tmp')" {
		t.Errorf("state in context: %+v", ex.events)
	}
	if ex := codeRun(t, p, def, "python", "'x' in globals()"); joined(resultTexts(ex)) != "False" {
		t.Errorf("default context sees another context's state: %+v", ex.events)
	}
	ex = codeRun(t, p, c.ID, "", "1/0")
	if last := lastEvent(ex); last.Type != sandbox.EventError || last.Error.Name != "ZeroDivisionError" || len(last.Error.Traceback) == 0 {
		t.Errorf("1/0 ended with %+v", last)
	}
	ex = codeRun(t, p, c.ID, "", "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()")
	png := false
	for _, ev := range ex.events {
		if s, ok := ev.Results["image/png"].(string); ok && s != "" {
			png = true
		}
	}
	if !png && lastEvent(ex).Type == sandbox.EventExecutionComplete {
		t.Errorf("plot gave no image/png result: %+v", ex.events)
	}

	// Interrupt through DELETE /command (which falls back to contexts).
	marker := t.TempDir() + "/loop"
	done := make(chan execution, 1)
	go func() {
		done <- codeRun(t, p, c.ID, "", "open("+strconv.Quote(marker)+", 'w').close()\nwhile True: pass")
	}()
	poll(t, "the loop to start", func() bool { _, err := os.Stat(marker); return err == nil })
	p.call(t, "DELETE", "/command?id="+c.ID, nil, 200, nil)
	select {
	case ex = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("loop not interrupted")
	}
	if last := lastEvent(ex); last.Type != sandbox.EventError || last.Error.Name != "KeyboardInterrupt" {
		t.Errorf("interrupted loop ended with %+v", last)
	}
	if ex := codeRun(t, p, c.ID, "", "x"); joined(resultTexts(ex)) != "20" {
		t.Errorf("after interrupt: %+v", ex.events)
	}

	// A kernel that dies is reported and replaced under the same id.
	ex = codeRun(t, p, c.ID, "", "import os; os._exit(1)")
	if last := lastEvent(ex); last.Type != sandbox.EventError || last.Error.Name != sandbox.ErrNameKernelDied {
		t.Errorf("os._exit ended with %+v", last)
	}
	if ex := codeRun(t, p, c.ID, "", "'x' in globals()"); joined(resultTexts(ex)) != "False" {
		t.Errorf("after kernel death: %+v", ex.events)
	}
}

func TestExecdCodeJavaScriptAndBash(t *testing.T) {
	p := startExecd(t, execdOpts{})
	codeLanguages(t, p, "javascript", "bash")

	codeRun(t, p, "", "javascript", "var a = 1")
	ex := codeRun(t, p, "", "javascript", "console.log('hi'); a + 1")
	if joined(ex.stdout) != "hi\n" || joined(resultTexts(ex)) != "2" {
		t.Errorf("javascript: %+v", ex.events)
	}
	ex = codeRun(t, p, "", "javascript", "throw new Error('boom')")
	if last := lastEvent(ex); last.Type != sandbox.EventError || last.Error.Name != "Error" || last.Error.Value != "boom" {
		t.Errorf("throw ended with %+v", last)
	}
	js := ex.events[0].Text
	marker := t.TempDir() + "/loop"
	done := make(chan execution, 1)
	go func() {
		done <- codeRun(t, p, js, "", "require('fs').writeFileSync("+strconv.Quote(marker)+", ''); while (true) {}")
	}()
	poll(t, "the loop to start", func() bool { _, err := os.Stat(marker); return err == nil })
	p.call(t, "DELETE", "/code?id="+js, nil, 200, nil)
	if last := lastEvent(<-done); last.Type != sandbox.EventError || last.Error.Name != sandbox.ErrNameInterrupted {
		t.Errorf("interrupted loop ended with %+v", last)
	}
	if ex := codeRun(t, p, js, "", "40 + 2"); joined(resultTexts(ex)) != "42" {
		t.Errorf("after interrupt: %+v", ex.events)
	}

	var c sandbox.CodeContext
	p.call(t, "POST", "/code/context", sandbox.CreateCodeContextRequest{Language: "bash"}, 200, &c)
	codeRun(t, p, c.ID, "", "export V=7; cd /")
	if ex := codeRun(t, p, c.ID, "", "echo $V; pwd"); strings.Join(ex.stdout, "") != "7\n/\n" {
		t.Errorf("bash state: %q", ex.stdout)
	}
	if ex := codeRun(t, p, c.ID, "", "exit_with() { return $1; }; exit_with 3"); ex.exit != 3 {
		t.Errorf("bash exit code = %d, want 3", ex.exit)
	}
}

func TestExecdCodeContexts(t *testing.T) {
	p := startExecd(t, execdOpts{})
	codeLanguages(t, p, "bash")
	var list []sandbox.CodeContext
	p.call(t, "GET", "/code/contexts", nil, 200, &list)
	if list == nil || len(list) != 0 {
		t.Errorf("no contexts yet: %#v", list)
	}
	var a, b sandbox.CodeContext
	p.call(t, "POST", "/code/context", sandbox.CreateCodeContextRequest{Language: "bash"}, 200, &a)
	p.call(t, "POST", "/code/context", sandbox.CreateCodeContextRequest{Language: "bash"}, 200, &b)
	p.call(t, "GET", "/code/contexts?language=bash", nil, 200, &list)
	if len(list) != 2 {
		t.Errorf("bash contexts = %+v", list)
	}
	p.call(t, "GET", "/code/contexts?language=python", nil, 200, &list)
	if len(list) != 0 {
		t.Errorf("python contexts = %+v", list)
	}
	var got sandbox.CodeContext
	p.call(t, "GET", "/code/contexts/"+a.ID, nil, 200, &got)
	if got != a {
		t.Errorf("get = %+v, want %+v", got, a)
	}
	p.wantError(t, "GET", "/code/contexts/nope", nil, 404, "CONTEXT_NOT_FOUND")
	p.wantError(t, "DELETE", "/code/contexts/nope", nil, 404, "CONTEXT_NOT_FOUND")
	p.wantError(t, "DELETE", "/code?id=nope", nil, 404, "CONTEXT_NOT_FOUND")
	p.wantError(t, "DELETE", "/code/contexts", nil, 400, "MISSING_QUERY")
	p.wantError(t, "POST", "/code", sandbox.RunCodeRequest{Context: &sandbox.CodeContext{ID: "nope"}, Code: "1"}, 404, "CONTEXT_NOT_FOUND")
	p.wantError(t, "POST", "/code", sandbox.RunCodeRequest{Context: &sandbox.CodeContext{Language: "cobol"}, Code: "1"}, 400, "NOT_SUPPORTED")
	p.call(t, "DELETE", "/code/contexts/"+a.ID, nil, 200, nil)
	p.wantError(t, "GET", "/code/contexts/"+a.ID, nil, 404, "CONTEXT_NOT_FOUND")
	p.call(t, "DELETE", "/code/contexts?language=bash", nil, 200, nil)
	p.call(t, "GET", "/code/contexts", nil, 200, &list)
	if len(list) != 0 {
		t.Errorf("after deleting by language: %+v", list)
	}
}
