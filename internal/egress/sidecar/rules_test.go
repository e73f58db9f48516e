package sidecar

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/egress/nft"
	"github.com/opensandbox-go/opensandbox/internal/egress/policy"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func TestSubtract(t *testing.T) {
	p := netip.MustParsePrefix("10.0.0.0/30")
	got := subtract(p, []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")})
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/32"), netip.MustParsePrefix("10.0.0.2/31")}
	if !slices.Equal(got, want) {
		t.Fatalf("subtract = %v; want %v", got, want)
	}
	if got := subtract(p, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}); len(got) != 0 {
		t.Fatalf("covered prefix left %v", got)
	}
	if got := subtract(p, []netip.Prefix{netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("10.0.1.0/24")}); !slices.Equal(got, []netip.Prefix{p}) {
		t.Fatalf("disjoint subtract = %v", got)
	}
}

// TestFirewallRulesFirstMatch checks address by address that the disjoint
// sets decide like the policy does.
func TestFirewallRulesFirstMatch(t *testing.T) {
	p, err := policy.Parse([]byte(`{"defaultAction":"deny","egress":[
		{"action":"allow","target":"10.1.0.5"},
		{"action":"deny","target":"10.1.0.0/24"},
		{"action":"allow","target":"10.1.0.0/16"},
		{"action":"allow","target":"pypi.org"}]}`), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := firewallRules(p, fwOptions{mode: sandbox.EgressEnforcementDNSNft, dnsPort: 15353})
	if !r.DefaultDeny {
		t.Fatal("default deny lost")
	}
	for _, s := range []string{"10.1.0.5", "10.1.0.4", "10.1.0.6", "10.1.1.1", "10.2.0.1", "10.1.0.255"} {
		ip := netip.MustParseAddr(s)
		want, _ := p.DecideIP(ip)
		if got := fwDecide(r, ip); got != want {
			t.Errorf("%s: firewall %s, policy %s", s, got, want)
		}
	}
	doh := []netip.Prefix{netip.MustParsePrefix("1.1.1.1/32")}
	if d := firewallRules(p, fwOptions{mode: sandbox.EgressEnforcementDNS, allowMetadata: true}); len(d.AllowCIDRs)+len(d.DenyCIDRs) != 0 {
		t.Fatalf("dns mode rules with allowMetadata = %+v; want no address sets", d)
	}
	if d := firewallRules(p, fwOptions{mode: sandbox.EgressEnforcementDNS, dnsPort: 15353, tlsPort: 18081, blockDoH: true, dohList: doh}); d.DefaultDeny || len(d.AllowCIDRs) != 0 || !slices.Equal(d.DenyCIDRs, MetadataPrefixes) || d.TLSProxyPort != 18081 || !d.BlockDoH || len(d.DoHBlockCIDRs) != 1 {
		t.Fatalf("dns mode rules = %+v; want only redirects", d)
	}
}

func fwDecide(r nft.Rules, ip netip.Addr) policy.Action {
	for _, p := range r.DenyCIDRs {
		if p.Contains(ip) {
			return policy.Deny
		}
	}
	for _, p := range r.AllowCIDRs {
		if p.Contains(ip) {
			return policy.Allow
		}
	}
	if r.DefaultDeny {
		return policy.Deny
	}
	return policy.Allow
}

// TestFirewallRulesMetadata: the link-local metadata ranges are dropped
// in both modes, whatever the policy allows (an IP rule, a wider CIDR, an
// allow-all default), unless allowMetadata says the policy decides.
func TestFirewallRulesMetadata(t *testing.T) {
	p, err := policy.Parse([]byte(`{"defaultAction":"allow","egress":[
		{"action":"allow","target":"169.254.169.254"},
		{"action":"allow","target":"169.254.0.0/16"},
		{"action":"allow","target":"0.0.0.0/0"},
		{"action":"allow","target":"fd00:ec2::254"}]}`), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	metadata := []string{"169.254.169.254", "169.254.170.2", "169.254.0.1", "fd00:ec2::254"}
	for _, mode := range []string{sandbox.EgressEnforcementDNS, sandbox.EgressEnforcementDNSNft} {
		r := firewallRules(p, fwOptions{mode: mode, dnsPort: 15353})
		for _, s := range metadata {
			if got := fwDecide(r, netip.MustParseAddr(s)); got != policy.Deny {
				t.Errorf("%s: %s is %s; want it dropped", mode, s, got)
			}
		}
		for _, s := range []string{"169.253.255.255", "169.255.0.0", "10.0.0.1", "fd00:ec2::253"} {
			if got := fwDecide(r, netip.MustParseAddr(s)); got != policy.Allow {
				t.Errorf("%s: %s is %s; want it allowed", mode, s, got)
			}
		}
	}
	r := firewallRules(p, fwOptions{mode: sandbox.EgressEnforcementDNSNft, dnsPort: 15353, allowMetadata: true})
	for _, s := range metadata {
		if got := fwDecide(r, netip.MustParseAddr(s)); got != policy.Allow {
			t.Errorf("allowMetadata: %s is %s; want the policy's allow", s, got)
		}
	}
}
