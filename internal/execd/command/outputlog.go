package command

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// memLogLimit is how much of a foreground command's output is kept in
// memory before its log moves to a file. Most commands print far less, and
// creating a file per command is a measurable share of a short round trip.
const memLogLimit = 256 << 10

// outputLog is the combined stdout+stderr log of a foreground command,
// written by its two pumps and read by GET /command/{id}/logs. It lives in
// memory until it outgrows memLogLimit, then in a file.
type outputLog struct {
	path string

	mu      sync.Mutex
	mem     []byte
	f       *os.File // set once spilled
	size    int64
	pending []byte // lines not yet written to f
	err     error
}

// WriteLine appends line and a newline; an empty line arrives as "\n".
func (l *outputLog) WriteLine(line []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	nl := len(line) != 1 || line[0] != '\n'
	if l.f == nil {
		if l.err != nil {
			return // no file to move to: the log keeps its first memLogLimit bytes
		}
		l.mem = append(l.mem, line...)
		if nl {
			l.mem = append(l.mem, '\n')
		}
		l.size = int64(len(l.mem))
		if len(l.mem) > memLogLimit {
			l.spillLocked()
		}
		return
	}
	l.pending = append(l.pending, line...)
	if nl {
		l.pending = append(l.pending, '\n')
	}
	l.size += int64(len(line))
	if nl {
		l.size++
	}
}

func (l *outputLog) spillLocked() {
	if l.path == "" {
		l.err = errors.New("no directory for command logs")
		return
	}
	f, err := openLog(l.path)
	if err != nil {
		l.err = err
		return // the log stops growing; the stream is unaffected
	}
	l.f, l.pending, l.mem = f, l.mem, nil
	l.flushLocked()
}

// Flush writes buffered lines to the file, when there is one.
func (l *outputLog) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked()
}

func (l *outputLog) flushLocked() {
	if l.f == nil || len(l.pending) == 0 {
		return
	}
	if _, err := l.f.Write(l.pending); err != nil && l.err == nil {
		l.err = fmt.Errorf("write command log: %w", err)
	}
	l.pending = l.pending[:0]
}

// Close flushes and closes the file, if any.
func (l *outputLog) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked()
	if l.f != nil {
		l.f.Close()
	}
}

// Read returns up to max bytes from offset (clamped to the end) and the
// offset that follows them.
func (l *outputLog) Read(offset, max int64) ([]byte, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked()
	offset = min(offset, l.size)
	n := min(l.size-offset, max)
	if l.f == nil {
		return append([]byte(nil), l.mem[offset:offset+n]...), offset + n, nil
	}
	buf := make([]byte, n)
	f, err := os.Open(l.path)
	if err != nil {
		return nil, offset, fmt.Errorf("open command log: %w", err)
	}
	defer f.Close()
	if _, err := io.ReadFull(io.NewSectionReader(f, offset, n), buf); err != nil {
		return nil, offset, fmt.Errorf("read command log: %w", err)
	}
	return buf, offset + n, nil
}
