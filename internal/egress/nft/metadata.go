package nft

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// MetadataPrefixes are the link-local ranges where cloud metadata
// services answer (169.254.169.254 and its IPv6 twin fd00:ec2::254): the
// whole IPv4 link-local range, since providers use other addresses in it
// too (169.254.170.2, 169.254.169.123).
var MetadataPrefixes = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
}

// MetadataTable is the host's table of metadata guards: one forward and
// one input chain per guarded bridge interface, dropping what enters from
// that interface for MetadataPrefixes.
const MetadataTable = "opensandbox_metadata"

// metadataChains are the names of bridge's chains in MetadataTable.
func metadataChains(bridge string) (forward, input string) {
	return "forward-" + bridge, "input-" + bridge
}

// GuardMetadata makes sure packets that enter the host from interface
// bridge (a container bridge) and are headed for MetadataPrefixes are
// dropped, routed on (forward) or for the host itself (input). It is
// idempotent: the bridge's chains are created when missing and their
// rules replaced, in one transaction, leaving other bridges' chains
// alone. ns is the namespace to program; netns.None() is the caller's.
func GuardMetadata(ns netns.NsHandle, bridge string) error {
	if bridge == "" || len(bridge) >= unix.IFNAMSIZ {
		return fmt.Errorf("nft: metadata guard: %q is not an interface name", bridge)
	}
	f := &Firewall{ns: ns}
	c, err := f.newConn()
	if err != nil {
		return err
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: MetadataTable})
	fwd, in := metadataChains(bridge)
	accept := nftables.ChainPolicyAccept
	for _, ch := range []struct {
		name string
		hook *nftables.ChainHook
	}{{fwd, nftables.ChainHookForward}, {in, nftables.ChainHookInput}} {
		chain := c.AddChain(&nftables.Chain{Name: ch.name, Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: ch.hook, Priority: nftables.ChainPriorityFilter, Policy: &accept})
		c.FlushChain(chain)
		for _, p := range MetadataPrefixes {
			c.AddRule(&nftables.Rule{Table: t, Chain: chain, Exprs: concat(iifname(bridge), daddrInPrefix(p), []expr.Any{&expr.Counter{}}, verdict(expr.VerdictDrop))})
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nft: metadata guard for %s: %w", bridge, err)
	}
	return nil
}

// UnguardMetadata removes bridge's chains from MetadataTable, and the
// table once it holds no chain. Nothing to remove is no error.
func UnguardMetadata(ns netns.NsHandle, bridge string) error {
	f := &Firewall{ns: ns}
	c, err := f.newConn()
	if err != nil {
		return err
	}
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: MetadataTable}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("nft: list chains: %w", err)
	}
	fwd, in := metadataChains(bridge)
	left := 0
	for _, ch := range chains {
		if ch.Table.Name != MetadataTable {
			continue
		}
		if ch.Name == fwd || ch.Name == in {
			c.DelChain(ch)
			continue
		}
		left++
	}
	if left == 0 && slices.ContainsFunc(chains, func(ch *nftables.Chain) bool { return ch.Table.Name == MetadataTable }) {
		c.DelTable(t)
	}
	if err := c.Flush(); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("nft: remove metadata guard for %s: %w", bridge, err)
	}
	return nil
}

// daddrInPrefix matches packets of p's family whose destination is in p.
func daddrInPrefix(p netip.Prefix) []expr.Any {
	fam := families[1]
	if p.Addr().Is4() {
		fam = families[0]
	}
	mask := make([]byte, fam.addrLen)
	for i := range p.Bits() {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{fam.nfproto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: fam.daddrOffset, Len: fam.addrLen},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: fam.addrLen, Mask: mask, Xor: make([]byte, fam.addrLen)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Masked().Addr().AsSlice()},
	}
}
