package openapitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
)

// maxFrame bounds the bytes held for one unfinished frame; a longer line is
// reported and skipped.
const maxFrame = 4 << 20

// streamChecker passes a stream body through to the caller and validates each
// complete frame (a line of JSON) against a schema as the bytes go by. Only
// the current unfinished line is buffered.
type streamChecker struct {
	rc      io.ReadCloser
	schema  *openapi3.Schema
	framing string
	opts    []openapi3.SchemaValidationOption
	report  func(error)

	mu          sync.Mutex
	pending     []byte // bytes of the current, unterminated line
	skipping    bool   // dropping the rest of an oversized line
	expectBlank bool   // blank-line framing: a frame was just seen
	frames      int
	done        bool
}

func newStreamChecker(rc io.ReadCloser, schema *openapi3.Schema, framing string, opts []openapi3.SchemaValidationOption, report func(error)) *streamChecker {
	opts = append(opts[:len(opts):len(opts)], openapi3.VisitAsResponse(), openapi3.MultiErrors())
	return &streamChecker{rc: rc, schema: schema, framing: framing, opts: opts, report: report}
}

func (c *streamChecker) Read(p []byte) (int, error) {
	n, err := c.rc.Read(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done {
		c.feed(p[:n])
		if errors.Is(err, io.EOF) {
			c.finish()
		}
	}
	return n, err
}

// Close stops checking; a frame left incomplete by an early close is not an
// error.
func (c *streamChecker) Close() error {
	c.mu.Lock()
	c.done = true
	c.pending = nil
	c.mu.Unlock()
	return c.rc.Close()
}

func (c *streamChecker) feed(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			c.hold(b)
			return
		}
		c.hold(b[:i])
		b = b[i+1:]
		if c.skipping {
			c.skipping = false
		} else {
			c.line(bytes.TrimSuffix(c.pending, []byte("\r")))
		}
		c.pending = c.pending[:0]
	}
}

// hold appends part of the current line, within maxFrame.
func (c *streamChecker) hold(b []byte) {
	if c.skipping {
		return
	}
	if len(c.pending)+len(b) > maxFrame {
		c.frames++
		c.report(fmt.Errorf("stream frame %d: longer than %d bytes", c.frames, maxFrame))
		c.skipping = true
		c.expectBlank = c.framing == framingBlankLine
		c.pending = c.pending[:0]
		return
	}
	c.pending = append(c.pending, b...)
}

// line handles one complete line.
func (c *streamChecker) line(l []byte) {
	if c.framing == framingBlankLine && c.expectBlank {
		c.expectBlank = false
		if len(l) == 0 {
			return
		}
		c.report(fmt.Errorf("stream frame %d: not followed by a blank line", c.frames))
	}
	if len(l) == 0 {
		return
	}
	c.frames++
	c.frame(l)
	c.expectBlank = c.framing == framingBlankLine
}

// frame validates one JSON frame.
func (c *streamChecker) frame(l []byte) {
	var v any
	if err := json.Unmarshal(l, &v); err != nil {
		c.report(fmt.Errorf("stream frame %d: not a JSON value: %v: %q", c.frames, err, snippet(l)))
		return
	}
	if c.schema == nil {
		return
	}
	if err := c.schema.VisitJSON(v, c.opts...); err != nil {
		c.report(fmt.Errorf("stream frame %d doesn't match schema: %v: %s", c.frames, err, snippet(l)))
	}
}

// finish runs at end of stream: the last frame must be complete.
func (c *streamChecker) finish() {
	c.done = true
	switch {
	case c.skipping:
	case len(c.pending) > 0:
		c.frames++
		c.report(fmt.Errorf("stream ends inside frame %d (no terminating newline): %q", c.frames, snippet(c.pending)))
	case c.framing == framingBlankLine && c.expectBlank:
		c.report(fmt.Errorf("stream ends after frame %d without the blank line that ends a frame", c.frames))
	}
	c.pending = nil
}
