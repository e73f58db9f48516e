package command

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/execd/eventstream"
	"github.com/opensandbox-go/opensandbox/internal/execd/lines"
	"github.com/opensandbox-go/opensandbox/internal/execd/proc"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// After the command's shell exits, its output readers normally see EOF at
// once. When a process it left running still holds a pipe, the readers keep
// streaming while data keeps coming, until the pipe has been quiet for
// drainIdle or drainMax has passed since the exit; then the stream ends and
// later output only goes to the command's log.
const (
	drainIdle = 20 * time.Millisecond
	drainMax  = time.Second
)

// Run handles POST /command.
func (m *Manager) Run(w http.ResponseWriter, r *http.Request) {
	var req sandbox.RunCommandRequest
	if err := apierror.DecodeJSON(w, r, m.opts.MaxJSONBody, &req); err != nil {
		apierror.Write(w, r, err)
		return
	}
	if err := validate(&req); err != nil {
		apierror.Write(w, r, err)
		return
	}
	sw := eventstream.New(w)
	id := newID()
	cmd, err := m.prepare(&req)
	if err != nil {
		startFailed(sw, id, err)
		return
	}
	if req.Background {
		m.runBackground(r.Context(), sw, cmd, &req, id)
		return
	}
	m.runForeground(r.Context(), sw, cmd, &req, id)
}

func validate(req *sandbox.RunCommandRequest) error {
	if req.Command == "" {
		return apierror.BadRequest(apierror.CodeInvalidRequestBody, "command is required")
	}
	if req.Timeout < 0 {
		return apierror.BadRequest(apierror.CodeInvalidRequestBody, "timeout must be >= 0 milliseconds, got %d", req.Timeout)
	}
	if req.GID != nil && req.UID == nil {
		return apierror.BadRequest(apierror.CodeInvalidRequestBody, "gid requires uid")
	}
	return nil
}

// startFailed reports a command that could not start: init, then an error
// event whose value is the reason.
func startFailed(sw *eventstream.Writer, id string, err error) {
	sw.Send(sandbox.StreamEvent{Type: sandbox.EventInit, Text: id})
	sw.Send(sandbox.StreamEvent{Type: sandbox.EventError, Error: &sandbox.StreamError{
		Name: sandbox.ErrNameCommandExec, Value: err.Error(), Traceback: []string{err.Error()},
	}})
	sw.Close()
}

func (m *Manager) runBackground(ctx context.Context, sw *eventstream.Writer, cmd *exec.Cmd, req *sandbox.RunCommandRequest, id string) {
	path, err := m.logPath(id)
	if err != nil {
		startFailed(sw, id, err)
		return
	}
	logf, err := openLog(path)
	if err != nil {
		startFailed(sw, id, err)
		return
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	c, err := m.startProcess(cmd, req, id, path)
	logf.Close()
	if err != nil {
		os.Remove(path)
		startFailed(sw, id, err)
		return
	}
	if err := m.register(c); err != nil {
		proc.SignalGroup(c.pgid, 9)
		cmd.Wait()
		startFailed(sw, id, err)
		return
	}
	m.wg.Add(1)
	go m.wait(c, cmd, req.Timeout)
	sw.Send(sandbox.StreamEvent{Type: sandbox.EventInit, Text: id})
	sw.Send(sandbox.StreamEvent{Type: sandbox.EventExecutionComplete})
	sw.Close()
}

// wait records the exit of c, enforcing its timeout.
func (m *Manager) wait(c *Command, cmd *exec.Cmd, timeoutMs int64) {
	defer m.wg.Done()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var timeout <-chan time.Time
	if timeoutMs > 0 {
		t := time.NewTimer(time.Duration(timeoutMs) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	var werr error
	timedOut := false
	select {
	case werr = <-exited:
	case <-timeout:
		timedOut = true
		c.Interrupt(fmt.Sprintf("command timed out after %dms", timeoutMs))
		werr = <-exited
	}
	code, _ := proc.WaitExitCode(cmd, werr)
	msg := ""
	if code != 0 && werr != nil {
		msg = werr.Error()
	}
	c.finish(code, msg)
	// Retention first: whoever sees Done then sees the older commands
	// already forgotten (TestRetention failed once on the other order).
	m.markFinished(c)
	close(c.done)
	if timeout != nil && !timedOut {
		m.killLeftoversAtTimeout(c, timeout)
	}
}

// leftoverPoll is how often a finished command's session is checked for
// processes it left behind while its timeout is pending.
const leftoverPoll = time.Second

// killLeftoversAtTimeout enforces a command's timeout on what its shell
// left running (`server &`, or a fork bomb that backgrounds itself): when
// the timeout fires and processes of the command's session are still
// alive, they are killed. It returns as soon as none are left, at the
// timeout, or when the Manager closes.
func (m *Manager) killLeftoversAtTimeout(c *Command, timeout <-chan time.Time) {
	tick := time.NewTicker(leftoverPoll)
	defer tick.Stop()
	for {
		alive, n, err := proc.TreeAlive(c.pgid)
		if err != nil || !alive {
			return
		}
		select {
		case <-m.closing:
			return
		case <-tick.C:
		case <-timeout:
			ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
			defer cancel()
			if err := proc.KillTree(ctx, c.pgid); err != nil {
				m.log.Error("cannot end the processes a command left behind", "id", c.ID, "err", err)
			} else {
				m.log.Info("timeout killed the processes a command left behind", "id", c.ID, "processes", n)
			}
			return
		}
	}
}

func (m *Manager) runForeground(ctx context.Context, sw *eventstream.Writer, cmd *exec.Cmd, req *sandbox.RunCommandRequest, id string) {
	outR, outW, err := os.Pipe()
	if err != nil {
		startFailed(sw, id, fmt.Errorf("create stdout pipe: %w", err))
		return
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		startFailed(sw, id, fmt.Errorf("create stderr pipe: %w", err))
		return
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	// Without a log directory the command still runs; its log just
	// stays in memory, capped (see outputLog).
	path, _ := m.logPath(id)
	c, err := m.startProcess(cmd, req, id, path)
	outW.Close()
	errW.Close()
	if err == nil {
		err = m.register(c)
		if err != nil {
			proc.SignalGroup(c.pgid, 9)
			cmd.Wait()
		}
	}
	if err != nil {
		outR.Close()
		errR.Close()
		startFailed(sw, id, err)
		return
	}
	log := &outputLog{path: c.logPath}
	c.log = log
	m.wg.Add(1)
	go m.wait(c, cmd, req.Timeout)

	sw.SendFlush(sandbox.StreamEvent{Type: sandbox.EventInit, Text: id})
	pingCtx, stopPing := context.WithCancel(ctx)
	defer stopPing()
	go sw.Ping(pingCtx, eventstream.PingInterval)

	var pumps sync.WaitGroup
	streamed := make(chan struct{}, 2) // one token per pump once the stream no longer needs it
	for _, p := range []struct {
		f   *os.File
		typ string
	}{{outR, sandbox.EventStdout}, {errR, sandbox.EventStderr}} {
		pumps.Add(1)
		go func() {
			defer pumps.Done()
			pump(p.f, p.typ, sw, log, c.done, streamed)
		}()
	}
	go func() {
		// The log stays open while stragglers write to it.
		pumps.Wait()
		log.Close()
	}()

	// The client going away ends the command; nothing is left behind.
	select {
	case <-c.done:
	case <-ctx.Done():
		c.Interrupt("client disconnected")
		<-c.done
	}
	<-streamed
	<-streamed
	stopPing()

	st := c.Status()
	if *st.ExitCode == 0 {
		sw.Send(sandbox.StreamEvent{Type: sandbox.EventExecutionComplete, ExecutionTime: time.Since(c.StartedAt).Milliseconds()})
	} else {
		trace := st.Error
		if trace == "" {
			trace = "exit status " + strconv.Itoa(*st.ExitCode)
		}
		sw.Send(sandbox.StreamEvent{Type: sandbox.EventError, Error: &sandbox.StreamError{
			Name: sandbox.ErrNameCommandExec, Value: strconv.Itoa(*st.ExitCode), Traceback: []string{trace},
		}})
	}
	sw.Close()
}

// pump reads one output pipe of a foreground command, streams each line as
// an event and appends it to the command's log. Once the command has exited
// and the pipe stays quiet for drainIdle (a process it left behind still
// holds the pipe), pump signals streamed and keeps copying to the log alone
// until the pipe closes, so such processes never block on a full pipe.
func pump(f *os.File, typ string, sw *eventstream.Writer, log *outputLog, exited <-chan struct{}, streamed chan<- struct{}) {
	defer f.Close()
	var (
		split     lines.Splitter
		buf       = make([]byte, 32<<10)
		streaming = true
		exitAt    time.Time
	)
	emit := func(line []byte) {
		if streaming {
			sw.Send(sandbox.StreamEvent{Type: typ, Text: string(line)})
		}
		log.WriteLine(line)
	}
	stopStreaming := func() {
		if streaming {
			split.Flush(emit)
			sw.Flush()
			log.Flush()
			streaming = false
			streamed <- struct{}{}
		}
	}
	defer stopStreaming()
	readDone := make(chan struct{})
	defer close(readDone)
	go func() {
		// Arm the drain deadline once the command has exited.
		select {
		case <-exited:
			f.SetReadDeadline(time.Now().Add(drainIdle))
		case <-readDone:
		}
	}()
	for {
		n, err := f.Read(buf)
		if n > 0 {
			split.Feed(buf[:n], emit)
			if streaming {
				sw.Flush()
			}
			log.Flush()
			if streaming && exitAt.IsZero() {
				select {
				case <-exited:
					exitAt = time.Now()
				default:
				}
			}
			if streaming && !exitAt.IsZero() {
				deadline := time.Now().Add(drainIdle)
				if limit := exitAt.Add(drainMax); deadline.After(limit) {
					deadline = limit
				}
				f.SetReadDeadline(deadline)
			}
		}
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// Output the command wrote before it exited may still sit in
			// the pipe (an expired deadline fails the read unread); an
			// exited command's writes fit in far less than ReadBuffered takes.
			proc.ReadBuffered(f, buf, func(b []byte) { split.Feed(b, emit) })
			stopStreaming()
			f.SetReadDeadline(time.Time{})
			continue
		}
		return // EOF or a read error: the stream is complete
	}
}
