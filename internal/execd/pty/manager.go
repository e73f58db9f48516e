package pty

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
)

// Defaults applied by New to zero Options fields.
const (
	DefaultReplayBytes  = 1 << 20
	DefaultPingInterval = 30 * time.Second
	DefaultWriteTimeout = 10 * time.Second
)

// minQueueBytes is the smallest per-client output queue, so that one full
// read of the process output always fits.
const minQueueBytes = 64 << 10

// Options configures a Manager. Every field is optional.
type Options struct {
	// Env builds the environment of session processes; the zero value is
	// execd's own environment.
	Env procenv.Builder
	// Logger receives session lifecycle records; nil means slog.Default().
	Logger *slog.Logger
	// ReplayBytes is how much recent output each session keeps for replay
	// with since=; 0 or less means DefaultReplayBytes (1 MiB). A client
	// may fall behind live output by twice this (at least 64 KiB) before
	// it is disconnected.
	ReplayBytes int
	// PingInterval is the period of WebSocket pings to attached clients;
	// 0 or less means DefaultPingInterval (30s).
	PingInterval time.Duration
	// WriteTimeout bounds each WebSocket write, each ping's round trip and
	// each write to the process stdin; 0 or less means DefaultWriteTimeout
	// (10s).
	WriteTimeout time.Duration
}

// Manager owns the terminal sessions of one execd. Its methods are the
// HTTP handlers of the /pty routes; they are safe for concurrent use.
type Manager struct {
	opts       Options
	log        *slog.Logger
	queueBytes int

	mu       sync.Mutex
	sessions map[string]*session
	closing  bool
	// wg counts WebSocket handlers and every goroutine the package starts,
	// so Close can wait for all of them.
	wg sync.WaitGroup
}

// New returns a Manager with the defaults applied to opts.
func New(opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ReplayBytes <= 0 {
		opts.ReplayBytes = DefaultReplayBytes
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = DefaultPingInterval
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	return &Manager{
		opts:       opts,
		log:        opts.Logger.With(slog.String("component", "pty")),
		queueBytes: max(2*opts.ReplayBytes, minQueueBytes),
		sessions:   make(map[string]*session),
	}
}

// Close kills every session's process tree, closes attached sockets with
// 1001 (going away) after a SESSION_GONE error frame, and waits until all
// goroutines of the package have returned or ctx ends. Later requests get
// 503 SHUTTING_DOWN.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closing = true
	sessions := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		sessions = append(sessions, s)
	}
	clear(m.sessions)
	m.mu.Unlock()

	for _, s := range sessions {
		s.terminate(closeRequest{websocket.StatusGoingAway, codeSessionGone}, "execd is shutting down")
	}
	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pty: wait for %d sessions to end: %w", len(sessions), ctx.Err())
	}
}

// enter registers a WebSocket handler with wg unless the manager is
// closing; the caller must call m.wg.Done when it returns.
func (m *Manager) enter() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return false
	}
	m.wg.Add(1)
	return true
}

// add registers a new session under a fresh id.
func (m *Manager) add(cwd, command string) (*session, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return nil, false
	}
	for {
		id := newID()
		if _, taken := m.sessions[id]; taken {
			continue
		}
		s := newSession(m, id, cwd, command)
		m.sessions[id] = s
		return s, true
	}
}

func (m *Manager) lookup(id string) *session {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sessions[id]
}

// remove forgets a session and returns it, or nil if id is unknown.
func (m *Manager) remove(id string) *session {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[id]
	delete(m.sessions, id)
	return s
}

func newID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails on Linux (Go 1.24+ crashes instead)
	return hex.EncodeToString(b[:])
}

// Count returns how many terminal sessions exist.
func (m *Manager) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}
