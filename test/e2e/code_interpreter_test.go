package e2e

import (
	"bytes"
	"context"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// The TestCodeInterpreter* tests run code through the real server, execd
// and the opensandbox/code-interpreter image: with the SDK, with `osb code
// run` and with the MCP server's code_run tool.

var (
	codeImageOnce sync.Once
	codeImageErr  error
	codeImageOut  []byte
)

// ensureCodeInterpreterImage builds opensandbox/code-interpreter from its
// recipe when it changed (a no-op otherwise), once per test binary, and
// returns its name. It skips the test unless OSB_E2E is set.
func ensureCodeInterpreterImage(t *testing.T) string {
	t.Helper()
	binPath(t, "opensandbox-server") // skips unless OSB_E2E=1
	codeImageOnce.Do(func() {
		cmd := osexec.Command("bash", openapitest.RepoPath("images/build.sh"), "code-interpreter")
		codeImageOut, codeImageErr = cmd.CombinedOutput()
	})
	if codeImageErr != nil {
		t.Fatalf("images/build.sh code-interpreter: %v\n%s", codeImageErr, codeImageOut)
	}
	return sandbox.DefaultCodeInterpreterImage
}

// codeSandbox creates a code-interpreter sandbox on s and kills it at the end.
func codeSandbox(t *testing.T, c *sandbox.Client) *sandbox.CodeInterpreter {
	t.Helper()
	ensureCodeInterpreterImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ci, err := c.CreateCodeInterpreter(ctx, sandbox.CreateOptions{
		Resources:    map[string]string{"cpu": "1", "memory": "1Gi"},
		ReadyTimeout: time.Minute,
	})
	if err != nil {
		t.Fatalf("CreateCodeInterpreter: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ci.Kill(ctx); err != nil && !sandbox.IsNotFound(err) {
			t.Errorf("Kill %s: %v", ci.ID(), err)
		}
	})
	return ci
}

// codeCtx bounds one step: kernels start in a few seconds, Java's in more.
func codeCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// runCode runs code and fails the test on a transport or API error.
func runCode(t *testing.T, ci *sandbox.CodeInterpreter, code string, opts sandbox.CodeRunOptions) *sandbox.CodeExecution {
	t.Helper()
	ex, err := ci.Run(codeCtx(t), code, opts)
	if err != nil {
		t.Fatalf("Run(%q): %v", code, err)
	}
	return ex
}

// runOK runs code that must not raise.
func runOK(t *testing.T, ci *sandbox.CodeInterpreter, code string, opts sandbox.CodeRunOptions) *sandbox.CodeExecution {
	t.Helper()
	ex := runCode(t, ci, code, opts)
	if ex.Error != nil {
		t.Fatalf("Run(%q) raised %s: %s\n%s\nstdout %q stderr %q", code, ex.Error.Name, ex.Error.Value, strings.Join(ex.Error.Traceback, "\n"), ex.StdoutText(), ex.StderrText())
	}
	return ex
}

func newContext(t *testing.T, ci *sandbox.CodeInterpreter, language string) string {
	t.Helper()
	cc, err := ci.CreateContext(codeCtx(t), language, "")
	if err != nil {
		t.Fatalf("CreateContext(%s): %v", language, err)
	}
	if cc.ID == "" || cc.Language != language {
		t.Fatalf("CreateContext(%s) = %+v", language, cc)
	}
	return cc.ID
}

func TestCodeInterpreterSDK(t *testing.T) {
	t.Parallel()
	ensureCodeInterpreterImage(t)
	s := startServer(t, serverOpts{})
	ci := codeSandbox(t, sdkClient(t, s, false))

	t.Run("expression and stdout", func(t *testing.T) {
		ex := runOK(t, ci, "2 + 2", sandbox.CodeRunOptions{})
		if ex.Text() != "4" || len(ex.Results) != 1 || ex.ContextID == "" || ex.ExecutionCount < 1 {
			t.Errorf("2 + 2 = %+v (text %q), want one result \"4\" in a context with an execution count", ex, ex.Text())
		}
		ex = runOK(t, ci, `print("a"); print("b")`, sandbox.CodeRunOptions{})
		if got := ex.StdoutText(); got != "a\nb\n" || len(ex.Results) != 0 {
			t.Errorf(`print("a"); print("b") stdout = %q, results %v; want "a\nb\n" and no result`, got, ex.Results)
		}
		var streamed strings.Builder
		runOK(t, ci, `import sys; print("to stderr", file=sys.stderr)`, sandbox.CodeRunOptions{Handlers: &sandbox.CodeHandlers{
			OnStderr: func(l sandbox.OutputLine) { streamed.WriteString(l.Text) },
		}})
		if streamed.String() != "to stderr\n" {
			t.Errorf("stderr handler saw %q, want \"to stderr\\n\"", streamed.String())
		}
	})

	t.Run("state carries over; contexts are separate", func(t *testing.T) {
		a, b := newContext(t, ci, "python"), newContext(t, ci, "python")
		runOK(t, ci, "x = 41", sandbox.CodeRunOptions{ContextID: a})
		if ex := runOK(t, ci, "x + 1", sandbox.CodeRunOptions{ContextID: a}); ex.Text() != "42" || ex.ContextID != a {
			t.Errorf("x + 1 in context a = %q (context %s), want 42 in %s", ex.Text(), ex.ContextID, a)
		}
		ex := runCode(t, ci, "x", sandbox.CodeRunOptions{ContextID: b})
		if ex.Error == nil || ex.Error.Name != "NameError" {
			t.Errorf("x in context b = %+v, want a NameError (contexts must not share state)", ex)
		}
		list, err := ci.ListContexts(codeCtx(t), "python")
		if err != nil {
			t.Fatalf("ListContexts: %v", err)
		}
		var ids []string
		for _, c := range list {
			ids = append(ids, c.ID)
		}
		if !strings.Contains(strings.Join(ids, ","), a) || !strings.Contains(strings.Join(ids, ","), b) {
			t.Errorf("ListContexts(python) = %v, want %s and %s among them", ids, a, b)
		}
		if got, err := ci.GetContext(codeCtx(t), a); err != nil || got.ID != a || got.Language != "python" {
			t.Errorf("GetContext(%s) = %+v, %v", a, got, err)
		}
		if err := ci.DeleteContext(codeCtx(t), b); err != nil {
			t.Fatalf("DeleteContext: %v", err)
		}
		if _, err := ci.GetContext(codeCtx(t), b); !sandbox.IsNotFound(err) {
			t.Errorf("GetContext after DeleteContext = %v, want not found", err)
		}
		if _, err := ci.Run(codeCtx(t), "1", sandbox.CodeRunOptions{ContextID: b}); !sandbox.IsNotFound(err) {
			t.Errorf("Run in a deleted context = %v, want not found", err)
		}
	})

	t.Run("matplotlib plot is an image/png result", func(t *testing.T) {
		ex := runOK(t, ci, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()", sandbox.CodeRunOptions{})
		var found bool
		for _, r := range ex.Results {
			if png, ok := r.PNG(); ok {
				found = true
				if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
					t.Errorf("image/png result: %d bytes starting %q, want a PNG", len(png), png[:min(8, len(png))])
				}
			}
		}
		if !found {
			var types [][]string
			for _, r := range ex.Results {
				types = append(types, r.MIMETypes())
			}
			t.Errorf("plt.show() results have MIME types %v (stdout %q, stderr %q), want an image/png", types, ex.StdoutText(), ex.StderrText())
		}
	})

	t.Run("interrupt", func(t *testing.T) {
		id := newContext(t, ci, "python")
		runOK(t, ci, "counter = 7", sandbox.CodeRunOptions{ContextID: id})
		started := make(chan struct{})
		type result struct {
			ex  *sandbox.CodeExecution
			err error
			at  time.Time
		}
		done := make(chan result, 1)
		go func() {
			var once sync.Once
			ex, err := ci.Run(codeCtx(t), "print('spinning', flush=True)\nwhile True: pass", sandbox.CodeRunOptions{
				ContextID: id,
				Handlers:  &sandbox.CodeHandlers{OnStdout: func(sandbox.OutputLine) { once.Do(func() { close(started) }) }},
			})
			done <- result{ex, err, time.Now()}
		}()
		select {
		case <-started:
		case r := <-done:
			t.Fatalf("the loop ended before it was interrupted: %+v, %v", r.ex, r.err)
		case <-time.After(60 * time.Second):
			t.Fatal("the loop never printed that it started")
		}
		t0 := time.Now()
		if err := ci.Interrupt(codeCtx(t), id); err != nil {
			t.Fatalf("Interrupt: %v", err)
		}
		var r result
		select {
		case r = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the run did not end within 30s of Interrupt")
		}
		if took := r.at.Sub(t0); took > 2*time.Second {
			t.Errorf("the stream ended %v after Interrupt, want <= 2s", took)
		} else {
			t.Logf("interrupt to end of stream: %v", took)
		}
		if r.err != nil || r.ex.Error == nil || r.ex.Error.Name != "KeyboardInterrupt" {
			t.Errorf("interrupted run = %+v, %v; want a KeyboardInterrupt error", r.ex, r.err)
		}
		if ex := runOK(t, ci, "counter + 1", sandbox.CodeRunOptions{ContextID: id}); ex.Text() != "8" {
			t.Errorf("after the interrupt, counter + 1 = %q, want 8 (the context keeps its state)", ex.Text())
		}
	})

	t.Run("kernel death", func(t *testing.T) {
		id := newContext(t, ci, "python")
		ex := runCode(t, ci, "import os; os._exit(1)", sandbox.CodeRunOptions{ContextID: id})
		if ex.Error == nil {
			t.Errorf("os._exit(1) = %+v, want an error", ex)
		} else {
			t.Logf("os._exit(1): %s: %s", ex.Error.Name, ex.Error.Value)
		}
		if ex := runOK(t, ci, "1 + 1", sandbox.CodeRunOptions{ContextID: id}); ex.Text() != "2" {
			t.Errorf("after the kernel died, 1 + 1 = %q, want 2", ex.Text())
		}
	})

	t.Run("syntax error", func(t *testing.T) {
		ex := runCode(t, ci, "def f(:\n    pass", sandbox.CodeRunOptions{})
		if ex.Error == nil || ex.Error.Name != "SyntaxError" || ex.Error.Value == "" || len(ex.Error.Traceback) == 0 {
			t.Errorf("syntax error = %+v, want SyntaxError with evalue and traceback", ex.Error)
		}
	})

	t.Run("javascript keeps state", func(t *testing.T) {
		id := newContext(t, ci, "javascript")
		runOK(t, ci, "var z = 20;", sandbox.CodeRunOptions{ContextID: id})
		ex := runOK(t, ci, "console.log(z + 1);", sandbox.CodeRunOptions{ContextID: id})
		if ex.StdoutText() != "21\n" {
			t.Errorf("console.log(z + 1) stdout = %q, want \"21\\n\"", ex.StdoutText())
		}
		if ex := runOK(t, ci, "z * 2", sandbox.CodeRunOptions{ContextID: id}); ex.Text() != "40" {
			t.Errorf("z * 2 = %q, want 40", ex.Text())
		}
		if ex := runCode(t, ci, "throw new TypeError('bad')", sandbox.CodeRunOptions{ContextID: id}); ex.Error == nil || ex.Error.Name != "TypeError" {
			t.Errorf("throw TypeError = %+v, want a TypeError", ex.Error)
		}
	})

	t.Run("java keeps state", func(t *testing.T) {
		id := newContext(t, ci, "java")
		runOK(t, ci, "int x = 40;", sandbox.CodeRunOptions{ContextID: id})
		if ex := runOK(t, ci, "x + 2", sandbox.CodeRunOptions{ContextID: id}); !strings.Contains(ex.Text(), "42") {
			t.Errorf("x + 2 = %q, want 42", ex.Text())
		}
		ex := runOK(t, ci, "String twice(String s) { return s + s; }\nSystem.out.println(twice(\"ab\"));", sandbox.CodeRunOptions{ContextID: id})
		if ex.StdoutText() != "abab\n" {
			t.Errorf("System.out.println stdout = %q, want \"abab\\n\"", ex.StdoutText())
		}
		ex = runCode(t, ci, "Object o = null;\no.toString();", sandbox.CodeRunOptions{ContextID: id})
		if ex.Error == nil || ex.Error.Name != "EvalException" || !strings.HasPrefix(ex.Error.Value, "java.lang.NullPointerException") || len(ex.Error.Traceback) == 0 {
			t.Errorf("NPE = %+v, want EvalException with java.lang.NullPointerException in its value", ex.Error)
		}
		ex = runCode(t, ci, "int y = \"s\";", sandbox.CodeRunOptions{ContextID: id})
		if ex.Error == nil || ex.Error.Name != "CompilationError" {
			t.Errorf("compile error = %+v, want CompilationError", ex.Error)
		}
		if ex := runOK(t, ci, "twice(\"c\") + x", sandbox.CodeRunOptions{ContextID: id}); ex.Text() != `"cc40"` {
			t.Errorf("state after errors = %q, want \"cc40\"", ex.Text())
		}
	})

	t.Run("go keeps declarations", func(t *testing.T) {
		id := newContext(t, ci, "go")
		runOK(t, ci, "import \"strings\"\n\nfunc shout(s string) string { return strings.ToUpper(s) + \"!\" }", sandbox.CodeRunOptions{ContextID: id})
		ex := runOK(t, ci, "import \"fmt\"\nfmt.Println(shout(\"hi\"), 40+2)", sandbox.CodeRunOptions{ContextID: id})
		if ex.StdoutText() != "HI! 42\n" {
			t.Errorf("fmt.Println stdout = %q, want \"HI! 42\\n\"", ex.StdoutText())
		}
		ex = runCode(t, ci, "fmt.Println(undefinedThing)", sandbox.CodeRunOptions{ContextID: id})
		if ex.Error == nil || ex.Error.Name != "CompilationError" || !strings.Contains(ex.Error.Value, "undefinedThing") {
			t.Errorf("compile error = %+v, want CompilationError naming undefinedThing", ex.Error)
		}
		ex = runCode(t, ci, "panic(\"boom\")", sandbox.CodeRunOptions{ContextID: id})
		if ex.Error == nil || ex.Error.Name != "panic" || ex.Error.Value != "boom" {
			t.Errorf("panic = %+v, want panic boom", ex.Error)
		}
	})

	// What upstream's suites and multi-language example run and check.
	t.Run("upstream cells", func(t *testing.T) {
		java := newContext(t, ci, "java")
		ex := runCode(t, ci, "int x = 10 / 0; // ArithmeticException", sandbox.CodeRunOptions{ContextID: java})
		if ex.Error == nil || ex.Error.Name != "EvalException" || !strings.Contains(ex.Error.Value, "java.lang.ArithmeticException") {
			t.Errorf("10 / 0 = %+v, want EvalException naming java.lang.ArithmeticException", ex.Error)
		}
		gc := newContext(t, ci, "go")
		ex = runOK(t, ci, "package main\nimport \"fmt\"\nfunc main() {\n    fmt.Println(\"Hello from Go!\")\n    sum := 3 + 4\n    fmt.Println(\"3 + 4 =\", sum)\n}", sandbox.CodeRunOptions{ContextID: gc})
		if ex.StdoutText() != "Hello from Go!\n3 + 4 = 7\n" {
			t.Errorf("go program stdout = %q", ex.StdoutText())
		}
		if !imageRecipeHas(t, "node-typescript") {
			t.Log("the image recipe has no node-typescript: typescript not checked")
		} else {
			ts := newContext(t, ci, "typescript")
			ex = runOK(t, ci, "console.log('Hello from TypeScript!');\nconst nums: number[] = [1, 2, 3];\nconsole.log('sum =', nums.reduce((a, b) => a + b, 0));", sandbox.CodeRunOptions{ContextID: ts})
			if ex.StdoutText() != "Hello from TypeScript!\nsum = 6\n" {
				t.Errorf("typescript stdout = %q", ex.StdoutText())
			}
			if ex := runOK(t, ci, "const result: number = 2 + 2;\nresult", sandbox.CodeRunOptions{ContextID: ts}); ex.Text() != "4" {
				t.Errorf("typescript result = %q, want 4", ex.Text())
			}
		}
		// Interrupt as soon as init arrives, as upstream's suites do.
		py := newContext(t, ci, "python")
		runOK(t, ci, "kept = 7", sandbox.CodeRunOptions{ContextID: py})
		for i := range 10 {
			var t0 time.Time
			ex, err := ci.Run(codeCtx(t), "import time\nfor i in range(100):\n  print(i)\n  time.sleep(0.2)", sandbox.CodeRunOptions{
				ContextID: py,
				Handlers: &sandbox.CodeHandlers{OnInit: func(id string) {
					t0 = time.Now()
					if err := ci.Interrupt(codeCtx(t), id); err != nil {
						t.Errorf("Interrupt: %v", err)
					}
				}},
			})
			if err != nil || ex.Error == nil || ex.Error.Name != "KeyboardInterrupt" {
				t.Fatalf("round %d: %+v, %v; want a KeyboardInterrupt", i, ex, err)
			}
			if took := time.Since(t0); took > 3*time.Second {
				t.Errorf("round %d: the stream ended %v after the interrupt", i, took)
			}
		}
		if ex := runOK(t, ci, "kept", sandbox.CodeRunOptions{ContextID: py}); ex.Text() != "7" {
			t.Errorf("after the interrupts kept = %q, want 7", ex.Text())
		}
	})

	t.Run("bash keeps state", func(t *testing.T) {
		id := newContext(t, ci, "bash")
		runOK(t, ci, "export Q=7; cd /tmp", sandbox.CodeRunOptions{ContextID: id})
		if ex := runOK(t, ci, "echo $Q; pwd", sandbox.CodeRunOptions{ContextID: id}); ex.StdoutText() != "7\n/tmp\n" {
			t.Errorf("echo $Q; pwd = %q, want \"7\\n/tmp\\n\"", ex.StdoutText())
		}
		if ex := runCode(t, ci, "false", sandbox.CodeRunOptions{ContextID: id}); ex.Error == nil {
			t.Errorf("false in bash = %+v, want an error", ex)
		}
	})
}

func TestCodeInterpreterCLI(t *testing.T) {
	t.Parallel()
	ensureCodeInterpreterImage(t)
	cli := newCLI(t)
	ci := codeSandbox(t, sdkClient(t, cli.srv, false))
	id := ci.ID()

	if out := cli.ok("print('hi')\n2 + 2\n", "code", "run", id); out != "hi\n4\n" {
		t.Errorf("osb code run (stdin) stdout = %q, want \"hi\\n4\\n\"", out)
	}
	ctxID := strings.TrimSpace(cli.ok("", "code", "context", "create", id, "-l", "python"))
	cli.ok("v = 'kept'", "code", "run", id, "--context", ctxID, "-")
	file := filepath.Join(t.TempDir(), "cell.py")
	if err := os.WriteFile(file, []byte("print(v)"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := cli.ok("", "code", "run", id, "-c", ctxID, file); out != "kept\n" {
		t.Errorf("osb code run FILE in a context = %q, want \"kept\\n\"", out)
	}
	if out := cli.ok("", "code", "context", "list", id, "-l", "python"); !strings.Contains(out, ctxID) {
		t.Errorf("osb code context list = %q, want %s in it", out, ctxID)
	}

	r := cli.run("print('before')\n1/0\n", nil, "code", "run", id)
	if r.code != 1 || r.stdout != "before\n" || !strings.Contains(r.stderr, "ZeroDivisionError: division by zero") ||
		!strings.Contains(r.stderr, "Traceback") && !strings.Contains(r.stderr, "----") {
		t.Errorf("osb code run 1/0: exit %d, stdout %q, stderr %q; want exit 1, \"before\\n\", a traceback and ZeroDivisionError: division by zero", r.code, r.stdout, r.stderr)
	}

	dir := t.TempDir()
	out := cli.ok("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\n", "code", "run", id, "--save-images", dir)
	files, _ := filepath.Glob(filepath.Join(dir, "*.png"))
	if len(files) != 1 || !strings.Contains(out, "[image/png, ") {
		t.Errorf("osb code run --save-images: stdout %q, files %v; want one PNG saved and reported", out, files)
	}

	if out := cli.ok("echo $((6 * 7))", "code", "run", id, "-l", "bash"); out != "42\n" {
		t.Errorf("osb code run -l bash = %q, want \"42\\n\"", out)
	}
	cli.ok("", "code", "context", "delete", id, ctxID)
	cli.fails(1, "", "code", "context", "get", id, ctxID)
}

func TestCodeInterpreterMCP(t *testing.T) {
	t.Parallel()
	ensureCodeInterpreterImage(t)
	s := startServer(t, serverOpts{})
	ci := codeSandbox(t, sdkClient(t, s, false))
	cs := mcpStdio(t, s)

	type runOut struct {
		ContextID      string `json:"context_id"`
		ExecutionCount int    `json:"execution_count"`
		Stdout         string `json:"stdout"`
		Stderr         string `json:"stderr"`
		Results        []struct {
			Text      string   `json:"text"`
			MIMETypes []string `json:"mime_types"`
		} `json:"results"`
		Error *struct {
			Name      string   `json:"ename"`
			Value     string   `json:"evalue"`
			Traceback []string `json:"traceback"`
		} `json:"error"`
	}
	var created struct {
		ContextID string `json:"context_id"`
	}
	mcpCall(t, cs, "code_context_create", map[string]any{"sandbox_id": ci.ID(), "connect_if_missing": true}, &created)
	if created.ContextID == "" {
		t.Fatal("code_context_create returned no context_id")
	}
	var out runOut
	mcpCall(t, cs, "code_run", map[string]any{"sandbox_id": ci.ID(), "code": "n = 21\nprint('set')", "context_id": created.ContextID}, &out)
	if out.ContextID != created.ContextID || out.Stdout != "set\n" || out.Error != nil {
		t.Errorf("code_run(n = 21) = %+v", out)
	}
	out = runOut{}
	mcpCall(t, cs, "code_run", map[string]any{"sandbox_id": ci.ID(), "code": "n * 2", "context_id": created.ContextID}, &out)
	if len(out.Results) != 1 || out.Results[0].Text != "42" || len(out.Results[0].MIMETypes) == 0 || out.ExecutionCount < 2 {
		t.Errorf("code_run(n * 2) = %+v, want one result \"42\"", out)
	}
	out = runOut{}
	mcpCall(t, cs, "code_run", map[string]any{"sandbox_id": ci.ID(), "code": "undefined_name"}, &out)
	if out.Error == nil || out.Error.Name != "NameError" || len(out.Error.Traceback) == 0 {
		t.Errorf("code_run(undefined_name) = %+v, want a NameError with a traceback", out)
	}
	out = runOut{}
	mcpCall(t, cs, "code_run", map[string]any{"sandbox_id": ci.ID(), "code": "console.log('js')", "language": "javascript"}, &out)
	if out.Stdout != "js\n" || out.Error != nil {
		t.Errorf("code_run(javascript) = %+v", out)
	}
	var list struct {
		Contexts []struct {
			ContextID string `json:"context_id"`
		} `json:"contexts"`
	}
	mcpCall(t, cs, "code_context_list", map[string]any{"sandbox_id": ci.ID(), "language": "python"}, &list)
	if !strings.Contains(func() string {
		var ids []string
		for _, c := range list.Contexts {
			ids = append(ids, c.ContextID)
		}
		return strings.Join(ids, ",")
	}(), created.ContextID) {
		t.Errorf("code_context_list = %+v, want %s in it", list, created.ContextID)
	}
	mcpCall(t, cs, "code_context_delete", map[string]any{"sandbox_id": ci.ID(), "context_id": created.ContextID}, nil)
	if res := mcpCallRaw(t, cs, "code_run", map[string]any{"sandbox_id": ci.ID(), "code": "1", "context_id": created.ContextID}); !res.IsError {
		t.Errorf("code_run in a deleted context = %s, want a tool error", mcpText(res))
	}
}

// imageRecipeHas reports whether the code-interpreter image's recipe
// installs the Debian package pkg.
func imageRecipeHas(t *testing.T, pkg string) bool {
	t.Helper()
	b, err := os.ReadFile(openapitest.RepoPath("images/build.sh"))
	if err != nil {
		t.Fatalf("read the image recipe: %v", err)
	}
	return strings.Contains(string(b), pkg)
}
