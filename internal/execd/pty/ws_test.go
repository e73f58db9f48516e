//go:build linux

package pty

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// waitPID reads until stdout holds "<prefix><digits>" followed by a line
// end, and returns the number.
func waitPID(w *wsClient, prefix string) int {
	w.t.Helper()
	re := regexp.MustCompile(regexp.QuoteMeta(prefix) + `(\d+)\r?\n`)
	var m []string
	w.until("a pid after "+prefix, func(frame) bool {
		m = re.FindStringSubmatch(w.stdout.String())
		return m != nil
	})
	pid, _ := strconv.Atoi(m[1])
	return pid
}

func TestConnectedFrame(t *testing.T) {
	h := newHarness(t, Options{})
	tests := []struct {
		query, mode string
	}{
		{"", modePTY},
		{"pty=1", modePTY},
		{"pty=0", modePipe},
		{"pty=false&since=0", modePipe},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			id := h.create(sandbox.CreatePTYRequest{})
			w := h.dial(id, tt.query, tt.mode) // checks the connected frame
			if st := h.status(id); !st.Running {
				t.Errorf("GET /pty/%s after attach = %+v, want running", id, st)
			}
			w.c.Close(websocket.StatusNormalClosure, "")
		})
	}
}

func TestEchoRoundTrip(t *testing.T) {
	// A short ping interval keeps WebSocket pings flowing during the test.
	h := newHarness(t, Options{PingInterval: 5 * time.Millisecond})
	send := map[string]func(w *wsClient, s string){
		"binary": func(w *wsClient, s string) { w.stdin(s) },
		"json":   func(w *wsClient, s string) { w.sendJSON(map[string]string{"type": "stdin", "data": s}) },
	}
	for _, mode := range []struct{ query, name string }{{"", modePTY}, {"pty=0", modePipe}} {
		for kind, fn := range send {
			t.Run(mode.name+"/"+kind, func(t *testing.T) {
				id := h.create(sandbox.CreatePTYRequest{})
				w := h.dial(id, mode.query, mode.name)
				// The terminal echoes the input line; only the shell's
				// output contains the evaluated number.
				fn(w, "echo marker-$((6*7))\n")
				w.waitStdout("marker-42")
				fn(w, "exit 0\n")
				if m := w.waitMsg("exit"); m.ExitCode == nil || *m.ExitCode != 0 {
					t.Errorf("exit frame = %+v, want exit_code 0", m)
				}
				if ce := w.waitClosed(); ce.Code != websocket.StatusNormalClosure {
					t.Errorf("close after exit = %v, want normal closure", ce)
				}
			})
		}
	}
}

func TestResize(t *testing.T) {
	h := newHarness(t, Options{})
	id := h.create(sandbox.CreatePTYRequest{})
	w := h.dial(id, "", modePTY)
	w.stdin("stty size\n")
	w.waitStdout("24 80") // the initial size
	w.sendJSON(map[string]any{"type": "resize", "cols": 101, "rows": 33})
	w.stdin("stty size\n")
	w.waitStdout("33 101")
}

func TestSignal(t *testing.T) {
	h := newHarness(t, Options{})
	tests := []struct {
		query, mode, signal string
		want                int
	}{
		{"", modePTY, "SIGINT", 130},
		{"", modePTY, "INT", 130},
		{"", modePTY, "sigterm", 143},
		{"", modePTY, "KILL", 137},
		{"pty=0", modePipe, "SIGINT", 130},
		{"pty=0", modePipe, "SIGHUP", 129},
	}
	for _, tt := range tests {
		t.Run(tt.mode+"/"+tt.signal, func(t *testing.T) {
			id := h.create(sandbox.CreatePTYRequest{Command: "echo ready; exec sleep 100"})
			w := h.dial(id, tt.query, tt.mode)
			w.waitStdout("ready")
			w.sendJSON(map[string]string{"type": "signal", "signal": tt.signal})
			if m := w.waitMsg("exit"); m.ExitCode == nil || *m.ExitCode != tt.want {
				t.Errorf("exit frame after %s = %+v, want exit_code %d", tt.signal, m, tt.want)
			}
		})
	}
}

// TestSignalForegroundJob checks that a signal reaches the job running
// under an interactive shell, as Ctrl-C would.
func TestSignalForegroundJob(t *testing.T) {
	h := newHarness(t, Options{})
	id := h.create(sandbox.CreatePTYRequest{})
	w := h.dial(id, "", modePTY)
	w.stdin("echo shell=$$\n")
	shell := waitPID(w, "shell=")
	// Quotes split the words so the echoed input line does not match.
	w.stdin("echo sta''rted; sleep 100; echo not-re''ached\n")
	w.waitStdout("started")
	// A signal that lands between fork and exec is lost, by a terminal
	// too; wait until sleep itself runs.
	waitSessionMember(t, h, shell, "sleep")
	w.sendJSON(map[string]string{"type": "signal", "signal": "SIGINT"})
	w.stdin("echo done-$((2+3))\n")
	w.waitStdout("done-5")
	if strings.Contains(w.stdout.String(), "not-reached") {
		t.Errorf("stdout = %q, want the interrupted list not to go on", w.stdout.String())
	}
	if st := h.status(id); !st.Running {
		t.Errorf("GET /pty/%s after SIGINT to the job = %+v, want the shell still running", id, st)
	}
}

// waitSessionMember polls /proc until a process named comm runs in the
// session led by sid.
func waitSessionMember(t *testing.T, h *harness, sid int, comm string) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, pid := range sessionMembers(sid) {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
			if strings.TrimSpace(string(b)) == comm {
				return
			}
		}
		select {
		case <-h.ctx.Done():
			t.Fatalf("no %s process appeared in session %d", comm, sid)
		case <-tick.C:
		}
	}
}

func TestExitAndReattach(t *testing.T) {
	h := newHarness(t, Options{})
	id := h.create(sandbox.CreatePTYRequest{Command: "echo bye; exit 7"})
	w := h.dial(id, "", modePTY)
	if m := w.waitMsg("exit"); m.ExitCode == nil || *m.ExitCode != 7 {
		t.Fatalf("exit frame = %+v, want exit_code 7", m)
	}
	if got := w.stdout.String(); got != "bye\r\n" {
		t.Errorf("stdout before exit = %q, want %q", got, "bye\r\n")
	}
	if ce := w.waitClosed(); ce.Code != websocket.StatusNormalClosure {
		t.Errorf("close after exit = %v, want normal closure", ce)
	}
	if st := h.status(id); st.Running || st.OutputOffset != 5 {
		t.Errorf("GET /pty/%s after exit = %+v, want not running at offset 5", id, st)
	}

	// The exited session still replays its output and reports the code.
	w2 := h.dial(id, "since=0", modePTY)
	if f := w2.next(); f.ch != chanReplay || f.off != 0 || string(f.data) != "bye\r\n" {
		t.Errorf("frame after connected with since=0 = %s, want replay@0 \"bye\\r\\n\"", f)
	}
	if f := w2.next(); !f.text || f.msg.Type != "exit" || *f.msg.ExitCode != 7 {
		t.Errorf("frame after replay = %s, want exit 7", f)
	}
	w2.waitClosed()

	// Without since there is nothing to replay.
	w3 := h.dial(id, "", modePTY)
	if f := w3.next(); !f.text || f.msg.Type != "exit" {
		t.Errorf("frame after connected without since = %s, want exit", f)
	}
	w3.waitClosed()
}

func TestPipeModeSeparatesStderr(t *testing.T) {
	h := newHarness(t, Options{})
	id := h.create(sandbox.CreatePTYRequest{Command: "echo out; echo err >&2; exit 3"})
	w := h.dial(id, "pty=0", modePipe)
	if m := w.waitMsg("exit"); m.ExitCode == nil || *m.ExitCode != 3 {
		t.Errorf("exit frame = %+v, want exit_code 3", m)
	}
	if got, want := w.stdout.String(), "out\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if got, want := w.stderr.String(), "err\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}

func TestReplayAfterDisconnect(t *testing.T) {
	h := newHarness(t, Options{})
	id := h.create(sandbox.CreatePTYRequest{Command: `echo one; read x; echo "two-$x"; read y; echo "three-$y"`})
	w := h.dial(id, "pty=0", modePipe)
	w.waitStdout("one\n")
	w.stdin("go\n")
	w.c.Close(websocket.StatusNormalClosure, "") // leave before reading the answer

	const all = "one\ntwo-go\n"
	h.waitStatus(id, "at offset 11", func(st sandbox.PTYStatus) bool { return st.OutputOffset == int64(len(all)) })

	tests := []struct {
		since   string
		wantOff int64
		want    string
	}{
		{"0", 0, all},
		{"4", 4, "two-go\n"},
		{"6", 6, "o-go\n"},
	}
	// Each attach takes over: the server may not have seen the previous
	// socket close yet, and a reconnecting client should not wait for it.
	for _, tt := range tests {
		w := h.dial(id, "pty=0&takeover=1&since="+tt.since, modePipe)
		var got bytes.Buffer
		first := int64(-1)
		w.until("the replay", func(f frame) bool {
			if f.ch != chanReplay {
				t.Fatalf("since=%s: frame %s before the replay was complete", tt.since, f)
			}
			if first < 0 {
				first = f.off
			}
			if f.off != first+int64(got.Len()) {
				t.Errorf("since=%s: replay frame offset %d, want %d", tt.since, f.off, first+int64(got.Len()))
			}
			got.Write(f.data)
			return got.Len() >= len(tt.want)
		})
		if first != tt.wantOff || got.String() != tt.want {
			t.Errorf("since=%s: replay = %q at %d, want %q at %d", tt.since, got.String(), first, tt.want, tt.wantOff)
		}
		w.c.Close(websocket.StatusNormalClosure, "")
	}

	// Past the end: no replay, then live output continues.
	w = h.dial(id, "pty=0&takeover=1&since=1000", modePipe)
	w.stdin("y\n")
	if f := w.next(); f.ch != chanStdout || string(f.data) != "three-y\n" {
		t.Errorf("frame after since=1000 and stdin = %s, want live stdout %q", f, "three-y\n")
	}
	if m := w.waitMsg("exit"); *m.ExitCode != 0 {
		t.Errorf("exit frame = %+v, want exit_code 0", m)
	}
}

func TestSecondClientConflict(t *testing.T) {
	h := newHarness(t, Options{})
	id := h.create(sandbox.CreatePTYRequest{})
	w := h.dial(id, "", modePTY)
	_, resp, err := h.dialRaw(id, "")
	if err == nil || resp == nil || resp.StatusCode != http.StatusConflict {
		t.Fatalf("second Dial = (%v, %v), want a 409 response", resp, err)
	}
	var body apiError
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Code != "ALREADY_CONNECTED" {
		t.Errorf("409 body = %+v (err %v), want code ALREADY_CONNECTED", body, err)
	}
	// The first client is unaffected.
	w.sendJSON(map[string]string{"type": "ping"})
	w.waitMsg("pong")
}

func TestTakeover(t *testing.T) {
	h := newHarness(t, Options{})
	id := h.create(sandbox.CreatePTYRequest{})
	old := h.dial(id, "", modePTY)
	w := h.dial(id, "takeover=1", modePTY)
	if m := old.waitMsg("error"); m.Code != "TAKEN_OVER" {
		t.Errorf("old client error frame = %+v, want TAKEN_OVER", m)
	}
	if ce := old.waitClosed(); ce.Code != 4001 || ce.Reason != "TAKEN_OVER" {
		t.Errorf("old client close = %v, want 4001 TAKEN_OVER", ce)
	}
	w.stdin("echo new-$((1+1))\n")
	w.waitStdout("new-2")
}

func TestInvalidFramesKeepSession(t *testing.T) {
	h := newHarness(t, Options{})
	id := h.create(sandbox.CreatePTYRequest{})
	w := h.dial(id, "", modePTY)
	tests := []struct {
		name string
		typ  websocket.MessageType
		data string
	}{
		{"not JSON", websocket.MessageText, "hello"},
		{"JSON array", websocket.MessageText, "[1]"},
		{"no type", websocket.MessageText, `{"data":"x"}`},
		{"unknown type", websocket.MessageText, `{"type":"bogus"}`},
		{"stdin without data", websocket.MessageText, `{"type":"stdin"}`},
		{"resize without rows", websocket.MessageText, `{"type":"resize","cols":80}`},
		{"resize zero cols", websocket.MessageText, `{"type":"resize","cols":0,"rows":24}`},
		{"resize too many rows", websocket.MessageText, `{"type":"resize","cols":80,"rows":65536}`},
		{"resize fractional", websocket.MessageText, `{"type":"resize","cols":80.5,"rows":24}`},
		{"unknown signal", websocket.MessageText, `{"type":"signal","signal":"SIGNOPE"}`},
		{"empty signal", websocket.MessageText, `{"type":"signal"}`},
		{"empty binary", websocket.MessageBinary, ""},
		{"binary on stdout channel", websocket.MessageBinary, "\x01ls\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := w.c.Write(w.ctx, tt.typ, []byte(tt.data)); err != nil {
				t.Fatalf("Write(%q): %v", tt.data, err)
			}
			if m := w.waitMsg("error"); m.Code != "INVALID_FRAME" || m.Error == "" {
				t.Errorf("reply to %q = %+v, want INVALID_FRAME with a message", tt.data, m)
			}
		})
	}
	w.sendJSON(map[string]string{"type": "ping"})
	w.waitMsg("pong")
	w.stdin("echo alive-$((3*3))\n")
	w.waitStdout("alive-9")
	if st := h.status(id); !st.Running {
		t.Errorf("GET /pty/%s after invalid frames = %+v, want running", id, st)
	}
}

// TestSlowClient checks that a client that stops reading neither blocks
// the process nor grows memory without bound: it is dropped with an error
// naming the offset to resume from, and can come back with since=.
func TestSlowClient(t *testing.T) {
	h := newHarness(t, Options{ReplayBytes: 16 << 10, WriteTimeout: 2 * time.Minute})
	const total = 32 << 20 // far more than the socket buffers hold
	id := h.create(sandbox.CreatePTYRequest{Command: "head -c " + strconv.Itoa(total) + " /dev/zero"})
	w := h.dial(id, "pty=0", modePipe)
	// The client reads nothing while the process writes everything.
	h.waitStatus(id, "exited after writing everything", func(st sandbox.PTYStatus) bool {
		return !st.Running && st.OutputOffset == total
	})
	m := w.waitMsg("error")
	if m.Code != "RUNTIME_ERROR" {
		t.Fatalf("error frame to the slow client = %+v, want RUNTIME_ERROR", m)
	}
	match := regexp.MustCompile(`since=(\d+)`).FindStringSubmatch(m.Error)
	if match == nil {
		t.Fatalf("error message %q names no since= offset", m.Error)
	}
	resume, _ := strconv.ParseInt(match[1], 10, 64)
	if got := int64(w.stdout.Len()); resume != got {
		t.Errorf("resume offset = %d, want %d (the bytes delivered)", resume, got)
	}
	if ce := w.waitClosed(); ce.Code != websocket.StatusTryAgainLater {
		t.Errorf("close of the slow client = %v, want 1013", ce)
	}

	// Only the newest ReplayBytes are kept; the replay says where they start.
	w2 := h.dial(id, "pty=0&since="+match[1], modePipe)
	var got int
	var first int64 = -1
	w2.until("exit", func(f frame) bool {
		if f.ch == chanReplay {
			if first < 0 {
				first = f.off
			}
			got += len(f.data)
		}
		return f.text && f.msg.Type == "exit"
	})
	if want := int64(total - 16<<10); first != want || got != 16<<10 {
		t.Errorf("replay from since=%d = %d bytes at %d, want %d bytes at %d", resume, got, first, 16<<10, want)
	}
}

// TestBlockedStdinKeepsConnection checks that a process which does not
// read its input neither stalls the socket (pings are still answered) nor
// queues input without bound (the excess is refused with an error).
func TestBlockedStdinKeepsConnection(t *testing.T) {
	h := newHarness(t, Options{WriteTimeout: time.Minute})
	id := h.create(sandbox.CreatePTYRequest{Command: "echo ready; exec sleep 100"})
	w := h.dial(id, "pty=0", modePipe)
	w.waitStdout("ready")
	chunk := append([]byte{chanStdin}, bytes.Repeat([]byte("x"), 8<<10)...)
	for range 80 { // 640 KiB: more than the pipe and the input queue hold
		w.sendBinary(chunk)
	}
	w.sendJSON(map[string]string{"type": "ping"})
	refused := false
	w.until("pong", func(f frame) bool {
		if f.text && f.msg.Type == "error" {
			if f.msg.Code != "STDIN_WRITE_FAILED" {
				t.Errorf("error frame = %+v, want STDIN_WRITE_FAILED", f.msg)
			}
			refused = true
		}
		return f.text && f.msg.Type == "pong"
	})
	if !refused {
		t.Errorf("no STDIN_WRITE_FAILED before pong, want the excess input refused")
	}
}
