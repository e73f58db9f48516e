package code

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// runInterruptAtInit runs code in context id and interrupts it the moment
// the init event arrives: the worst moment, when the interpreter may not
// even have received the cell. It fails the test unless the stream ends
// within bound of the interrupt, and returns the events (pings left out).
func (h *harness) runInterruptAtInit(t *testing.T, id, code string, bound time.Duration) cell {
	t.Helper()
	b, _ := json.Marshal(sandbox.RunCodeRequest{Code: code, Context: &sandbox.CodeContext{ID: id}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", h.srv.URL+"/code", bytes.NewReader(b))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /code: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST /code = %d", resp.StatusCode)
	}
	type next struct {
		ev  sandbox.StreamEvent
		err error
	}
	evs := make(chan next)
	go func() {
		er := sandbox.NewEventReader(resp.Body)
		for {
			ev, err := er.Next()
			select {
			case evs <- next{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var (
		c        cell
		deadline <-chan time.Time
	)
	for {
		var n next
		select {
		case n = <-evs:
		case <-deadline:
			t.Fatalf("the stream did not end within %v of the interrupt: %+v", bound, c.events)
		}
		if errors.Is(n.err, io.EOF) {
			break
		}
		if n.err != nil {
			t.Fatalf("reading the stream: %v", n.err)
		}
		if n.ev.Type == sandbox.EventPing {
			continue
		}
		c.events = append(c.events, n.ev)
		if n.ev.Type == sandbox.EventInit {
			h.call(t, "DELETE", "/code?id="+id, nil, 200, nil)
			deadline = time.After(bound)
		}
	}
	if len(c.events) < 2 || c.events[0].Type != sandbox.EventInit {
		t.Fatalf("stream %+v: want init first and an end", c.events)
	}
	if l := c.last().Type; l != sandbox.EventError && l != sandbox.EventExecutionComplete {
		t.Fatalf("stream ends with %s: %+v", l, c.events)
	}
	return c
}

// interruptAtInitRounds is how many times in a row each language is
// interrupted at the worst moment.
const interruptAtInitRounds = 20

// TestPythonInterruptAtInit: interrupting right after init, before the
// kernel has started the cell, must stop the cell, every time, without
// losing the kernel (the state survives every round).
func TestPythonInterruptAtInit(t *testing.T) {
	need(t, sandbox.LanguagePython)
	h := newHarness(t)
	id := h.create(t, sandbox.LanguagePython)
	h.run(t, id, "", "kept = 7")
	// upstream's interrupt example, and a loop that never sleeps
	codes := []string{"import time\nfor i in range(100):\n  print(i)\n  time.sleep(0.2)", "while True: pass"}
	for i := range interruptAtInitRounds + 5 {
		c := h.runInterruptAtInit(t, id, codes[i%2], 2*time.Second)
		if e := c.err(); e == nil || e.Name != "KeyboardInterrupt" {
			t.Fatalf("round %d: ended with %+v, want a KeyboardInterrupt error", i, c.events)
		}
	}
	if c := h.run(t, id, "", "kept"); !c.ok() || c.results()[0]["text"] != "7" {
		t.Errorf("after the interrupts the context answered %+v, want its state (7): the kernel was restarted", c.events)
	}
}

// TestPythonInterruptIgnored: a cell that ignores SIGINT is ended by
// killing the kernel once the interrupt grace has passed.
func TestPythonInterruptIgnored(t *testing.T) {
	need(t, sandbox.LanguagePython)
	h := newHarnessOpts(t, Options{InterruptGrace: 500 * time.Millisecond})
	id := h.create(t, sandbox.LanguagePython)
	h.run(t, id, "", "kept = 7")
	marker := t.TempDir() + "/looping"
	code := "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nopen(" + strconv.Quote(marker) + ", 'w').close()\nwhile True: time.sleep(0.05)"
	done := make(chan cell, 1)
	go func() { done <- h.run(t, id, "", code) }()
	h.interruptWhen(t, id, marker)
	var c cell
	select {
	case c = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the cell that ignores KeyboardInterrupt still runs 5 s after the interrupt")
	}
	if e := c.err(); e == nil || e.Name != sandbox.ErrNameInterrupted || !strings.Contains(e.Value, "state is lost") {
		t.Fatalf("ended with %+v, want Interrupted", c.events)
	}
	if c := h.run(t, id, "", "'kept' in globals()"); !c.ok() || c.results()[0]["text"] != "False" {
		t.Errorf("after the kill: %+v, want a fresh kernel", c.events)
	}
}

func TestJavaScriptInterruptAtInit(t *testing.T) {
	need(t, sandbox.LanguageJavaScript)
	h := newHarness(t)
	id := h.create(t, sandbox.LanguageJavaScript)
	for i := range interruptAtInitRounds {
		c := h.runInterruptAtInit(t, id, "while (true) {}", 5*time.Second)
		if e := c.err(); e == nil || e.Name != sandbox.ErrNameInterrupted {
			t.Fatalf("round %d: ended with %+v, want Interrupted", i, c.events)
		}
	}
	if c := h.run(t, id, "", "1 + 1"); !c.ok() || c.results()[0]["text"] != "2" {
		t.Errorf("after the interrupts: %+v", c.events)
	}
}

func TestJavaInterruptAtInit(t *testing.T) {
	needJava(t)
	h := newHarness(t)
	id := h.create(t, langJava)
	h.run(t, id, "", "int kept = 7;")
	for i := range interruptAtInitRounds {
		c := h.runInterruptAtInit(t, id, "while (true) {}", 5*time.Second)
		if e := c.err(); e == nil || e.Name != sandbox.ErrNameInterrupted {
			t.Fatalf("round %d: ended with %+v, want Interrupted", i, c.events)
		}
	}
	if c := h.run(t, id, "", "kept"); !c.ok() || c.results()[0]["text"] != "7" {
		t.Errorf("after the interrupts: %+v, want the state kept (7)", c.events)
	}
}

func TestGoInterruptAtInit(t *testing.T) {
	needGo(t)
	h := newHarness(t)
	id := h.create(t, langGo)
	h.run(t, id, "", "func kept() int { return 7 }")
	for i := range interruptAtInitRounds {
		c := h.runInterruptAtInit(t, id, "for {}", 5*time.Second)
		if e := c.err(); e == nil || e.Name != sandbox.ErrNameInterrupted {
			t.Fatalf("round %d: ended with %+v, want Interrupted", i, c.events)
		}
	}
	if c := h.run(t, id, "", "println(kept())"); !c.ok() || c.stderr() != "7\n" {
		t.Errorf("after the interrupts: %+v, want the declarations kept", c.events)
	}
}

func TestBashInterruptAtInit(t *testing.T) {
	need(t, sandbox.LanguageBash)
	h := newHarness(t)
	id := h.create(t, sandbox.LanguageBash)
	h.run(t, id, "", "KEPT=7")
	for i := range interruptAtInitRounds {
		c := h.runInterruptAtInit(t, id, "sleep 30", 5*time.Second)
		if c.err() == nil {
			t.Fatalf("round %d: ended with %+v, want an error", i, c.events)
		}
	}
	if c := h.run(t, id, "", "echo $KEPT"); !c.ok() || c.stdout() != "7\n" {
		t.Errorf("after the interrupts: %+v, want the shell kept", c.events)
	}
	// A loop of builtins has no process to signal: the shell goes.
	h = newHarnessOpts(t, Options{InterruptGrace: 300 * time.Millisecond})
	id = h.create(t, sandbox.LanguageBash)
	if c := h.runInterruptAtInit(t, id, "while true; do :; done", 5*time.Second); c.err() == nil {
		t.Errorf("builtin loop: %+v, want an error", c.events)
	}
	if c := h.run(t, id, "", "echo fresh"); !c.ok() || c.stdout() != "fresh\n" {
		t.Errorf("after the builtin loop: %+v", c.events)
	}
}
