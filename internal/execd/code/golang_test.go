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

func needGo(t *testing.T) {
	t.Helper()
	var d detector
	env, _ := procenv.Builder{}.Environ(nil)
	if _, err := d.interpreter(langGo, env); err != nil {
		t.Skip("no go toolchain in PATH (apt-get install -y golang-go); Go is covered by test/e2e in the code-interpreter image")
	}
}

func TestGo(t *testing.T) {
	needGo(t)
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

// TestGoPrograms: a cell written as a Go program (package clause or not,
// imports, declarations, func main) runs its main; its other declarations
// are kept; statements cells keep working beside such cells.
func TestGoPrograms(t *testing.T) {
	c, err := parseGoCell("package main\nimport \"fmt\"\nfunc main() { fmt.Print(\"hi\") }")
	if err != nil || !c.run || c.imports["fmt"] != "" || strings.TrimSpace(c.body) != `fmt.Print("hi")` || len(c.decls) != 0 {
		t.Errorf("program cell: %+v %v", c, err)
	}
	if _, err := parseGoCell("package other\nfunc F() {}"); err == nil || !strings.Contains(err.Error(), "package main") {
		t.Errorf("package other: %v", err)
	}
	if _, err := parseGoCell("package main\nfunc main() {\n\tx := \n}"); err == nil || !strings.HasPrefix(err.Error(), "cell:4:") {
		t.Errorf("syntax error in a program cell: %v, want it at cell:4", err)
	}

	needGo(t)
	h := newHarness(t)
	id := h.create(t, langGo)
	if c := h.run(t, id, "", "x := 1\n_ = x"); !c.ok() {
		t.Errorf("statements: %+v %+v", c.events, c.err())
	}
	// upstream's examples, verbatim
	r := h.run(t, id, "", "package main\nimport \"fmt\"\nfunc main() {\n    fmt.Print(\"Hello from Go!\")\n    result := 2 + 2\n    fmt.Print(\"2 + 2 =\", result)\n}")
	if !r.ok() || r.stdout() != "Hello from Go!2 + 2 =4" {
		t.Errorf("program: %+v %+v", r.events, r.err())
	}
	r = h.run(t, id, "", "package main\nimport \"fmt\"\nfunc calculate(numbers []int) int {\n    sum := 0\n    for _, num := range numbers {\n        sum += num\n    }\n    return sum\n}\nfunc main() {\n    numbers := []int{1, 2, 3, 4, 5}\n    sum := calculate(numbers)\n    fmt.Print(\"Numbers:\", numbers)\n    fmt.Print(\"Sum:\", sum)\n}")
	if !r.ok() || r.stdout() != "Numbers:[1 2 3 4 5]Sum:15" {
		t.Errorf("program with a function: %+v %+v", r.events, r.err())
	}
	r = h.run(t, id, "", "package main\nfunc main() {\n    undeclaredVariable++  // This will cause compilation error\n}")
	if e := r.err(); e == nil || e.Name != "CompilationError" || !strings.Contains(e.Value, "undeclaredVariable") {
		t.Errorf("program that does not compile: %+v %+v", r.events, r.err())
	}
	// No package clause: still a program; the earlier cell's function is
	// kept, and a statements cell can call it.
	r = h.run(t, id, "", "import \"fmt\"\nfunc main() { fmt.Println(calculate([]int{40, 2})) }")
	if !r.ok() || r.stdout() != "42\n" {
		t.Errorf("program without package clause: %+v %+v", r.events, r.err())
	}
	if r := h.run(t, id, "", "import \"fmt\"\nfmt.Println(calculate([]int{1, 1}))"); !r.ok() || r.stdout() != "2\n" {
		t.Errorf("statements after programs: %+v %+v", r.events, r.err())
	}
	// A program's main is not kept: a declarations cell after it builds.
	if r := h.run(t, id, "", "func twice(n int) int { return 2 * n }"); !r.ok() {
		t.Errorf("declarations after programs: %+v %+v", r.events, r.err())
	}
}
