package code

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/opensandbox-go/opensandbox/internal/execd/eventstream"
	"github.com/opensandbox-go/opensandbox/internal/execd/proc"
	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// pyKernel is one ipykernel process and execd's three sockets to it: shell
// (requests and replies), iopub (outputs and status) and control
// (shutdown). Messages are routed to the waiting run by the msg_id of
// their parent header.
type pyKernel struct {
	id     string
	cmd    *exec.Cmd
	dir    string // private: the connection file
	sig    *signer
	log    *tailBuffer
	exited chan struct{}
	status string        // how the process ended, valid after exited closes
	grace  time.Duration // see Options.InterruptGrace

	sockCtx               context.Context
	cancelSocks           context.CancelFunc
	shell, iopub, control zmq4.Socket
	iopubSeen             atomic.Bool

	mu      sync.Mutex
	waiters map[string]*waiter

	closeOnce sync.Once
}

// waiter receives the messages whose parent is one request.
type waiter struct {
	ch   chan routed
	done chan struct{}
}

// routed is a received message and the socket it came from.
type routed struct {
	iopub bool
	m     jmsg
}

func startPython(ctx context.Context, m *Manager, c *codeContext) (runner, error) {
	env, err := m.opts.Env.Environ(nil)
	if err != nil {
		return nil, err
	}
	py, err := m.det.findPython(env)
	if err != nil {
		return nil, errors.New("no python3 that can import ipykernel (set EXECD_PYTHON)")
	}
	dir, err := procenv.MkdirScratch("execd-kernel-")
	if err != nil {
		return nil, err
	}
	k := &pyKernel{
		id:      c.id,
		dir:     dir,
		sig:     newSigner(),
		log:     &tailBuffer{max: 8 << 10},
		exited:  make(chan struct{}),
		grace:   m.opts.InterruptGrace,
		waiters: map[string]*waiter{},
	}
	// Port 0 everywhere: the kernel binds ports of its own choosing and
	// writes them back to the file. Ports reserved here and released for
	// the kernel could be taken in between (many contexts starting at
	// once), and a dial could then reach some other process.
	conn := map[string]any{
		"ip": "127.0.0.1", "transport": "tcp",
		"shell_port": 0, "iopub_port": 0, "stdin_port": 0, "control_port": 0, "hb_port": 0,
		"key": string(k.sig.key), "signature_scheme": "hmac-sha256", "kernel_name": "python3",
	}
	b, _ := json.Marshal(conn)
	file := filepath.Join(dir, "kernel.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	startup := filepath.Join(dir, "startup.py")
	if err := os.WriteFile(startup, []byte(kernelStartup), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// Plain tracebacks: error events go to programs, not terminals.
	cmd := exec.Command(py, "-m", "ipykernel_launcher", "-f", file,
		"--InteractiveShell.colors=NoColor", "--IPKernelApp.exec_files="+startup)
	cmd.Env = kernelEnv(env)
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = k.log, k.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", py, err)
	}
	proc.PreferAsOOMVictim(cmd.Process.Pid)
	k.cmd = cmd
	go func() {
		werr := cmd.Wait()
		code, _ := proc.WaitExitCode(cmd, werr)
		k.status = "exit status " + strconv.Itoa(code)
		if code > 128 {
			k.status = fmt.Sprintf("killed by signal %d", code-128)
		}
		close(k.exited)
	}()

	k.sockCtx, k.cancelSocks = context.WithCancel(context.Background())
	go func() {
		// Dialing retries until the kernel listens; its death ends that.
		<-k.exited
		k.cancelSocks()
	}()
	startCtx, cancel := context.WithTimeout(ctx, m.opts.StartTimeout)
	defer cancel()
	ports, err := boundPorts(startCtx, file, k.exited)
	if err != nil {
		err = k.startError(startCtx, err)
		k.close()
		return nil, err
	}
	if err := k.connect(startCtx, ports); err != nil {
		k.close()
		return nil, err
	}
	return k, nil
}

// kernelPorts is the part of a connection file that names the ports.
type kernelPorts struct {
	Shell   int `json:"shell_port"`
	IOPub   int `json:"iopub_port"`
	Stdin   int `json:"stdin_port"`
	Control int `json:"control_port"`
	HB      int `json:"hb_port"`
}

// boundPortsPoll is how often the connection file is read while the
// kernel starts.
const boundPortsPoll = 10 * time.Millisecond

// boundPorts waits until the kernel has written the ports it bound into its
// connection file (shell, iopub, stdin, control, hb), the kernel exits or
// ctx ends. The file is rewritten in place, so a partial read is retried.
func boundPorts(ctx context.Context, file string, exited <-chan struct{}) ([]int, error) {
	t := time.NewTicker(boundPortsPoll)
	defer t.Stop()
	for {
		if b, err := os.ReadFile(file); err == nil {
			var p kernelPorts
			if json.Unmarshal(b, &p) == nil && p.Shell > 0 && p.IOPub > 0 && p.Stdin > 0 && p.Control > 0 && p.HB > 0 {
				return []int{p.Shell, p.IOPub, p.Stdin, p.Control, p.HB}, nil
			}
		}
		select {
		case <-t.C:
		case <-exited:
			return nil, errors.New("kernel exited")
		case <-ctx.Done():
			return nil, fmt.Errorf("kernel did not report its ports: %w", ctx.Err())
		}
	}
}

// connect dials the kernel's sockets and waits until it answers a
// kernel_info_request and its iopub messages reach us.
func (k *pyKernel) connect(ctx context.Context, ports []int) error {
	stop := context.AfterFunc(ctx, k.cancelSocks)
	defer stop()
	ep := func(port int) string { return "tcp://127.0.0.1:" + strconv.Itoa(port) }
	opts := []zmq4.Option{zmq4.WithDialerRetry(50 * time.Millisecond), zmq4.WithDialerMaxRetries(-1)}
	k.shell = zmq4.NewDealer(k.sockCtx, opts...)
	k.control = zmq4.NewDealer(k.sockCtx, opts...)
	k.iopub = zmq4.NewSub(k.sockCtx, opts...)
	if err := k.iopub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		return err
	}
	for _, d := range []struct {
		s    zmq4.Socket
		port int
	}{{k.shell, ports[0]}, {k.iopub, ports[1]}, {k.control, ports[3]}} {
		if err := d.s.Dial(ep(d.port)); err != nil {
			return k.startError(ctx, err)
		}
	}
	go k.recvLoop(k.shell, false)
	go k.recvLoop(k.iopub, true)
	go k.recvLoop(k.control, false)

	// The SUB subscription reaches the kernel asynchronously; repeat the
	// round trip until an iopub message proves outputs will arrive.
	for {
		id, w, err := k.request(k.shell, "kernel_info_request", struct{}{})
		if err != nil {
			return k.startError(ctx, err)
		}
		gotReply := false
		settle := time.NewTimer(time.Hour)
	wait:
		for {
			select {
			case rm := <-w.ch:
				if !rm.iopub && rm.m.Header.MsgType == "kernel_info_reply" {
					gotReply = true
					settle.Reset(200 * time.Millisecond)
				}
				if gotReply && k.iopubSeen.Load() {
					settle.Stop()
					k.unwait(id)
					return nil
				}
			case <-settle.C:
				break wait
			case <-k.exited:
				settle.Stop()
				return k.startError(ctx, errors.New("kernel exited"))
			case <-ctx.Done():
				settle.Stop()
				return k.startError(ctx, ctx.Err())
			}
		}
		k.unwait(id)
	}
}

func (k *pyKernel) startError(ctx context.Context, err error) error {
	select {
	case <-k.exited:
		return fmt.Errorf("python kernel exited during start (%s): %s", k.status, k.log.String())
	default:
	}
	if ctx.Err() != nil {
		return fmt.Errorf("python kernel not ready: %w", ctx.Err())
	}
	return fmt.Errorf("python kernel: %w", err)
}

// recvLoop reads one socket until it closes and routes each message.
func (k *pyKernel) recvLoop(s zmq4.Socket, iopub bool) {
	for {
		msg, err := s.Recv()
		if err != nil {
			// A broken connection while the kernel lives: zmq4 redials;
			// do not spin meanwhile.
			select {
			case <-k.sockCtx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		m, err := k.sig.decode(msg.Frames)
		if err != nil {
			// Unsigned or malformed: not from our kernel.
			continue
		}
		if iopub {
			k.iopubSeen.Store(true)
		}
		k.mu.Lock()
		w := k.waiters[m.Parent.MsgID]
		k.mu.Unlock()
		if w == nil {
			continue
		}
		select {
		case w.ch <- routed{iopub: iopub, m: m}:
		case <-w.done:
		case <-k.sockCtx.Done():
			return
		}
	}
}

// request sends a message and registers for what answers it.
func (k *pyKernel) request(s zmq4.Socket, msgType string, content any) (string, *waiter, error) {
	frames, id, err := k.sig.encode(msgType, content)
	if err != nil {
		return "", nil, err
	}
	w := &waiter{ch: make(chan routed, 256), done: make(chan struct{})}
	k.mu.Lock()
	k.waiters[id] = w
	k.mu.Unlock()
	if err := s.SendMulti(zmq4.NewMsgFrom(frames...)); err != nil {
		k.unwait(id)
		return "", nil, err
	}
	return id, w, nil
}

func (k *pyKernel) unwait(id string) {
	k.mu.Lock()
	w := k.waiters[id]
	delete(k.waiters, id)
	k.mu.Unlock()
	if w != nil {
		close(w.done)
	}
}

type executeRequest struct {
	Code            string         `json:"code"`
	Silent          bool           `json:"silent"`
	StoreHistory    bool           `json:"store_history"`
	UserExpressions map[string]any `json:"user_expressions"`
	AllowStdin      bool           `json:"allow_stdin"`
	StopOnError     bool           `json:"stop_on_error"`
}

// outputContent covers the content fields of the messages a run maps.
type outputContent struct {
	ExecutionCount int            `json:"execution_count"`
	Name           string         `json:"name"`
	Text           string         `json:"text"`
	Data           map[string]any `json:"data"`
	EName          string         `json:"ename"`
	EValue         string         `json:"evalue"`
	Traceback      []string       `json:"traceback"`
	ExecutionState string         `json:"execution_state"`
	Status         string         `json:"status"`
}

// run sends the cell and maps the kernel's messages to events until the
// kernel has replied and reported itself idle for it.
//
// Interrupts are SIGINT, which ipykernel turns into KeyboardInterrupt only
// while it handles a request: between requests it ignores SIGINT, and a
// SIGINT that lands in its own code around the cell (after it has taken
// the request, before or after the user's code) is caught and logged, the
// request then ending with an idle status and no reply. So an interrupt
// that comes before the kernel has announced the cell (execute_input,
// published once its SIGINT handler is in place) is held until it does,
// and sent once: a second SIGINT could land in the kernel's own handling
// of the first; an idle without a reply is checked with a
// kernel_info_request, whose reply follows every earlier reply on the
// shell socket, so that its arrival proves no execute_reply is coming; and
// a kernel that has not ended the cell within the interrupt grace is
// killed.
func (k *pyKernel) run(ctx context.Context, sw *eventstream.Writer, code string, stop <-chan struct{}) bool {
	started := time.Now()
	sw.SendFlush(sandbox.StreamEvent{Type: sandbox.EventInit, Text: k.id})
	pingCtx, stopPing := context.WithCancel(ctx)
	defer stopPing()
	go sw.Ping(pingCtx, eventstream.PingInterval)
	defer sw.Close()

	if stopped(stop) {
		// Interrupted before the kernel got the cell: it never runs.
		stopPing()
		sendError(sw, "KeyboardInterrupt", interruptedBeforeStart, []string{"KeyboardInterrupt: " + interruptedBeforeStart})
		return true
	}
	id, w, err := k.request(k.shell, "execute_request", executeRequest{
		// Runs are queued by execd, never by the kernel, so there is
		// nothing for stop_on_error to abort, and with it ipykernel may
		// abort the next request after an error.
		Code: code, StoreHistory: true, UserExpressions: map[string]any{}, StopOnError: false,
	})
	if err != nil {
		sendError(sw, "KernelError", err.Error(), nil)
		return k.alive()
	}
	defer k.unwait(id)

	var (
		errEv         *sandbox.StreamError
		idle, replied bool
		replyStatus   string
		countSent     bool
		announced     bool // execute_input seen: the kernel handles the cell
		interrupted   bool
		held          bool    // an interrupt waits for the announcement
		probe         *waiter // kernel_info_request after an idle without reply
		probeID       string
		grace         <-chan time.Time
	)
	defer func() {
		if probe != nil {
			k.unwait(probeID)
		}
	}()
	handle := func(rm routed) {
		var c outputContent
		if err := json.Unmarshal(rm.m.Content, &c); err != nil {
			return
		}
		switch rm.m.Header.MsgType {
		case "execute_input":
			announced = true
			if held {
				held = false
				k.sigint()
			}
			if c.ExecutionCount > 0 && !countSent {
				countSent = true
				sw.SendFlush(sandbox.StreamEvent{Type: sandbox.EventExecutionCount, ExecutionCount: c.ExecutionCount})
			}
		case "stream":
			typ := sandbox.EventStdout
			if c.Name == "stderr" {
				typ = sandbox.EventStderr
			}
			sw.SendFlush(sandbox.StreamEvent{Type: typ, Text: c.Text})
		case "execute_result", "display_data":
			sw.SendFlush(sandbox.StreamEvent{Type: sandbox.EventResult, Results: mimeBundle(c.Data)})
		case "error":
			errEv = &sandbox.StreamError{Name: c.EName, Value: c.EValue, Traceback: nonNil(c.Traceback)}
		case "status":
			if rm.iopub && c.ExecutionState == "idle" {
				idle = true
			}
		case "execute_reply":
			replied = true
			replyStatus = c.Status
			if c.Status == "error" && errEv == nil {
				errEv = &sandbox.StreamError{Name: c.EName, Value: c.EValue, Traceback: nonNil(c.Traceback)}
			}
			if c.Status == "aborted" && errEv == nil {
				errEv = &sandbox.StreamError{Name: "ExecutionAborted", Value: "the kernel aborted the execution", Traceback: []string{}}
			}
		}
	}
	var probeCh <-chan routed
	for !(idle && replied) {
		if idle && !replied && probe == nil {
			// Idle without a reply, so far: the reply may still be on its
			// way (shell and iopub are separate sockets), or never come.
			var err error
			probeID, probe, err = k.request(k.shell, "kernel_info_request", struct{}{})
			if err != nil {
				sendError(sw, "KernelError", err.Error(), nil)
				return k.alive()
			}
			probeCh = probe.ch
		}
		select {
		case rm := <-w.ch:
			handle(rm)
		case rm := <-probeCh:
			if rm.iopub || rm.m.Header.MsgType != "kernel_info_reply" {
				continue
			}
			// Every message that came before the probe's reply is queued
			// in w.ch already (one shell socket, read in order).
			for drained := false; !drained; {
				select {
				case rm := <-w.ch:
					handle(rm)
				default:
					drained = true
				}
			}
			if !replied {
				stopPing()
				if interrupted {
					sendError(sw, "KeyboardInterrupt", interruptedInKernel, []string{"KeyboardInterrupt: " + interruptedInKernel})
				} else {
					msg := "the kernel ended the cell without a reply (see its log)"
					sendError(sw, "KernelError", msg, []string{msg})
				}
				return true
			}
		case <-stop:
			stop = nil
			interrupted = true
			switch {
			case idle:
				// The cell is over: only its reply is awaited, and a
				// SIGINT could only hit the probe.
			case announced:
				k.sigint()
			default:
				held = true
			}
			t := time.NewTimer(k.grace)
			defer t.Stop()
			grace = t.C
		case <-grace:
			// The cell ignores KeyboardInterrupt, or is stuck where
			// signals are not seen: the kernel goes, and its state.
			proc.SignalGroup(k.cmd.Process.Pid, syscall.SIGKILL)
			<-k.exited
			stopPing()
			msg := fmt.Sprintf("execution interrupted: the cell did not stop within %v of the interrupt, so the python kernel was restarted and the context's state is lost", k.grace)
			sendError(sw, sandbox.ErrNameInterrupted, msg, []string{msg})
			return false
		case <-k.exited:
			msg := "the python kernel died (" + k.status + "); it is restarted and the context's state is lost"
			sendError(sw, sandbox.ErrNameKernelDied, k.status, []string{msg})
			return false
		}
	}
	stopPing()
	if replyStatus == "" {
		replyStatus = "ok"
	}
	if errEv != nil {
		sw.Send(sandbox.StreamEvent{Type: sandbox.EventStatus, Text: "error"})
		sw.Send(sandbox.StreamEvent{Type: sandbox.EventError, Error: errEv})
		return true
	}
	sw.Send(sandbox.StreamEvent{Type: sandbox.EventStatus, Text: replyStatus})
	sw.Send(sandbox.StreamEvent{Type: sandbox.EventExecutionComplete, ExecutionTime: time.Since(started).Milliseconds()})
	return true
}

const (
	interruptedBeforeStart = "execution interrupted before the cell ran"
	interruptedInKernel    = "execution interrupted"
)

// mimeBundle renames text/plain to text, as the execd wire format has it,
// and keeps every other MIME type as the kernel sent it.
func mimeBundle(data map[string]any) map[string]any {
	out := make(map[string]any, len(data))
	for k, v := range data {
		if k == "text/plain" {
			k = "text"
		}
		out[k] = v
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func sendError(sw *eventstream.Writer, name, value string, tb []string) {
	sw.Send(sandbox.StreamEvent{Type: sandbox.EventError, Error: &sandbox.StreamError{Name: name, Value: value, Traceback: nonNil(tb)}})
}

// sigint sends SIGINT to the kernel's process group: ipykernel's default
// interrupt mode turns it into KeyboardInterrupt in the cell.
func (k *pyKernel) sigint() {
	if k.alive() {
		proc.SignalGroup(k.cmd.Process.Pid, syscall.SIGINT)
	}
}

func (k *pyKernel) alive() bool {
	select {
	case <-k.exited:
		return false
	default:
		return true
	}
}

// close asks the kernel to shut down over the control socket, kills its
// process group if it has not exited within a second, and frees the
// sockets and the connection file.
func (k *pyKernel) close() {
	k.closeOnce.Do(func() {
		if k.alive() && k.control != nil && k.sockCtx.Err() == nil {
			if id, _, err := k.request(k.control, "shutdown_request", map[string]bool{"restart": false}); err == nil {
				defer k.unwait(id)
			}
			t := time.NewTimer(time.Second)
			select {
			case <-k.exited:
			case <-t.C:
			}
			t.Stop()
		}
		proc.SignalGroup(k.cmd.Process.Pid, syscall.SIGKILL)
		<-k.exited
		k.cancelSocks()
		for _, s := range []zmq4.Socket{k.shell, k.iopub, k.control} {
			if s != nil {
				s.Close()
			}
		}
		os.RemoveAll(k.dir)
	})
}

// kernelStartup runs in every new kernel: a matplotlib figure that is
// displayed (display(fig), or the value of a cell) becomes an image/png
// result whatever the backend. The formatter is registered by type name,
// so matplotlib is not imported until the cell does.
const kernelStartup = `
def _execd_setup():
    try:
        from IPython import get_ipython
        from IPython.core.pylabtools import print_figure
        fmt = get_ipython().display_formatter.formatters["image/png"]
        fmt.for_type_by_name("matplotlib.figure", "Figure", lambda fig: print_figure(fig, "png"))
    except Exception:
        pass
_execd_setup()
del _execd_setup
`

// kernelEnv is env for a kernel: a notebook-style kernel wants
// matplotlib's inline backend (plt.show() yields an image/png result), so
// an MPLBACKEND of Agg, which images set for headless scripts, is replaced.
func kernelEnv(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == "MPLBACKEND" {
			if v == "" || strings.EqualFold(v, "agg") {
				continue
			}
		}
		out = append(out, kv)
	}
	return out
}

// tailBuffer keeps the last max bytes written to it (an interpreter's own
// output, for start errors).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
