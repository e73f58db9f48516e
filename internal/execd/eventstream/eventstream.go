// Package eventstream writes execution events in the execd wire format: each
// event is a single-line JSON object followed by a blank line, with a
// timestamp on every event. Headers are committed lazily on the first event
// so that a handler can still answer with a JSON error before anything ran.
//
// A Writer is safe for concurrent use: stdout, stderr and ping producers
// share it. Events are buffered and reach the client on Flush, so a producer
// that emits many lines from one read pays for one flush, not one per line.
package eventstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// PingInterval is how often a long stream carries a ping event.
const PingInterval = 3 * time.Second

// ErrClosed is returned by Send after the client went away or Close was called.
var ErrClosed = errors.New("event stream closed")

// Writer emits events to one HTTP response.
type Writer struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	buf     *bufio.Writer
	started bool
	closed  bool
	err     error
	now     func() time.Time
}

// New returns a Writer for w.
func New(w http.ResponseWriter) *Writer {
	return &Writer{w: w, rc: http.NewResponseController(w), now: time.Now}
}

// Started reports whether any event has been written (and so headers sent).
func (s *Writer) Started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// Send buffers one event; it sets Timestamp when it is zero.
func (s *Writer) Send(ev sandbox.StreamEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sendLocked(ev)
}

// SendFlush sends one event and flushes it to the client.
func (s *Writer) SendFlush(ev sandbox.StreamEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.sendLocked(ev); err != nil {
		return err
	}
	return s.flushLocked()
}

func (s *Writer) sendLocked(ev sandbox.StreamEvent) error {
	if s.closed {
		return ErrClosed
	}
	if s.err != nil {
		return s.err
	}
	if ev.Timestamp == 0 {
		ev.Timestamp = s.now().UnixMilli()
	}
	frame, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if !s.started {
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("Connection", "keep-alive")
		h.Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
		s.buf = bufio.NewWriterSize(s.w, 32<<10)
		s.started = true
	}
	s.buf.Write(frame)
	if _, err := s.buf.WriteString("\n\n"); err != nil {
		s.err = err
		return err
	}
	return nil
}

// Flush pushes buffered events to the client.
func (s *Writer) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushLocked()
}

func (s *Writer) flushLocked() error {
	if s.err != nil {
		return s.err
	}
	if !s.started || s.closed {
		return nil
	}
	if err := s.buf.Flush(); err != nil {
		s.err = err
		return err
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
		return err
	}
	return nil
}

// Close flushes what is buffered and refuses further events.
func (s *Writer) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.flushLocked()
	s.closed = true
	return err
}

// Ping sends a ping event every interval until ctx ends or the stream fails.
// Run it in its own goroutine and cancel ctx when the execution is over.
func (s *Writer) Ping(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.SendFlush(sandbox.StreamEvent{Type: sandbox.EventPing, Text: "pong"}); err != nil {
				return
			}
		}
	}
}
