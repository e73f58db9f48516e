package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestExecdCodeUpstreamCells runs, through the real execd binary and the
// interpreters of this host, the cells upstream's code-interpreter suites
// and multi-language example send, and checks what those suites check.
func TestExecdCodeUpstreamCells(t *testing.T) {
	p := startExecd(t, execdOpts{})

	t.Run("java runtime error is EvalException", func(t *testing.T) {
		codeLanguages(t, p, "java")
		var c sandbox.CodeContext
		p.call(t, "POST", "/code/context", sandbox.CreateCodeContextRequest{Language: "java"}, 200, &c)
		ex := codeRun(t, p, c.ID, "", "System.out.println(\"Hello from Java!\");\nint result = 2 + 3;\nSystem.out.println(\"2 + 3 = \" + result);\nresult")
		if strings.Join(ex.stdout, "") != "Hello from Java!\n2 + 3 = 5\n" || joined(resultTexts(ex)) != "5" {
			t.Errorf("java example: %+v", ex.events)
		}
		last := lastEvent(codeRun(t, p, c.ID, "", "int x = 10 / 0; // ArithmeticException"))
		if last.Type != sandbox.EventError || last.Error.Name != "EvalException" || last.Error.Value != "java.lang.ArithmeticException: / by zero" ||
			len(last.Error.Traceback) == 0 || !strings.HasPrefix(last.Error.Traceback[0], "java.lang.ArithmeticException") {
			t.Errorf("10 / 0 ended with %+v, want EvalException naming java.lang.ArithmeticException", last)
		}
	})

	t.Run("go cells that are programs", func(t *testing.T) {
		codeLanguages(t, p, "go")
		var c sandbox.CodeContext
		p.call(t, "POST", "/code/context", sandbox.CreateCodeContextRequest{Language: "go"}, 200, &c)
		// The first build in a context compiles the packages it uses:
		// slow on a busy machine.
		ex := codeRunWithin(t, p, c.ID, 5*time.Minute, "package main\nimport \"fmt\"\nfunc main() {\n    fmt.Println(\"Hello from Go!\")\n    sum := 3 + 4\n    fmt.Println(\"3 + 4 =\", sum)\n}")
		if last := lastEvent(ex); last.Type != sandbox.EventExecutionComplete || strings.Join(ex.stdout, "") != "Hello from Go!\n3 + 4 = 7\n" {
			t.Errorf("go program: %+v", ex.events)
		}
		ex = codeRun(t, p, c.ID, "", "package main\nimport \"fmt\"\nfunc main(){ for i:=0;i<3;i++{ fmt.Print(i) } }")
		if last := lastEvent(ex); last.Type != sandbox.EventExecutionComplete || strings.Join(ex.stdout, "") != "012" {
			t.Errorf("go loop program: %+v", ex.events)
		}
		if last := lastEvent(codeRun(t, p, c.ID, "", "package main\nfunc main() {\n    undeclaredVariable++\n}")); last.Type != sandbox.EventError || last.Error.Name != "CompilationError" {
			t.Errorf("go program that does not compile ended with %+v", last)
		}
	})

	t.Run("typescript", func(t *testing.T) {
		codeLanguages(t, p, "typescript")
		var c sandbox.CodeContext
		p.call(t, "POST", "/code/context", sandbox.CreateCodeContextRequest{Language: "typescript"}, 200, &c)
		if c.Language != "typescript" {
			t.Errorf("context = %+v", c)
		}
		ex := codeRun(t, p, c.ID, "", "console.log('Hello from TypeScript!');\nconst nums: number[] = [1, 2, 3];\nconsole.log('sum =', nums.reduce((a, b) => a + b, 0));")
		if last := lastEvent(ex); last.Type != sandbox.EventExecutionComplete || strings.Join(ex.stdout, "") != "Hello from TypeScript!\nsum = 6\n" {
			t.Errorf("typescript example: %+v", ex.events)
		}
		if ex := codeRun(t, p, c.ID, "", "nums.length as number"); joined(resultTexts(ex)) != "3" {
			t.Errorf("state across cells: %+v", ex.events)
		}
	})

	t.Run("python interrupt at init", func(t *testing.T) {
		codeLanguages(t, p, "python")
		var c sandbox.CodeContext
		p.call(t, "POST", "/code/context", sandbox.CreateCodeContextRequest{Language: "python"}, 200, &c)
		codeRun(t, p, c.ID, "", "kept = 7")
		for i := range 20 {
			last := interruptAtInit(t, p, c.ID, "import time\nfor i in range(100):\n  print(i)\n  time.sleep(0.2)", 3*time.Second)
			if last.Type != sandbox.EventError || last.Error.Name != "KeyboardInterrupt" {
				t.Fatalf("round %d ended with %+v, want KeyboardInterrupt", i, last)
			}
		}
		if ex := codeRun(t, p, c.ID, "", "kept"); joined(resultTexts(ex)) != "7" {
			t.Errorf("after the interrupts: %+v, want the state kept", ex.events)
		}
	})
}

// interruptAtInit runs code in context id, interrupts it (DELETE
// /code?id=) as soon as the init event arrives, and returns the last event;
// it fails the test unless the stream ends within bound of the interrupt.
func interruptAtInit(t *testing.T, p *execdProc, id, code string, bound time.Duration) sandbox.StreamEvent {
	t.Helper()
	b, _ := json.Marshal(sandbox.RunCodeRequest{Code: code, Context: &sandbox.CodeContext{ID: id}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := p.do(ctx, http.MethodPost, "/code", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST /code: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST /code = %d", resp.StatusCode)
	}
	er := sandbox.NewEventReader(resp.Body)
	var (
		last  sandbox.StreamEvent
		timer *time.Timer
	)
	for {
		ev, err := er.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading the stream (it must end within %v of the interrupt): %v", bound, err)
		}
		if ev.Type == sandbox.EventPing {
			continue
		}
		last = ev
		if ev.Type == sandbox.EventInit {
			p.call(t, "DELETE", "/code?id="+id, nil, 200, nil)
			// Past the bound the request is cancelled and Next fails.
			timer = time.AfterFunc(bound, cancel)
			defer timer.Stop()
		}
	}
	if timer == nil {
		t.Fatal("no init event")
	}
	return last
}

// codeRunWithin is codeRun in context id with a time limit of its own.
func codeRunWithin(t *testing.T, p *execdProc, id string, limit time.Duration, code string) execution {
	t.Helper()
	return p.streamWithin(t, "/code", sandbox.RunCodeRequest{Code: code, Context: &sandbox.CodeContext{ID: id}}, limit)
}
