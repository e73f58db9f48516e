package sidecar

import (
	"net/netip"

	"github.com/opensandbox-go/opensandbox/internal/egress/nft"
	"github.com/opensandbox-go/opensandbox/internal/egress/policy"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// firewallRules turns a policy into the firewall's static state.
//
// The policy's IP and CIDR rules follow "first match wins" (always-deny,
// then always-allow, then user rules), while the firewall checks its deny
// sets before its allow sets. Each rule's range is therefore cut down by
// the ranges of earlier rules with the other action, which makes the two
// sets disjoint and the firewall agree with the policy address by address.
//
// In dns mode only the DNS redirect, the DoT block and the metadata drop
// are programmed: IP rules are not enforced and unmatched traffic is
// accepted.
//
// Unless allowMetadata is set, the metadata ranges are dropped before any
// rule of the policy, always-allow files included: they are cut out of
// every allow range, as an earlier deny rule would be.
func firewallRules(p *policy.Policy, o fwOptions) nft.Rules {
	r := nft.Rules{DNSProxyPort: o.dnsPort, TLSProxyPort: o.tlsPort, HTTPProxyPort: o.httpPort, BlockDoH: o.blockDoH, DoHBlockCIDRs: o.dohList,
		APIPort: o.apiPort, APIAllowFrom: o.apiAllow}
	var earlierAllow, earlierDeny []netip.Prefix
	if !o.allowMetadata {
		r.DenyCIDRs = append(r.DenyCIDRs, MetadataPrefixes...)
		earlierDeny = append(earlierDeny, MetadataPrefixes...)
	}
	if o.mode != sandbox.EgressEnforcementDNSNft {
		return r
	}
	r.DefaultDeny = p.DefaultAction() == policy.Deny
	var ordered []policy.Rule
	if a := p.Always(); a != nil {
		ordered = append(ordered, a.Deny()...)
		ordered = append(ordered, a.Allow()...)
	}
	ordered = append(ordered, p.Rules()...)
	for _, rule := range ordered {
		if rule.Kind != policy.KindIP && rule.Kind != policy.KindCIDR {
			continue
		}
		if rule.Action == policy.Allow {
			r.AllowCIDRs = append(r.AllowCIDRs, subtract(rule.Prefix, earlierDeny)...)
			earlierAllow = append(earlierAllow, rule.Prefix)
		} else {
			r.DenyCIDRs = append(r.DenyCIDRs, subtract(rule.Prefix, earlierAllow)...)
			earlierDeny = append(earlierDeny, rule.Prefix)
		}
	}
	return r
}

// MetadataPrefixes are the link-local metadata ranges the sidecar drops
// unless the configuration lets the policy decide.
var MetadataPrefixes = nft.MetadataPrefixes

// fwOptions are the parts of the firewall that do not come from the policy.
type fwOptions struct {
	mode             string
	dnsPort, tlsPort uint16
	httpPort         uint16 // plain-HTTP credential proxy
	blockDoH         bool
	dohList          []netip.Prefix
	apiPort          uint16
	apiAllow         []netip.Addr
	allowMetadata    bool // the policy may allow MetadataPrefixes
}

// subtract returns the parts of p not covered by any of qs, as prefixes.
func subtract(p netip.Prefix, qs []netip.Prefix) []netip.Prefix {
	out := []netip.Prefix{p.Masked()}
	for _, q := range qs {
		var next []netip.Prefix
		for _, o := range out {
			next = append(next, subtractOne(o, q.Masked())...)
		}
		out = next
	}
	return out
}

func subtractOne(p, q netip.Prefix) []netip.Prefix {
	if p.Addr().Is4() != q.Addr().Is4() || !p.Overlaps(q) {
		return []netip.Prefix{p}
	}
	if q.Bits() <= p.Bits() {
		return nil // q covers p
	}
	// q lies inside p: split p in halves and keep what q leaves of each.
	lo := netip.PrefixFrom(p.Addr(), p.Bits()+1)
	b := p.Addr().AsSlice()
	b[p.Bits()/8] |= 0x80 >> (p.Bits() % 8)
	hiAddr, _ := netip.AddrFromSlice(b)
	hi := netip.PrefixFrom(hiAddr, p.Bits()+1)
	return append(subtractOne(lo, q), subtractOne(hi, q)...)
}
