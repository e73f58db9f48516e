package tlsproxy

import (
	"bytes"
	"io"
)

// redactingBody masks every occurrence of the injected secrets in a
// response body as it streams, with as many '*' as the secret has bytes,
// so Content-Length stays true. Only a tail that could be the start of a
// secret is held back until more of the body arrives or it ends, so
// interactive streams are not delayed.
type redactingBody struct {
	src     io.ReadCloser
	needles [][]byte
	keep    int
	pending []byte // read, masked as far as possible, not yet released
	ready   []byte // safe to hand out
	eof     bool
	err     error
	chunk   []byte
}

func newRedactingBody(src io.ReadCloser, needles []string) io.ReadCloser {
	r := &redactingBody{src: src, chunk: make([]byte, 32<<10)}
	for _, n := range needles {
		if n == "" {
			continue
		}
		r.needles = append(r.needles, []byte(n))
		r.keep = max(r.keep, len(n)-1)
	}
	if len(r.needles) == 0 {
		return src
	}
	return r
}

func (r *redactingBody) Read(p []byte) (int, error) {
	for len(r.ready) == 0 {
		if r.eof {
			if len(r.pending) > 0 {
				r.ready, r.pending = r.pending, nil
				break
			}
			return 0, r.err
		}
		n, err := r.src.Read(r.chunk)
		r.pending = append(r.pending, r.chunk[:n]...)
		if err != nil {
			r.eof = true
			r.err = err
		}
		for _, nd := range r.needles {
			mask(r.pending, nd)
		}
		hold := 0
		if !r.eof {
			hold = r.partialTail()
		}
		if len(r.pending) > hold {
			cut := len(r.pending) - hold
			r.ready = append([]byte(nil), r.pending[:cut]...)
			r.pending = append(r.pending[:0], r.pending[cut:]...)
		}
	}
	n := copy(p, r.ready)
	r.ready = r.ready[n:]
	return n, nil
}

func (r *redactingBody) Close() error { return r.src.Close() }

// partialTail is the length of the longest end of pending that is a proper
// prefix of a secret.
func (r *redactingBody) partialTail() int {
	for n := min(r.keep, len(r.pending)); n > 0; n-- {
		tail := r.pending[len(r.pending)-n:]
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
