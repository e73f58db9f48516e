package inject

import (
	"bytes"
	"io"
	"strings"
)

// pair is one replacement: old (a form of a placeholder) by new.
type pair struct{ old, new string }

// earliest returns the position of the first occurrence of any old in b and
// which pair it is (the longest at that position, as pairs are sorted
// longest first), or -1.
func earliest(b []byte, ps []pair) (int, int) {
	at, which := -1, -1
	for i, p := range ps {
		j := bytes.Index(b, []byte(p.old))
		if j >= 0 && (at < 0 || j < at) {
			at, which = j, i
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
	rest := []byte(s)
	changed := false
	grown := 0
	for {
		at, which := earliest(rest, ps)
		if at < 0 {
			break
		}
		if grown += len(ps[which].new) - len(ps[which].old); grown > limit {
			return "", false
		}
		changed = true
		b.Write(rest[:at])
		b.WriteString(ps[which].new)
		rest = rest[at+len(ps[which].old):]
	}
	if !changed {
		return s, true
	}
	b.Write(rest)
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
// the rest of in waits for the next scan). At the end of the source (final)
// nothing is held back.
func (r *replaceReader) scan(final bool) {
	out := r.out[:0:0]
	rest := r.in
	r.pending = false
	for {
		if len(out) >= readChunk {
			r.out, r.in, r.pending = out, rest, true
			return
		}
		at, which := earliest(rest, r.ps)
		if at < 0 {
			break
		}
		out = append(out, rest[:at]...)
		out = append(out, r.ps[which].new...)
		rest = rest[at+len(r.ps[which].old):]
	}
	hold := 0
	if !final {
		hold = r.partialTail(rest)
	}
	out = append(out, rest[:len(rest)-hold]...)
	r.out = out
	// Keep the held tail at the front of a fresh slice: the next read
	// appends after it.
	tail := make([]byte, hold, hold+readChunk)
	copy(tail, rest[len(rest)-hold:])
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
