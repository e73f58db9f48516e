//go:build !linux

package docker

import (
	"context"

	"github.com/docker/docker/api/types/network"
)

// guardMetadata is the Linux host's nftables guard (see metadata_linux.go);
// elsewhere the engine runs in a VM this server cannot program.
func (r *Runtime) guardMetadata(ctx context.Context, nw network.Inspect) {
	if !r.opts.AllowMetadata {
		r.log.WarnContext(ctx, "link-local metadata addresses are not blocked for sandboxes on this platform", "network", nw.Name)
	}
}
