// Package httpmw holds the HTTP middleware pieces both of the project's
// servers (execd and the lifecycle server) wrap their route tables with:
// panic recovery and a ResponseWriter that remembers the status sent.
package httpmw

import (
	"net/http"
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
