// Package httpmetrics counts and times the requests an HTTP server
// answers, for Prometheus: requests by route pattern and status, their
// latency, the requests in flight and, optionally, body bytes in and out.
// The lifecycle server and execd both instrument their route tables with
// it, under their own metric name prefix.
package httpmetrics

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Options shape the metrics. The names are <Namespace>_http_requests_total,
// <Namespace>_http_request_duration_seconds, <Namespace>_http_requests_in_flight
// and, with BodyBytes, <Namespace>_http_request_body_bytes_total and
// <Namespace>_http_response_body_bytes_total.
type Options struct {
	Namespace string
	// Buckets of the latency histogram (seconds); nil means
	// prometheus.DefBuckets.
	Buckets []float64
	// Method adds a "method" label (the standard methods, or "other").
	Method bool
	// BodyBytes counts request and response body bytes by route.
	BodyBytes bool
	// Unmatched is the route label of a request no pattern matched (or
	// that was refused before routing); default "unmatched".
	Unmatched string
}

// Metrics are the request metrics of one server. Register Collectors in
// the server's registry and wrap its route table with Middleware.
type Metrics struct {
	opts     Options
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
	bytesIn  *prometheus.CounterVec // nil without BodyBytes
	bytesOut *prometheus.CounterVec
}

// New makes the metrics; they record nothing until registered and used.
func New(o Options) *Metrics {
	if o.Unmatched == "" {
		o.Unmatched = "unmatched"
	}
	route := []string{"route"}
	if o.Method {
		route = append(route, "method")
	}
	m := &Metrics{
		opts: o,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: o.Namespace, Subsystem: "http", Name: "requests_total",
			Help: "HTTP requests answered, by route pattern, status code (\"aborted\" for a reply cut short) and, where labelled, method.",
		}, append(route, "code")),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: o.Namespace, Subsystem: "http", Name: "request_duration_seconds",
			Help:    "Time from a request to the end of its reply (streams and WebSockets included), by route pattern and, where labelled, method.",
			Buckets: o.Buckets,
		}, route),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: o.Namespace, Subsystem: "http", Name: "requests_in_flight",
			Help: "HTTP requests being served, streams and WebSockets included.",
		}),
	}
	if o.BodyBytes {
		m.bytesIn = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: o.Namespace, Subsystem: "http", Name: "request_body_bytes_total",
			Help: "Request body bytes read by handlers (uploads, JSON), by route pattern.",
		}, []string{"route"})
		m.bytesOut = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: o.Namespace, Subsystem: "http", Name: "response_body_bytes_total",
			Help: "Response body bytes written (downloads, streams), by route pattern; hijacked connections (WebSockets) are not counted.",
		}, []string{"route"})
	}
	return m
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	cs := []prometheus.Collector{m.requests, m.duration, m.inFlight}
	if m.bytesIn != nil {
		cs = append(cs, m.bytesIn, m.bytesOut)
	}
	return cs
}

// Requests is the request counter (for tests).
func (m *Metrics) Requests() *prometheus.CounterVec { return m.requests }

// Middleware records every request next serves, labelled by the pattern of
// the http.ServeMux route that matched (r.Pattern once next returns), so
// ids in paths do not multiply series. Put it around the ServeMux, inside
// anything that replaces the request. A panic (an aborted reply) is counted
// with code "aborted" and passed on.
func (m *Metrics) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inFlight.Inc()
		rec := &recorder{ResponseWriter: w}
		var body *countingBody
		if m.bytesIn != nil && r.Body != nil && r.Body != http.NoBody {
			body = &countingBody{ReadCloser: r.Body}
			r.Body = body
		}
		defer func() {
			m.inFlight.Dec()
			v := recover()
			code := "aborted"
			if v == nil {
				code = strconv.Itoa(rec.statusOr200())
			}
			m.observe(r, code, time.Since(start), body, rec.n)
			if v != nil {
				panic(v)
			}
		}()
		next.ServeHTTP(rec, r)
	})
}

func (m *Metrics) observe(r *http.Request, code string, d time.Duration, body *countingBody, sent int64) {
	route := r.Pattern
	if route == "" || route == "/" {
		route = m.opts.Unmatched
	}
	labels := []string{route}
	if m.opts.Method {
		labels = append(labels, methodLabel(r.Method))
	}
	m.requests.WithLabelValues(append(labels, code)...).Inc()
	m.duration.WithLabelValues(labels...).Observe(d.Seconds())
	if m.bytesIn == nil {
		return
	}
	if body != nil && body.n > 0 {
		m.bytesIn.WithLabelValues(route).Add(float64(body.n))
	}
	if sent > 0 {
		m.bytesOut.WithLabelValues(route).Add(float64(sent))
	}
}

// methodLabel keeps the method label to the standard methods (proxies
// accept any method).
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// recorder notes the final status and counts the bytes of a reply.
type recorder struct {
	http.ResponseWriter
	status int
	n      int64
}

func (r *recorder) statusOr200() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

func (r *recorder) WriteHeader(code int) {
	// A final status replaces an informational one; a 1xx alone stays
	// (101 for a WebSocket).
	if r.status == 0 || r.status < 200 && code >= 200 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status < 200 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.n += int64(n)
	return n, err
}

// Flush serves handlers that assert http.Flusher.
func (r *recorder) Flush() {
	if r.status < 200 {
		r.status = http.StatusOK
	}
	http.NewResponseController(r.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController (flush, hijack, deadlines) reach
// the connection's writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// countingBody counts what a handler reads of a request body.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}
