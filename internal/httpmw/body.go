package httpmw

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// BodyLimits bound how long a server waits for a client to send a request
// body. Only the time spent waiting for the client counts (time inside
// the body's Read): a handler that reads slowly, because what it writes
// to is slow, is not the client's fault. A long upload that keeps its
// pace, a long streamed reply and a WebSocket (no body) are never cut.
type BodyLimits struct {
	// Idle is the longest one read of the body may wait for data.
	Idle time.Duration
	// MinRate (bytes per second) and Grace bound the total wait: after
	// receiving n bytes the client may have been waited for at most
	// Grace + n/MinRate. A client that trickles a byte every few seconds
	// runs out of that allowance; one that keeps a modest pace never does.
	MinRate int64
	Grace   time.Duration
}

// DefaultBodyLimits are the limits of every server in the project: a
// read may wait 30 s, and a body must average 1 KiB/s once its first 15 s
// of allowance are used up (a trickle of a byte every 5 s is cut after
// about 15 s; a 10 KiB/s upload runs for as long as it lasts).
var DefaultBodyLimits = BodyLimits{Idle: 30 * time.Second, MinRate: 1 << 10, Grace: 15 * time.Second}

// ErrBodyTimeout is what reading a request body returns (errors.Is) when
// the client sent it too slowly for the BodyLimits.
var ErrBodyTimeout = errors.New("the client sent the request body too slowly")

// bodyTimeoutError is ErrBodyTimeout with the read error behind it.
type bodyTimeoutError struct{ cause error }

func (e *bodyTimeoutError) Error() string {
	if e.cause == nil {
		return ErrBodyTimeout.Error()
	}
	return fmt.Sprintf("%v: %v", ErrBodyTimeout, e.cause)
}

func (e *bodyTimeoutError) Is(target error) bool { return target == ErrBodyTimeout }
func (e *bodyTimeoutError) Unwrap() error        { return e.cause }

// BoundBody makes reads of a request's body fail with ErrBodyTimeout when
// the client is slower than lim allows. It works through the connection's
// read deadline (http.ResponseController.SetReadDeadline), which it sets
// before every read and clears once the body has been read to its end, so
// do not combine it with http.Server.ReadTimeout. Set
// http.Server.ReadHeaderTimeout for the headers.
//
// The deadline is set before the handler runs too, so that a handler that
// answers without reading the body (which net/http then reads, up to
// 256 KiB, before sending the reply) is bounded as well; a handler that
// neither reads the body nor answers within that time may find its
// request's context cancelled when it does.
//
// The handler sees the error from Read and answers as it sees fit (408,
// say); the rest of the body was never read, so the connection is closed
// after that reply ("Connection: close"). A handler that returns without
// answering gets a plain 408; a reply already under way when the body
// timed out (a proxy relaying both ways) is cut. Requests without a body
// pass through untouched, and so does everything when the writer cannot
// set deadlines (httptest.ResponseRecorder).
//
// Wrap the outermost handler, so that w is the server's own writer (or
// one that unwraps to it).
func BoundBody(next http.Handler, lim BodyLimits) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		b := &boundedBody{ReadCloser: r.Body, rc: http.NewResponseController(w), lim: lim}
		tw := &trackingWriter{ResponseWriter: w, body: b}
		b.w = tw
		// A handler that answers without reading the body (a 401, say)
		// leaves net/http to read it before replying: bound that too.
		if first := lim.firstWait(); first > 0 {
			if err := b.rc.SetReadDeadline(time.Now().Add(first)); err != nil {
				b.done = true // deadlines not supported here
			}
		}
		r2 := r.WithContext(context.WithValue(r.Context(), boundedBodyKey{}, b))
		r2.Body = b
		next.ServeHTTP(tw, r2)
		b.mu.Lock()
		expired, startedBefore := b.expired, b.replyStartedBefore
		b.mu.Unlock()
		switch {
		case !expired:
		case startedBefore:
			b.rc.Flush()
			panic(http.ErrAbortHandler)
		case !tw.started():
			http.Error(w, ErrBodyTimeout.Error(), http.StatusRequestTimeout)
		}
	})
}

// firstWait is the longest wait before the first byte of a body.
func (l BodyLimits) firstWait() time.Duration {
	w := l.Idle
	if l.MinRate > 0 && (w <= 0 || l.Grace < w) {
		w = l.Grace
	}
	return w
}

type boundedBodyKey struct{}

// BodyTimedOut reports whether the body of the request whose context is
// ctx (or a context derived from it) timed out under BoundBody. A read
// error seen elsewhere (a proxy's transport reports the request's
// cancellation instead) can be told apart with it.
func BodyTimedOut(ctx context.Context) bool {
	b, ok := ctx.Value(boundedBodyKey{}).(*boundedBody)
	if !ok {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.expired
}

// trackingWriter records whether the reply has begun, so BoundBody knows
// whether its "Connection: close" can still take effect.
type trackingWriter struct {
	http.ResponseWriter
	body  *boundedBody
	mu    sync.Mutex
	begun bool
}

func (t *trackingWriter) begin() {
	t.mu.Lock()
	t.begun = true
	t.mu.Unlock()
}

func (t *trackingWriter) started() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.begun
}

func (t *trackingWriter) WriteHeader(code int) {
	if code >= 200 { // 1xx replies are not the reply
		t.begin()
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(p []byte) (int, error) {
	t.begin()
	return t.ResponseWriter.Write(p)
}

// Flush is here for handlers that assert http.Flusher; it begins the reply.
func (t *trackingWriter) Flush() {
	t.begin()
	http.NewResponseController(t.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// boundedBody sets the connection's read deadline before each Read.
type boundedBody struct {
	io.ReadCloser
	rc  *http.ResponseController
	lim BodyLimits
	w   *trackingWriter

	mu       sync.Mutex // Read may race Close, and timedOut is read after the handler
	received int64
	waited   time.Duration
	done     bool // read to its end, or deadlines not supported
	expired  bool
	// replyStartedBefore: the reply had begun when the body expired.
	replyStartedBefore bool
}

// expire records the timeout (b.mu held) and asks for the connection to
// be closed after the reply, which works if the reply has not begun.
func (b *boundedBody) expire() {
	if b.expired {
		return
	}
	b.expired = true
	b.replyStartedBefore = b.w.started()
	b.w.Header().Set("Connection", "close")
}

func (b *boundedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.expired {
		b.mu.Unlock()
		return 0, &bodyTimeoutError{}
	}
	armed := false
	if !b.done {
		wait := b.lim.Idle
		if b.lim.MinRate > 0 {
			allowance := b.lim.Grace + time.Duration(float64(b.received)/float64(b.lim.MinRate)*float64(time.Second)) - b.waited
			if allowance <= 0 {
				b.expire()
				b.mu.Unlock()
				return 0, &bodyTimeoutError{}
			}
			if wait <= 0 || allowance < wait {
				wait = allowance
			}
		}
		if wait > 0 {
			if err := b.rc.SetReadDeadline(time.Now().Add(wait)); err != nil {
				// Not supported by this writer (or the connection is gone,
				// which the read reports): read without a deadline.
				b.done = true
			} else {
				armed = true
			}
		}
	}
	b.mu.Unlock()

	start := time.Now()
	n, err := b.ReadCloser.Read(p)
	took := time.Since(start)

	b.mu.Lock()
	defer b.mu.Unlock()
	b.received += int64(n)
	b.waited += took
	switch {
	case err == nil:
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.expire()
		return n, &bodyTimeoutError{cause: err}
	default:
		// EOF (or a broken body): the connection is net/http's again,
		// and its background read, which notices a client going away
		// during a long reply, must not run into our deadline.
		if armed {
			b.rc.SetReadDeadline(time.Time{})
		}
		b.done = true
	}
	return n, err
}
