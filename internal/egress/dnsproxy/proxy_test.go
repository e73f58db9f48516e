package dnsproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// upstream is a real miekg/dns server on loopback answering fixed records.
type upstream struct {
	addr    string
	queries atomic.Int64
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		u.queries.Add(1)
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		switch name := strings.ToLower(q.Name); {
		case name == "allowed.example." && q.Qtype == dns.TypeA:
			m.Answer = append(m.Answer,
				mustRR(t, "allowed.example. 30 IN A 192.0.2.10"),
				mustRR(t, "allowed.example. 20 IN A 192.0.2.11"))
		case name == "allowed.example." && q.Qtype == dns.TypeAAAA:
			m.Answer = append(m.Answer, mustRR(t, "allowed.example. 40 IN AAAA 2001:db8::10"))
		case name == "txt.example.":
			m.Answer = append(m.Answer, mustRR(t, `txt.example. 40 IN TXT "hi"`))
		default:
			m.SetRcode(r, dns.RcodeNameError)
		}
		_ = w.WriteMsg(m)
	})
	// UDP and TCP on one port: the port the kernel picks for UDP may be
	// taken for TCP, so a few picks are tried.
	var (
		pc  net.PacketConn
		ln  net.Listener
		err error
	)
	for range 10 {
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatalf("listen udp: %v", err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
	}
	if err != nil {
		t.Fatalf("listen tcp: %v", err)
	}
	u.addr = pc.LocalAddr().String()
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}} {
		go func() { _ = s.ActivateAndServe() }()
		t.Cleanup(func() { _ = s.Shutdown() })
	}
	return u
}

func mustRR(t *testing.T, s string) dns.RR {
	t.Helper()
	rr, err := dns.NewRR(s)
	if err != nil {
		t.Fatalf("NewRR(%q): %v", s, err)
	}
	return rr
}

type hookCall struct {
	name string
	ips  []netip.Addr
	ttl  time.Duration
}

type recorder struct {
	mu    sync.Mutex
	calls []hookCall
	err   error
}

func (r *recorder) hook(_ context.Context, name string, ips []netip.Addr, ttl time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, hookCall{name, ips, ttl})
	return r.err
}

func (r *recorder) snapshot() []hookCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

var allowExample = DeciderFunc(func(h string) bool { return h == "allowed.example" || h == "txt.example" })

// startProxy runs a proxy on a random loopback port until the test ends.
func startProxy(t *testing.T, cfg Config) *Proxy {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Decider == nil {
		cfg.Decider = allowExample
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx) }()
	select {
	case <-p.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start returned %v", err)
		}
	})
	return p
}

func query(t *testing.T, p *Proxy, network, name string, qtype uint16) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 10 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	resp, _, err := c.Exchange(m, p.Addr().String())
	if err != nil {
		t.Fatalf("Exchange(%s %s over %s): %v", name, dns.TypeToString[qtype], network, err)
	}
	return resp
}

func TestAllowedResolvesAndHookSeesIPs(t *testing.T) {
	up := startUpstream(t)
	rec := &recorder{}
	p := startProxy(t, Config{Upstreams: []string{up.addr}, OnAllowed: rec.hook})

	resp := query(t, p, "udp", "Allowed.Example", dns.TypeA)
	if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 2 {
		t.Fatalf("A query: rcode %s, %d answers; want NOERROR, 2", dns.RcodeToString[resp.Rcode], len(resp.Answer))
	}
	calls := rec.snapshot()
	want := []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.11")}
	if len(calls) != 1 || calls[0].name != "allowed.example" || !slices.Equal(calls[0].ips, want) || calls[0].ttl != 20*time.Second {
		t.Fatalf("hook calls = %+v; want one {allowed.example %v 20s}", calls, want)
	}

	// No A/AAAA in the answer: no hook call, answer passed through.
	resp = query(t, p, "udp", "txt.example", dns.TypeTXT)
	if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
		t.Fatalf("TXT query: rcode %s, %d answers", dns.RcodeToString[resp.Rcode], len(resp.Answer))
	}
	if n := len(rec.snapshot()); n != 1 {
		t.Fatalf("hook called %d times after TXT query; want 1", n)
	}
}

func TestDeniedGetsNXDOMAINWithoutUpstream(t *testing.T) {
	up := startUpstream(t)
	rec := &recorder{}
	var denied []string
	var mu sync.Mutex
	p := startProxy(t, Config{Upstreams: []string{up.addr}, OnAllowed: rec.hook, OnDenied: func(h string) {
		mu.Lock()
		denied = append(denied, h)
		mu.Unlock()
	}})

	for _, network := range []string{"udp", "tcp"} {
		resp := query(t, p, network, "Denied.Example.", dns.TypeA)
		if resp.Rcode != dns.RcodeNameError {
			t.Errorf("%s: rcode = %s; want NXDOMAIN", network, dns.RcodeToString[resp.Rcode])
		}
	}
	mu.Lock()
	if !slices.Equal(denied, []string{"denied.example", "denied.example"}) {
		t.Errorf("OnDenied got %q; want the canonical name once per query", denied)
	}
	mu.Unlock()
	if n := up.queries.Load(); n != 0 {
		t.Fatalf("upstream saw %d queries; want 0", n)
	}
	if n := len(rec.snapshot()); n != 0 {
		t.Fatalf("hook called %d times; want 0", n)
	}
}

// deadUpstream returns a loopback UDP address nothing answers on: a bound
// socket that never reads, so queries time out rather than being refused.
func deadUpstream(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().String()
}

func TestUpstreamFailover(t *testing.T) {
	up := startUpstream(t)
	// The live upstream must answer within Timeout: generous, so a loaded
	// machine cannot fail the test (the dead one costs the full wait).
	p := startProxy(t, Config{Upstreams: []string{deadUpstream(t), up.addr}, Timeout: time.Second})
	resp := query(t, p, "udp", "allowed.example", dns.TypeA)
	if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 2 {
		t.Fatalf("rcode %s, %d answers; want NOERROR from the second upstream", dns.RcodeToString[resp.Rcode], len(resp.Answer))
	}
}

func TestUpstreamDownServfail(t *testing.T) {
	rec := &recorder{}
	p := startProxy(t, Config{
		Upstreams: []string{deadUpstream(t), deadUpstream(t)},
		Timeout:   200 * time.Millisecond,
		OnAllowed: rec.hook,
	})
	resp := query(t, p, "udp", "allowed.example", dns.TypeA)
	if resp.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode = %s; want SERVFAIL", dns.RcodeToString[resp.Rcode])
	}
	if n := len(rec.snapshot()); n != 0 {
		t.Fatalf("hook called %d times; want 0", n)
	}
}

func TestTCP(t *testing.T) {
	up := startUpstream(t)
	rec := &recorder{}
	p := startProxy(t, Config{Upstreams: []string{up.addr}, OnAllowed: rec.hook})
	resp := query(t, p, "tcp", "allowed.example", dns.TypeAAAA)
	if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
		t.Fatalf("rcode %s, %d answers; want NOERROR, 1", dns.RcodeToString[resp.Rcode], len(resp.Answer))
	}
	calls := rec.snapshot()
	if len(calls) != 1 || !slices.Equal(calls[0].ips, []netip.Addr{netip.MustParseAddr("2001:db8::10")}) || calls[0].ttl != 40*time.Second {
		t.Fatalf("hook calls = %+v; want the AAAA address with 40s", calls)
	}
}

func TestHookFailureServfail(t *testing.T) {
	up := startUpstream(t)
	rec := &recorder{err: errors.New("nft unavailable")}
	p := startProxy(t, Config{Upstreams: []string{up.addr}, OnAllowed: rec.hook})
	resp := query(t, p, "udp", "allowed.example", dns.TypeA)
	if resp.Rcode != dns.RcodeServerFailure || len(resp.Answer) != 0 {
		t.Fatalf("rcode %s, %d answers; want SERVFAIL with no answers", dns.RcodeToString[resp.Rcode], len(resp.Answer))
	}
}

func TestConcurrentQueries(t *testing.T) {
	up := startUpstream(t)
	rec := &recorder{}
	p := startProxy(t, Config{Upstreams: []string{up.addr}, OnAllowed: rec.hook})
	const n = 64
	errc := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			network := []string{"udp", "tcp"}[i%2]
			name, want := "allowed.example.", dns.RcodeSuccess
			if i%3 == 0 {
				name, want = fmt.Sprintf("denied%d.example.", i), dns.RcodeNameError
			}
			m := new(dns.Msg)
			m.SetQuestion(name, dns.TypeA)
			c := &dns.Client{Net: network, Timeout: 10 * time.Second}
			resp, _, err := c.Exchange(m, p.Addr().String())
			if err != nil {
				errc <- fmt.Errorf("query %d: %w", i, err)
				return
			}
			if resp.Rcode != want || resp.Id != m.Id {
				errc <- fmt.Errorf("query %d %s: rcode %s id %d; want %s id %d", i, name, dns.RcodeToString[resp.Rcode], resp.Id, dns.RcodeToString[want], m.Id)
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	allowed := n - (n+2)/3
	if got := len(rec.snapshot()); got != allowed {
		t.Errorf("hook calls = %d; want %d", got, allowed)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no decider", Config{Upstreams: []string{"127.0.0.1"}}},
		{"no upstreams", Config{Decider: allowExample}},
		{"hostname upstream", Config{Decider: allowExample, Upstreams: []string{"dns.example:53"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); err == nil {
				t.Fatalf("New(%+v) = nil error; want error", tc.cfg)
			}
		})
	}
}

func TestParseUpstream(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1":        "10.0.0.1:53",
		"10.0.0.1:5353":   "10.0.0.1:5353",
		"2001:db8::1":     "[2001:db8::1]:53",
		"[2001:db8::1]:5": "[2001:db8::1]:5",
	} {
		got, err := ParseUpstream(in)
		if err != nil || got != want {
			t.Errorf("ParseUpstream(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
