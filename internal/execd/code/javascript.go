package code

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/execd/eventstream"
	"github.com/opensandbox-go/opensandbox/internal/execd/proc"
	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

//go:embed driver.js
var driverJS []byte

// nodeRunner is the driver of a JavaScript, TypeScript or Java context:
// node running driver.js (or java running Driver.java), requests as JSON
// lines on its stdin, events as JSON lines on its file descriptor 3. What
// the process or its children write to stdout/stderr directly goes to the
// run in progress.
type nodeRunner struct {
	id       string
	cmd      *exec.Cmd
	dir      string
	stdin    *os.File
	log      *tailBuffer
	exited   chan struct{}
	status   string
	name     string // "JavaScript driver"
	softStop bool   // see driverSpec.softStop
	grace    time.Duration

	wmu sync.Mutex // serializes writes to stdin

	mu          sync.Mutex
	cur         *jsRun
	interrupted bool // killed by an interrupt
	seq         int

	closeOnce sync.Once
}

type jsRun struct {
	id string
	ch chan jsEvent
	sw *eventstream.Writer
}

type jsEvent struct {
	ID        string   `json:"id"`
	Type      string   `json:"type"`
	Text      string   `json:"text"`
	EName     string   `json:"ename"`
	EValue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

func startNode(ctx context.Context, m *Manager, c *codeContext) (runner, error) {
	return startDriver(ctx, m, c, driverSpec{
		lang: sandbox.LanguageJavaScript, name: "JavaScript driver", file: "driver.js", source: driverJS,
		prefix: "execd-node-",
		argv:   func(bin, script string) []string { return []string{bin, script} },
	})
}

// driverSpec describes an embedded driver program: a script execd writes
// to a scratch directory and runs with the language's interpreter, speaking
// the protocol of driver.js (requests as JSON lines on stdin, events as
// JSON lines on fd 3).
type driverSpec struct {
	lang   string // language, for the detector
	name   string // for messages: "JavaScript driver"
	file   string // script file name
	source []byte
	prefix string // scratch directory prefix
	argv   func(bin, script string) []string
	// softStop: the driver stops a cell in place on {"stop": true, "id"},
	// keeping its state; it is killed only when the cell has not ended
	// within the interrupt grace. Without it an interrupt kills the driver.
	softStop bool
}

func startDriver(ctx context.Context, m *Manager, c *codeContext, spec driverSpec) (runner, error) {
	env, err := m.opts.Env.Environ(nil)
	if err != nil {
		return nil, err
	}
	bin, err := m.det.interpreter(spec.lang, env)
	if err != nil {
		return nil, fmt.Errorf("no %s interpreter found in PATH", spec.lang)
	}
	dir, err := procenv.MkdirScratch(spec.prefix)
	if err != nil {
		return nil, err
	}
	script := filepath.Join(dir, spec.file)
	if err := os.WriteFile(script, spec.source, 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	n := &nodeRunner{id: c.id, dir: dir, name: spec.name, softStop: spec.softStop, grace: m.opts.InterruptGrace, log: &tailBuffer{max: 8 << 10}, exited: make(chan struct{})}
	argv := spec.argv(bin, script)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = c.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	inR, inW, err := os.Pipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	evR, evW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.ExtraFiles = []*os.File{evW}
	err = cmd.Start()
	for _, f := range []*os.File{inR, evW, outW, errW} {
		f.Close()
	}
	if err != nil {
		for _, f := range []*os.File{inW, evR, outR, errR} {
			f.Close()
		}
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", spec.name, err)
	}
	proc.PreferAsOOMVictim(cmd.Process.Pid)
	n.cmd, n.stdin = cmd, inW
	go n.copyRaw(outR, sandbox.EventStdout)
	go n.copyRaw(errR, sandbox.EventStderr)
	ready := make(chan struct{})
	go n.readEvents(evR, ready)
	go func() {
		werr := cmd.Wait()
		code, _ := proc.WaitExitCode(cmd, werr)
		n.status = "exit status " + strconv.Itoa(code)
		if code > 128 {
			n.status = fmt.Sprintf("killed by signal %d", code-128)
		}
		proc.SignalGroup(cmd.Process.Pid, syscall.SIGKILL)
		close(n.exited)
	}()
	t := time.NewTimer(m.opts.StartTimeout)
	defer t.Stop()
	select {
	case <-ready:
		return n, nil
	case <-n.exited:
		err = fmt.Errorf("%s exited during start (%s): %s", spec.name, n.status, n.log.String())
	case <-t.C:
		err = fmt.Errorf("%s not ready in time", spec.name)
	case <-ctx.Done():
		err = ctx.Err()
	}
	n.close()
	return nil, err
}

// readEvents routes the driver's events to the run they belong to.
func (n *nodeRunner) readEvents(f *os.File, ready chan struct{}) {
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		var ev jsEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if ev.Type == "ready" {
			close(ready)
			continue
		}
		n.mu.Lock()
		r := n.cur
		n.mu.Unlock()
		if r != nil && r.id == ev.ID {
			r.ch <- ev
		}
	}
}

// copyRaw forwards direct writes to the process's stdout or stderr (from
// child processes) to the run in progress; without one they are dropped.
func (n *nodeRunner) copyRaw(f *os.File, typ string) {
	defer f.Close()
	buf := make([]byte, 32<<10)
	for {
		k, err := f.Read(buf)
		if k > 0 {
			n.log.Write(buf[:k])
			n.mu.Lock()
			r := n.cur
			n.mu.Unlock()
			if r != nil {
				r.sw.SendFlush(sandbox.StreamEvent{Type: typ, Text: string(buf[:k])})
			}
		}
		if err != nil {
			return
		}
	}
}

func (n *nodeRunner) run(ctx context.Context, sw *eventstream.Writer, code string, stop <-chan struct{}) bool {
	started := time.Now()
	sw.SendFlush(sandbox.StreamEvent{Type: sandbox.EventInit, Text: n.id})
	pingCtx, stopPing := context.WithCancel(ctx)
	defer stopPing()
	go sw.Ping(pingCtx, eventstream.PingInterval)
	defer sw.Close()

	if stopped(stop) {
		// Interrupted before the driver got the cell: it never runs.
		stopPing()
		msg := "execution interrupted before the cell ran; the context keeps its state"
		sendError(sw, sandbox.ErrNameInterrupted, msg, []string{msg})
		return true
	}
	n.mu.Lock()
	n.seq++
	r := &jsRun{id: strconv.Itoa(n.seq), ch: make(chan jsEvent, 64), sw: sw}
	n.cur = r
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.cur = nil
		n.mu.Unlock()
	}()
	line, _ := json.Marshal(map[string]string{"id": r.id, "code": code})
	if _, err := n.write(append(line, '\n')); err != nil {
		sendError(sw, sandbox.ErrNameKernelDied, "write to driver: "+err.Error(), nil)
		return false
	}
	var (
		errEv *sandbox.StreamError
		grace <-chan time.Time
	)
	for {
		select {
		case ev := <-r.ch:
			switch ev.Type {
			case "stdout", "stderr":
				sw.SendFlush(sandbox.StreamEvent{Type: ev.Type, Text: ev.Text})
			case "result":
				sw.SendFlush(sandbox.StreamEvent{Type: sandbox.EventResult, Results: map[string]any{"text": ev.Text}})
			case "error":
				errEv = &sandbox.StreamError{Name: ev.EName, Value: ev.EValue, Traceback: nonNil(ev.Traceback)}
			case "done":
				stopPing()
				if errEv != nil {
					sw.Send(sandbox.StreamEvent{Type: sandbox.EventError, Error: errEv})
				} else {
					sw.Send(sandbox.StreamEvent{Type: sandbox.EventExecutionComplete, ExecutionTime: time.Since(started).Milliseconds()})
				}
				return true
			}
		case <-n.exited:
			n.mu.Lock()
			interrupted := n.interrupted
			n.mu.Unlock()
			if interrupted {
				msg := "execution interrupted: the " + n.name + " was restarted and the context's state is lost"
				sendError(sw, sandbox.ErrNameInterrupted, msg, []string{msg})
			} else {
				msg := "the " + n.name + " died (" + n.status + "); it is restarted and the context's state is lost"
				sendError(sw, sandbox.ErrNameKernelDied, n.status, []string{msg})
			}
			return false
		case <-stop:
			stop = nil
			if !n.softStop {
				// A busy event loop cannot be interrupted from outside:
				// the driver goes, and the context restarts it.
				n.kill()
				continue
			}
			// The driver stops the cell in place, even one it has not
			// started yet: the stop names the cell.
			req, _ := json.Marshal(map[string]any{"stop": true, "id": r.id})
			n.write(append(req, '\n'))
			t := time.NewTimer(n.grace)
			defer t.Stop()
			grace = t.C
		case <-grace:
			// The cell ignores the stop: the driver goes, and its state.
			grace = nil
			n.kill()
		}
	}
}

func (n *nodeRunner) write(b []byte) (int, error) {
	n.wmu.Lock()
	defer n.wmu.Unlock()
	return n.stdin.Write(b)
}

// kill kills the driver; a run in progress ends with Interrupted.
func (n *nodeRunner) kill() {
	n.mu.Lock()
	n.interrupted = true
	n.mu.Unlock()
	proc.SignalGroup(n.cmd.Process.Pid, syscall.SIGKILL)
}

func (n *nodeRunner) alive() bool {
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

func (n *nodeRunner) close() {
	n.closeOnce.Do(func() {
		n.stdin.Close()
		proc.SignalGroup(n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.exited
		os.RemoveAll(n.dir)
	})
}
