package sidecar

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/dnsproxy"
	"github.com/opensandbox-go/opensandbox/internal/egress/hostname"
	"github.com/opensandbox-go/opensandbox/internal/egress/nft"
	"github.com/opensandbox-go/opensandbox/internal/egress/policy"
	"github.com/opensandbox-go/opensandbox/internal/egress/sockmark"
	"github.com/opensandbox-go/opensandbox/internal/egress/vault"
)

// initialPolicy prefers a valid persisted policy file over the configured
// policy, so a restarted sidecar keeps the changes made through the API.
func initialPolicy(cfg Config, opts policy.Options) (*policy.Policy, string, error) {
	if cfg.PolicyFile != "" {
		if b, err := os.ReadFile(cfg.PolicyFile); err == nil {
			if p, err := policy.Parse(b, opts); err == nil {
				return p, "file", nil
			}
		}
	}
	p, err := policy.Parse(cfg.Policy, opts)
	if err != nil {
		return nil, "", fmt.Errorf("egress: OPENSANDBOX_EGRESS_RULES: %w", err)
	}
	return p, "env", nil
}

func reloadAlways(ctx context.Context, store *policy.Store, apply policy.ApplyFunc, every time.Duration, log *slog.Logger, reloadSkip func() error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := store.Reload(ctx, apply); err != nil {
				log.Warn("reload always-rule files; previous rules stay", "err", err)
			}
			if err := reloadSkip(); err != nil {
				log.Warn("reload log_skip.always; previous patterns stay", "err", err)
			}
		}
	}
}

// originalDst reports where a redirected connection was headed; a failure
// refuses the connection (an empty host).
func originalDst(log *slog.Logger) func(net.Conn) (string, int) {
	return func(c net.Conn) (string, int) {
		ap, err := nft.OriginalDst(c)
		if err != nil {
			log.Warn("credential proxy: no original destination", "err", err)
			return "", 0
		}
		return ap.Addr().String(), int(ap.Port())
	}
}

// upstreamResolvers returns one resolver per upstream, in order, whose
// queries carry the bypass mark.
func upstreamResolvers(upstreams []string, timeout time.Duration) []*net.Resolver {
	var out []*net.Resolver
	for _, u := range upstreams {
		addr, err := dnsproxy.ParseUpstream(u)
		if err != nil {
			continue // validated with the configuration; never here
		}
		out = append(out, &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			d := net.Dialer{Timeout: timeout, Control: sockmark.Control(nft.BypassMark)}
			return d.DialContext(ctx, network, addr)
		}})
	}
	return out
}

// lookup asks each resolver in turn until one answers; a name that does
// not exist is an answer.
func lookup(ctx context.Context, rs []*net.Resolver, host string) ([]netip.Addr, error) {
	err := errors.New("no upstream resolver")
	for _, r := range rs {
		var addrs []netip.Addr
		if addrs, err = r.LookupNetIP(ctx, "ip", host); err == nil {
			return addrs, nil
		}
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound || ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

// boundResolver resolves a host an http binding matched, for the plain-HTTP
// proxy, which connects there instead of where the sandbox connected. The
// name must be allowed by the current network policy, and addresses an IP
// or CIDR rule denies are dropped: the sidecar's own connections bypass the
// firewall, so the policy is applied here. Local addresses (loopback,
// unspecified, the namespace's own) are dropped too: the sidecar shares the
// sandbox's network namespace, so a connection there would deliver the
// credential to a listener inside the sandbox. Lookups go to the upstream
// resolvers with the bypass mark, never through the sandbox's DNS.
//
// Metadata addresses (MetadataPrefixes) are dropped unless allowMetadata,
// as the firewall drops them.
func boundResolver(store *policy.Store, rs []*net.Resolver, allowMetadata bool) func(context.Context, string) ([]netip.Addr, error) {
	return func(ctx context.Context, host string) ([]netip.Addr, error) {
		p := store.Current()
		if p.Decide(host) != policy.Allow {
			return nil, fmt.Errorf("host %q is denied by the network policy", host)
		}
		addrs := []netip.Addr{}
		if a, err := netip.ParseAddr(host); err == nil {
			addrs = append(addrs, a)
		} else if addrs, err = lookup(ctx, rs, host); err != nil {
			return nil, err
		}
		local, err := localAddrs()
		if err != nil {
			return nil, err
		}
		// An allowed name's addresses are reachable unless a rule denies
		// them, as in the firewall (deny sets before the learned ones).
		var out []netip.Addr
		refused := ""
		for _, a := range addrs {
			a = a.Unmap().WithZone("")
			if a.IsLoopback() || a.IsUnspecified() || local[a] {
				refused = "local (inside the sandbox's network namespace)"
				continue
			}
			if !allowMetadata && slices.ContainsFunc(MetadataPrefixes, func(m netip.Prefix) bool { return m.Contains(a) }) {
				if refused == "" {
					refused = "a link-local metadata address"
				}
				continue
			}
			if act, ruled := p.DecideIP(a); ruled && act == policy.Deny {
				if refused == "" {
					refused = "denied by the network policy"
				}
				continue
			}
			out = append(out, a)
		}
		if len(out) == 0 {
			if refused == "" {
				refused = "missing"
			}
			return nil, fmt.Errorf("every address of %q is %s", host, refused)
		}
		return out, nil
	}
}

// localAddrs returns the addresses of the network namespace's interfaces.
func localAddrs() (map[netip.Addr]bool, error) {
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list local addresses: %w", err)
	}
	m := make(map[netip.Addr]bool, len(ifaddrs))
	for _, ia := range ifaddrs {
		if pfx, err := netip.ParsePrefix(ia.String()); err == nil {
			m[pfx.Addr().Unmap().WithZone("")] = true
		}
	}
	return m, nil
}

// checkBindings refuses bindings the proxies could never serve: hosts the
// network policy would not let the sandbox reach, and ports they do not
// intercept (only 443 for https and 80 for http are redirected to them).
func checkBindings(p *policy.Policy, bs []vault.CredentialBinding) error {
	for _, b := range bs {
		for _, port := range b.Match.Ports {
			if port != interceptedTLSPort && port != interceptedHTTPPort {
				return fmt.Errorf("binding %q: port %d is not intercepted by the credential proxy (only %d for https and %d for http)",
					b.Name, port, interceptedTLSPort, interceptedHTTPPort)
			}
		}
		for _, h := range b.Match.Hosts {
			name := hostname.Canonical(h)
			if strings.HasPrefix(name, "*.") {
				continue // some names under it may be allowed; nothing to check
			}
			if p.Decide(name) != policy.Allow {
				return fmt.Errorf("binding %q: host %q is not allowed by the network policy", b.Name, h)
			}
		}
	}
	return nil
}

// The destination ports redirected to the proxies.
const (
	interceptedTLSPort  = 443
	interceptedHTTPPort = 80
)

// ipv6Loopback reports whether ::1 can be bound (IPv6 is on).
func ipv6Loopback() bool {
	pc, err := net.ListenPacket("udp", "[::1]:0")
	if err != nil {
		return false
	}
	pc.Close()
	return true
}

// isIPv4Loopback reports whether addr (host:port) is on 127.0.0.0/8, the
// address the nat redirect sends IPv4 to; ::1 then mirrors it.
func isIPv4Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Is4() && a.IsLoopback()
}

// hasAddressRules reports whether p has IP or CIDR rules.
func hasAddressRules(p *policy.Policy) bool {
	for _, r := range p.Rules() {
		if r.Kind == policy.KindIP || r.Kind == policy.KindCIDR {
			return true
		}
	}
	return false
}

func portOf(addr string) (uint16, error) {
	_, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	p, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || p == 0 {
		return 0, fmt.Errorf("%q has no fixed port", addr)
	}
	return uint16(p), nil
}

// resolvConfNameservers returns up to 10 non-loopback nameservers: a
// loopback resolver would be the sidecar itself after the redirect.
func resolvConfNameservers(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("egress: no OPENSANDBOX_EGRESS_DNS_UPSTREAM and cannot read %s: %w", path, err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(strings.SplitN(f[1], "%", 2)[0])
		if err != nil || a.IsLoopback() {
			continue
		}
		if out = append(out, a.String()); len(out) == 10 {
			break
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("egress: no usable nameserver in %s; set OPENSANDBOX_EGRESS_DNS_UPSTREAM", path)
	}
	return out, nil
}

func readCerts(path string) ([]*x509.Certificate, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("egress: upstream CA file: %w", err)
	}
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("egress: upstream CA file %s: %w", path, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("egress: upstream CA file %s holds no certificate", path)
	}
	return out, nil
}

// ErrRestarted is returned by Run when the start marker exists: this
// container ran before, and the sandbox is not in its network namespace.
var ErrRestarted = errors.New("egress: the sidecar was restarted; the sandbox stays in the network namespace of its first start, so this start refuses to run")

// claimFirstStart creates the start marker, or returns ErrRestarted when
// an earlier start already did.
func claimFirstStart(path string) error {
	// An image of the operator's own ([egress] image) may lack the
	// directory; the marker must not be why the sidecar cannot start.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("egress: create start marker directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%w (marker %s)", ErrRestarted, path)
	}
	if err != nil {
		return fmt.Errorf("egress: create start marker: %w", err)
	}
	_, err = fmt.Fprintf(f, "%d\n", os.Getpid())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("egress: write start marker: %w", err)
	}
	return nil
}
