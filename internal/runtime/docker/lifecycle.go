package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// Delete kills and removes the sandbox's container with its anonymous
// volumes, then the named volumes it created for deletion with it. When
// the container is already gone but such volumes remain (an interrupted
// delete), it removes them and succeeds; with nothing left at all it
// returns runtime.ErrNotFound.
func (r *Runtime) Delete(ctx context.Context, id string) error {
	c, inspectErr := r.inspect(ctx, id)
	found := inspectErr == nil
	if !found && !errors.Is(inspectErr, runtime.ErrNotFound) {
		return inspectErr
	}
	// The sidecar goes whether or not the sandbox container is still
	// there, but without it only if it carries this runtime's labels: the
	// id may be another instance's sandbox.
	removeSidecar := r.removeSidecar
	if !found {
		removeSidecar = r.removeScopedSidecar
	}
	if err := removeSidecar(ctx, id); err != nil {
		return err
	}
	var volumes []string
	if !found {
		// A create interrupted after it took a network holder.
		if err := r.removeHolder(ctx, id, true); err != nil {
			return err
		}
	}
	if found {
		volumes = newLabelView(c.Config.Labels).managedVolumes()
		holder := holderOf(c)
		err := r.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if removalInProgress(err) {
			// Another server sharing this engine (an expiry it found at
			// start, say) is removing it: the sandbox is going either way,
			// so wait for that instead of calling it a conflict.
			err = r.waitRemoved(ctx, c.ID)
		}
		if err != nil && classOf(err) != runtime.ErrNotFound {
			return engineErr(err, "docker: delete sandbox %s", id)
		}
		if holder != "" {
			if err := r.removeContainer(ctx, holder); err != nil {
				return fmt.Errorf("docker: delete sandbox %s: its network holder: %w", id, err)
			}
		}
		r.log.InfoContext(ctx, "sandbox deleted", "sandbox", id)
	}
	left, err := r.leftoverVolumes(ctx, id)
	if err != nil {
		return err
	}
	for _, v := range left {
		if !slices.Contains(volumes, v) {
			volumes = append(volumes, v)
		}
	}
	if !found && len(volumes) == 0 {
		return inspectErr
	}
	return r.removeVolumes(ctx, id, volumes)
}

// removalInProgress reports the engine's refusal to remove a container
// that another caller is already removing (409).
func removalInProgress(err error) bool {
	return err != nil && cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress")
}

// waitRemoved waits until container id is gone.
func (r *Runtime) waitRemoved(ctx context.Context, id string) error {
	waitC, errC := r.cli.ContainerWait(ctx, id, container.WaitConditionRemoved)
	select {
	case <-waitC:
		return nil
	case err := <-errC:
		if classOf(err) == runtime.ErrNotFound {
			return nil // gone before the wait began
		}
		return engineErr(err, "docker: wait for the removal of %s", id)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Pause freezes every process of the sandbox.
func (r *Runtime) Pause(ctx context.Context, id string) error {
	c, err := r.inspect(ctx, id)
	if err != nil {
		return err
	}
	if c.State == nil || !c.State.Running || c.State.Paused {
		return fmt.Errorf("docker: pause sandbox %s: sandbox is not running (%s): %w", id, stateOf(c.State).State, runtime.ErrConflict)
	}
	if err := r.cli.ContainerPause(ctx, c.ID); err != nil {
		return engineErr(err, "docker: pause sandbox %s", id)
	}
	return nil
}

// Resume thaws a paused sandbox.
func (r *Runtime) Resume(ctx context.Context, id string) error {
	c, err := r.inspect(ctx, id)
	if err != nil {
		return err
	}
	if c.State == nil || !c.State.Paused {
		return fmt.Errorf("docker: resume sandbox %s: sandbox is not paused (%s): %w", id, stateOf(c.State).State, runtime.ErrConflict)
	}
	if err := r.cli.ContainerUnpause(ctx, c.ID); err != nil {
		return engineErr(err, "docker: resume sandbox %s", id)
	}
	return nil
}
