package docker

import (
	"context"
	"fmt"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

var _ runtime.Pinger = (*Runtime)(nil)

// Ping asks the engine's /_ping. Any failure means the engine cannot
// serve sandboxes now, so it is ErrUnavailable whatever its cause.
func (r *Runtime) Ping(ctx context.Context) error {
	if _, err := r.cli.Ping(ctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("docker: ping engine: %w: %w", ctx.Err(), runtime.ErrUnavailable)
		}
		return classErr(runtime.ErrUnavailable, err, "docker: ping engine")
	}
	return nil
}

// LiveRestore reports whether the engine keeps containers running while
// dockerd itself is down (the daemon's live-restore option). Without it
// every sandbox stops when dockerd stops or restarts, and stays stopped.
func (r *Runtime) LiveRestore(ctx context.Context) (bool, error) {
	info, err := r.cli.Info(ctx)
	if err != nil {
		return false, engineErr(err, "docker: engine info")
	}
	return info.LiveRestoreEnabled, nil
}
