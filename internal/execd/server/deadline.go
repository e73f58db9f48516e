package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// Defaults of the read bounds (Config.ReadHeaderTimeout, BodyReadTimeout,
// BodyProgressBytes).
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultBodyReadTimeout   = 30 * time.Second
	DefaultBodyProgressBytes = 16 << 10
)

// bodyDeadline bounds how long a request body may take, by progress: the
// first BodyReadTimeout covers the start of the body, and every further
// BodyProgressBytes received buys another BodyReadTimeout. A client that
// trickles (one byte every few seconds) is cut off after BodyReadTimeout;
// an upload of any size that keeps moving at more than
// BodyProgressBytes/BodyReadTimeout (about 550 B/s by default) is not.
//
// Only the reading of the body is bounded. Once it is read (or for
// requests without one: GETs, WebSocket upgrades) no deadline is left on
// the connection, so a streamed reply — a long command, a download, a
// terminal — runs as long as it needs to.
func (s *Server) bodyDeadline(next http.Handler) http.Handler {
	timeout, step := s.cfg.BodyReadTimeout, s.cfg.BodyProgressBytes
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
			// A writer without deadlines (not a network connection).
			next.ServeHTTP(w, r)
			return
		}
		r.Body = &progressBody{ReadCloser: r.Body, rc: rc, timeout: timeout, step: step}
		next.ServeHTTP(w, r)
	})
}

// progressBody extends the connection's read deadline as the body arrives.
type progressBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	step    int64
	since   int64 // bytes since the deadline was last extended
	done    bool  // the body ended: net/http now owns the connection's reads
}

// ErrBodyTooSlow is returned by a request body read that made too little
// progress before its deadline.
var ErrBodyTooSlow = errors.New("request body arrives too slowly")

func (b *progressBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.done = true
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = fmt.Errorf("%w: fewer than %d bytes in %v: %w", ErrBodyTooSlow, b.step, b.timeout, err)
		}
		return n, err
	}
	b.since += int64(n)
	if b.since >= b.step && !b.done {
		b.since = 0
		// Never after the body ended: net/http then reads the connection
		// in the background to notice a client that leaves, and a deadline
		// set then would cancel the request.
		b.rc.SetReadDeadline(time.Now().Add(b.timeout))
	}
	return n, nil
}
