package sidecar

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/opensandbox-go/opensandbox/internal/egress/policy"
	"github.com/opensandbox-go/opensandbox/internal/egress/vault"
	"github.com/opensandbox-go/opensandbox/internal/testenv"
)

func TestCheckBindings(t *testing.T) {
	p, err := policy.Parse([]byte(`{"defaultAction":"deny","egress":[{"action":"allow","target":"api.github.com"},{"action":"allow","target":"*.corp.test"}]}`), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bind := func(hosts []string, schemes []string, ports []int) []vault.CredentialBinding {
		return []vault.CredentialBinding{{Name: "b", Match: vault.RequestMatch{Hosts: hosts, Schemes: schemes, Ports: ports}}}
	}
	for _, tt := range []struct {
		name string
		bs   []vault.CredentialBinding
		want string // "" = accepted
	}{
		{"allowed host", bind([]string{"api.github.com"}, []string{"https"}, []int{443}), ""},
		{"wildcard inside an allowed wildcard", bind([]string{"*.corp.test"}, nil, nil), ""},
		{"wildcard wider than the policy", bind([]string{"*.github.com"}, nil, nil), ""},
		{"host the policy denies", bind([]string{"evil.test"}, nil, nil), "not allowed by the network policy"},
		{"plain http", bind([]string{"api.github.com"}, []string{"https", "http"}, nil), ""},
		{"plain http, standard ports given", bind([]string{"api.github.com"}, []string{"http"}, []int{80, 443}), ""},
		{"plain http, host the policy denies", bind([]string{"evil.test"}, []string{"http"}, nil), "not allowed by the network policy"},
		{"other port", bind([]string{"api.github.com"}, []string{"https"}, []int{8443}), "port 8443 is not intercepted"},
		{"other plain port", bind([]string{"api.github.com"}, []string{"http"}, []int{8080}), "port 8080 is not intercepted"},
	} {
		err := checkBindings(p, tt.bs)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: err = %v; want %q", tt.name, err, tt.want)
		}
	}
}

// TestBoundResolverPolicy checks that the plain-HTTP proxy's resolver
// refuses what the network policy denies before any lookup.
func TestBoundResolverPolicy(t *testing.T) {
	p, err := policy.Parse([]byte(`{"defaultAction":"deny","egress":[{"action":"allow","target":"192.0.2.7"}]}`), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	store, err := policy.NewStore(p, policy.AlwaysFiles{})
	if err != nil {
		t.Fatal(err)
	}
	noLookup := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		t.Error("a lookup was made")
		return nil, errors.New("no lookups in this test")
	}}
	resolve := boundResolver(store, []*net.Resolver{noLookup}, false)
	if got, err := resolve(context.Background(), "192.0.2.7"); err != nil || len(got) != 1 || got[0] != netip.MustParseAddr("192.0.2.7") {
		t.Errorf("allowed IP: %v, %v; want itself", got, err)
	}
	for _, host := range []string{"192.0.2.8", "denied.test"} {
		if got, err := resolve(context.Background(), host); err == nil || !strings.Contains(err.Error(), "denied by the network policy") {
			t.Errorf("%s: %v, %v; want denied by the network policy", host, got, err)
		}
	}
}

// TestBoundResolverRefusesLocalAddresses: the sidecar shares the
// sandbox's network namespace, so a bound name that resolves to loopback,
// to the unspecified address or to one of the namespace's own addresses
// would hand the credential to a listener inside the sandbox. Such
// addresses are never dialled, whatever the policy allows.
func TestBoundResolverRefusesLocalAddresses(t *testing.T) {
	p, err := policy.Parse([]byte(`{"defaultAction":"allow","egress":[]}`), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	store, err := policy.NewStore(p, policy.AlwaysFiles{})
	if err != nil {
		t.Fatal(err)
	}
	resolve := boundResolver(store, nil, false)
	local := []string{"127.0.0.1", "127.9.9.9", "::1", "0.0.0.0", "::", "::ffff:127.0.0.1"}
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range ifaddrs {
		if pfx, err := netip.ParsePrefix(a.String()); err == nil {
			local = append(local, pfx.Addr().String())
		}
	}
	for _, host := range local {
		if got, err := resolve(context.Background(), host); err == nil {
			t.Errorf("%s resolved to %v; want it refused as a local address", host, got)
		}
	}
	if got, err := resolve(context.Background(), "192.0.2.7"); err != nil || len(got) != 1 {
		t.Errorf("192.0.2.7: %v, %v; want itself", got, err)
	}
}

func TestResolvConfNameservers(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/resolv.conf"
	writeFile(t, path, "# comment\nnameserver 127.0.0.53\nnameserver 10.0.0.2\nnameserver fe80::1%eth0\noptions ndots:1\n")
	got, err := resolvConfNameservers(path)
	if err != nil || strings.Join(got, ",") != "10.0.0.2,fe80::1" {
		t.Fatalf("nameservers = %v, %v; want loopback skipped and the zone dropped", got, err)
	}
	writeFile(t, path, "nameserver 127.0.0.11\n")
	if _, err := resolvConfNameservers(path); err == nil || !strings.Contains(err.Error(), "OPENSANDBOX_EGRESS_DNS_UPSTREAM") {
		t.Fatalf("only loopback: err = %v", err)
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultGateways(t *testing.T) {
	path := t.TempDir() + "/route"
	writeFile(t, path, "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"+
		"eth0\t00000000\t010011AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"+
		"eth0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n")
	got, err := defaultGateways(path)
	if err != nil || len(got) != 1 || got[0].String() != "172.17.0.1" {
		t.Fatalf("gateways = %v, %v; want [172.17.0.1]", got, err)
	}
}

func TestDNSUpstreamConfig(t *testing.T) {
	env := map[string]string{"OPENSANDBOX_EGRESS_DNS_UPSTREAM": "10.0.0.2, [fd00::1]:54"}
	c, err := FromEnv(func(k string) string { return env[k] })
	if err != nil || strings.Join(c.DNSUpstreams, ",") != "10.0.0.2,[fd00::1]:54" {
		t.Fatalf("upstreams = %v, %v", c.DNSUpstreams, err)
	}
	env["OPENSANDBOX_EGRESS_DNS_UPSTREAM"] = "dns.example"
	if _, err := FromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "OPENSANDBOX_EGRESS_DNS_UPSTREAM") {
		t.Fatalf("a host name upstream: err = %v", err)
	}
}

// TestStartMarker: the first start claims the marker; a second start of
// the same container (same writable layer) refuses before touching
// anything, and says why.
func TestStartMarker(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "started")
	env := map[string]string{"OPENSANDBOX_EGRESS_START_MARKER": marker}
	c, err := FromEnv(func(k string) string { return env[k] })
	if err != nil || c.StartMarker != marker {
		t.Fatalf("StartMarker = %q, %v", c.StartMarker, err)
	}
	if err := claimFirstStart(marker); err != nil {
		t.Fatalf("first start: %v", err)
	}
	if err := claimFirstStart(marker); !errors.Is(err, ErrRestarted) {
		t.Fatalf("second start: err = %v; want ErrRestarted", err)
	}
	// Run stops at the marker, before the firewall (which this test,
	// without CAP_NET_ADMIN in a namespace of its own, could not program).
	c.Logger = nil
	if err := Run(context.Background(), c); !errors.Is(err, ErrRestarted) {
		t.Fatalf("Run after a restart: err = %v; want ErrRestarted", err)
	}
	// A missing directory is created (an operator's own sidecar image).
	if err := claimFirstStart(filepath.Join(t.TempDir(), "missing-dir", "started")); err != nil {
		t.Fatalf("marker in a missing directory: %v", err)
	}
	// A path that cannot be created is an error, not a restart.
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	if err := claimFirstStart(filepath.Join(file, "started")); err == nil || errors.Is(err, ErrRestarted) {
		t.Fatalf("marker under a regular file: err = %v; want a create error", err)
	}
}

// TestBoundResolverLookup checks the lookup itself: a failing upstream is
// skipped, addresses a rule denies are dropped, NXDOMAIN is final.
func TestBoundResolverLookup(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "the upstream resolvers set SO_MARK, which needs CAP_NET_ADMIN")
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		switch {
		case q.Question[0].Name != "bound.test.":
			m.Rcode = dns.RcodeNameError
		case q.Question[0].Qtype == dns.TypeA:
			for _, ip := range []string{"192.0.2.9", "192.0.2.10"} {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: "bound.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.ParseIP(ip)})
			}
		}
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })

	p, err := policy.Parse([]byte(`{"defaultAction":"deny","egress":[{"action":"deny","target":"192.0.2.10"},{"action":"allow","target":"*.test"},{"action":"allow","target":"bound.test"}]}`), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	store, err := policy.NewStore(p, policy.AlwaysFiles{})
	if err != nil {
		t.Fatal(err)
	}
	down := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("upstream down")
	}}
	resolve := boundResolver(store, []*net.Resolver{down, upstreamResolvers([]string{pc.LocalAddr().String()}, time.Second)[0]}, false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := resolve(ctx, "bound.test")
	if err != nil || len(got) != 1 || got[0] != netip.MustParseAddr("192.0.2.9") {
		t.Errorf("bound.test = %v, %v; want 192.0.2.9 only (the second address is denied by a rule)", got, err)
	}
	var de *net.DNSError
	if _, err := resolve(ctx, "missing.test"); !errors.As(err, &de) || !de.IsNotFound {
		t.Errorf("missing.test: %v; want not found", err)
	}
}

// TestBoundResolverMetadata: a bound name's metadata addresses are never
// dialled by the plain-HTTP proxy (its connections bypass the firewall),
// even when the policy allows them, unless allowMetadata is set.
func TestBoundResolverMetadata(t *testing.T) {
	p, err := policy.Parse([]byte(`{"defaultAction":"allow","egress":[{"action":"allow","target":"169.254.169.254"}]}`), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	store, err := policy.NewStore(p, policy.AlwaysFiles{})
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"169.254.169.254", "fd00:ec2::254"} {
		if got, err := boundResolver(store, nil, false)(context.Background(), host); err == nil || !strings.Contains(err.Error(), "metadata") {
			t.Errorf("%s: %v, %v; want refused as a metadata address", host, got, err)
		}
		if got, err := boundResolver(store, nil, true)(context.Background(), host); err != nil || len(got) != 1 {
			t.Errorf("allowMetadata, %s: %v, %v; want itself", host, got, err)
		}
	}
}
