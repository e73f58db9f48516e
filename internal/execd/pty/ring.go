package pty

// ring keeps the most recent size bytes of a session's output together with
// the total number of bytes ever written, so that any absolute offset still
// held can be read back. The buffer grows on demand up to size; the zero
// value is not usable, build one with newRing.
//
// A ring is not safe for concurrent use; the session lock guards it.
type ring struct {
	size  int
	buf   []byte
	total int64
}

func newRing(size int) *ring {
	return &ring{size: size}
}

// write appends p. While the buffer is not yet full the byte at absolute
// offset o lives at buf[o]; once full it lives at buf[o%size]. Both rules
// agree for o < size, so the switch from growing to wrapping needs no copy.
func (r *ring) write(p []byte) {
	for len(p) > 0 {
		if len(r.buf) < r.size {
			k := min(r.size-len(r.buf), len(p))
			r.buf = append(r.buf, p[:k]...)
			r.total += int64(k)
			p = p[k:]
			continue
		}
		k := copy(r.buf[r.total%int64(r.size):], p)
		r.total += int64(k)
		p = p[k:]
	}
}

// first is the absolute offset of the oldest byte still held.
func (r *ring) first() int64 {
	return r.total - int64(len(r.buf))
}

// since returns a copy of the bytes from absolute offset off to the end and
// the offset of the first returned byte. An offset older than the ring is
// moved up to the oldest byte held; one past the end yields no bytes.
func (r *ring) since(off int64) (int64, []byte) {
	off = max(off, r.first())
	if off >= r.total {
		return r.total, nil
	}
	out := make([]byte, 0, r.total-off)
	for o := off; o < r.total; {
		i := int(o % int64(r.size))
		end := len(r.buf)
		if rest := r.total - o; int64(end-i) > rest {
			end = i + int(rest)
		}
		out = append(out, r.buf[i:end]...)
		o += int64(end - i)
	}
	return off, out
}
