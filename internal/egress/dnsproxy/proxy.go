// Package dnsproxy is the egress sidecar's filtering DNS proxy. It answers
// every query from the sandbox: names the policy denies get NXDOMAIN without
// any upstream query, allowed names are forwarded to the configured upstream
// resolvers, and the A/AAAA answers are handed to an OnAllowed hook (the
// nftables layer) before the reply is sent, so a client never learns an
// address it cannot reach. Any failure answers SERVFAIL: the proxy fails
// closed.
//
// The package depends only on miekg/dns and sockmark; the policy and the
// firewall are reached through the small Decider and AllowedFunc types
// declared here.
//
//	p, err := dnsproxy.New(dnsproxy.Config{
//		Upstreams: []string{"10.0.0.2"},
//		Decider:   decider,
//		OnAllowed: func(ctx context.Context, name string, ips []netip.Addr, ttl time.Duration) error {
//			return fw.AllowDynamic(ctx, ips, ttl)
//		},
//		Mark: 0x1,
//	})
//	go p.Start(ctx)
//	<-p.Ready()
package dnsproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/opensandbox-go/opensandbox/internal/egress/hostname"
	"github.com/opensandbox-go/opensandbox/internal/egress/sockmark"
)

// Defaults used when the corresponding Config field is zero.
const (
	DefaultAddr    = "127.0.0.1:15353"
	DefaultTimeout = 5 * time.Second
)

// Decider reports whether a host name may be resolved. host is lower-case
// and carries no trailing dot.
type Decider interface {
	Allow(host string) bool
}

// DeciderFunc adapts a function to Decider.
type DeciderFunc func(host string) bool

// Allow calls f(host).
func (f DeciderFunc) Allow(host string) bool { return f(host) }

// AllowedFunc is called with the A/AAAA addresses of an allowed answer
// before the answer is sent to the client. name is the question name
// (lower-case, no trailing dot) and ttl the smallest TTL among the address
// records. A non-nil error makes the proxy answer SERVFAIL instead.
type AllowedFunc func(ctx context.Context, name string, ips []netip.Addr, ttl time.Duration) error

// Config configures a Proxy.
type Config struct {
	// Addr is the UDP and TCP listen address. Default DefaultAddr. With
	// port 0 the UDP port is chosen by the kernel and TCP uses the same one.
	Addr string
	// Upstreams are the resolvers queries are forwarded to, as IP or
	// IP:port (port 53 when omitted); tried in order. Required.
	Upstreams []string
	// Timeout bounds each upstream exchange. Default DefaultTimeout.
	Timeout time.Duration
	// Mark, when non-zero, is set as SO_MARK on upstream sockets so the
	// firewall can let them out and skip the DNS redirect (needs
	// CAP_NET_ADMIN; Linux only).
	Mark int
	// Decider decides which names may be resolved. Required.
	Decider Decider
	// OnAllowed receives the addresses of allowed answers. Optional.
	OnAllowed AllowedFunc
	// OnDenied is told of every denied name (and then nothing is logged
	// here: the caller decides what to report). It must not block.
	// Optional; without it each denial is logged at info level.
	OnDenied func(host string)
	// Logger receives per-query diagnostics. Default slog.Default().
	Logger *slog.Logger
}

// Proxy is a filtering DNS forwarder. Create it with New and run it with
// Start.
type Proxy struct {
	cfg       Config
	upstreams []string
	ready     chan struct{}

	mu   sync.Mutex
	addr netip.AddrPort
}

// New validates cfg and returns a Proxy that is not yet listening.
func New(cfg Config) (*Proxy, error) {
	if cfg.Decider == nil {
		return nil, errors.New("dnsproxy: Config.Decider is required")
	}
	if len(cfg.Upstreams) == 0 {
		return nil, errors.New("dnsproxy: at least one upstream is required")
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ups := make([]string, 0, len(cfg.Upstreams))
	for _, u := range cfg.Upstreams {
		hp, err := ParseUpstream(u)
		if err != nil {
			return nil, err
		}
		ups = append(ups, hp)
	}
	return &Proxy{cfg: cfg, upstreams: ups, ready: make(chan struct{})}, nil
}

// ParseUpstream accepts IP or IP:port (IPv6 as [ip]:port) and returns
// host:port, port 53 when omitted. Host names are rejected: resolving them
// would need DNS.
func ParseUpstream(s string) (string, error) {
	if ip, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(ip.Unmap(), 53).String(), nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return "", fmt.Errorf("dnsproxy: upstream %q is not IP or IP:port: %w", s, err)
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String(), nil
}

// Ready is closed once both listeners are bound.
func (p *Proxy) Ready() <-chan struct{} { return p.ready }

// Addr returns the bound listen address; valid after Ready is closed.
func (p *Proxy) Addr() netip.AddrPort {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// Start binds UDP and TCP listeners, serves until ctx ends and then shuts
// both down. It returns nil after a clean shutdown.
func (p *Proxy) Start(ctx context.Context) error {
	pc, ln, err := p.listen(ctx)
	if err != nil {
		return err
	}
	bound := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	p.mu.Lock()
	p.addr = netip.AddrPortFrom(bound.Addr().Unmap(), bound.Port())
	p.mu.Unlock()

	handler := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) { p.serve(ctx, w, r) })
	udpSrv := &dns.Server{PacketConn: pc, Handler: handler}
	tcpSrv := &dns.Server{Listener: ln, Handler: handler, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}

	var started sync.WaitGroup
	started.Add(2)
	udpSrv.NotifyStartedFunc = started.Done
	tcpSrv.NotifyStartedFunc = started.Done

	errc := make(chan error, 2)
	go func() { errc <- udpSrv.ActivateAndServe() }()
	go func() { errc <- tcpSrv.ActivateAndServe() }()
	go func() { started.Wait(); close(p.ready) }()

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	// Shutdown errors only say a server was not running; the serve error
	// (if any) is the one worth reporting.
	_ = udpSrv.ShutdownContext(shutCtx)
	_ = tcpSrv.ShutdownContext(shutCtx)
	if serveErr != nil {
		return fmt.Errorf("dnsproxy: serve: %w", serveErr)
	}
	return nil
}

// listen binds UDP and then TCP on the same port. When the configured port
// is 0 the kernel picks the UDP port, which may be taken for TCP; a few
// fresh picks are tried before giving up.
func (p *Proxy) listen(ctx context.Context) (net.PacketConn, net.Listener, error) {
	var lc net.ListenConfig
	host, port, err := net.SplitHostPort(p.cfg.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("dnsproxy: listen address %q: %w", p.cfg.Addr, err)
	}
	attempts := 1
	if port == "0" {
		attempts = 10
	}
	var errs []error
	for range attempts {
		pc, err := lc.ListenPacket(ctx, "udp", p.cfg.Addr)
		if err != nil {
			return nil, nil, fmt.Errorf("dnsproxy: listen udp %s: %w", p.cfg.Addr, err)
		}
		tcpAddr := net.JoinHostPort(host, fmt.Sprint(pc.LocalAddr().(*net.UDPAddr).Port))
		ln, err := lc.Listen(ctx, "tcp", tcpAddr)
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		errs = append(errs, fmt.Errorf("dnsproxy: listen tcp %s: %w", tcpAddr, err))
	}
	return nil, nil, errors.Join(errs...)
}

// serve answers one query.
func (p *Proxy) serve(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) {
	log := p.cfg.Logger
	if len(r.Question) == 0 {
		reply(w, r, dns.RcodeFormatError)
		return
	}
	name := hostname.Canonical(r.Question[0].Name)
	for _, q := range r.Question {
		if h := hostname.Canonical(q.Name); !p.cfg.Decider.Allow(h) {
			if p.cfg.OnDenied != nil {
				p.cfg.OnDenied(h)
			} else {
				log.InfoContext(ctx, "dns query denied", "host", h, "qtype", dns.TypeToString[q.Qtype])
			}
			reply(w, r, dns.RcodeNameError)
			return
		}
	}
	network := "udp"
	if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		network = "tcp"
	}
	resp, err := p.forward(ctx, network, r)
	if err != nil {
		log.WarnContext(ctx, "dns upstream failed", "host", name, "err", err)
		reply(w, r, dns.RcodeServerFailure)
		return
	}
	if ips, ttl := addresses(resp); len(ips) > 0 && p.cfg.OnAllowed != nil {
		if err := p.cfg.OnAllowed(ctx, name, ips, ttl); err != nil {
			log.ErrorContext(ctx, "dns allow hook failed; answering SERVFAIL", "host", name, "err", err)
			reply(w, r, dns.RcodeServerFailure)
			return
		}
	}
	resp.Id = r.Id
	if err := w.WriteMsg(resp); err != nil {
		log.DebugContext(ctx, "dns write reply", "host", name, "err", err)
	}
}

// forward tries each upstream in order and returns the first response.
func (p *Proxy) forward(ctx context.Context, network string, r *dns.Msg) (*dns.Msg, error) {
	c := &dns.Client{
		Net:     network,
		Timeout: p.cfg.Timeout,
		Dialer: &net.Dialer{
			Timeout: p.cfg.Timeout,
			Control: sockmark.Control(p.cfg.Mark),
		},
	}
	var errs []error
	for _, up := range p.upstreams {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		qctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
		resp, _, err := c.ExchangeContext(qctx, r.Copy(), up)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", up, err))
			continue
		}
		if resp.Rcode == dns.RcodeServerFailure || resp.Rcode == dns.RcodeRefused {
			errs = append(errs, fmt.Errorf("%s: rcode %s", up, dns.RcodeToString[resp.Rcode]))
			continue
		}
		return resp, nil
	}
	return nil, fmt.Errorf("all %d upstreams failed: %w", len(p.upstreams), errors.Join(errs...))
}

// addresses returns the A/AAAA addresses of the answer section and the
// smallest TTL among them.
func addresses(m *dns.Msg) ([]netip.Addr, time.Duration) {
	var ips []netip.Addr
	var minTTL uint32
	for _, rr := range m.Answer {
		var ip net.IP
		switch v := rr.(type) {
		case *dns.A:
			ip = v.A
		case *dns.AAAA:
			ip = v.AAAA
		default:
			continue
		}
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			continue
		}
		if ttl := rr.Header().Ttl; len(ips) == 0 || ttl < minTTL {
			minTTL = ttl
		}
		ips = append(ips, a.Unmap())
	}
	return ips, time.Duration(minTTL) * time.Second
}

func reply(w dns.ResponseWriter, r *dns.Msg, rcode int) {
	m := new(dns.Msg)
	m.SetRcode(r, rcode)
	m.RecursionAvailable = true
	_ = w.WriteMsg(m) // the client may be gone; nothing else to do
}
