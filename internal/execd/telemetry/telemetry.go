// Package telemetry is execd's Prometheus instrumentation: requests by
// route and status, their latency, bytes received and sent, and gauges of
// what execd runs (commands, bash sessions, code contexts, terminals),
// exposed in the Prometheus text format. It is separate from the metrics
// package, which serves the sandbox's resource usage on the API's own
// /metrics route.
package telemetry

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Gauges read what execd runs at scrape time. A nil function is skipped.
type Gauges struct {
	RunningCommands func() int
	Sessions        func() int
	CodeContexts    func() int
	Terminals       func() int
}

// Metrics owns execd's registry.
type Metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	bytesIn   *prometheus.CounterVec
	bytesOut  *prometheus.CounterVec
	inFlight  prometheus.Gauge
	unmatched string
}

// New returns Metrics with the Go runtime and process collectors and the
// given gauges registered.
func New(g Gauges) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "execd", Name: "http_requests_total",
			Help: "HTTP requests answered, by route pattern and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "execd", Name: "http_request_duration_seconds",
			Help: "Time from request to the end of the reply (streams and terminals included), by route pattern.",
			// Streams (commands, terminals) run for minutes: long buckets too.
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800},
		}, []string{"route"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "execd", Name: "http_request_body_bytes_total",
			Help: "Request body bytes read by handlers (uploads, JSON), by route pattern.",
		}, []string{"route"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "execd", Name: "http_response_body_bytes_total",
			Help: "Response body bytes written (downloads, streams), by route pattern; hijacked connections (WebSockets) are not counted.",
		}, []string{"route"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "execd", Name: "http_requests_in_flight",
			Help: "Requests being served, streams and terminals included.",
		}),
	}
	reg.MustRegister(m.requests, m.duration, m.bytesIn, m.bytesOut, m.inFlight,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, gf := range []struct {
		name, help string
		f          func() int
	}{
		{"commands_running", "Commands (foreground and background) running now.", g.RunningCommands},
		{"sessions", "Bash sessions open.", g.Sessions},
		{"code_contexts", "Code interpreter contexts open.", g.CodeContexts},
		{"terminals", "Terminal (PTY) sessions open.", g.Terminals},
	} {
		if gf.f == nil {
			continue
		}
		f := gf.f
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "execd", Name: gf.name, Help: gf.help,
		}, func() float64 { return float64(f()) }))
	}
	return m
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the registry the metrics live in (for tests and extra
// collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Middleware records every request that next serves. The route label is
// the pattern of the ServeMux route that served it (so ids in paths do
// not multiply series); a request no route matched, or one refused before
// routing (auth), is labelled "none".
func (m *Metrics) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inFlight.Inc()
		defer m.inFlight.Dec()
		rec := &recorder{ResponseWriter: w}
		var body *countingBody
		if r.Body != nil && r.Body != http.NoBody {
			body = &countingBody{ReadCloser: r.Body}
			r.Body = body
		}
		next.ServeHTTP(rec, r)
		route := r.Pattern
		if route == "" || route == "/" {
			route = "none"
		}
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
		m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
		if body != nil && body.n > 0 {
			m.bytesIn.WithLabelValues(route).Add(float64(body.n))
		}
		if rec.n > 0 {
			m.bytesOut.WithLabelValues(route).Add(float64(rec.n))
		}
	})
}

// recorder notes the status and counts the bytes of a reply.
type recorder struct {
	http.ResponseWriter
	status int
	n      int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 || r.status < 200 && code >= 200 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.n += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController (flush, hijack, deadlines) reach
// the connection's writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

type countingBody struct {
	io.ReadCloser
	n int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}
