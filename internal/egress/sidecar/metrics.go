package sidecar

import (
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/opensandbox-go/opensandbox/internal/egress/inject"
	"github.com/opensandbox-go/opensandbox/internal/egress/vault"
)

// MetricsPath is where the API serves the sidecar's Prometheus metrics
// (with the API token, like /policy).
const MetricsPath = "/metrics"

// The component label values of opensandbox_egress_errors_total.
const (
	componentFirewall = "firewall" // a rebuild or a DNS-learned addition failed
	componentPersist  = "persist"  // the policy file could not be written
	componentService  = "service"  // a listener or server stopped while serving
)

// metrics are the sidecar's Prometheus metrics, on a registry of its own.
type metrics struct {
	reg             *prometheus.Registry
	dnsQueries      *prometheus.CounterVec
	policyUpdates   prometheus.Counter
	vaultInjections prometheus.Counter
	proxyConns      *prometheus.CounterVec
	errors          *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		dnsQueries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opensandbox_egress_dns_queries_total",
			Help: "DNS questions from the sandbox, by the policy's decision (allowed, denied).",
		}, []string{"decision"}),
		policyUpdates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "opensandbox_egress_policy_updates_total",
			Help: "Changes of the current network policy (API updates and always-rule reloads).",
		}),
		vaultInjections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "opensandbox_egress_vault_injections_total",
			Help: "Requests through the credential proxy that a credential binding matched.",
		}),
		proxyConns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opensandbox_egress_proxy_connections_total",
			Help: "Connections the credential proxy accepted, by kind (tls, plain).",
		}, []string{"kind"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opensandbox_egress_errors_total",
			Help: "Failures, by component (firewall, persist, service).",
		}, []string{"component"}),
	}
	m.reg.MustRegister(m.dnsQueries, m.policyUpdates, m.vaultInjections, m.proxyConns, m.errors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every series exists from the start, at zero.
	for _, d := range []string{"allowed", "denied"} {
		m.dnsQueries.WithLabelValues(d)
	}
	for _, k := range []string{"tls", "plain"} {
		m.proxyConns.WithLabelValues(k)
	}
	for _, c := range []string{componentFirewall, componentPersist, componentService} {
		m.errors.WithLabelValues(c)
	}
	return m
}

func (m *metrics) dnsQuery(allowed bool) {
	d := "denied"
	if allowed {
		d = "allowed"
	}
	m.dnsQueries.WithLabelValues(d).Inc()
}

// handler serves the exposition of m's registry.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

func proxyKind(plain bool) string {
	if plain {
		return "plain"
	}
	return "tls"
}

// countingInjector counts the requests a binding matched. Embedding the
// store keeps its other methods (the proxy asks for MayMatch).
type countingInjector struct {
	*vault.Store
	injections prometheus.Counter
}

func (c countingInjector) Match(scheme, host string, port int, method, path string) (*inject.Plan, bool) {
	plan, ok := c.Store.Match(scheme, host, port, method, path)
	if ok {
		c.injections.Inc()
	}
	return plan, ok
}

// countingListener counts accepted connections.
type countingListener struct {
	net.Listener
	accepted prometheus.Counter
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Inc()
	}
	return c, err
}
