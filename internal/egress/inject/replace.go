package inject

import (
	"bytes"
	"io"
	"strings"
)

// pair is one replacement: old (a form of a placeholder) by new.
type pair struct{ old, new string }

// matcher finds, left to right, the pairs' olds in b. It remembers where
// each old occurs next, so each is searched for again only when a
// replacement passed that position: a scan costs about len(b) per pair,
// however many occurrences there are (a bytes.Index per pair at every
// occurrence would be quadratic).
type matcher struct {
	b        []byte
	olds     [][]byte
	pos      []int // next occurrence of olds[i] at or after the last from; -1 none, -2 unknown
	searched int   // bytes handed to bytes.Index (for tests)
}

func newMatcher(b []byte, ps []pair) *matcher {
	m := &matcher{b: b, olds: make([][]byte, len(ps)), pos: make([]int, len(ps))}
	for i, p := range ps {
		m.olds[i] = []byte(p.old)
		m.pos[i] = -2
	}
	return m
}

// next returns the position of the first occurrence at or after from of
// any old and which pair it is (the longest at that position, as pairs are
// sorted longest first), or -1. from never decreases between calls.
func (m *matcher) next(from int) (int, int) {
	at, which := -1, -1
	for i, old := range m.olds {
		if m.pos[i] == -1 {
			continue // none left in b
		}
		if m.pos[i] < from {
			j := bytes.Index(m.b[from:], old)
			if j < 0 {
				m.searched += len(m.b) - from
				m.pos[i] = -1
				continue
			}
			m.searched += j + len(old)
			m.pos[i] = from + j
		}
		if at < 0 || m.pos[i] < at {
			at, which = m.pos[i], i
		}
	}
	return at, which
}

// replaceAll replaces, left to right and without overlap, every occurrence
// of each pair's old in s. It fails (false) when the result would be more
// than limit bytes longer than s: a short placeholder repeated many times
// must not turn a long secret into an unbounded allocation.
func replaceAll(s string, ps []pair, limit int) (string, bool) {
	if len(ps) == 0 {
		return s, true
	}
	var b strings.Builder
	in := []byte(s)
	m := newMatcher(in, ps)
	from := 0
	grown := 0
	for {
		at, which := m.next(from)
		if at < 0 {
			break
		}
		if grown += len(ps[which].new) - len(ps[which].old); grown > limit {
			return "", false
		}
		b.Write(in[from:at])
		b.WriteString(ps[which].new)
		from = at + len(ps[which].old)
	}
	if from == 0 {
		return s, true
	}
	b.Write(in[from:])
	return b.String(), true
}

// readChunk is how much of the source a replaceReader asks for at a time.
const readChunk = 32 << 10

// replaceReader streams src with every pair's old replaced by its new. It
// holds at most one read of input plus the longest tail that could still
// become a placeholder, and about one read of output (a scan stops once
// readChunk bytes are out, however much the replacements expand), so
// memory is bounded whatever the body's size and content.
type replaceReader struct {
	src     io.Reader
	ps      []pair
	keep    int    // longest old minus one: the most input ever held back
	in      []byte // input not yet scanned (a held-back tail, or more when pending)
	pending bool   // in holds input a scan left for later (its output was full)
	out     []byte // replaced output not yet handed out
	err     error  // the source's error, returned once out and in are drained
}

func newReplaceReader(src io.Reader, ps []pair) *replaceReader {
	r := &replaceReader{src: src, ps: ps}
	for _, p := range ps {
		r.keep = max(r.keep, len(p.old)-1)
	}
	return r
}

func (r *replaceReader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.pending {
			r.scan(r.err != nil)
			continue
		}
		if r.err != nil {
			return 0, r.err
		}
		if len(r.ps) == 0 {
			return r.src.Read(p)
		}
		n := len(r.in)
		if cap(r.in)-n < readChunk {
			grown := make([]byte, n, n+readChunk)
			copy(grown, r.in)
			r.in = grown
		}
		m, err := r.src.Read(r.in[n : n+readChunk])
		r.in = r.in[:n+m]
		if err != nil {
			r.err = err
		}
		r.scan(err != nil)
		if err == nil && m == 0 && len(r.out) == 0 {
			return 0, nil // a source that read nothing; let the caller retry
		}
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

// scan moves what can no longer be part of a placeholder from in to out,
// replaced, until about readChunk bytes are out (then pending is set and
// the rest of in waits for the next scan). Unless the source has ended
// (final), a match is taken only before the held tail, the longest end of
// in that could still become a placeholder: a placeholder that starts
// there, earlier than or at a complete match, might yet complete and would
// win, as it does when the whole input is at hand.
func (r *replaceReader) scan(final bool) {
	out := r.out[:0:0]
	m := newMatcher(r.in, r.ps)
	from := 0
	held := len(r.in) // where the held tail begins
	if !final {
		held -= r.partialTail(r.in)
	}
	r.pending = false
	for {
		if len(out) >= readChunk {
			r.out, r.in, r.pending = out, r.in[from:], true
			return
		}
		at, which := m.next(from)
		if at < 0 || at >= held {
			break
		}
		out = append(out, r.in[from:at]...)
		out = append(out, r.ps[which].new...)
		from = at + len(r.ps[which].old)
		if from > held {
			// The match covered the start of the tail: what could still
			// become a placeholder now begins later.
			held = len(r.in) - r.partialTail(r.in[from:])
		}
	}
	out = append(out, r.in[from:held]...)
	r.out = out
	// Keep the held tail at the front of a fresh slice: the next read
	// appends after it.
	tail := make([]byte, len(r.in)-held, len(r.in)-held+readChunk)
	copy(tail, r.in[held:])
	r.in = tail
}

// partialTail is the length of the longest end of b that is a proper prefix
// of some old: it could become a placeholder with the next read.
func (r *replaceReader) partialTail(b []byte) int {
	for n := min(r.keep, len(b)); n > 0; n-- {
		tail := b[len(b)-n:]
		for _, p := range r.ps {
			if len(p.old) > n && bytes.HasPrefix([]byte(p.old), tail) {
				return n
			}
		}
	}
	return 0
}
