package docker

import (
	"context"
	"net/netip"

	"github.com/docker/docker/api/types/network"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

var _ runtime.SandboxNetworks = (*Runtime)(nil)

// SandboxSubnets returns the subnets of the network sandboxes join and its
// gateways (the host's side). Containers there can reach the host's
// services through the gateway, and on a user-defined network the engine's
// embedded DNS names the other containers (and so sandbox ids) to anyone
// asking, so the server must not trust a caller from these ranges for
// knowing an id. In host mode sandboxes use the host's own addresses and
// nothing is returned.
func (r *Runtime) SandboxSubnets(ctx context.Context) ([]netip.Prefix, []netip.Addr, error) {
	name := r.network
	if name == networkHost || name == "" {
		return nil, nil, nil
	}
	nw, err := r.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	if err != nil {
		return nil, nil, engineErr(err, "docker: inspect network %s", name)
	}
	var (
		subnets []netip.Prefix
		gws     []netip.Addr
	)
	for _, c := range nw.IPAM.Config {
		if p, err := netip.ParsePrefix(c.Subnet); err == nil {
			subnets = append(subnets, p.Masked())
		}
		if a, err := netip.ParseAddr(c.Gateway); err == nil {
			gws = append(gws, a.Unmap())
		}
	}
	return subnets, gws, nil
}
