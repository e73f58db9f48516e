package pty

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"

	"github.com/coder/websocket"
	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/execd/proc"
	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// replayChunk is the largest payload of one replay frame.
const replayChunk = 32 << 10

type state int

const (
	stateNew     state = iota // registered, no process yet
	stateRunning              // process started, not yet reaped
	stateExited               // process reaped and its output drained
)

// session is one terminal session: its process, its output history and the
// client attached to it, if any. All mutable fields are guarded by mu, and
// so is the order of output: each chunk is recorded in the ring and queued
// for the client under one lock, so that replay and live output neither
// overlap nor leave a gap.
type session struct {
	m       *Manager
	id      string
	cwd     string // as requested; resolved again at start
	command string // "" means an interactive shell

	mu       sync.Mutex
	state    state
	gone     bool // deleted or shut down
	mode     string
	proc     *process
	ring     *ring
	client   *client // attached or reserved client
	exitCode int
	done     chan struct{} // closed when the process is reaped; nil before start
}

func newSession(m *Manager, id, cwd, command string) *session {
	return &session{m: m, id: id, cwd: cwd, command: command, ring: newRing(m.opts.ReplayBytes)}
}

func (s *session) status() sandbox.PTYStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sandbox.PTYStatus{SessionID: s.id, Running: s.state == stateRunning, OutputOffset: s.ring.total}
}

// reserve makes c the session's client before the WebSocket upgrade, so a
// concurrent attach is refused with 409 instead of racing. With takeover the
// previous client is closed with 4001 TAKEN_OVER.
func (s *session) reserve(c *client, takeover bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return errNoSession(s.id)
	}
	if old := s.client; old != nil {
		if !takeover {
			return apierror.New(http.StatusConflict, codeAlreadyConnected,
				"pty session %s already has a client; attach with takeover=1 to replace it", s.id)
		}
		old.out.finish(true, closeRequest{statusTakenOver, codeTakenOver},
			errorFrame(codeTakenOver, "another client took over session %s", s.id))
	}
	s.client = c
	return nil
}

// release drops c if it is still the session's client.
func (s *session) release(c *client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == c {
		s.client = nil
	}
}

// activate runs once c's socket is open: it starts the process on first
// attach, queues the connected frame and the replay, and from then on c
// receives live output. For a session whose process has already exited,
// c gets the replay and the exit frame, then a normal close.
func (s *session) activate(c *client, q attachQuery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != c {
		return // taken over or deleted meanwhile; c's outbox says so
	}
	if s.state == stateNew {
		if err := s.startLocked(!q.pipe); err != nil {
			s.m.log.Warn("pty session failed to start", slog.String("session", s.id), slog.Any("err", err))
			c.out.push(connectedFrame(s.id, modeName(!q.pipe)))
			c.out.finish(false, closeRequest{websocket.StatusInternalError, codeStartFailed},
				errorFrame(codeStartFailed, "%v", err))
			s.client = nil
			return
		}
	}
	c.out.push(connectedFrame(s.id, s.mode))
	if q.since >= 0 {
		off, b := s.ring.since(q.since)
		c.out.pushAll(replayFrames(off, b, replayChunk))
	}
	if s.state == stateExited {
		c.out.finish(false, closeRequest{websocket.StatusNormalClosure, ""}, exitFrame(s.exitCode))
		s.client = nil
		return
	}
	c.ready = true
}

func modeName(tty bool) string {
	if tty {
		return modePTY
	}
	return modePipe
}

// startLocked starts the process and the goroutines that pump its output
// and reap it.
func (s *session) startLocked(tty bool) error {
	spec, err := s.spec(tty)
	if err != nil {
		return err
	}
	p, err := startProcess(spec)
	if err != nil {
		return err
	}
	s.proc, s.state, s.mode = p, stateRunning, modeName(tty)
	s.done = make(chan struct{})
	s.m.log.Info("pty session started", slog.String("session", s.id), slog.String("mode", s.mode),
		slog.Int("pid", p.pid()))

	var pumps sync.WaitGroup
	for _, o := range p.outputs {
		pumps.Add(1)
		s.m.wg.Go(func() {
			defer pumps.Done()
			s.pump(o)
		})
	}
	s.m.wg.Go(func() { s.reap(p, &pumps) })
	return nil
}

// spec describes the process: the request's command through the shell, or
// an interactive shell (bash -i on a terminal, bash reading stdin on pipes).
func (s *session) spec(tty bool) (procSpec, error) {
	env, err := s.m.opts.Env.Environ(nil)
	if err != nil {
		return procSpec{}, fmt.Errorf("build environment: %w", err)
	}
	if tty && procenv.Lookup(env, "TERM") == "" {
		env = append(env, "TERM=xterm-256color")
	}
	dir, err := procenv.ResolveDir(s.cwd, env)
	if err != nil {
		return procSpec{}, err
	}
	argv := []string{procenv.Shell()}
	switch {
	case s.command != "":
		argv = append(argv, "-c", s.command)
	case tty:
		argv = append(argv, "-i")
	}
	return procSpec{argv: argv, env: env, dir: dir, tty: tty}, nil
}

// pump copies one output stream of the process into the session until the
// stream ends (EOF, EIO once the terminal has no writer left, the drain
// deadline after exit, or close).
func (s *session) pump(o procOutput) {
	buf := make([]byte, 32<<10)
	for {
		n, err := o.f.Read(buf)
		if n > 0 {
			s.output(o.ch, buf[:n])
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// What the process wrote before it exited may still be
			// buffered: a late read past the deadline does not look.
			proc.ReadBuffered(o.f, buf, func(b []byte) { s.output(o.ch, b) })
		}
		if err != nil {
			return
		}
	}
}

// output records p and forwards it to the attached client.
func (s *session) output(ch byte, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	off := s.ring.total
	s.ring.write(p)
	if c := s.client; c != nil && c.ready {
		s.deliverLocked(c, outputFrame(ch, off, p))
	}
}

// deliverLocked queues f for c; a client whose queue is full is dropped
// with an error naming the offset to resume from.
func (s *session) deliverLocked(c *client, f outFrame) {
	if c.out.push(f) {
		return
	}
	off := f.off
	if off < 0 {
		off = s.ring.total
	}
	s.client = nil
	c.out.overflow(off, closeRequest{websocket.StatusTryAgainLater, "SLOW_CLIENT"}, func(resume int64) outFrame {
		return errorFrame(codeRuntimeError,
			"client fell behind the output; reconnect with since=%d to resume", resume)
	})
	s.m.log.Debug("pty client dropped: output queue full", slog.String("session", s.id))
}

// reply queues a control answer for c if c is still the live client.
func (s *session) reply(c *client, f outFrame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == c && c.ready {
		s.deliverLocked(c, f)
	}
}

// attached returns the process when c is the live client of a running
// session; frames from anyone else are ignored.
func (s *session) attached(c *client) (*process, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc, s.client == c && c.ready && s.state == stateRunning
}

// reap waits for the process, lets the pumps drain what it wrote, then
// reports the exit to the attached client.
func (s *session) reap(p *process, pumps *sync.WaitGroup) {
	waitErr := p.cmd.Wait()
	code := proc.ExitCode(p.cmd.ProcessState)
	p.drain()
	pumps.Wait()
	p.close()

	s.mu.Lock()
	s.state, s.exitCode = stateExited, code
	if c := s.client; c != nil && c.ready {
		c.out.finish(false, closeRequest{websocket.StatusNormalClosure, ""}, exitFrame(code))
		s.client = nil
	}
	close(s.done)
	s.mu.Unlock()
	s.m.log.Info("pty session exited", slog.String("session", s.id), slog.Int("exit_code", code),
		slog.Any("wait", waitErr))
}

// terminate marks the session gone, closes its client with a SESSION_GONE
// error and cr, and kills the process tree. It returns the channel closed
// once the process is reaped (nil if it never started).
func (s *session) terminate(cr closeRequest, why string) <-chan struct{} {
	s.mu.Lock()
	if s.gone {
		done := s.done
		s.mu.Unlock()
		return done
	}
	s.gone = true
	if c := s.client; c != nil {
		c.out.finish(true, cr, errorFrame(codeSessionGone, "%s", why))
		s.client = nil
	}
	p, running, done := s.proc, s.state == stateRunning, s.done
	s.mu.Unlock()
	if running {
		p.kill()
	}
	return done
}
