// Package nft enforces the egress policy at the packet level with
// nftables, programmed over netlink (github.com/google/nftables; the nft
// binary is never run). It owns the table "inet opensandbox" in one network
// namespace and nothing else there.
//
// The egress chain hooks output at mangle priority (-150, before any
// redirect) with a drop policy when the policy's default is deny, so when
// the sidecar is gone the sandbox keeps a closed network, never an open one.
// Rule order (first match wins):
//
//	ct state established,related accept
//	meta mark 0x1 accept                  (the sidecar's own upstream traffic)
//	oifname "lo" accept
//	icmpv6 neighbour discovery accept     (IPv6 cannot work without it)
//	tcp/udp dport 53 accept               (redirected to the DNS proxy below)
//	tcp/udp dport 853 drop                (DNS over TLS)
//	tcp/udp dport 443 [daddr @doh_block_*] drop   (DNS over HTTPS, when asked)
//	ip/ip6 daddr @deny_v4/@deny_v6 drop
//	ip/ip6 daddr @dyn_allow_v4/@dyn_allow_v6 accept
//	ip/ip6 daddr @allow_v4/@allow_v6 accept
//	counter drop                          (counter accept when default allow)
//
// With TieToProcess, egress also depends on the sidecar process being
// alive: an owned table "inet opensandbox_live" (deleted by the kernel when
// the process exits, however it exits) marks accepted packets, and a guard
// chain (priority -130, policy drop) accepts only loopback and marked
// packets. A killed sidecar leaves the sandbox with loopback only.
//
// A nat output chain redirects udp/tcp dport 53 to the DNS proxy port,
// except packets carrying mark 0x1, so processes cannot pick another
// resolver; with Rules.TLSProxyPort (HTTPProxyPort) it also redirects tcp
// dport 443 (80) on non-loopback routes to the credential proxy.
//
//	ns, _ := netns.GetFromName("sandbox")
//	fw, err := nft.New(ns)
//	err = fw.Apply(ctx, nft.Rules{DefaultDeny: true, DNSProxyPort: 15353})
//	err = fw.AllowDynamic(ctx, ips, ttl) // from the DNS proxy's OnAllowed hook
package nft

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"
)

// Names of the objects this package owns.
const (
	TableName  = "opensandbox"
	ChainName  = "egress"
	NATChain   = "dns_redirect"
	InputChain = "api_guard"
	GuardChain = "guard"
	SetAllow4  = "allow_v4"
	SetAllow6  = "allow_v6"
	SetDeny4   = "deny_v4"
	SetDeny6   = "deny_v6"
	SetDyn4    = "dyn_allow_v4"
	SetDyn6    = "dyn_allow_v6"
	SetDoH4    = "doh_block_v4"
	SetDoH6    = "doh_block_v6"
	BypassMark = 0x1
	// DefaultDNSProxyPort is used when Rules.DNSProxyPort is 0.
	DefaultDNSProxyPort = 15353
)

// Dynamic element timeouts: DNS TTL + DynamicGrace, clamped to
// [MinDynamicTimeout, MaxDynamicTimeout].
const (
	DynamicGrace      = 60 * time.Second
	MinDynamicTimeout = 60 * time.Second
	MaxDynamicTimeout = 360 * time.Second
)

// ErrNotApplied is returned by AllowDynamic before Apply has created the
// table.
var ErrNotApplied = errors.New("nft: rules not applied")

// Rules is the complete static state of the table.
type Rules struct {
	// DefaultDeny makes the egress chain drop what no rule accepts.
	DefaultDeny bool
	// AllowCIDRs and DenyCIDRs are static destination rules; a single
	// address is a /32 or /128 prefix. Deny wins over allow.
	// Loopback (127.0.0.0/8, ::1) is always allowed.
	AllowCIDRs, DenyCIDRs []netip.Prefix
	// DNSProxyPort receives redirected port-53 traffic. Default
	// DefaultDNSProxyPort.
	DNSProxyPort uint16
	// TLSProxyPort, when set, receives TCP connections to port 443 on any
	// non-loopback destination: the credential proxy's transparent mode.
	// The egress chain still judges each such connection by its original
	// destination.
	TLSProxyPort uint16
	// HTTPProxyPort, when set, receives TCP connections to port 80 on any
	// non-loopback destination: the credential proxy's plain-HTTP side,
	// judged by the egress chain by the original destination too.
	HTTPProxyPort uint16
	// BlockDoH drops tcp/udp port 443 to DoHBlockCIDRs (DNS-over-HTTPS
	// resolvers), or to every address when the list is empty.
	BlockDoH      bool
	DoHBlockCIDRs []netip.Prefix
	// APIPort, when set, is the sidecar API's TCP port: an input chain lets
	// it be reached only over loopback and from APIAllowFrom (the host's
	// address on the bridge), never from other containers.
	APIPort      uint16
	APIAllowFrom []netip.Addr
	// Dynamic are put into the new table's dynamic allow sets in the same
	// batch (addresses learned from DNS that stay allowed, with what is
	// left of their timeouts), so a policy change does not cut them off.
	Dynamic []DynamicEntry
}

// DynamicEntry is one address of the dynamic allow sets.
type DynamicEntry struct {
	Addr    netip.Addr
	Timeout time.Duration
}

// Firewall programs the opensandbox table in one network namespace. It is
// safe for concurrent use.
type Firewall struct {
	ns netns.NsHandle
	mu sync.Mutex
	// applied is set once Apply succeeded; AllowDynamic needs the sets.
	applied bool
	// live owns the liveness table once TieToProcess succeeded.
	live *liveness
}

// TieToProcess makes the namespace's egress depend on this process being
// alive: it creates the liveness table (owned by a netlink socket of this
// process, so the kernel deletes it when the process exits) and from the
// next Apply on adds a guard chain that drops every packet the liveness
// chain did not mark. Call it before the first Apply. Close releases it
// explicitly, closing the namespace's egress.
func (f *Firewall) TieToProcess() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live != nil {
		return nil
	}
	l, err := f.holdLiveness()
	if err != nil {
		return err
	}
	f.live = l
	return nil
}

// Close releases the liveness table, if held: the sandbox loses egress.
// The opensandbox table stays.
func (f *Firewall) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live == nil {
		return nil
	}
	err := f.live.close()
	f.live = nil
	return err
}

// New returns a Firewall for the network namespace ns. ns is only used
// while New and later calls run; the caller keeps ownership and must keep
// it open for the Firewall's lifetime. netns.None() selects the
// namespace of the calling process.
func New(ns netns.NsHandle) (*Firewall, error) {
	f := &Firewall{ns: ns}
	if _, err := f.newConn(); err != nil {
		return nil, err
	}
	return f, nil
}

// newConn returns a fresh batch. Each operation uses its own, so a batch
// abandoned on error can never leak into the next Flush.
func (f *Firewall) newConn() (*nftables.Conn, error) {
	var opts []nftables.ConnOption
	if f.ns.IsOpen() {
		opts = append(opts, nftables.WithNetNSFd(int(f.ns)))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("nft: open netlink connection: %w", err)
	}
	return c, nil
}

func table() *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyINet, Name: TableName}
}

// Apply replaces the whole table with one built from r, in a single
// netlink batch: the kernel applies all of it or none of it. The dynamic
// allow sets hold r.Dynamic afterwards; other entries go with the old
// table.
func (f *Firewall) Apply(ctx context.Context, r Rules) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("nft: apply: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Add (no-op when present) then delete: the batch works whether or not
	// the table exists, and deletion and creation commit together.
	c, err := f.newConn()
	if err != nil {
		return err
	}
	t := c.AddTable(table())
	c.DelTable(t)
	t = c.AddTable(table())
	if err := build(c, t, r, f.live != nil); err != nil {
		return fmt.Errorf("nft: build rules: %w", err)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nft: apply table inet %s: %w", TableName, err)
	}
	f.applied = true
	return nil
}

// DynamicTimeout converts a DNS TTL to the timeout of a dynamic element.
func DynamicTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl+DynamicGrace, MinDynamicTimeout), MaxDynamicTimeout)
}

// AllowDynamic adds ips to the dynamic allow sets with timeout
// DynamicTimeout(ttl), refreshing the timeout of addresses already there.
// It returns when the kernel has committed the change, so a caller may
// hand the addresses to a client afterwards.
func (f *Firewall) AllowDynamic(ctx context.Context, ips []netip.Addr, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("nft: allow dynamic: %w", err)
	}
	if len(ips) == 0 {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.applied {
		return ErrNotApplied
	}
	c, err := f.newConn()
	if err != nil {
		return err
	}
	timeout := DynamicTimeout(ttl)
	t := table()
	var v4, v6 []nftables.SetElement
	seen := map[netip.Addr]bool{}
	for _, ip := range ips {
		ip = ip.Unmap()
		if !ip.IsValid() || seen[ip] {
			continue
		}
		seen[ip] = true
		e := nftables.SetElement{Key: ip.AsSlice(), Timeout: timeout}
		if ip.Is4() {
			v4 = append(v4, e)
		} else {
			v6 = append(v6, e)
		}
	}
	for _, s := range []struct {
		name  string
		key   nftables.SetDatatype
		elems []nftables.SetElement
	}{{SetDyn4, nftables.TypeIPAddr, v4}, {SetDyn6, nftables.TypeIP6Addr, v6}} {
		if len(s.elems) == 0 {
			continue
		}
		set := &nftables.Set{Table: t, Name: s.name, KeyType: s.key, HasTimeout: true}
		// add (no-op if present), delete, add: the element ends up with a
		// fresh timeout whether or not it existed, in one batch.
		for i, op := range []func(*nftables.Set, []nftables.SetElement) error{
			c.SetAddElements, c.SetDeleteElements, c.SetAddElements,
		} {
			if err := op(set, s.elems); err != nil {
				return fmt.Errorf("nft: queue set %s op %d: %w", s.name, i, err)
			}
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nft: add %d dynamic addresses: %w", len(seen), err)
	}
	return nil
}

// Remove deletes the table, leaving the namespace without egress rules.
// Removing an absent table is not an error.
func (f *Firewall) Remove(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("nft: remove: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.newConn()
	if err != nil {
		return err
	}
	t := c.AddTable(table())
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nft: remove table inet %s: %w", TableName, err)
	}
	f.applied = false
	return nil
}

// sortedPrefixes returns the masked, valid prefixes of one family.
func sortedPrefixes(ps []netip.Prefix, v4 bool) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		if !p.IsValid() {
			continue
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		if p.Addr().Is4() != v4 {
			continue
		}
		out = append(out, p.Masked())
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}
