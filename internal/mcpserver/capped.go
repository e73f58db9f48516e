package mcpserver

import (
	"fmt"
	"strings"
)

// DefaultOutputLimit is how many bytes of each output stream command_run
// returns by default.
const DefaultOutputLimit = 64 << 10

// cappedText accumulates a command's output up to limit bytes: it keeps the
// first half and the last half and counts what falls in between, so a
// chatty command cannot flood the model while its start and its end (where
// errors usually are) both survive. The zero value is not usable; make one
// with newCappedText.
type cappedText struct {
	limit   int
	head    []byte // up to limit/2 bytes, the start of the output
	tail    []byte // ring of up to limit-limit/2 bytes, the end of the output
	tailPos int    // next write position in tail once it is full
	dropped int64  // bytes that are neither in head nor in tail
}

func newCappedText(limit int) *cappedText {
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	return &cappedText{limit: limit}
}

func (c *cappedText) headCap() int { return c.limit / 2 }
func (c *cappedText) tailCap() int { return c.limit - c.limit/2 }

// WriteString appends s.
func (c *cappedText) WriteString(s string) {
	if room := c.headCap() - len(c.head); room > 0 {
		n := min(room, len(s))
		c.head = append(c.head, s[:n]...)
		s = s[n:]
	}
	for len(s) > 0 {
		if len(c.tail) < c.tailCap() {
			n := min(c.tailCap()-len(c.tail), len(s))
			c.tail = append(c.tail, s[:n]...)
			s = s[n:]
			continue
		}
		// The ring is full: each byte written evicts the oldest one.
		if len(s) >= c.tailCap() {
			c.dropped += int64(len(s)) // the old ring plus the start of s
			copy(c.tail, s[len(s)-c.tailCap():])
			c.tailPos = 0
			return
		}
		n := copy(c.tail[c.tailPos:], s)
		c.dropped += int64(n)
		c.tailPos = (c.tailPos + n) % c.tailCap()
		s = s[n:]
	}
}

// Truncated reports whether some output was dropped.
func (c *cappedText) Truncated() bool { return c.dropped > 0 }

// String returns the kept output; when something was dropped, a note in the
// middle says how much. A character cut at a boundary becomes U+FFFD.
func (c *cappedText) String() string {
	var b strings.Builder
	b.Grow(len(c.head) + len(c.tail) + 80)
	b.Write(c.head)
	if c.dropped > 0 {
		fmt.Fprintf(&b, "\n[... output truncated: %d bytes omitted (limit %d bytes per stream) ...]\n", c.dropped, c.limit)
	}
	b.Write(c.tail[c.tailPos:])
	b.Write(c.tail[:c.tailPos])
	return strings.ToValidUTF8(b.String(), "\uFFFD")
}
