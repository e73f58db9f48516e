// Package netnstest builds network namespaces for tests: a "sandbox"
// namespace joined by a veth pair to a "world" namespace, with addresses
// 10.250.N.1 and fd00:250:N::1 (sandbox) and 10.250.N.2–5 and
// fd00:250:N::2–5 (world) that exist only inside them, and runs code
// inside either one. It is a test helper: import it
// only from _test.go files. Setting up needs root and the ip command.
package netnstest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/opensandbox-go/opensandbox/internal/testenv"
)

// Pair is a sandbox namespace and a world namespace joined by veth.
type Pair struct {
	Sandbox, World         netns.NsHandle
	SandboxName, WorldName string // names for `ip netns exec`
	prefix                 string // "10.250.N."
	prefix6                string // "fd00:250:N::"
}

// New creates the pair and removes it when the test ends. It skips the
// test when it cannot run (not root, no ip command, no namespaces).
func New(t testing.TB) *Pair {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.NeedRoot(t, "network namespaces and nftables")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		testenv.Missing(t, "needs the ip command to build test namespaces")
	}
	var b [2]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	n := 1 + int(b[0])%250
	p := &Pair{SandboxName: "osbt-s-" + id, WorldName: "osbt-w-" + id, prefix: fmt.Sprintf("10.250.%d.", n), prefix6: fmt.Sprintf("fd00:250:%x::", n)}
	if out, err := exec.Command("ip", "netns", "add", p.SandboxName).CombinedOutput(); err != nil {
		testenv.Missing(t, "cannot create a network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", p.SandboxName).Run() })
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	ip("netns", "add", p.WorldName)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", p.WorldName).Run() })
	ip("link", "add", "vs"+id, "netns", p.SandboxName, "type", "veth", "peer", "name", "vw"+id, "netns", p.WorldName)
	ip("-n", p.SandboxName, "addr", "add", p.IP(1).String()+"/24", "dev", "vs"+id)
	ip("-n", p.SandboxName, "addr", "add", p.IP6(1).String()+"/64", "dev", "vs"+id, "nodad")
	for i := 2; i <= 5; i++ {
		ip("-n", p.WorldName, "addr", "add", p.IP(i).String()+"/24", "dev", "vw"+id)
		ip("-n", p.WorldName, "addr", "add", p.IP6(i).String()+"/64", "dev", "vw"+id, "nodad")
	}
	for _, l := range [][2]string{{p.SandboxName, "lo"}, {p.SandboxName, "vs" + id}, {p.WorldName, "lo"}, {p.WorldName, "vw" + id}} {
		ip("-n", l[0], "link", "set", l[1], "up")
	}
	// The veth carrier comes up asynchronously; a packet sent before that
	// is lost, and a test's first connect would wait for a retransmit.
	for _, l := range [][2]string{{p.SandboxName, "vs" + id}, {p.WorldName, "vw" + id}} {
		waitLowerUp(t, l[0], l[1])
	}
	var err error
	if p.Sandbox, err = netns.GetFromName(p.SandboxName); err != nil {
		t.Fatalf("open netns %s: %v", p.SandboxName, err)
	}
	t.Cleanup(func() { p.Sandbox.Close() })
	if p.World, err = netns.GetFromName(p.WorldName); err != nil {
		t.Fatalf("open netns %s: %v", p.WorldName, err)
	}
	t.Cleanup(func() { p.World.Close() })
	return p
}

// waitLowerUp waits until link dev of namespace ns has its carrier.
func waitLowerUp(t testing.TB, ns, dev string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := exec.Command("ip", "-n", ns, "-o", "link", "show", "dev", dev).CombinedOutput()
		if err == nil && strings.Contains(string(out), "LOWER_UP") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("link %s in %s has no carrier after 10s: %v: %s", dev, ns, err, out)
		}
		time.Sleep(10 * time.Millisecond) // polling the link state, not standing in for it
	}
}

// IP is address i of the pair: 1 is the sandbox's, 2 to 5 the world's.
func (p *Pair) IP(i int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf("%s%d", p.prefix, i)) }

// IP6 is IPv6 address i of the pair, numbered like IP.
func (p *Pair) IP6(i int) netip.Addr {
	return netip.MustParseAddr(fmt.Sprintf("%s%x", p.prefix6, i))
}

// InNS runs fn on an OS thread switched into ns. Sockets fn opens stay in
// ns after it returns.
func InNS(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			errc <- err
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, err) // the thread stays locked and dies with the goroutine
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Dial connects from inside ns.
func Dial(ns netns.NsHandle, network, addr string, timeout time.Duration) (c net.Conn, err error) {
	err = InNS(ns, func() (e error) {
		c, e = (&net.Dialer{Timeout: timeout}).Dial(network, addr)
		return
	})
	return
}

// Listen opens a TCP listener inside ns.
func Listen(ns netns.NsHandle, addr string) (ln net.Listener, err error) {
	err = InNS(ns, func() (e error) { ln, e = net.Listen("tcp", addr); return })
	return
}

// ListenPacket opens a UDP socket inside ns.
func ListenPacket(ns netns.NsHandle, addr string) (pc net.PacketConn, err error) {
	err = InNS(ns, func() (e error) { pc, e = net.ListenPacket("udp", addr); return })
	return
}
