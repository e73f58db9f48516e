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
type redactingBody struct {
	src     io.ReadCloser
	needles [][]byte
	keep    int
	bp      *[]byte // pooled buffer, nil until the first read and after free
	buf     []byte
	off     int // buf[off:ready] is masked and safe to hand out
	ready   int
	end     int // buf[ready:end] could be the start of a secret: held back
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
			if r.ready < r.end {
				r.ready = r.end
				break
			}
			return 0, r.err
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
		for _, nd := range r.needles {
			mask(r.buf[:r.end], nd)
		}
		hold := 0
		if !r.eof {
			hold = r.partialTail()
		}
		r.ready = r.end - hold
		if transient && r.ready == 0 {
			return 0, err
		}
	}
	n := copy(p, r.buf[r.off:r.ready])
	r.off += n
	return n, nil
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

// mask overwrites every occurrence of needle in b with '*'.
func mask(b, needle []byte) {
	for i := 0; ; {
		j := bytes.Index(b[i:], needle)
		if j < 0 {
			return
		}
		for k := i + j; k < i+j+len(needle); k++ {
			b[k] = '*'
		}
		i += j + len(needle)
	}
}
