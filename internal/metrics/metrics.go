// Package metrics holds the lifecycle server's Prometheus metrics: HTTP
// requests by route pattern and status, create and delete latency, engine
// errors, expiry actions, and sandboxes by state (read from the runtime
// at each scrape). The HTTP layer and the lifecycle code both record into
// one *Metrics; every method is safe on a nil *Metrics, which records
// nothing, so callers need no checks.
package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/httpmetrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const namespace = "opensandbox"

// StateCounter reports how many sandboxes are in each state; it is asked
// at every scrape, within the scrape's time limit.
type StateCounter func(ctx context.Context) (map[string]int, error)

// Metrics is one registry and the metrics in it.
type Metrics struct {
	reg *prometheus.Registry

	http         *httpmetrics.Metrics
	creates      *prometheus.HistogramVec
	deletes      *prometheus.HistogramVec
	engineErrors *prometheus.CounterVec
	expiry       *prometheus.CounterVec
}

// New builds the metrics, with Go runtime and process metrics beside them.
// states may be nil (no sandboxes-by-state gauge).
func New(states StateCounter) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.http = httpmetrics.New(httpmetrics.Options{
		Namespace: namespace,
		// Up to 10 min: creates wait for image pulls, proxied streams last.
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		Method:  true,
	})
	lifecycleBuckets := []float64{.05, .1, .25, .5, 1, 2, 5, 10, 30, 60, 120, 300}
	m.creates = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "sandbox", Name: "create_duration_seconds",
		Help:    "Time to create a sandbox (until execd answers), by outcome (ok or error).",
		Buckets: lifecycleBuckets,
	}, []string{"outcome"})
	m.deletes = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "sandbox", Name: "delete_duration_seconds",
		Help:    "Time to delete a sandbox, by reason (user_delete, expired, ...) and outcome.",
		Buckets: lifecycleBuckets,
	}, []string{"reason", "outcome"})
	m.engineErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "engine", Name: "errors_total",
		Help: "Runtime (engine) calls that failed for a reason other than the caller's (unavailable, timeout, unexpected), by operation.",
	}, []string{"op"})
	m.expiry = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "expiry", Name: "actions_total",
		Help: "Expiry actions: deletions of expired sandboxes and what became of them (deleted, gone, failed).",
	}, []string{"result"})
	m.reg.MustRegister(m.http.Collectors()...)
	m.reg.MustRegister(m.creates, m.deletes, m.engineErrors, m.expiry,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if states != nil {
		m.reg.MustRegister(&stateCollector{count: states, errors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "sandboxes", Name: "scrape_errors_total",
			Help: "Scrapes in which the sandboxes by state could not be read from the runtime.",
		})})
	}
	return m
}

// Registry is where the metrics live (for tests and extra collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, Timeout: 10 * time.Second})
}

func outcome(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// ObserveCreate records one sandbox create that took d and ended with err.
func (m *Metrics) ObserveCreate(d time.Duration, err error) {
	if m == nil {
		return
	}
	m.creates.WithLabelValues(outcome(err)).Observe(d.Seconds())
}

// ObserveDelete records one sandbox delete for reason that took d.
func (m *Metrics) ObserveDelete(reason string, d time.Duration, err error) {
	if m == nil {
		return
	}
	m.deletes.WithLabelValues(reason, outcome(err)).Observe(d.Seconds())
}

// EngineError counts one failed runtime call of operation op (create,
// delete, list, ...). Count only failures that are not the caller's: an
// unknown sandbox is not an engine error.
func (m *Metrics) EngineError(op string) {
	if m == nil {
		return
	}
	m.engineErrors.WithLabelValues(op).Inc()
}

// Expiry results.
const (
	ExpiryDeleted = "deleted" // an expired sandbox was deleted
	ExpiryGone    = "gone"    // it had gone already
	ExpiryFailed  = "failed"  // deleting it failed; retried later
)

// ExpiryAction counts one expiry action with its result.
func (m *Metrics) ExpiryAction(result string) {
	if m == nil {
		return
	}
	m.expiry.WithLabelValues(result).Inc()
}

// Instrument counts and times the requests next serves by the pattern
// of the http.ServeMux route that matched ("unmatched" for none), so
// labels stay few whatever the paths (see httpmetrics). Put it directly
// around the ServeMux, inside anything that replaces the request.
func (m *Metrics) Instrument(next http.Handler) http.Handler {
	if m == nil {
		return next
	}
	return m.http.Middleware(next)
}

// stateCollector asks the runtime for sandboxes by state at each scrape.
type stateCollector struct {
	count  StateCounter
	errors prometheus.Counter
}

var stateDesc = prometheus.NewDesc(namespace+"_sandboxes", "Sandboxes this server manages, by state (read from the runtime at scrape time).", []string{"state"}, nil)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- stateDesc
	c.errors.Describe(ch)
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	byState, err := c.count(ctx)
	if err != nil {
		c.errors.Inc()
	} else {
		for state, n := range byState {
			ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, float64(n), state)
		}
	}
	c.errors.Collect(ch)
}
