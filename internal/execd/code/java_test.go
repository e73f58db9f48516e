package code

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func needJava(t *testing.T) {
	t.Helper()
	var d detector
	env, _ := procenv.Builder{}.Environ(nil)
	if _, err := d.interpreter(langJava, env); err != nil {
		t.Skip("no JDK with jshell here (apt-get install -y default-jdk-headless); Java is covered by test/e2e in the code-interpreter image")
	}
}

func TestJava(t *testing.T) {
	needJava(t)
	h := newHarness(t)
	id := h.create(t, langJava)
	if c := h.run(t, id, "", "int x = 40;"); !c.ok() || len(c.results()) != 0 {
		t.Errorf("int x = 40;: %+v", c.events)
	}
	if c := h.run(t, id, "", "x + 2"); !c.ok() || c.results()[0]["text"] != "42" {
		t.Errorf("x + 2: %+v", c.events)
	}
	c := h.run(t, id, "", "System.out.println(\"hi\");\nSystem.err.print(\"err\");\nSystem.out.print(\"raw\")")
	if !c.ok() || c.stdout() != "hi\nraw" || c.stderr() != "err" || len(c.results()) != 0 {
		t.Errorf("System.out/err: %+v", c.events)
	}
	// Methods, classes and imports persist.
	h.run(t, id, "", "import java.util.*;\nint twice(int n) { return 2 * n; }\nclass Box { int v = 21; }")
	if c := h.run(t, id, "", "List<Integer> l = new ArrayList<>(List.of(twice(new Box().v)));\nl"); !c.ok() || c.results()[0]["text"] != "[42]" {
		t.Errorf("declarations across cells: %+v", c.events)
	}
	if c := h.run(t, id, "", "\"s\" + 1"); !c.ok() || c.results()[0]["text"] != `"s1"` {
		t.Errorf("string result: %+v", c.events)
	}
	// A runtime exception is EvalException, as upstream's IJava names it;
	// the exception's class leads the value and the traceback.
	c = h.run(t, id, "", "Integer.parseInt(\"zz\")")
	if e := c.err(); e == nil || e.Name != "EvalException" || !strings.HasPrefix(e.Value, "java.lang.NumberFormatException: ") || !strings.Contains(e.Value, "zz") ||
		len(e.Traceback) < 2 || !strings.HasPrefix(e.Traceback[0], "java.lang.NumberFormatException") {
		t.Errorf("exception: %+v %+v", c.events, c.err())
	}
	c = h.run(t, id, "", "int z = 10 / 0; // ArithmeticException")
	if e := c.err(); e == nil || e.Name != "EvalException" || e.Value != "java.lang.ArithmeticException: / by zero" {
		t.Errorf("10 / 0: %+v %+v", c.events, c.err())
	}
	c = h.run(t, id, "", "System.out.println(\"before\");\nint y = \"s\";\nSystem.out.println(\"after\");")
	if e := c.err(); e == nil || e.Name != "CompilationError" || !strings.Contains(e.Value, "incompatible types") || c.stdout() != "before\n" {
		t.Errorf("compile error: %+v", c.events)
	}

	// Interrupt stops the cell in place (JShell.stop): the state stays.
	done := make(chan cell)
	marker := t.TempDir() + "/looping"
	go func() {
		done <- h.run(t, id, "", "new java.io.File("+strconv.Quote(marker)+").createNewFile();\nwhile (true) {}")
	}()
	h.interruptWhen(t, id, marker)
	select {
	case c = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("while (true) {} not interrupted within 10 s")
	}
	if e := c.err(); e == nil || e.Name != sandbox.ErrNameInterrupted {
		t.Errorf("interrupted loop: %+v", c.events)
	}
	if c := h.run(t, id, "", "x"); !c.ok() || c.results()[0]["text"] != "40" {
		t.Errorf("after interrupt: %+v %+v, want the state kept (40)", c.events, c.err())
	}

	// System.exit kills the execution engine: KernelDied, then a fresh context.
	c = h.run(t, id, "", "System.exit(1);")
	if e := c.err(); e == nil || e.Name != sandbox.ErrNameKernelDied {
		t.Errorf("System.exit: %+v", c.events)
	}
	if c := h.run(t, id, "", "1 + 1"); !c.ok() || c.results()[0]["text"] != "2" {
		t.Errorf("after System.exit: %+v", c.events)
	}
}
