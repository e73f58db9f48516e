package nft

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// family describes one address family's sets and header layout.
type family struct {
	nfproto     byte
	key         nftables.SetDatatype
	daddrOffset uint32
	addrLen     uint32
	allow, deny string
	dyn, doh    string
	isV4        bool
}

var families = []family{
	{nfproto: unix.NFPROTO_IPV4, key: nftables.TypeIPAddr, daddrOffset: 16, addrLen: 4,
		allow: SetAllow4, deny: SetDeny4, dyn: SetDyn4, doh: SetDoH4, isV4: true},
	{nfproto: unix.NFPROTO_IPV6, key: nftables.TypeIP6Addr, daddrOffset: 24, addrLen: 16,
		allow: SetAllow6, deny: SetDeny6, dyn: SetDyn6, doh: SetDoH6, isV4: false},
}

// build queues sets, chains and rules for r on c. With guard, a last
// chain drops what the liveness chain did not mark.
func build(c *nftables.Conn, t *nftables.Table, r Rules, guard bool) error {
	// Loopback destinations are always allowed (the sidecar's own
	// listeners live there).
	allow := append([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}, r.AllowCIDRs...)
	type famSets struct {
		fam                   family
		allow, deny, dyn, doh *nftables.Set
	}
	var fs []famSets
	for _, fam := range families {
		mk := func(name string, prefixes []netip.Prefix) (*nftables.Set, error) {
			s := &nftables.Set{Table: t, Name: name, KeyType: fam.key, Interval: true}
			if err := c.AddSet(s, intervalElements(sortedPrefixes(prefixes, fam.isV4))); err != nil {
				return nil, fmt.Errorf("add set %s: %w", name, err)
			}
			return s, nil
		}
		a, err := mk(fam.allow, allow)
		if err != nil {
			return err
		}
		d, err := mk(fam.deny, r.DenyCIDRs)
		if err != nil {
			return err
		}
		dyn := &nftables.Set{Table: t, Name: fam.dyn, KeyType: fam.key, HasTimeout: true}
		var carried []nftables.SetElement
		for _, e := range r.Dynamic {
			if a := e.Addr.Unmap(); a.IsValid() && a.Is4() == fam.isV4 && e.Timeout >= time.Second {
				carried = append(carried, nftables.SetElement{Key: a.AsSlice(), Timeout: e.Timeout.Truncate(time.Second)})
			}
		}
		if err := c.AddSet(dyn, carried); err != nil {
			return fmt.Errorf("add set %s: %w", fam.dyn, err)
		}
		var doh *nftables.Set
		if r.BlockDoH && len(r.DoHBlockCIDRs) > 0 {
			if doh, err = mk(fam.doh, r.DoHBlockCIDRs); err != nil {
				return err
			}
		}
		fs = append(fs, famSets{fam, a, d, dyn, doh})
	}

	policy := nftables.ChainPolicyAccept
	final := expr.VerdictAccept
	if r.DefaultDeny {
		policy, final = nftables.ChainPolicyDrop, expr.VerdictDrop
	}
	ch := c.AddChain(&nftables.Chain{
		Name: ChainName, Table: t, Type: nftables.ChainTypeFilter,
		// Before the nat chain: rules see where a packet was meant to go,
		// not where a redirect sends it, so a redirected TLS connection is
		// still judged by its real destination.
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityMangle, Policy: &policy,
	})
	add := func(parts ...[]expr.Any) { c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: concat(parts...)}) }

	add(ctEstablishedRelated(), accept())
	add(markIs(BypassMark), accept())
	add(oifname("lo"), accept())
	add(l4proto(unix.IPPROTO_ICMPV6), icmpv6NeighbourDiscovery(), accept())
	for _, proto := range []byte{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
		// Any port-53 packet is redirected to the DNS proxy by the nat
		// chain below, whichever resolver it names.
		add(l4proto(proto), dport(53), accept())
	}
	for _, proto := range []byte{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
		add(l4proto(proto), dport(853), verdict(expr.VerdictDrop))
	}
	if r.BlockDoH {
		// DNS over HTTPS (and over QUIC): to the listed resolvers, or to
		// every address when there is no list.
		for _, proto := range []byte{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
			if len(r.DoHBlockCIDRs) == 0 {
				add(l4proto(proto), dport(443), verdict(expr.VerdictDrop))
				continue
			}
			for _, s := range fs {
				add(l4proto(proto), dport(443), daddrIn(s.fam, s.doh), verdict(expr.VerdictDrop))
			}
		}
	}
	for _, s := range fs {
		add(daddrIn(s.fam, s.deny), verdict(expr.VerdictDrop))
	}
	for _, s := range fs {
		add(daddrIn(s.fam, s.dyn), accept())
	}
	for _, s := range fs {
		add(daddrIn(s.fam, s.allow), accept())
	}
	add([]expr.Any{&expr.Counter{}}, verdict(final))

	if guard {
		drop := nftables.ChainPolicyDrop
		g := c.AddChain(&nftables.Chain{
			Name: GuardChain, Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityRef(guardPriority), Policy: &drop,
		})
		for _, e := range [][]expr.Any{oifname("lo"), markIs(BypassMark), markIs(LiveMark)} {
			c.AddRule(&nftables.Rule{Table: t, Chain: g, Exprs: concat(e, accept())})
		}
	}

	if r.APIPort != 0 {
		accept := nftables.ChainPolicyAccept
		in := c.AddChain(&nftables.Chain{
			Name: InputChain, Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept,
		})
		addIn := func(parts ...[]expr.Any) { c.AddRule(&nftables.Rule{Table: t, Chain: in, Exprs: concat(parts...)}) }
		addIn(iifname("lo"), verdict(expr.VerdictAccept))
		for _, a := range r.APIAllowFrom {
			addIn(l4proto(unix.IPPROTO_TCP), dport(r.APIPort), saddrIs(a), verdict(expr.VerdictAccept))
		}
		addIn(l4proto(unix.IPPROTO_TCP), dport(r.APIPort), verdict(expr.VerdictDrop))
	}

	port := r.DNSProxyPort
	if port == 0 {
		port = DefaultDNSProxyPort
	}
	natPolicy := nftables.ChainPolicyAccept
	nat := c.AddChain(&nftables.Chain{
		Name: NATChain, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest, Policy: &natPolicy,
	})
	c.AddRule(&nftables.Rule{Table: t, Chain: nat, Exprs: concat(markIs(BypassMark), verdict(expr.VerdictReturn))})
	for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
		c.AddRule(&nftables.Rule{Table: t, Chain: nat, Exprs: concat(l4proto(proto), dport(53), redirectTo(port))})
	}
	if r.TLSProxyPort != 0 {
		c.AddRule(&nftables.Rule{Table: t, Chain: nat, Exprs: concat(
			oifnameNot("lo"), l4proto(unix.IPPROTO_TCP), dport(443), redirectTo(r.TLSProxyPort))})
	}
	if r.HTTPProxyPort != 0 {
		c.AddRule(&nftables.Rule{Table: t, Chain: nat, Exprs: concat(
			oifnameNot("lo"), l4proto(unix.IPPROTO_TCP), dport(80), redirectTo(r.HTTPProxyPort))})
	}
	return nil
}

// intervalElements turns sorted, masked prefixes into interval-set
// elements, merging overlapping and adjacent ranges (the kernel rejects
// overlaps). A range reaching the top of the address space has no end
// element, as nft itself encodes it.
func intervalElements(ps []netip.Prefix) []nftables.SetElement {
	if len(ps) == 0 {
		return nil
	}
	type rng struct{ lo, hi netip.Addr }
	var rs []rng
	for _, p := range ps {
		lo, hi := p.Addr(), lastAddr(p)
		if n := len(rs); n > 0 {
			last := &rs[n-1]
			if next := last.hi.Next(); !next.IsValid() || lo.Compare(next) <= 0 {
				if hi.Compare(last.hi) > 0 {
					last.hi = hi
				}
				continue
			}
		}
		rs = append(rs, rng{lo, hi})
	}
	var out []nftables.SetElement
	if !rs[0].lo.IsUnspecified() {
		// nft starts interval sets with an end marker at zero.
		out = append(out, nftables.SetElement{Key: make([]byte, rs[0].lo.BitLen()/8), IntervalEnd: true})
	}
	for _, r := range rs {
		out = append(out, nftables.SetElement{Key: r.lo.AsSlice()})
		if end := r.hi.Next(); end.IsValid() {
			out = append(out, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
	}
	return out
}

// lastAddr is the highest address inside p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func concat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func accept() []expr.Any { return verdict(expr.VerdictAccept) }

func verdict(k expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Verdict{Kind: k}} }

func ctEstablishedRelated() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{
			SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  binaryutil.NativeEndian.PutUint32(0),
		},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

func markIs(mark uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(mark)},
	}
}

func oifname(name string) []expr.Any {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b},
	}
}

func oifnameNot(name string) []expr.Any {
	e := oifname(name)
	e[1].(*expr.Cmp).Op = expr.CmpOpNeq
	return e
}

func iifname(name string) []expr.Any {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b},
	}
}

// saddrIs matches packets from a (IPv4 or IPv6).
func saddrIs(a netip.Addr) []expr.Any {
	a = a.Unmap()
	proto, off := byte(unix.NFPROTO_IPV6), uint32(8)
	if a.Is4() {
		proto, off = unix.NFPROTO_IPV4, 12
	}
	b := a.AsSlice()
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(len(b))},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b},
	}
}

func l4proto(p byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
	}
}

// icmpv6NeighbourDiscovery matches ICMPv6 types 133–136 (router
// solicitation/advertisement, neighbour solicitation/advertisement).
func icmpv6NeighbourDiscovery() []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
		&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: []byte{133}, ToData: []byte{136}},
	}
}

func dport(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
	}
}

func daddrIn(f family, s *nftables.Set) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{f.nfproto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.daddrOffset, Len: f.addrLen},
		&expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID},
	}
}

func redirectTo(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.Redir{RegisterProtoMin: 1},
	}
}
