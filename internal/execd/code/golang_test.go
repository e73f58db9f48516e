package code

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func TestGoCellParsing(t *testing.T) {
	c, err := parseGoCell("import \"fmt\"\nfmt.Println(1)")
	if err != nil || !c.run || c.imports["fmt"] != "" || !strings.Contains(c.body, "fmt.Println") {
		t.Errorf("imports + statements: %+v %v", c, err)
	}
	c, err = parseGoCell("import (\n\t\"strings\"\n)\n// Up upper-cases.\nfunc Up(s string) string { return strings.ToUpper(s) }\ntype T struct{}\nfunc (t *T) M() {}\nvar a, b = 1, 2")
	if err != nil || c.run || len(c.decls) != 4 {
		t.Fatalf("declarations: %+v %v", c, err)
	}
	if got := [][]string{c.decls[0].names, c.decls[2].names, c.decls[3].names}; strings.Join(got[0], ",") != "Up" || got[1][0] != "T.M" || len(got[2]) != 2 {
		t.Errorf("names: %v", got)
	}
	if !strings.HasPrefix(c.decls[0].src, "// Up upper-cases.") {
		t.Errorf("doc comment not kept: %q", c.decls[0].src)
	}
	if _, err := parseGoCell("x := := 1"); err == nil || !strings.HasPrefix(err.Error(), "cell:1:") {
		t.Errorf("syntax error: %v", err)
	}
	if got := importName("math/rand/v2"); got != "rand" {
		t.Errorf("importName = %q", got)
	}
	src := program(nil, map[string]string{"fmt": "", "os": "", "strings": "str"}, "fmt.Println(str.ToUpper(\"a\"))")
	if strings.Contains(src, `"os"`) || !strings.Contains(src, `import str "strings"`) {
		t.Errorf("unused imports kept or aliased dropped:\n%s", src)
	}
}

func TestGo(t *testing.T) {
	var d detector
	env, _ := procenv.Builder{}.Environ(nil)
	if _, err := d.interpreter(langGo, env); err != nil {
		t.Skip("no go toolchain in PATH (apt-get install -y golang-go); Go is covered by test/e2e in the code-interpreter image")
	}
	h := newHarness(t)
	id := h.create(t, langGo)
	if c := h.run(t, id, "", "import \"fmt\"\nfunc add(a, b int) int { return a + b }\ntype P struct{ N int }"); !c.ok() || c.stdout() != "" {
		t.Errorf("declarations: %+v %+v", c.events, c.err())
	}
	c := h.run(t, id, "", "x := add(40, 2)\nfmt.Println(x, P{N: 1})\nfmt.Fprint(os.Stderr, \"err\")")
	if e := c.err(); e == nil || e.Name != "CompilationError" || !strings.Contains(e.Value, "os") {
		t.Errorf("os not imported: %+v", c.events)
	}
	c = h.run(t, id, "", "import \"os\"\nx := add(40, 2)\nfmt.Println(x, P{N: 1})\nfmt.Fprint(os.Stderr, \"err\")")
	if !c.ok() || c.stdout() != "42 {1}\n" || c.stderr() != "err" {
		t.Errorf("statements: %+v %+v", c.events, c.err())
	}
	// A declaration replaces the earlier one of its name.
	h.run(t, id, "", "func add(a, b int) int { return a*10 + b }")
	if c := h.run(t, id, "", "fmt.Println(add(4, 2))"); !c.ok() || c.stdout() != "42\n" {
		t.Errorf("redeclared add: %+v %+v", c.events, c.err())
	}
	// A failing declaration is not kept.
	if c := h.run(t, id, "", "func bad() int { return \"s\" }"); c.err() == nil || c.err().Name != "CompilationError" {
		t.Errorf("bad declaration: %+v", c.events)
	}
	if c := h.run(t, id, "", "fmt.Println(\"still fine\")"); !c.ok() || c.stdout() != "still fine\n" {
		t.Errorf("after a bad declaration: %+v %+v", c.events, c.err())
	}
	c = h.run(t, id, "", "fmt.Println(\"out\")\npanic(\"boom\")")
	if e := c.err(); e == nil || e.Name != "panic" || e.Value != "boom" || c.stdout() != "out\n" {
		t.Errorf("panic: %+v %+v", c.events, c.err())
	}
	c = h.run(t, id, "", "os.Exit(3)")
	if e := c.err(); e == nil || e.Name != "ExitError" || e.Value != "exit status 3" {
		t.Errorf("exit 3: %+v %+v", c.events, c.err())
	}

	done := make(chan cell)
	marker := t.TempDir() + "/looping"
	go func() {
		done <- h.run(t, id, "", "os.WriteFile("+strconv.Quote(marker)+", nil, 0o600)\nfor {}")
	}()
	h.interruptWhen(t, id, marker)
	select {
	case c = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("for {} not interrupted within 5 s")
	}
	if e := c.err(); e == nil || e.Name != sandbox.ErrNameInterrupted {
		t.Errorf("interrupted loop: %+v", c.events)
	}
	if c := h.run(t, id, "", "fmt.Println(add(0, 7))"); !c.ok() || c.stdout() != "7\n" {
		t.Errorf("after interrupt: %+v %+v", c.events, c.err())
	}
}
