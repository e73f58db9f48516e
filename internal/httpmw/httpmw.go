// Package httpmw holds the HTTP middleware pieces both of the project's
// servers (execd and the lifecycle server) wrap their route tables with:
// panic recovery and a ResponseWriter that remembers the status sent.
package httpmw

import (
	"io"
	"net/http"
	"sync/atomic"
)

// Recover calls next and turns a panic into report's reply, so one bad
// request never takes the server down. http.ErrAbortHandler keeps its
// meaning (abort the response) and is re-raised.
func Recover(next http.Handler, report func(w http.ResponseWriter, r *http.Request, panicValue any)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			report(w, r, v)
		}()
		next.ServeHTTP(w, r)
	})
}

// StatusRecorder remembers the status a handler sent (200 when it wrote a
// body without calling WriteHeader).
type StatusRecorder struct {
	http.ResponseWriter
	Status int
}

func (s *StatusRecorder) WriteHeader(code int) {
	if s.Status == 0 {
		s.Status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *StatusRecorder) Write(p []byte) (int, error) {
	if s.Status == 0 {
		s.Status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController (flush, hijack, deadlines) and
// reverse proxies reach the underlying writer.
func (s *StatusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// FullDuplex lets a proxy relay the rest of a request body after the reply
// has begun (the backend may answer first). Proxy the request it returns,
// and call done once the proxying is over.
//
// Full duplex has a catch: net/http then ignores a body that failed to
// parse (a malformed chunk) or was left unread, when the request ends, and
// keeps reading the connection, so the bytes behind would be served as
// the next request (request smuggling, or a desynchronised connection pool
// in front). So done ends the connection unless the body was read to its
// clean end: it flushes what the reply holds and aborts the handler. Call
// it last, not deferred (the abort is a panic).
//
// r itself is left alone: net/http inspects the request it handed out
// when deciding about the connection.
func FullDuplex(w http.ResponseWriter, r *http.Request) (out *http.Request, done func()) {
	// ErrNotSupported on HTTP/2, which is duplex already.
	_ = http.NewResponseController(w).EnableFullDuplex()
	if r.Body == nil || r.Body == http.NoBody {
		return r, func() {}
	}
	b := &watchedBody{ReadCloser: r.Body}
	out = new(http.Request)
	*out = *r
	out.Body = b
	return out, func() {
		// A body cut by BoundBody: that closes the connection itself,
		// after the reply.
		if !b.clean.Load() && !BodyTimedOut(r.Context()) {
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		}
	}
}

// BodyUnfinished reports whether r's body (as wrapped by FullDuplex) has
// not been read to its clean end; the connection will not be reused, and
// a reply may say so with "Connection: close".
func BodyUnfinished(r *http.Request) bool {
	b, ok := r.Body.(*watchedBody)
	return ok && !b.clean.Load()
}

// watchedBody records whether the body was read to a clean EOF.
type watchedBody struct {
	io.ReadCloser
	clean atomic.Bool
	bad   atomic.Bool
}

// maxDrain bounds what Close reads of a body left unread, as net/http
// itself does before reusing a connection.
const maxDrain = 256 << 10

// Close reads what is left of the body (up to maxDrain) before closing it,
// so a body the backend did not need still ends the request cleanly and
// the connection can be reused; a malformed or oversized rest cannot.
func (b *watchedBody) Close() error {
	if !b.clean.Load() && !b.bad.Load() {
		io.CopyN(io.Discard, b, maxDrain)
	}
	return b.ReadCloser.Close()
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF && !b.bad.Load():
		b.clean.Store(true)
	case err != nil && err != io.EOF:
		b.bad.Store(true)
		b.clean.Store(false)
	}
	return n, err
}
