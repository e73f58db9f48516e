// Package readiness is how execd tells the runtime that started it that
// its API accepts requests, without the runtime polling for it: the
// runtime passes a fresh random marker in MarkerEnv, and execd, once its
// listening socket is open, writes Line(marker) to its standard error,
// which the runtime reads from the container's output stream (Docker:
// an attach made before the container starts). The marker is for execd
// alone: it is removed from the environment before any other process
// starts, so the sandbox's entrypoint cannot announce readiness early
// (and were it read anyway, an early line only makes the runtime's
// confirming request come sooner).
//
// The package depends on the standard library only: both execd and the
// runtime driver import it.
package readiness

import (
	"bytes"
	"errors"
)

// MarkerEnv names the variable that carries the marker.
const MarkerEnv = "OPENSANDBOX_EXECD_READY_MARKER"

// Line is what execd writes once it listens: one short line, written with
// a single write (atomic on a pipe), so output of other processes cannot
// split it.
func Line(marker string) string {
	return "opensandbox execd ready " + marker + "\n"
}

// ErrSeen is what a Matcher's Write returns once the line went through it,
// to stop the copy that feeds it.
var ErrSeen = errors.New("readiness: execd is ready")

// Matcher is an io.Writer that watches a byte stream for Line(marker),
// also when the stream splits it across writes.
type Matcher struct {
	want []byte
	tail []byte // the last len(want)-1 bytes seen
}

// NewMatcher watches for Line(marker).
func NewMatcher(marker string) *Matcher {
	return &Matcher{want: []byte(Line(marker))}
}

// Write consumes p; it returns ErrSeen once the line was seen.
func (m *Matcher) Write(p []byte) (int, error) {
	buf := append(m.tail, p...)
	if bytes.Contains(buf, m.want) {
		m.tail = nil
		return len(p), ErrSeen
	}
	if keep := len(m.want) - 1; len(buf) > keep {
		buf = buf[len(buf)-keep:]
	}
	m.tail = append(m.tail[:0:0], buf...)
	return len(p), nil
}
