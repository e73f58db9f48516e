package nft

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/opensandbox-go/opensandbox/internal/netnstest"
)

// testNet is a sandbox netns joined by a veth pair to a world netns. All
// addresses are 10.250.N.0/24 and exist only inside these namespaces.
type testNet struct {
	sandbox, world netns.NsHandle
	sandboxIP      netip.Addr
	world1         netip.Addr // .2
	world2         netip.Addr // .3
	world3         netip.Addr // .4
	world4         netip.Addr // .5
	httpPort       int
}

func setupNet(t *testing.T) *testNet {
	t.Helper()
	p := netnstest.New(t)
	tn := &testNet{
		sandbox: p.Sandbox, world: p.World,
		sandboxIP: p.IP(1), world1: p.IP(2), world2: p.IP(3), world3: p.IP(4), world4: p.IP(5),
	}

	// HTTP on all world addresses, and a TCP listener on 853 (DoT).
	ln, err := netnstest.Listen(tn.world, "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	acceptAndClose(t, tn.world, "0.0.0.0:853")
	tn.httpPort = ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }),
		ReadHeaderTimeout: 5 * time.Second,
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return tn
}

// acceptAndClose listens on addr inside ns and closes every connection it
// accepts (a TCP peer that only needs to complete handshakes), until the
// test ends.
func acceptAndClose(t *testing.T, ns netns.NsHandle, addr string) net.Listener {
	t.Helper()
	ln, err := netnstest.Listen(ns, addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln
}

// inNS runs fn inside ns and fails the test on error.
func inNS(t *testing.T, ns netns.NsHandle, fn func() error) {
	t.Helper()
	if err := netnstest.InNS(ns, fn); err != nil {
		t.Fatalf("in netns: %v", err)
	}
}

// dial reports whether a TCP connect from the sandbox to ip:port succeeds
// within a short timeout. A dropped SYN shows up as a timeout.
// Connects that must succeed get a long timeout (a loaded machine must
// not fail them); connects that must be dropped wait the short one.
const (
	connectTimeout = 3 * time.Second
	dropTimeout    = 400 * time.Millisecond
)

func (tn *testNet) dial(t *testing.T, ip netip.Addr, port int, timeout time.Duration) error {
	t.Helper()
	c, err := netnstest.Dial(tn.sandbox, "tcp", netip.AddrPortFrom(ip, uint16(port)).String(), timeout)
	if err == nil {
		c.Close()
	}
	return err
}

func (tn *testNet) mustConnect(t *testing.T, ip netip.Addr, port int) {
	t.Helper()
	if err := tn.dial(t, ip, port, connectTimeout); err != nil {
		t.Fatalf("connect %s:%d from sandbox: %v; want success", ip, port, err)
	}
}

func (tn *testNet) mustBeDropped(t *testing.T, ip netip.Addr, port int) {
	t.Helper()
	err := tn.dial(t, ip, port, dropTimeout)
	var ne net.Error
	if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("connect %s:%d from sandbox: %v; want timeout (dropped)", ip, port, err)
	}
}

func newFirewall(t *testing.T, tn *testNet) *Firewall {
	t.Helper()
	f, err := New(tn.sandbox)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return f
}

func hostPrefix(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

func TestEnforcement(t *testing.T) {
	tn := setupNet(t)
	ctx := context.Background()
	// Baseline: everything reachable before any rules.
	for _, ip := range []netip.Addr{tn.world1, tn.world2, tn.world3, tn.world4} {
		tn.mustConnect(t, ip, tn.httpPort)
	}
	tn.mustConnect(t, tn.world1, 853)

	f := newFirewall(t, tn)
	t.Cleanup(func() { _ = f.Remove(ctx) })
	err := f.Apply(ctx, Rules{
		DefaultDeny: true,
		AllowCIDRs:  []netip.Prefix{netip.MustParsePrefix(tn.world1.String() + "/31"), hostPrefix(tn.world3)}, // .2,.3 and .4
		DenyCIDRs:   []netip.Prefix{hostPrefix(tn.world2)},                                                    // .3 denied: deny wins
	})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	t.Run("allowed CIDR connects", func(t *testing.T) { tn.mustConnect(t, tn.world1, tn.httpPort) })
	t.Run("denied IP dropped", func(t *testing.T) { tn.mustBeDropped(t, tn.world2, tn.httpPort) })
	t.Run("DoT dropped", func(t *testing.T) { tn.mustBeDropped(t, tn.world1, 853) })
	t.Run("dynamic allow", func(t *testing.T) {
		tn.mustBeDropped(t, tn.world4, tn.httpPort)
		if err := f.AllowDynamic(ctx, []netip.Addr{tn.world4}, 30*time.Second); err != nil {
			t.Fatalf("AllowDynamic: %v", err)
		}
		tn.mustConnect(t, tn.world4, tn.httpPort)
		// Re-adding refreshes rather than fails.
		if err := f.AllowDynamic(ctx, []netip.Addr{tn.world4, netip.MustParseAddr("2001:db8::1")}, 300*time.Second); err != nil {
			t.Fatalf("AllowDynamic again: %v", err)
		}
		elems := setElements(t, tn, SetDyn4)
		if len(elems) != 1 || elems[0].Timeout != MaxDynamicTimeout {
			t.Fatalf("dyn_allow_v4 = %+v; want one element with timeout %v", elems, MaxDynamicTimeout)
		}
	})
}

func setElements(t *testing.T, tn *testNet, name string) []nftables.SetElement {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(int(tn.sandbox)))
	if err != nil {
		t.Fatalf("nftables.New: %v", err)
	}
	s, err := c.GetSetByName(table(), name)
	if err != nil {
		t.Fatalf("GetSetByName(%s): %v", name, err)
	}
	elems, err := c.GetSetElements(s)
	if err != nil {
		t.Fatalf("GetSetElements(%s): %v", name, err)
	}
	return elems
}

func TestDNSRedirect(t *testing.T) {
	tn := setupNet(t)
	ctx := context.Background()
	// The "proxy": a UDP responder on loopback in the sandbox netns.
	var proxy net.PacketConn
	inNS(t, tn.sandbox, func() error {
		var err error
		proxy, err = net.ListenPacket("udp", "127.0.0.1:0")
		return err
	})
	t.Cleanup(func() { proxy.Close() })
	got := make(chan string, 4)
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := proxy.ReadFrom(buf)
			if err != nil {
				return
			}
			got <- string(buf[:n])
			_, _ = proxy.WriteTo([]byte("proxy:"+string(buf[:n])), from)
		}
	}()
	// The "other resolver" in the world netns.
	var resolver net.PacketConn
	inNS(t, tn.world, func() error {
		var err error
		resolver, err = net.ListenPacket("udp", "0.0.0.0:53")
		return err
	})
	t.Cleanup(func() { resolver.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := resolver.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = resolver.WriteTo([]byte("world:"+string(buf[:n])), from)
		}
	}()

	f := newFirewall(t, tn)
	t.Cleanup(func() { _ = f.Remove(ctx) })
	port := proxy.LocalAddr().(*net.UDPAddr).Port
	if err := f.Apply(ctx, Rules{DefaultDeny: true, DNSProxyPort: uint16(port)}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	ask := func(mark int) string {
		var reply string
		inNS(t, tn.sandbox, func() error {
			d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
				var serr error
				if err := rc.Control(func(fd uintptr) {
					serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, mark)
				}); err != nil {
					return err
				}
				return serr
			}}
			c, err := d.Dial("udp", netip.AddrPortFrom(tn.world1, 53).String())
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
				return err
			}
			if _, err := c.Write([]byte("q")); err != nil {
				return err
			}
			buf := make([]byte, 64)
			n, err := c.Read(buf)
			if err != nil {
				return fmt.Errorf("read reply (mark %#x): %w", mark, err)
			}
			reply = string(buf[:n])
			return nil
		})
		return reply
	}
	if r := ask(0); r != "proxy:q" {
		t.Fatalf("unmarked query to %s:53 answered %q; want the proxy (proxy:q)", tn.world1, r)
	}
	select {
	case q := <-got:
		if q != "q" {
			t.Fatalf("proxy received %q; want q", q)
		}
	default:
		t.Fatal("proxy did not receive the redirected query")
	}
	if r := ask(BypassMark); r != "world:q" {
		t.Fatalf("marked query answered %q; want the real resolver (world:q)", r)
	}
}

func TestApplyReplacesAndRemove(t *testing.T) {
	tn := setupNet(t)
	ctx := context.Background()
	f := newFirewall(t, tn)
	t.Cleanup(func() { _ = f.Remove(ctx) })
	if err := f.AllowDynamic(ctx, []netip.Addr{tn.world1}, time.Minute); !errors.Is(err, ErrNotApplied) {
		t.Fatalf("AllowDynamic before Apply = %v; want ErrNotApplied", err)
	}
	if err := f.Apply(ctx, Rules{DefaultDeny: true, AllowCIDRs: []netip.Prefix{hostPrefix(tn.world1)}}); err != nil {
		t.Fatalf("Apply #1: %v", err)
	}
	if err := f.AllowDynamic(ctx, []netip.Addr{tn.world4}, time.Minute); err != nil {
		t.Fatalf("AllowDynamic: %v", err)
	}
	tn.mustConnect(t, tn.world1, tn.httpPort)
	tn.mustBeDropped(t, tn.world2, tn.httpPort)

	if err := f.Apply(ctx, Rules{DefaultDeny: true, AllowCIDRs: []netip.Prefix{hostPrefix(tn.world2)}}); err != nil {
		t.Fatalf("Apply #2: %v", err)
	}
	tn.mustConnect(t, tn.world2, tn.httpPort)
	tn.mustBeDropped(t, tn.world1, tn.httpPort)
	tn.mustBeDropped(t, tn.world4, tn.httpPort) // dynamic entries went with the old table
	if e := setElements(t, tn, SetDyn4); len(e) != 0 {
		t.Fatalf("dyn_allow_v4 after Apply = %+v; want empty", e)
	}

	// Default allow: unlisted addresses pass, deny still drops.
	if err := f.Apply(ctx, Rules{DenyCIDRs: []netip.Prefix{hostPrefix(tn.world3)}}); err != nil {
		t.Fatalf("Apply #3: %v", err)
	}
	tn.mustConnect(t, tn.world1, tn.httpPort)
	tn.mustBeDropped(t, tn.world3, tn.httpPort)

	if err := f.Remove(ctx); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	c, err := nftables.New(nftables.WithNetNSFd(int(tn.sandbox)))
	if err != nil {
		t.Fatalf("nftables.New: %v", err)
	}
	tables, err := c.ListTables()
	if err != nil {
		t.Fatalf("ListTables: %v", err)
	}
	if len(tables) != 0 {
		t.Fatalf("tables after Remove = %d (first %q); want none", len(tables), tables[0].Name)
	}
	tn.mustConnect(t, tn.world3, tn.httpPort)
	if err := f.Remove(ctx); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
}

// TestTLSRedirect checks the credential proxy's transparent mode: port-443
// (TLS proxy) and port-80 (plain-HTTP proxy) connections to allowed
// addresses land on the local proxy ports with their original destination
// recoverable; denied ones are still dropped.
func TestTLSRedirect(t *testing.T) {
	tn := setupNet(t)
	ctx := context.Background()
	var tlsLn, httpLn net.Listener
	inNS(t, tn.sandbox, func() error {
		var err error
		if tlsLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return err
		}
		httpLn, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	})
	t.Cleanup(func() { tlsLn.Close(); httpLn.Close() })
	f := newFirewall(t, tn)
	t.Cleanup(func() { _ = f.Remove(ctx) })
	if err := f.Apply(ctx, Rules{
		DefaultDeny:   true,
		AllowCIDRs:    []netip.Prefix{hostPrefix(tn.world1)},
		TLSProxyPort:  uint16(tlsLn.Addr().(*net.TCPAddr).Port),
		HTTPProxyPort: uint16(httpLn.Addr().(*net.TCPAddr).Port),
	}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	for _, tt := range []struct {
		ln   net.Listener
		port uint16
	}{{tlsLn, 443}, {httpLn, 80}} {
		got := make(chan netip.AddrPort, 1)
		go func() {
			c, err := tt.ln.Accept()
			if err != nil {
				close(got)
				return
			}
			defer c.Close()
			dst, err := OriginalDst(c)
			if err != nil {
				t.Errorf("OriginalDst: %v", err)
			}
			got <- dst
		}()
		tn.mustConnect(t, tn.world1, int(tt.port))
		if dst := <-got; dst != netip.AddrPortFrom(tn.world1, tt.port) {
			t.Fatalf("original destination = %v; want %v:%d", dst, tn.world1, tt.port)
		}
		tn.mustBeDropped(t, tn.world2, int(tt.port))
	}
	// Other ports to allowed addresses are not redirected.
	tn.mustConnect(t, tn.world1, tn.httpPort)
}

// TestLivenessGuard checks the fail-closed tie: with the liveness table
// held, allowed traffic flows; once its socket closes (as when the sidecar
// process dies) the kernel drops the table and the guard chain stops all
// egress, even to addresses the policy allows.
func TestLivenessGuard(t *testing.T) {
	tn := setupNet(t)
	ctx := context.Background()
	f := newFirewall(t, tn)
	t.Cleanup(func() { _ = f.Close(); _ = f.Remove(ctx) })
	if err := f.TieToProcess(); err != nil {
		t.Fatalf("TieToProcess: %v", err)
	}
	if err := f.Apply(ctx, Rules{DefaultDeny: false}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	tn.mustConnect(t, tn.world1, tn.httpPort)
	if !hasTable(t, tn, LiveTable) {
		t.Fatal("liveness table missing while held")
	}
	if err := f.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if hasTable(t, tn, LiveTable) {
		t.Fatal("liveness table survived its socket")
	}
	tn.mustBeDropped(t, tn.world1, tn.httpPort)
	// Loopback keeps working.
	var ln net.Listener
	inNS(t, tn.sandbox, func() error {
		var err error
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	})
	defer ln.Close()
	tn.mustConnect(t, netip.MustParseAddr("127.0.0.1"), ln.Addr().(*net.TCPAddr).Port)
}

func hasTable(t *testing.T, tn *testNet, name string) bool {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(int(tn.sandbox)))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range ts {
		if tb.Name == name {
			return true
		}
	}
	return false
}

// TestBlockDoH checks DNS-over-HTTPS blocking: port 443 to a listed
// resolver is dropped while 443 elsewhere and other ports to the resolver
// pass; without a list every 443 is dropped.
func TestBlockDoH(t *testing.T) {
	tn := setupNet(t)
	ctx := context.Background()
	acceptAndClose(t, tn.world, "0.0.0.0:443")
	f := newFirewall(t, tn)
	t.Cleanup(func() { _ = f.Remove(ctx) })
	if err := f.Apply(ctx, Rules{BlockDoH: true, DoHBlockCIDRs: []netip.Prefix{hostPrefix(tn.world1)}}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	tn.mustBeDropped(t, tn.world1, 443)
	tn.mustConnect(t, tn.world2, 443)
	tn.mustConnect(t, tn.world1, tn.httpPort)
	if err := f.Apply(ctx, Rules{BlockDoH: true}); err != nil {
		t.Fatalf("Apply without a list: %v", err)
	}
	tn.mustBeDropped(t, tn.world2, 443)
	tn.mustConnect(t, tn.world2, tn.httpPort)
}

// TestAPIGuard checks that the sidecar API port is reachable over loopback
// and from the allowed address only.
func TestAPIGuard(t *testing.T) {
	tn := setupNet(t)
	ctx := context.Background()
	port := acceptAndClose(t, tn.sandbox, "0.0.0.0:0").Addr().(*net.TCPAddr).Port
	f := newFirewall(t, tn)
	t.Cleanup(func() { _ = f.Remove(ctx) })
	if err := f.Apply(ctx, Rules{APIPort: uint16(port), APIAllowFrom: []netip.Addr{tn.world1}}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	from := func(src netip.Addr, timeout time.Duration) error {
		var derr error
		inNS(t, tn.world, func() error {
			d := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}
			c, err := d.Dial("tcp", netip.AddrPortFrom(tn.sandboxIP, uint16(port)).String())
			if err == nil {
				c.Close()
			}
			derr = err
			return nil
		})
		return derr
	}
	if err := from(tn.world1, connectTimeout); err != nil {
		t.Fatalf("from the allowed address: %v", err)
	}
	if err := from(tn.world2, dropTimeout); err == nil || !isTimeout(err) {
		t.Fatalf("from another address: %v; want dropped", err)
	}
	tn.mustConnect(t, netip.MustParseAddr("127.0.0.1"), port)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestApplyCarriesDynamic checks that entries handed to Apply survive the
// table replacement with their timeouts.
func TestApplyCarriesDynamic(t *testing.T) {
	tn := setupNet(t)
	ctx := context.Background()
	f := newFirewall(t, tn)
	t.Cleanup(func() { _ = f.Remove(ctx) })
	if err := f.Apply(ctx, Rules{DefaultDeny: true}); err != nil {
		t.Fatal(err)
	}
	if err := f.AllowDynamic(ctx, []netip.Addr{tn.world4}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	tn.mustConnect(t, tn.world4, tn.httpPort)
	// A new policy without carrying: the learned address is gone.
	if err := f.Apply(ctx, Rules{DefaultDeny: true}); err != nil {
		t.Fatal(err)
	}
	tn.mustBeDropped(t, tn.world4, tn.httpPort)
	// Carried: still reachable, with the timeout given.
	if err := f.Apply(ctx, Rules{DefaultDeny: true, Dynamic: []DynamicEntry{{Addr: tn.world4, Timeout: 90 * time.Second}}}); err != nil {
		t.Fatal(err)
	}
	tn.mustConnect(t, tn.world4, tn.httpPort)
	if elems := setElements(t, tn, SetDyn4); len(elems) != 1 || elems[0].Timeout != 90*time.Second {
		t.Fatalf("dyn_allow_v4 = %+v; want one element with timeout 90s", elems)
	}
}
