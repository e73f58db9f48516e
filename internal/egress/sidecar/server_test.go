package sidecar

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/api"
	"github.com/opensandbox-go/opensandbox/internal/egress/policy"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestAPIServerBoundsSlowBodies: a client that sends its body a byte at
// a time loses the connection once the read timeout is spent, long
// before the body is complete (the API server bounded only the head).
func TestAPIServerBoundsSlowBodies(t *testing.T) {
	handlerErr := make(chan error, 1)
	srv := newAPIServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		handlerErr <- err
	}), slog.New(slog.NewTextHandler(io.Discard, nil)), 200*time.Millisecond, 500*time.Millisecond)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const bodyLen = 200 // at 1 byte per 50 ms: 10 s, twenty times the bound
	if _, err := fmt.Fprintf(c, "PUT /policy HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", bodyLen); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, c) // returns when the server closes
		close(closed)
	}()
	for sent := 0; sent < bodyLen; sent++ {
		select {
		case <-closed:
			if err := <-handlerErr; err == nil {
				t.Fatal("the handler read the whole slow body")
			}
			return
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := c.Write([]byte("x")); err != nil {
			break // the server closed the connection
		}
	}
	select {
	case <-closed:
	case err := <-handlerErr:
		t.Fatalf("the slow body was read to the end (err %v): the connection was held for all of it", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the connection is still open after the whole slow body")
	}
}

// TestMetricsRoute: the API serves the Prometheus exposition at
// MetricsPath behind the token, with the sidecar's series.
func TestMetricsRoute(t *testing.T) {
	m := newMetrics()
	store, err := policy.NewStore(policy.DenyAll(policy.Options{}), policy.AlwaysFiles{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := api.New(api.Config{Store: store, Token: "tok", Metrics: m.handler(),
		Apply: func(context.Context, *policy.Policy) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	m.dnsQuery(true)
	m.dnsQuery(false)
	m.dnsQuery(false)
	m.errors.WithLabelValues(componentPersist).Inc()
	ts := httptest.NewServer(a.Handler())
	defer ts.Close()
	get := func(token string) (int, string) {
		req, _ := http.NewRequest("GET", ts.URL+MetricsPath, nil)
		if token != "" {
			req.Header.Set(sandbox.EgressAuthHeader, token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Errorf("metrics without the token: %d; want 401", code)
	}
	code, body := get("tok")
	if code != 200 {
		t.Fatalf("metrics: %d %s", code, body)
	}
	want := map[string]bool{
		`opensandbox_egress_dns_queries_total{decision="allowed"} 1`: false,
		`opensandbox_egress_dns_queries_total{decision="denied"} 2`:  false,
		`opensandbox_egress_errors_total{component="persist"} 1`:     false,
		`opensandbox_egress_errors_total{component="firewall"} 0`:    false,
		`opensandbox_egress_proxy_connections_total{kind="tls"} 0`:   false,
		`opensandbox_egress_policy_updates_total 0`:                  false,
		`opensandbox_egress_vault_injections_total 0`:                false,
		`go_goroutines `: false,
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		for w := range want {
			if strings.HasPrefix(sc.Text(), w) {
				want[w] = true
			}
		}
	}
	for w, seen := range want {
		if !seen {
			t.Errorf("metrics lack %q:\n%s", w, body)
		}
	}
}
