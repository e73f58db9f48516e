package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sync/errgroup"

	"github.com/opensandbox-go/opensandbox/internal/egress/api"
	"github.com/opensandbox-go/opensandbox/internal/egress/dnsproxy"
	"github.com/opensandbox-go/opensandbox/internal/egress/nft"
	"github.com/opensandbox-go/opensandbox/internal/egress/policy"
	"github.com/opensandbox-go/opensandbox/internal/egress/sockmark"
	"github.com/opensandbox-go/opensandbox/internal/egress/tlsproxy"
	"github.com/opensandbox-go/opensandbox/internal/egress/vault"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Timeouts of the API's HTTP server: a client gets apiReadHeaderTimeout
// for its request head and apiReadTimeout for head and body together, so
// a slow body cannot hold a connection (the bodies are small JSON). An idle
// connection is kept longer than the lifecycle server's proxy keeps its own
// (90 s): the client side closes first, so the proxy never sends a request
// on a connection this end has just closed.
const (
	apiReadHeaderTimeout = 5 * time.Second
	apiReadTimeout       = 15 * time.Second
	apiIdleTimeout       = 2 * time.Minute
	apiShutdownGrace     = 5 * time.Second
)

// Run starts every part of the sidecar and serves until ctx ends. It
// returns an error when a part cannot start or fails while serving. The
// firewall rules stay in place when Run returns. Every goroutine Run
// starts has ended when it returns, and the current policy has been
// written to the policy file.
//
// The parts are built in stages, each needing the ones before: the
// state the configuration determines (newSidecar), the credential
// proxy's listeners, whose ports the firewall names (listenProxies), the
// firewall (programFirewall), the services (buildServices), and then
// serve runs them as one group.
func Run(ctx context.Context, cfg Config) error {
	s, err := newSidecar(cfg)
	if err != nil {
		return err
	}
	defer s.closeListeners()
	if err := s.listenProxies(); err != nil {
		return err
	}
	if err := s.programFirewall(ctx); err != nil {
		return err
	}
	if err := s.buildServices(); err != nil {
		return err
	}
	return s.serve(ctx)
}

// sidecar is the state Run builds, stage by stage.
type sidecar struct {
	cfg       Config
	log       *slog.Logger
	metrics   *metrics
	opts      policy.Options
	source    string // where the initial policy came from
	store     *policy.Store
	upstreams []string
	dnsPort   uint16
	apiPort   uint16

	// listenProxies
	listeners         []net.Listener // closed when Run returns
	tlsLn, httpLn     net.Listener
	tlsPort, httpPort uint16
	ca                *tlsproxy.CA

	// programFirewall
	fw       *nft.Firewall
	fwMu     sync.Mutex // orders DNS-learned additions with rebuilds
	learnt   *learned
	apiAllow []netip.Addr

	// buildServices
	persist  *persister
	deny     *denyReporter
	dns      []*dnsproxy.Proxy // IPv4, and IPv6 when the namespace has it
	proxy    *tlsproxy.Proxy
	proxyLns []proxyListener
	vstore   *vault.Store
	ready    atomic.Bool // the credential proxy serves
	srv      *http.Server
	apiLn    net.Listener
}

// proxyListener is one listener of the credential proxy and its mode.
type proxyListener struct {
	name  string
	ln    net.Listener
	plain bool
}

// newSidecar takes what the configuration alone determines: the start
// marker, the initial policy and its store, the resolvers and the ports.
func newSidecar(cfg Config) (*sidecar, error) {
	s := &sidecar{cfg: cfg, log: cfg.Logger, opts: policy.Options{MaxRules: cfg.MaxRules}, learnt: newLearned()}
	if s.log == nil {
		s.log = slog.Default()
	}
	if cfg.StartMarker != "" {
		if err := claimFirstStart(cfg.StartMarker); err != nil {
			return nil, err
		}
	}
	initial, source, err := initialPolicy(cfg, s.opts)
	if err != nil {
		return nil, err
	}
	s.source = source
	if s.store, err = policy.NewStore(initial, cfg.Always); err != nil {
		return nil, fmt.Errorf("egress: load always-rule files: %w", err)
	}
	s.upstreams = cfg.DNSUpstreams
	if len(s.upstreams) == 0 {
		if s.upstreams, err = resolvConfNameservers(cfg.ResolvConf); err != nil {
			return nil, err
		}
	}
	if s.dnsPort, err = portOf(cfg.DNSAddr); err != nil {
		return nil, fmt.Errorf("egress: DNS address: %w", err)
	}
	if s.apiPort, err = portOf(cfg.Listen); err != nil {
		return nil, fmt.Errorf("egress: API address: %w", err)
	}
	s.metrics = newMetrics()
	return s, nil
}

// listenProxies binds the credential proxy's listeners, before the
// firewall names their ports, and writes the CA certificate the sandbox
// trusts. Without the credential proxy it does nothing.
func (s *sidecar) listenProxies() error {
	if !s.cfg.CredentialProxy {
		return nil
	}
	var err error
	if s.tlsLn, err = s.listen(s.cfg.TLSProxyAddr); err != nil {
		return fmt.Errorf("egress: credential proxy listener: %w", err)
	}
	s.tlsPort = uint16(s.tlsLn.Addr().(*net.TCPAddr).Port)
	if s.httpLn, err = s.listen(s.cfg.HTTPProxyAddr); err != nil {
		return fmt.Errorf("egress: plain-HTTP credential proxy listener: %w", err)
	}
	s.httpPort = uint16(s.httpLn.Addr().(*net.TCPAddr).Port)
	if s.ca, err = tlsproxy.NewCA(s.cfg.SandboxID); err != nil {
		return fmt.Errorf("egress: credential proxy CA: %w", err)
	}
	if err := s.ca.WriteCertFile(s.cfg.CAFile); err != nil {
		return fmt.Errorf("egress: export CA certificate: %w", err)
	}
	return nil
}

// listen binds a TCP listener that closeListeners closes.
func (s *sidecar) listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s.listeners = append(s.listeners, ln)
	return ln, nil
}

func (s *sidecar) closeListeners() {
	for _, ln := range s.listeners {
		_ = ln.Close()
	}
}

// programFirewall ties the sandbox's egress to this process and programs
// the initial policy.
func (s *sidecar) programFirewall(ctx context.Context) error {
	var err error
	if s.fw, err = nft.New(netns.None()); err != nil {
		return fmt.Errorf("egress: firewall (the sidecar needs CAP_NET_ADMIN): %w", err)
	}
	// Before any rule: from here on the sandbox's egress lives and dies
	// with this process.
	if err := s.fw.TieToProcess(); err != nil {
		return fmt.Errorf("egress: tie egress to the sidecar process: %w", err)
	}
	s.apiAllow = s.cfg.APIAllow
	if s.apiAllow == nil {
		if s.apiAllow, err = defaultGateways("/proc/net/route"); err != nil {
			s.log.Warn("cannot read the default route; the API is reachable over loopback only", "err", err)
		}
	}
	// The resolvers are not allow-listed: only the DNS proxy talks to
	// them, with the bypass mark. The sandbox's own port-53 traffic is
	// redirected to the proxy whatever address it names.
	if err := s.apply(ctx, s.store.Current()); err != nil {
		return fmt.Errorf("egress: program firewall: %w", err)
	}
	s.log.Info("egress firewall programmed", "mode", s.cfg.Mode, "policy", s.source, "policyMode", s.store.Current().Mode(),
		"credentialProxy", s.cfg.CredentialProxy)
	return nil
}

// apply rebuilds the firewall for p. fwMu orders it with DNS-learned
// additions, so an address handed to a client is never lost to a rebuild
// that missed it.
func (s *sidecar) apply(ctx context.Context, p *policy.Policy) error {
	s.fwMu.Lock()
	defer s.fwMu.Unlock()
	rules := firewallRules(p, fwOptions{mode: s.cfg.Mode, dnsPort: s.dnsPort, tlsPort: s.tlsPort, httpPort: s.httpPort,
		blockDoH: s.cfg.BlockDoH, dohList: s.cfg.DoHBlocklist, apiPort: s.apiPort, apiAllow: s.apiAllow, allowMetadata: s.cfg.AllowMetadata})
	if s.cfg.Mode == sandbox.EgressEnforcementDNSNft {
		rules.Dynamic = s.learnt.keep(p)
	}
	err := s.fw.Apply(ctx, rules)
	if err != nil {
		s.metrics.errors.WithLabelValues(componentFirewall).Inc()
	}
	return err
}

// allowLearned opens the addresses of an allowed DNS answer (dns+nft).
func (s *sidecar) allowLearned(ctx context.Context, name string, ips []netip.Addr, ttl time.Duration) error {
	s.fwMu.Lock()
	defer s.fwMu.Unlock()
	s.learnt.add(name, ips, nft.DynamicTimeout(ttl))
	err := s.fw.AllowDynamic(ctx, ips, ttl)
	if err != nil {
		s.metrics.errors.WithLabelValues(componentFirewall).Inc()
	}
	return err
}

// buildServices makes what serve runs: the policy persister, the deny
// reporter, the DNS proxies, the credential proxy and the API.
func (s *sidecar) buildServices() error {
	if s.cfg.PolicyFile != "" {
		s.persist = newPersister(s.cfg.PolicyFile, s.log)
		s.persist.onError = func() { s.metrics.errors.WithLabelValues(componentPersist).Inc() }
	}
	s.store.Subscribe(func(p *policy.Policy) {
		s.metrics.policyUpdates.Inc()
		if s.persist != nil {
			s.persist.save(p)
		}
	})
	if s.persist != nil {
		s.persist.save(s.store.Current())
	}
	s.buildDeny()
	if err := s.buildDNS(); err != nil {
		return err
	}
	s.vstore = vault.NewStore()
	if err := s.buildCredentialProxy(); err != nil {
		return err
	}
	return s.buildAPI()
}

// buildDeny makes the deny reporter. The webhook is the sidecar's own
// traffic: its connections and its name lookups (straight to the upstream
// resolver) carry the bypass mark, so the sandbox's policy and the DNS
// redirect do not apply.
func (s *sidecar) buildDeny() {
	ownResolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		d := net.Dialer{Timeout: s.cfg.DNSTimeout, Control: sockmark.Control(nft.BypassMark)}
		addr, err := dnsproxy.ParseUpstream(s.upstreams[0])
		if err != nil {
			return nil, err
		}
		return d.DialContext(ctx, network, addr)
	}}
	s.deny = newDenyReporter(s.cfg.SandboxID, s.cfg.DenyWebhook, &http.Client{Transport: &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{Timeout: webhookTimeout, Control: sockmark.Control(nft.BypassMark),
			Resolver: ownResolver}).DialContext,
	}}, s.log.With("component", "deny"))
	if err := s.deny.loadSkip(s.cfg.LogSkip); err != nil {
		s.log.Warn("cannot read the log_skip.always file; every denial is reported", "err", err)
	}
}

// buildDNS makes the DNS proxy, and its IPv6 twin when the namespace has
// IPv6: IPv6 packets are redirected to ::1, where they would otherwise
// meet a closed port (closed, but broken).
func (s *sidecar) buildDNS() error {
	var onAllowed dnsproxy.AllowedFunc
	if s.cfg.Mode == sandbox.EgressEnforcementDNSNft {
		onAllowed = s.allowLearned
	}
	dnsCfg := dnsproxy.Config{
		Addr:      s.cfg.DNSAddr,
		Upstreams: s.upstreams,
		Timeout:   s.cfg.DNSTimeout,
		Mark:      nft.BypassMark,
		Decider: dnsproxy.DeciderFunc(func(h string) bool {
			ok := s.store.Current().Decide(h) == policy.Allow
			s.metrics.dnsQuery(ok)
			return ok
		}),
		OnAllowed: onAllowed,
		OnDenied:  s.deny.denied,
		Logger:    s.log.With("component", "dns"),
	}
	dns, err := dnsproxy.New(dnsCfg)
	if err != nil {
		return fmt.Errorf("egress: DNS proxy: %w", err)
	}
	s.dns = append(s.dns, dns)
	if ipv6Loopback() && isIPv4Loopback(s.cfg.DNSAddr) {
		dnsCfg.Addr = net.JoinHostPort("::1", strconv.Itoa(int(s.dnsPort)))
		dns6, err := dnsproxy.New(dnsCfg)
		if err != nil {
			return fmt.Errorf("egress: DNS proxy (IPv6): %w", err)
		}
		s.dns = append(s.dns, dns6)
	}
	return nil
}

// buildCredentialProxy makes the TLS and plain-HTTP credential proxy and
// its IPv6 listeners; without the credential proxy it does nothing.
func (s *sidecar) buildCredentialProxy() error {
	if !s.cfg.CredentialProxy {
		return nil
	}
	roots, err := readCerts(s.cfg.UpstreamCAFile)
	if err != nil {
		return err
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: sockmark.Control(nft.BypassMark)}
	s.proxy, err = tlsproxy.New(tlsproxy.Config{
		CA:          s.ca,
		Injector:    countingInjector{Store: s.vstore, injections: s.metrics.vaultInjections},
		OriginalDst: originalDst(s.log),
		ExtraRoots:  roots,
		Dial:        dialer.DialContext,
		Resolve:     boundResolver(s.store, upstreamResolvers(s.upstreams, s.cfg.DNSTimeout), s.cfg.AllowMetadata),
		Logger:      s.log.With("component", "credential-proxy"),
	})
	if err != nil {
		return fmt.Errorf("egress: credential proxy: %w", err)
	}
	s.proxyLns = []proxyListener{{"credential proxy", s.tlsLn, false}, {"plain-HTTP credential proxy", s.httpLn, true}}
	if ipv6Loopback() {
		for _, l := range []struct {
			name  string
			addr  string
			port  uint16
			plain bool
		}{{"credential proxy (IPv6)", s.cfg.TLSProxyAddr, s.tlsPort, false}, {"plain-HTTP credential proxy (IPv6)", s.cfg.HTTPProxyAddr, s.httpPort, true}} {
			if !isIPv4Loopback(l.addr) {
				continue
			}
			ln, err := s.listen(net.JoinHostPort("::1", strconv.Itoa(int(l.port))))
			if err != nil {
				return fmt.Errorf("egress: %s listener: %w", l.name, err)
			}
			s.proxyLns = append(s.proxyLns, proxyListener{l.name, ln, l.plain})
		}
	}
	for i := range s.proxyLns {
		s.proxyLns[i].ln = countingListener{Listener: s.proxyLns[i].ln, accepted: s.metrics.proxyConns.WithLabelValues(proxyKind(s.proxyLns[i].plain))}
	}
	return nil
}

// buildAPI makes the policy and credential-vault API, its metrics route
// and its listener.
func (s *sidecar) buildAPI() error {
	vh := vault.Handler(vault.HandlerConfig{
		Store:         s.vstore,
		Ready:         s.ready.Load,
		CheckBindings: func(bs []vault.CredentialBinding) error { return checkBindings(s.store.Current(), bs) },
		// The host reaches the API over the bridge (the published port):
		// host-local, like loopback, and the only other source api_guard
		// lets in.
		TrustedPeer: func(a netip.Addr) bool { return slices.Contains(s.apiAllow, a) },
		Logger:      s.log.With("component", "vault"),
	})
	a, err := api.New(api.Config{
		Store:           s.store,
		Options:         s.opts,
		Token:           s.cfg.Token,
		EnforcementMode: s.cfg.Mode,
		Reason: func() string {
			if s.cfg.Mode == sandbox.EgressEnforcementDNS && hasAddressRules(s.store.Current()) {
				return "enforcement mode dns filters names only: the IP and CIDR rules are not enforced (use dns+nft)"
			}
			return ""
		},
		Apply:   s.apply,
		Vault:   vh,
		Metrics: s.metrics.handler(),
		Ready: func(ctx context.Context) error {
			for _, p := range s.dns {
				select {
				case <-p.Ready():
				default:
					return errors.New("DNS proxy not ready")
				}
			}
			return nil
		},
		Logger: s.log.With("component", "api"),
	})
	if err != nil {
		return fmt.Errorf("egress: api: %w", err)
	}
	if s.apiLn, err = s.listen(s.cfg.Listen); err != nil {
		return fmt.Errorf("egress: api listener: %w", err)
	}
	s.srv = newAPIServer(a.Handler(), s.log, apiReadHeaderTimeout, apiReadTimeout)
	return nil
}

// newAPIServer is the API's HTTP server: a request's head must arrive
// within readHeader and its whole body within read, so a slow client
// cannot hold a connection.
func newAPIServer(h http.Handler, log *slog.Logger, readHeader, read time.Duration) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeader,
		ReadTimeout:       read,
		IdleTimeout:       apiIdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
}

// serve runs every service and background task as one group until ctx
// ends or a service fails, then stops them all and waits for each. The
// policy persister's last write happens after the API has shut down, so
// a policy accepted just before the end is the one on disk.
func (s *sidecar) serve(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	// A service runs until gctx ends; returning before is a failure.
	service := func(name string, fn func(context.Context) error) {
		g.Go(func() error {
			err := fn(gctx)
			if err == nil && gctx.Err() == nil {
				err = errors.New("stopped unexpectedly")
			}
			if err != nil {
				if gctx.Err() == nil {
					s.metrics.errors.WithLabelValues(componentService).Inc()
				}
				return fmt.Errorf("egress: %s: %w", name, err)
			}
			return nil
		})
	}
	background := func(fn func(context.Context)) {
		g.Go(func() error { fn(gctx); return nil })
	}

	if s.persist != nil {
		background(s.persist.run)
	}
	if s.cfg.DenyWebhook != "" {
		background(s.deny.run)
	}
	for i, p := range s.dns {
		name := "DNS proxy"
		if i > 0 {
			name = "DNS proxy (IPv6)"
		}
		service(name, p.Start)
	}
	for _, l := range s.proxyLns {
		serveFn := s.proxy.Serve
		if l.plain {
			serveFn = s.proxy.ServePlain
		}
		service(l.name, func(ctx context.Context) error { return serveFn(ctx, l.ln) })
	}
	if s.proxy != nil {
		s.ready.Store(true)
	}
	service("api", func(context.Context) error {
		if err := s.srv.Serve(s.apiLn); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	background(func(ctx context.Context) {
		<-ctx.Done()
		shut, done := context.WithTimeout(context.WithoutCancel(ctx), apiShutdownGrace)
		defer done()
		if err := s.srv.Shutdown(shut); err != nil {
			_ = s.srv.Close()
		}
	})
	if s.cfg.AlwaysReload > 0 {
		background(func(ctx context.Context) {
			reloadAlways(ctx, s.store, s.apply, s.cfg.AlwaysReload, s.log, func() error { return s.deny.loadSkip(s.cfg.LogSkip) })
		})
	}
	s.log.Info("egress sidecar serving", "api", s.apiLn.Addr().String(), "dns", s.cfg.DNSAddr, "upstreams", s.upstreams)

	err := g.Wait()
	if s.persist != nil {
		// Every writer of the store has stopped: what is current now is
		// the last policy, whether or not run saw it.
		s.persist.finish(s.store.Current())
	}
	return err
}
