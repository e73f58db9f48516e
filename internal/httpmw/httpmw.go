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
// has begun (the backend may answer first), and returns a function to
// call once the proxying is over.
//
// Full duplex has a catch: net/http then ignores a body that failed to
// parse (a malformed chunk) when the request ends and keeps reading the
// connection, so the bytes behind the bad chunk would be served as the
// next request (request smuggling through a front proxy that forwards
// them). The returned function ends such a connection instead: it flushes
// what the reply holds and aborts the handler. Call it last, not deferred
// (the abort is a panic).
func FullDuplex(w http.ResponseWriter, r *http.Request) (done func()) {
	// ErrNotSupported on HTTP/2, which is duplex already.
	_ = http.NewResponseController(w).EnableFullDuplex()
	if r.Body == nil || r.Body == http.NoBody {
		return func() {}
	}
	b := &watchedBody{ReadCloser: r.Body}
	r.Body = b
	return func() {
		if b.failed.Load() {
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		}
	}
}

// BodyFailed reports whether reading r's body (as wrapped by FullDuplex)
// has failed; a reply then should carry "Connection: close".
func BodyFailed(r *http.Request) bool {
	b, ok := r.Body.(*watchedBody)
	return ok && b.failed.Load()
}

// watchedBody records a read error other than EOF.
type watchedBody struct {
	io.ReadCloser
	failed atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.failed.Store(true)
	}
	return n, err
}
