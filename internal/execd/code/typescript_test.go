package code

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func needTypeScript(t *testing.T) {
	t.Helper()
	var d detector
	env, _ := procenv.Builder{}.Environ(nil)
	if _, err := d.interpreter(langTypeScript, env); err != nil {
		t.Skipf("TypeScript not available here (apt-get install -y node-typescript): %v", err)
	}
}

func TestTypeScript(t *testing.T) {
	needTypeScript(t)
	h := newHarness(t)
	id := h.create(t, langTypeScript)
	// upstream's example
	c := h.run(t, id, "", "console.log('Hello from TypeScript!');\nconst result: number = 2 + 2;\nresult")
	if !c.ok() || c.stdout() != "Hello from TypeScript!\n" || len(c.results()) != 1 || c.results()[0]["text"] != "4" {
		t.Fatalf("hello: %+v %+v", c.events, c.err())
	}
	// State persists: values, functions, classes, enums; types are erased.
	h.run(t, id, "", "interface P { n: number }\nenum Color { Red, Green }\nfunction twice(p: P): number { return 2 * p.n }\nclass Box<T> { constructor(public v: T) {} }\nlet count: number = 1")
	c = h.run(t, id, "", "count += result;\n`${twice({ n: count })} ${Color.Green} ${new Box<string>('b').v}`")
	if !c.ok() || c.results()[0]["text"] != "'10 1 b'" {
		t.Errorf("state across cells: %+v %+v", c.events, c.err())
	}
	// Imports are kept under their names and may be repeated.
	h.run(t, id, "", "import * as path from 'path'\nimport fs from 'fs'\nimport { join as j } from 'path'")
	c = h.run(t, id, "", "import * as path from 'path'\n[path.basename('/a/b.ts'), fs.existsSync('/'), j('x', 'y')].join(' ')")
	if !c.ok() || c.results()[0]["text"] != "'b.ts true x/y'" {
		t.Errorf("imports: %+v %+v", c.events, c.err())
	}
	c = h.run(t, id, "", "const v: number = await Promise.resolve(3); console.log(v)")
	if !c.ok() || c.stdout() != "3\n" {
		t.Errorf("top-level await: %+v %+v", c.events, c.err())
	}
	c = h.run(t, id, "", "let x: = 1")
	if e := c.err(); e == nil || e.Name != "SyntaxError" || e.Value != "Type expected." || len(e.Traceback) == 0 || !strings.Contains(e.Traceback[0], "TS1110") {
		t.Errorf("syntax error: %+v %+v", c.events, c.err())
	}
	c = h.run(t, id, "", "throw new RangeError('bad ' + count)")
	if e := c.err(); e == nil || e.Name != "RangeError" || e.Value != "bad 5" {
		t.Errorf("throw: %+v %+v", c.events, c.err())
	}
	for i := range interruptAtInitRounds {
		c := h.runInterruptAtInit(t, id, "while (true) {}", 5*time.Second)
		if e := c.err(); e == nil || e.Name != sandbox.ErrNameInterrupted {
			t.Fatalf("interrupt round %d: %+v", i, c.events)
		}
	}
	if c := h.run(t, id, "", "const n: number = 6 * 7; n"); !c.ok() || c.results()[0]["text"] != "42" {
		t.Errorf("after interrupts: %+v %+v", c.events, c.err())
	}
}

// TestTypeScriptMissing: without the typescript module the language is
// refused with a reason, and not listed as available.
func TestTypeScriptMissing(t *testing.T) {
	need(t, sandbox.LanguageJavaScript)
	h := newHarnessEnv(t, procenv.Builder{Base: append(os.Environ(), "EXECD_TYPESCRIPT=/nonexistent/typescript")})
	var er sandbox.ErrorResponse
	h.call(t, "POST", "/code/context", sandbox.CreateCodeContextRequest{Language: langTypeScript}, 400, &er)
	if er.Code != "NOT_SUPPORTED" || !strings.Contains(er.Message, "node-typescript") || !strings.Contains(er.Message, "javascript") {
		t.Errorf("typescript without its module: %+v", er)
	}
	if _, avail, _ := strings.Cut(er.Message, "available: "); strings.Contains(avail, "typescript") {
		t.Errorf("typescript listed as available: %q", er.Message)
	}
	h.call(t, "POST", "/code", sandbox.RunCodeRequest{Context: &sandbox.CodeContext{Language: langTypeScript}, Code: "1"}, 400, &er)
	if er.Code != "NOT_SUPPORTED" {
		t.Errorf("run in a default typescript context: %+v", er)
	}
}
