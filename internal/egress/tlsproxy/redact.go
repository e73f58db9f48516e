package tlsproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
)

// redactingBody masks every occurrence of the injected secrets in a
// response body as it streams, with as many '*' as the secret has bytes,
// so Content-Length stays true. Only a tail that could be the start of a
// secret is held back until more of the body arrives or it ends, so
// interactive streams are not delayed. A timeout from the source (the
// proxy's flush deadline) is passed on and reading may continue.
//
// Occurrences are found in the body as it came, for all secrets, before
// any is masked, and the held tail stays unmasked until it is released:
// when one secret contains another, masking the shorter first would break
// the longer one's match and show the rest of it.
type redactingBody struct {
	src     io.ReadCloser
	needles [][]byte
	keep    int
	bp      *[]byte // pooled buffer, nil until the first read and after free
	buf     []byte
	off     int // buf[off:ready] is masked and safe to hand out
	ready   int
	end     int // buf[ready:end] could be the start of a secret: held back, unmasked
	carry   int // the first carry bytes of the held tail belong to a secret found already
	ranges  [][2]int
	eof     bool
	err     error
}

func newRedactingBody(src io.ReadCloser, needles []string) *redactingBody {
	r := &redactingBody{src: src}
	for _, n := range needles {
		if n == "" {
			continue
		}
		r.needles = append(r.needles, []byte(n))
		r.keep = max(r.keep, len(n)-1)
	}
	return r
}

func (r *redactingBody) Read(p []byte) (int, error) {
	if len(r.needles) == 0 {
		return r.src.Read(p)
	}
	for r.off == r.ready {
		if r.eof {
			return 0, r.err // nothing is held back once the source ended
		}
		if r.buf == nil {
			if r.keep < 8<<10 {
				r.bp = buffers.Get().(*[]byte)
				r.buf = *r.bp
			} else {
				r.buf = make([]byte, 2*r.keep+32<<10)
			}
		}
		// Keep only the held tail, at the front.
		r.end = copy(r.buf, r.buf[r.off:r.end])
		r.off, r.ready = 0, 0
		n, err := r.src.Read(r.buf[r.end:])
		r.end += n
		transient := false
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				transient = true
			} else {
				r.eof = true
				r.err = err
			}
		}
		hold := 0
		if !r.eof {
			hold = r.partialTail()
		}
		r.ready = r.end - hold
		r.maskReleased()
		if transient && r.ready == 0 {
			return 0, err
		}
	}
	n := copy(p, r.buf[r.off:r.ready])
	r.off += n
	return n, nil
}

// maskReleased masks, in buf[:ready], every occurrence of a secret in
// buf[:end] (all searched before any is masked) and the previous carry,
// and sets carry to the part of the held tail that an occurrence starting
// in the released part covers. An occurrence inside the held tail is
// found again with the next read.
func (r *redactingBody) maskReleased() {
	r.ranges = r.ranges[:0]
	for _, nd := range r.needles {
		for i := 0; ; {
			j := bytes.Index(r.buf[i:r.end], nd)
			if j < 0 {
				break
			}
			if i+j < r.ready {
				r.ranges = append(r.ranges, [2]int{i + j, i + j + len(nd)})
			}
			i += j + 1
		}
	}
	if r.carry > 0 {
		r.ranges = append(r.ranges, [2]int{0, r.carry})
	}
	r.carry = 0
	for _, rg := range r.ranges {
		for k := rg[0]; k < min(rg[1], r.ready); k++ {
			r.buf[k] = '*'
		}
		r.carry = max(r.carry, rg[1]-r.ready)
	}
}

func (r *redactingBody) Close() error { return r.src.Close() }

// free returns the buffer to the pool; the body must not be read after.
func (r *redactingBody) free() {
	if r.bp != nil {
		buffers.Put(r.bp)
		r.bp, r.buf = nil, nil
	}
}

// partialTail is the length of the longest end of the unreleased bytes that
// is a proper prefix of a secret.
func (r *redactingBody) partialTail() int {
	pending := r.buf[r.off:r.end]
	for n := min(r.keep, len(pending)); n > 0; n-- {
		tail := pending[len(pending)-n:]
		for _, nd := range r.needles {
			if len(nd) > n && bytes.HasPrefix(nd, tail) {
				return n
			}
		}
	}
	return 0
}
