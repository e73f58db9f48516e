// Package command runs shell commands for execd's /command API: foreground
// commands stream their output as events while they run, background
// commands write to a log that clients poll. Every command runs in its own
// process group so that a timeout, an interrupt or a client that goes away
// ends the whole process tree, not just the shell.
package command

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/execd/proc"
	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Options configure a Manager. Zero fields take the documented defaults.
type Options struct {
	// Env builds the environment of every command.
	Env procenv.Builder
	// LogDir holds the output logs of background commands and of large
	// foreground output; default: a private scratch directory made on first
	// use (see procenv.MkdirScratch) and removed by Close.
	LogDir string
	// KillGrace is the time between SIGTERM and SIGKILL when a command is
	// interrupted or times out; default 3s.
	KillGrace time.Duration
	// Retain is how many finished commands keep their status and log;
	// default 1024. The oldest are forgotten first.
	Retain int
	// MaxJSONBody caps request bodies; default 1 MiB.
	MaxJSONBody int64
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Manager owns the commands started through the API.
type Manager struct {
	opts       Options
	ownsLogDir bool
	log        *slog.Logger

	mu       sync.Mutex
	cmds     map[string]*Command
	finished []string // ids of finished commands, oldest first
	closed   bool
	closing  chan struct{}  // closed by Close: stop watching leftovers
	wg       sync.WaitGroup // command waiters
}

// New returns a Manager.
func New(opts Options) (*Manager, error) {
	if opts.KillGrace <= 0 {
		opts.KillGrace = 3 * time.Second
	}
	if opts.Retain <= 0 {
		opts.Retain = 1024
	}
	if opts.MaxJSONBody <= 0 {
		opts.MaxJSONBody = 1 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	m := &Manager{opts: opts, log: opts.Logger, cmds: map[string]*Command{}, closing: make(chan struct{})}
	if opts.LogDir != "" {
		if err := os.MkdirAll(opts.LogDir, 0o700); err != nil {
			return nil, fmt.Errorf("create command log dir: %w", err)
		}
	}
	return m, nil
}

// logDir returns the directory for command logs, creating the default one
// on first use so that execd starts even where no scratch space exists;
// commands that need a log then fail with the reason.
func (m *Manager) logDir() (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.opts.LogDir != "" {
		return m.opts.LogDir, nil
	}
	dir, err := procenv.MkdirScratch("execd-commands-")
	if err != nil {
		return "", fmt.Errorf("create command log dir: %w", err)
	}
	m.opts.LogDir, m.ownsLogDir = dir, true
	return dir, nil
}

// Command is one command started through the API.
type Command struct {
	ID         string
	Content    string
	Background bool
	StartedAt  time.Time
	logPath    string
	log        *outputLog    // foreground commands; background ones log to logPath
	done       chan struct{} // closed when the process has exited
	pgid       int           // also the session id: commands run with setsid
	killGrace  time.Duration
	logger     *slog.Logger
	wg         *sync.WaitGroup // the Manager's; it waits for the kill to finish

	mu         sync.Mutex
	finishedAt time.Time
	exitCode   *int
	errMsg     string
	interrupt  sync.Once
}

// Status returns the wire status of c.
func (c *Command) Status() sandbox.CommandStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := sandbox.CommandStatus{
		ID:        c.ID,
		Content:   c.Content,
		Running:   c.exitCode == nil,
		Error:     c.errMsg,
		StartedAt: c.StartedAt.UTC(),
	}
	if c.exitCode != nil {
		code := *c.exitCode
		st.ExitCode = &code
		fin := c.finishedAt.UTC()
		st.FinishedAt = &fin
	}
	return st
}

func (c *Command) finish(code int, errMsg string) {
	c.mu.Lock()
	c.exitCode = &code
	c.finishedAt = time.Now()
	if c.errMsg == "" {
		c.errMsg = errMsg
	}
	c.mu.Unlock()
}

// setError records why the command ended badly (timeout, interrupt) before
// the process exit is recorded, so that the reason wins over "exit status".
func (c *Command) setError(msg string) {
	c.mu.Lock()
	if c.errMsg == "" && c.exitCode == nil {
		c.errMsg = msg
	}
	c.mu.Unlock()
}

// killTimeout bounds the SIGKILL passes over a command's process tree.
const killTimeout = 30 * time.Second

// Interrupt ends the command's whole process tree: SIGTERM, then SIGKILL
// passes once the shell has exited or the grace period has passed. It
// returns at once; calling it again does nothing.
func (c *Command) Interrupt(reason string) {
	select {
	case <-c.done:
		return
	default:
	}
	c.interrupt.Do(func() {
		c.setError(reason)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			if err := proc.TerminateTree(c.pgid, c.killGrace, killTimeout, c.done); err != nil {
				c.logger.Error("cannot end a command's processes", "id", c.ID, "err", err)
			}
		}()
	})
}

// Done is closed when the command's process has exited.
func (c *Command) Done() <-chan struct{} { return c.done }

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return "cmd-" + hex.EncodeToString(b[:])
}

func (m *Manager) register(c *Command) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errClosed
	}
	m.cmds[c.ID] = c
	return nil
}

// markFinished records that c ended and forgets the oldest finished
// commands beyond the retention limit.
func (m *Manager) markFinished(c *Command) {
	m.mu.Lock()
	m.finished = append(m.finished, c.ID)
	var evict []*Command
	for len(m.finished) > m.opts.Retain {
		id := m.finished[0]
		m.finished = m.finished[1:]
		if old, ok := m.cmds[id]; ok {
			evict = append(evict, old)
			delete(m.cmds, id)
		}
	}
	m.mu.Unlock()
	for _, old := range evict {
		os.Remove(old.logPath)
	}
}

// Get returns the command with the given id.
func (m *Manager) Get(id string) (*Command, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.cmds[id]
	return c, ok
}

// Close interrupts every running command, waits for them to exit (or ctx to
// end) and removes the log directory when the Manager created it.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if !m.closed {
		close(m.closing)
	}
	m.closed = true
	running := make([]*Command, 0, len(m.cmds))
	for _, c := range m.cmds {
		running = append(running, c)
	}
	m.mu.Unlock()
	for _, c := range running {
		c.Interrupt("execd is shutting down")
	}
	waited := make(chan struct{})
	go func() { m.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
		return ctx.Err()
	}
	m.mu.Lock()
	dir, owned := m.opts.LogDir, m.ownsLogDir
	m.mu.Unlock()
	if owned {
		return os.RemoveAll(dir)
	}
	return nil
}

// logPath is where command id keeps its log file.
func (m *Manager) logPath(id string) (string, error) {
	dir, err := m.logDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, id+".log"), nil
}

// Running returns how many commands are running now.
func (m *Manager) Running() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.cmds {
		select {
		case <-c.done:
		default:
			n++
		}
	}
	return n
}
