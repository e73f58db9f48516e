package main

import (
	"context"
	"log/slog"
	"time"
)

// liveRestorer is the Docker driver's view of the engine's live-restore.
type liveRestorer interface {
	LiveRestore(ctx context.Context) (bool, error)
}

// warnWithoutLiveRestore says at start when the engine stops every
// container with dockerd: the sandboxes would then not survive a dockerd
// restart (docs/server.md, "Engine outages").
func warnWithoutLiveRestore(ctx context.Context, rt liveRestorer, logger *slog.Logger, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	on, err := rt.LiveRestore(ctx)
	switch {
	case err != nil:
		logger.Warn("cannot tell whether the Docker engine has live-restore", "err", err)
	case !on:
		logger.Warn(`the Docker engine runs without live-restore: every sandbox stops when dockerd stops or restarts, and stays Failed; set "live-restore": true in /etc/docker/daemon.json (make deps does) and reload dockerd (SIGHUP)`)
	}
}
