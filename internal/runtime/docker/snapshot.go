package docker

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// CommitSnapshot saves the filesystem of sandbox sandboxID as the image
// opensandbox-snapshots:<snapshotID>. The container is paused while the
// commit runs. Volumes are not part of a snapshot.
func (r *Runtime) CommitSnapshot(ctx context.Context, sandboxID, snapshotID string) error {
	if snapshotID == "" {
		return fmt.Errorf("docker: snapshot of sandbox %s: empty snapshot id: %w", sandboxID, runtime.ErrInvalid)
	}
	c, err := r.inspect(ctx, sandboxID)
	if err != nil {
		return err
	}
	labels := map[string]string{labelSnapshotOf: sandboxID}
	for k, v := range r.opts.Labels {
		labels[k] = v
	}
	// The paused state is kept by the engine: committing a paused
	// container with Pause=true does not unpause it.
	_, err = r.cli.ContainerCommit(ctx, c.ID, container.CommitOptions{
		Reference: snapshotRef(snapshotID),
		Comment:   "opensandbox snapshot of sandbox " + sandboxID,
		Pause:     true,
		Config:    &container.Config{Labels: labels},
	})
	if err != nil {
		return engineErr(err, "docker: snapshot %s of sandbox %s", snapshotID, sandboxID)
	}
	r.log.InfoContext(ctx, "snapshot committed", "sandbox", sandboxID, "snapshot", snapshotID)
	return nil
}

// DeleteSnapshot removes the snapshot image; ErrNotFound if there is
// none, ErrConflict while a sandbox still uses it.
func (r *Runtime) DeleteSnapshot(ctx context.Context, snapshotID string) error {
	if snapshotID == "" {
		return fmt.Errorf("docker: delete snapshot: empty snapshot id: %w", runtime.ErrInvalid)
	}
	_, err := r.cli.ImageRemove(ctx, snapshotRef(snapshotID), image.RemoveOptions{Force: false, PruneChildren: true})
	if err != nil {
		return engineErr(err, "docker: delete snapshot %s", snapshotID)
	}
	r.log.InfoContext(ctx, "snapshot deleted", "snapshot", snapshotID)
	return nil
}
