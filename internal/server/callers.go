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
// are asked again (the network may be recreated while the server runs).
const callerRefresh = 30 * time.Second

// sandboxCallers tells whether a request comes from inside a sandbox. Such
// a caller may have learnt other sandboxes' ids (on a user-defined Docker
// network the engine's DNS names every container), so the routes that
// trust an id alone must ask it for the API key.
type sandboxCallers struct {
	src runtime.SandboxNetworks

	mu      sync.Mutex
	known   bool
	subnets []netip.Prefix
	host    []netip.Addr
	at      time.Time
}

// fromSandbox reports whether remoteAddr is in a sandbox subnet (and not
// the host's own address there). When the subnets have never been learnt
// it answers true for any non-loopback caller: not knowing must not open
// the door.
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
	subnets, hostAddrs, known := c.get(ctx)
	if !known {
		// Bridge-networked sandboxes never come from loopback.
		return !ip.IsLoopback()
	}
	for _, a := range hostAddrs {
		if a == ip {
			return false
		}
	}
	for _, p := range subnets {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func (c *sandboxCallers) get(ctx context.Context) ([]netip.Prefix, []netip.Addr, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.known && time.Since(c.at) < callerRefresh {
		return c.subnets, c.host, true
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	subnets, host, err := c.src.SandboxSubnets(ctx)
	if err != nil {
		// Keep what was known; retry on the next request.
		return c.subnets, c.host, c.known
	}
	c.subnets, c.host, c.known, c.at = subnets, host, true, time.Now()
	return subnets, host, true
}
