package docker

import (
	"context"
	"strings"

	"github.com/docker/docker/api/types/network"
	"github.com/vishvananda/netns"

	"github.com/opensandbox-go/opensandbox/internal/egress/nft"
)

// bridgeNameOption is the bridge driver's option naming the host
// interface of a network; without it the engine names it br-<id[:12]>.
const bridgeNameOption = "com.docker.network.bridge.name"

// bridgeInterface is the host interface of bridge network nw.
func bridgeInterface(nw network.Inspect) string {
	if n := nw.Options[bridgeNameOption]; n != "" {
		return n
	}
	return "br-" + shortID(nw.ID)
}

// guardMetadata drops, on this host, what sandboxes on nw send to
// link-local metadata addresses (nft.GuardMetadata on the network's bridge
// interface), or removes that guard when Options.AllowMetadata is set.
// It is idempotent. It needs the engine on this host and CAP_NET_ADMIN;
// when it cannot be done that is logged as an error and sandboxes still
// start: those with a network policy are covered by their sidecar.
func (r *Runtime) guardMetadata(ctx context.Context, nw network.Inspect) {
	if nw.Driver != bridgeDriver {
		return
	}
	br := bridgeInterface(nw)
	if r.opts.AllowMetadata {
		if err := nft.UnguardMetadata(netns.None(), br); err != nil {
			r.log.DebugContext(ctx, "remove the metadata guard", "bridge", br, "err", err)
		}
		return
	}
	if !strings.HasPrefix(r.cli.DaemonHost(), "unix://") {
		r.log.ErrorContext(ctx, "the engine is remote: sandboxes without a network policy can reach link-local metadata addresses (169.254.0.0/16) unless its host drops them",
			"network", nw.Name, "engine", r.cli.DaemonHost())
		return
	}
	if err := nft.GuardMetadata(netns.None(), br); err != nil {
		r.log.ErrorContext(ctx, "cannot drop sandbox packets to link-local metadata addresses on this host (the server needs CAP_NET_ADMIN); sandboxes without a network policy can reach them",
			"network", nw.Name, "bridge", br, "err", err)
		return
	}
	r.log.DebugContext(ctx, "sandbox packets to metadata addresses are dropped", "network", nw.Name, "bridge", br, "table", nft.MetadataTable)
}
