package nft

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The liveness table ties the sandbox's egress to the sidecar process.
//
// The kernel deletes a table created with the "owner" flag when the
// netlink socket that created it closes, which happens when the process
// exits for any reason, SIGKILL included. The liveness table holds one
// chain that marks every packet the egress chain let through with
// LiveMark; the guard chain of the (persistent) opensandbox table then
// drops everything unmarked. While the sidecar runs both agree; once it
// is gone the marks stop and the sandbox keeps only loopback.
//
// google/nftables cannot set table flags, so this table is built with raw
// netlink messages on a socket held open for the Firewall's lifetime.
const (
	LiveTable = "opensandbox_live"
	liveChain = "mark"
	// LiveMark marks packets while the sidecar is alive.
	LiveMark = 0x2

	tableFlagOwner = 0x2 // NFT_TABLE_F_OWNER
	livePriority   = -140
	guardPriority  = -130
)

// liveness is the open socket that owns the liveness table.
type liveness struct {
	conn *netlink.Conn
}

// holdLiveness creates the liveness table in the firewall's namespace and
// keeps the socket that owns it.
func (f *Firewall) holdLiveness() (*liveness, error) {
	cfg := &netlink.Config{}
	if f.ns.IsOpen() {
		cfg.NetNS = int(f.ns)
	}
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg)
	if err != nil {
		return nil, fmt.Errorf("nft: open liveness socket: %w", err)
	}
	msgs, err := liveMessages()
	if err != nil {
		c.Close()
		return nil, err
	}
	if _, err := c.SendMessages(msgs); err != nil {
		c.Close()
		return nil, fmt.Errorf("nft: send liveness table: %w", err)
	}
	// One ack per acknowledged message (the batch markers have none).
	var errs []error
	for range msgs[1 : len(msgs)-1] {
		if _, err := c.Receive(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, fmt.Errorf("nft: create liveness table inet %s: %w", LiveTable, err)
	}
	return &liveness{conn: c}, nil
}

// close drops the socket, and with it the table.
func (l *liveness) close() error { return l.conn.Close() }

func liveMessages() ([]netlink.Message, error) {
	const ack = netlink.Request | netlink.Acknowledge
	nfType := func(msg int) netlink.HeaderType {
		return netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | msg)
	}
	attrs := func(as ...netlink.Attribute) []byte {
		b, err := netlink.MarshalAttributes(as)
		if err != nil {
			panic(err) // only fixed, valid attributes are marshalled here
		}
		return b
	}
	str := func(s string) []byte { return []byte(s + "\x00") }
	be32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

	// meta mark != BypassMark → meta mark set LiveMark
	var elems []netlink.Attribute
	for _, e := range []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(BypassMark)},
		&expr.Immediate{Register: 1, Data: binaryutil.NativeEndian.PutUint32(LiveMark)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
	} {
		b, err := expr.Marshal(unix.NFPROTO_INET, e)
		if err != nil {
			return nil, fmt.Errorf("nft: marshal liveness rule: %w", err)
		}
		elems = append(elems, netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: b})
	}
	exprs, err := netlink.MarshalAttributes(elems)
	if err != nil {
		return nil, fmt.Errorf("nft: marshal liveness rule: %w", err)
	}
	prio := int32(livePriority)
	return []netlink.Message{
		{Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_MSG_BATCH_BEGIN), Flags: netlink.Request},
			Data: nfgen(unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES)},
		{Header: netlink.Header{Type: nfType(unix.NFT_MSG_NEWTABLE), Flags: ack | netlink.Create | netlink.Excl},
			Data: append(nfgen(unix.NFPROTO_INET, 0), attrs(
				netlink.Attribute{Type: unix.NFTA_TABLE_NAME, Data: str(LiveTable)},
				netlink.Attribute{Type: unix.NFTA_TABLE_FLAGS, Data: be32(tableFlagOwner)},
			)...)},
		{Header: netlink.Header{Type: nfType(unix.NFT_MSG_NEWCHAIN), Flags: ack | netlink.Create},
			Data: append(nfgen(unix.NFPROTO_INET, 0), attrs(
				netlink.Attribute{Type: unix.NFTA_CHAIN_TABLE, Data: str(LiveTable)},
				netlink.Attribute{Type: unix.NFTA_CHAIN_NAME, Data: str(liveChain)},
				netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_CHAIN_HOOK, Data: attrs(
					netlink.Attribute{Type: unix.NFTA_HOOK_HOOKNUM, Data: be32(unix.NF_INET_LOCAL_OUT)},
					netlink.Attribute{Type: unix.NFTA_HOOK_PRIORITY, Data: be32(uint32(prio))},
				)},
				netlink.Attribute{Type: unix.NFTA_CHAIN_POLICY, Data: be32(1 /* NF_ACCEPT */)},
				netlink.Attribute{Type: unix.NFTA_CHAIN_TYPE, Data: str("filter")},
			)...)},
		{Header: netlink.Header{Type: nfType(unix.NFT_MSG_NEWRULE), Flags: ack | netlink.Create | unix.NLM_F_APPEND},
			Data: append(nfgen(unix.NFPROTO_INET, 0), attrs(
				netlink.Attribute{Type: unix.NFTA_RULE_TABLE, Data: str(LiveTable)},
				netlink.Attribute{Type: unix.NFTA_RULE_CHAIN, Data: str(liveChain)},
				netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_RULE_EXPRESSIONS, Data: exprs},
			)...)},
		{Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_MSG_BATCH_END), Flags: netlink.Request},
			Data: nfgen(unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES)},
	}, nil
}

// nfgen is the nfgenmsg header: family, version 0, resource id.
func nfgen(family byte, resID uint16) []byte {
	return []byte{family, unix.NFNETLINK_V0, byte(resID >> 8), byte(resID)}
}
