package server

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// callerRefresh is how long the sandbox subnets are trusted before they
// are asked again (the network may be recreated while the server runs);
// callerRetry is the least time between two asks, so neither a failing
// engine nor callers from unknown addresses make every request wait on it.
const (
	callerRefresh = 30 * time.Second
	callerRetry   = 2 * time.Second
)

// sandboxCallers tells whether a request comes from inside a sandbox. Such
// a caller may have learnt other sandboxes' ids (on a user-defined Docker
// network the engine's DNS names every container), so the routes that
// trust an id alone must ask it for the API key.
type sandboxCallers struct {
	src runtime.SandboxNetworks

	mu         sync.Mutex
	known      bool
	subnets    []netip.Prefix
	host       []netip.Addr
	at         time.Time // of the last successful ask
	tried      time.Time // of the last ask
	refreshing bool
}

// fromSandbox reports whether remoteAddr is in a sandbox subnet (and not
// the host's own address there). When the subnets have never been learnt
// it answers true for any non-loopback caller: not knowing must not open
// the door. An address in no known subnet asks again (at most every
// callerRetry), in case the network was recreated with another subnet.
func (c *sandboxCallers) fromSandbox(ctx context.Context, remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return true
	}
	ip = ip.Unmap().WithZone("")
	in, known := c.get(ctx, false).match(ip)
	if !known {
		// Bridge-networked sandboxes never come from loopback.
		return !ip.IsLoopback()
	}
	if !in && !ip.IsLoopback() {
		in, _ = c.get(ctx, true).match(ip)
	}
	return in
}

type callerView struct {
	subnets []netip.Prefix
	host    []netip.Addr
	known   bool
}

// match reports whether ip is a sandbox's address in v, and whether v is
// known at all.
func (v callerView) match(ip netip.Addr) (in, known bool) {
	if !v.known {
		return false, false
	}
	for _, a := range v.host {
		if a == ip {
			return false, true
		}
	}
	for _, p := range v.subnets {
		if p.Contains(ip) {
			return true, true
		}
	}
	return false, true
}

// get returns the subnets, asking the runtime when they are stale (or,
// with force, whenever callerRetry has passed). One caller asks; the
// others go on with what is known rather than wait.
func (c *sandboxCallers) get(ctx context.Context, force bool) callerView {
	c.mu.Lock()
	v := callerView{c.subnets, c.host, c.known}
	stale := !c.known || time.Since(c.at) >= callerRefresh || force
	ask := stale && !c.refreshing && time.Since(c.tried) >= callerRetry
	if ask {
		c.refreshing, c.tried = true, time.Now()
	}
	c.mu.Unlock()
	if !ask {
		return v
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	subnets, host, err := c.src.SandboxSubnets(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refreshing = false
	if err != nil {
		return v // keep what was known
	}
	c.subnets, c.host, c.known, c.at = subnets, host, true, time.Now()
	return callerView{subnets, host, true}
}
