package session

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/execd/eventstream"
	"github.com/opensandbox-go/opensandbox/internal/execd/lines"
	"github.com/opensandbox-go/opensandbox/internal/execd/proc"
	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Shell is one bash session.
type Shell struct {
	id        string
	killGrace time.Duration
	raw       bool
	cmd       *exec.Cmd
	stdin     *os.File
	dir       string // private directory for run scripts

	runSem      chan struct{} // one run at a time
	exited      chan struct{} // closed when bash has exited
	readersDone chan struct{} // closed when both output pipes hit EOF
	exitCode    int           // valid after exited is closed
	closeOnce   sync.Once

	mu  sync.Mutex
	cur *run
	seq int
}

// StartShell starts a standalone persistent shell outside any Manager, for
// other runners (the code interpreter's bash contexts). id is the init text
// of its runs; cwd "" means execd's own directory. The caller owns the
// shell and must Close it.
func StartShell(id, cwd string, opts Options) (*Shell, error) {
	if opts.KillGrace <= 0 {
		opts.KillGrace = 3 * time.Second
	}
	return startShell(id, cwd, opts)
}

// startShell starts bash for a new session in cwd.
func startShell(id, cwd string, opts Options) (*Shell, error) {
	env, err := opts.Env.Environ(nil)
	if err != nil {
		return nil, apierror.Wrap(err, http.StatusInternalServerError, apierror.CodeRuntimeError, "build session environment")
	}
	dir, err := procenv.ResolveDir(cwd, env)
	if err != nil {
		return nil, apierror.BadRequest(apierror.CodeInvalidRequestBody, "%v", err)
	}
	scripts, err := procenv.MkdirScratch("execd-session-")
	if err != nil {
		return nil, apierror.Wrap(err, http.StatusInternalServerError, apierror.CodeRuntimeError, "create session directory")
	}
	sh := &Shell{
		id:          id,
		killGrace:   opts.KillGrace,
		raw:         opts.RawOutput,
		dir:         scripts,
		runSem:      make(chan struct{}, 1),
		exited:      make(chan struct{}),
		readersDone: make(chan struct{}),
	}
	shell := procenv.Shell()
	args := []string{}
	if filepath.Base(shell) == "bash" {
		args = append(args, "--noprofile", "--norc")
	}
	cmd := exec.Command(shell, args...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		os.RemoveAll(scripts)
		return nil, apierror.Wrap(err, http.StatusInternalServerError, apierror.CodeRuntimeError, "create session pipes")
	}
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, outW, errW
	err = cmd.Start()
	stdinR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		stdinW.Close()
		outR.Close()
		errR.Close()
		os.RemoveAll(scripts)
		return nil, apierror.Wrap(err, http.StatusInternalServerError, apierror.CodeRuntimeError, "start session shell")
	}
	proc.PreferAsOOMVictim(cmd.Process.Pid)
	sh.cmd, sh.stdin = cmd, stdinW

	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); sh.read(outR, true) }()
	go func() { defer readers.Done(); sh.read(errR, false) }()
	go func() { readers.Wait(); close(sh.readersDone) }()
	go func() {
		werr := cmd.Wait()
		sh.exitCode, _ = proc.WaitExitCode(cmd, werr)
		// Jobs the shell left running die with it, so that its pipes close.
		proc.SignalGroup(cmd.Process.Pid, syscall.SIGKILL)
		close(sh.exited)
	}()
	return sh, nil
}

// Exited is closed when the session's shell has exited.
func (sh *Shell) Exited() <-chan struct{} { return sh.exited }

// Close kills the shell and everything it started.
func (sh *Shell) Close() {
	sh.closeOnce.Do(func() {
		proc.SignalGroup(sh.cmd.Process.Pid, syscall.SIGKILL)
		sh.stdin.Close()
		os.RemoveAll(sh.dir)
	})
}

// interruptResend is how often an interrupt signals the shell's
// descendants again until the run ends: a command the shell had not yet
// forked at the first signal is stopped too.
const interruptResend = 50 * time.Millisecond

// Interrupt stops the current run's processes (not the shell itself):
// SIGTERM to every descendant of the shell, SIGKILL after the grace period,
// each repeated until the run ends.
func (sh *Shell) Interrupt(reason string) {
	sh.mu.Lock()
	r := sh.cur
	sh.mu.Unlock()
	if r == nil {
		return
	}
	r.interruptOnce.Do(func() {
		r.setReason(reason)
		pid := sh.cmd.Process.Pid
		proc.SignalDescendants(pid, syscall.SIGTERM)
		go func() {
			t := time.NewTimer(sh.killGrace)
			defer t.Stop()
			tick := time.NewTicker(interruptResend)
			defer tick.Stop()
			sig := syscall.SIGTERM
			for {
				select {
				case <-r.done:
					return
				case <-sh.exited:
					return
				case <-t.C:
					sig = syscall.SIGKILL
					proc.SignalDescendants(pid, sig)
				case <-tick.C:
					proc.SignalDescendants(pid, sig)
				}
			}
		}()
	})
}

// Run executes req in the shell and streams its output to sw.
func (sh *Shell) Run(ctx context.Context, sw *eventstream.Writer, req sandbox.RunInSessionRequest) {
	sh.RunStoppable(ctx, sw, req, nil)
}

// RunStoppable is Run that interrupts the run once stop is closed, at
// whatever point it has reached (even before the command is written to
// the shell).
func (sh *Shell) RunStoppable(ctx context.Context, sw *eventstream.Writer, req sandbox.RunInSessionRequest, stop <-chan struct{}) {
	select {
	case sh.runSem <- struct{}{}:
		defer func() { <-sh.runSem }()
	case <-ctx.Done():
		return
	case <-sh.exited:
		apierrorStream(sw, sh.id, "session has exited")
		return
	}
	cd := ""
	if req.Cwd != "" {
		dir, err := procenv.ResolveDir(req.Cwd, sh.cmd.Env)
		if err != nil {
			apierrorStream(sw, sh.id, err.Error())
			return
		}
		cd = "cd -- " + quote(dir) + " && "
	}
	sh.mu.Lock()
	sh.seq++
	script := filepath.Join(sh.dir, "run-"+strconv.Itoa(sh.seq)+".sh")
	sh.mu.Unlock()
	if err := os.WriteFile(script, []byte(req.Command+"\n"), 0o600); err != nil {
		apierrorStream(sw, sh.id, fmt.Sprintf("write run script: %v", err))
		return
	}
	defer os.Remove(script)

	r := newRun(sw, newMarker())
	r.raw = sh.raw
	sh.mu.Lock()
	sh.cur = r
	sh.mu.Unlock()
	defer func() {
		sh.mu.Lock()
		sh.cur = nil
		sh.mu.Unlock()
	}()

	started := time.Now()
	sw.SendFlush(sandbox.StreamEvent{Type: sandbox.EventInit, Text: sh.id})
	pingCtx, stopPing := context.WithCancel(ctx)
	defer stopPing()
	go sw.Ping(pingCtx, eventstream.PingInterval)

	// The command is sourced so that cd and exports persist; its stdin is
	// /dev/null so that it cannot swallow the lines that follow it.
	input := cd + ". " + quote(script) + " </dev/null\n" +
		"printf '%s %d\\n' " + quote(r.marker) + " \"$?\"\n" +
		"printf '%s\\n' " + quote(r.marker) + " >&2\n"
	if _, err := sh.stdin.WriteString(input); err != nil {
		r.finishShellGone()
	}

	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(time.Duration(req.Timeout) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	code, exitedShell := 0, false
	for waiting := true; waiting; {
		select {
		case <-r.done:
			code = r.exitCode
			waiting = false
		case <-sh.readersDone:
			<-sh.exited
			code, exitedShell = sh.exitCode, true
			waiting = false
		case <-timeout:
			timeout = nil
			sh.Interrupt(fmt.Sprintf("command timed out after %dms", req.Timeout))
		case <-stop:
			stop = nil
			sh.Interrupt("interrupted")
		case <-ctx.Done():
			// The client left: stop the run, keep the session.
			sh.Interrupt("client disconnected")
			select {
			case <-r.done:
			case <-sh.readersDone:
			}
			return
		}
	}
	stopPing()
	sh.mu.Lock()
	sh.cur = nil
	sh.mu.Unlock()
	r.flush()
	if code == 0 && !exitedShell {
		sw.Send(sandbox.StreamEvent{Type: sandbox.EventExecutionComplete, ExecutionTime: time.Since(started).Milliseconds()})
	} else {
		trace := r.reason()
		if trace == "" {
			trace = "exit status " + strconv.Itoa(code)
		}
		if exitedShell {
			trace += " (the session's shell exited; the session is closed)"
		}
		sw.Send(sandbox.StreamEvent{Type: sandbox.EventError, Error: &sandbox.StreamError{
			Name: sandbox.ErrNameCommandExec, Value: strconv.Itoa(code), Traceback: []string{trace},
		}})
	}
	sw.Close()
}

// apierrorStream reports a run that could not start, as init plus error.
func apierrorStream(sw *eventstream.Writer, id, msg string) {
	sw.Send(sandbox.StreamEvent{Type: sandbox.EventInit, Text: id})
	sw.Send(sandbox.StreamEvent{Type: sandbox.EventError, Error: &sandbox.StreamError{
		Name: sandbox.ErrNameCommandExec, Value: msg, Traceback: []string{msg},
	}})
	sw.Close()
}

// read copies one of the shell's output pipes into the current run. Output
// that arrives while no run is active (from jobs left in the background)
// is dropped.
func (sh *Shell) read(f *os.File, stdout bool) {
	defer f.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			sh.mu.Lock()
			r := sh.cur
			sh.mu.Unlock()
			if r != nil {
				r.feed(buf[:n], stdout)
			}
		}
		if err != nil {
			return
		}
	}
}

func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func newMarker() string {
	return "__OSB_END_" + newID()[len("session-"):] + "__"
}

// run is the state of one command in a shell: it splits output into
// events until each stream has shown the end marker.
type run struct {
	sw            *eventstream.Writer
	marker        string
	raw           bool // chunks as read, not lines
	out, err      streamState
	done          chan struct{}
	exitCode      int
	interruptOnce sync.Once

	mu         sync.Mutex
	reasonText string
	doneClosed bool
}

type streamState struct {
	typ     string
	pending []byte
	split   lines.Splitter
	seen    bool
}

func newRun(sw *eventstream.Writer, marker string) *run {
	return &run{
		sw:     sw,
		marker: marker,
		out:    streamState{typ: sandbox.EventStdout},
		err:    streamState{typ: sandbox.EventStderr},
		done:   make(chan struct{}),
	}
}

func (r *run) setReason(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reasonText == "" {
		r.reasonText = s
	}
}

func (r *run) reason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reasonText
}

func (r *run) finishShellGone() { r.setReason("session shell is gone") }

// feed takes a chunk of one stream. The marker may follow a partial line of
// the command's output; that partial line is emitted as a line of its own.
func (r *run) feed(p []byte, stdout bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := &r.err
	if stdout {
		st = &r.out
	}
	if st.seen {
		return
	}
	st.pending = append(st.pending, p...)
	emit := func(line []byte) {
		r.sw.Send(sandbox.StreamEvent{Type: st.typ, Text: string(line)})
	}
	feed, flush := func(p []byte) { st.split.Feed(p, emit) }, func() { st.split.Flush(emit) }
	if r.raw {
		feed = func(p []byte) {
			if len(p) > 0 {
				emit(p)
			}
		}
		flush = func() {}
	}
	tag := []byte(r.marker)
	if i := bytes.Index(st.pending, tag); i >= 0 {
		rest := st.pending[i+len(tag):]
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			// Wait for the rest of the marker line (the exit code).
			feed(st.pending[:i])
			st.pending = append(st.pending[:0], st.pending[i:]...)
			r.sw.Flush()
			return
		}
		feed(st.pending[:i])
		flush()
		if stdout {
			r.exitCode, _ = strconv.Atoi(strings.TrimSpace(string(rest[:nl])))
		}
		st.seen = true
		st.pending = nil
		r.sw.Flush()
		if r.out.seen && r.err.seen && !r.doneClosed {
			r.doneClosed = true
			close(r.done)
		}
		return
	}
	cut := len(st.pending) - markerPrefixLen(st.pending, tag)
	feed(st.pending[:cut])
	st.pending = append(st.pending[:0], st.pending[cut:]...)
	r.sw.Flush()
}

// flush emits what is left when the run ends without markers (the shell
// exited).
func (r *run) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, st := range []*streamState{&r.out, &r.err} {
		if st.seen {
			continue
		}
		emit := func(line []byte) {
			r.sw.Send(sandbox.StreamEvent{Type: st.typ, Text: string(line)})
		}
		if r.raw {
			if len(st.pending) > 0 {
				emit(st.pending)
			}
		} else {
			st.split.Feed(st.pending, emit)
			st.split.Flush(emit)
		}
		st.pending = nil
	}
}

// markerPrefixLen is the length of the longest suffix of p that is a proper
// prefix of tag: bytes that may be the start of a marker split across reads.
func markerPrefixLen(p, tag []byte) int {
	for n := min(len(tag)-1, len(p)); n > 0; n-- {
		if bytes.Equal(p[len(p)-n:], tag[:n]) {
			return n
		}
	}
	return 0
}
