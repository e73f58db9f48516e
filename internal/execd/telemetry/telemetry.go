// Package telemetry is execd's Prometheus instrumentation: requests by
// route and status, their latency, bytes received and sent, and gauges of
// what execd runs (commands, bash sessions, code contexts, terminals),
// exposed in the Prometheus text format. It is separate from the metrics
// package, which serves the sandbox's resource usage on the API's own
// /metrics route.
package telemetry

import (
	"net/http"

	"github.com/opensandbox-go/opensandbox/internal/httpmetrics"
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
	reg  *prometheus.Registry
	http *httpmetrics.Metrics
}

// New returns Metrics with the request metrics, the Go runtime and
// process collectors and the given gauges registered.
func New(g Gauges) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg: reg,
		http: httpmetrics.New(httpmetrics.Options{
			Namespace: "execd",
			// Streams (commands, terminals) run for minutes: long buckets too.
			Buckets:   []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800},
			BodyBytes: true,
			Unmatched: "none",
		}),
	}
	reg.MustRegister(m.http.Collectors()...)
	reg.MustRegister(collectors.NewGoCollector(),
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

// Middleware records every request that next serves (httpmetrics). The
// route label is the pattern of the ServeMux route that served it; a
// request no route matched, or one refused before routing (auth), is
// labelled "none".
func (m *Metrics) Middleware(next http.Handler) http.Handler { return m.http.Middleware(next) }
