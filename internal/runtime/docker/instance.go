package docker

import (
	"context"
	"fmt"
	"slices"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// Labels of instance scoping (see Options.InstanceID).
const (
	// labelInstance is on every object of a scoped runtime.
	labelInstance = labelPrefix + "instance"
	// labelInstanceOwner is on an instance claim volume: the identity of
	// the store of the server that claimed the instance id.
	labelInstanceOwner = labelPrefix + "instance-owner"
)

// claimVolumeName is the volume that records which store owns instance id.
func claimVolumeName(id string) string { return "opensandbox-instance-" + id }

// ClaimInstance records on the engine that the instance id of this
// runtime belongs to owner (the identity of the server's store), and fails
// with runtime.ErrConflict when another owner claimed it first. A server
// keeps renewals and metadata in its own store, so two servers with
// separate stores and one instance id would each expire the other's
// sandboxes at deadlines they do not know; the claim stops the second one
// from starting. The claim is an empty local volume; removing it (after
// retiring the server that made it) releases the id.
func (r *Runtime) ClaimInstance(ctx context.Context, owner string) error {
	id := r.opts.InstanceID
	if id == "" {
		return fmt.Errorf("docker: claim instance: no instance id configured: %w", runtime.ErrInvalid)
	}
	if owner == "" {
		return fmt.Errorf("docker: claim instance %s: empty owner: %w", id, runtime.ErrInvalid)
	}
	labels := map[string]string{labelInstanceOwner: owner}
	for k, v := range r.opts.Labels {
		labels[k] = v
	}
	name := claimVolumeName(id)
	// Creating a volume whose name exists returns the existing volume, so
	// of two servers racing, both read the winner's owner.
	vol, err := r.cli.VolumeCreate(ctx, volume.CreateOptions{Name: name, Driver: "local", Labels: labels})
	if err != nil {
		return engineErr(err, "docker: claim instance %s", id)
	}
	if got := vol.Labels[labelInstanceOwner]; got != owner {
		return fmt.Errorf("docker: instance id %q is already used on this engine by the server whose store is %q (this server's store is %q): "+
			"two servers with separate stores must not share an instance id, because each would expire the other's sandboxes at deadlines it does not know; "+
			"give this server another [server] instance_id, or, if that server is retired for good, release the id with `docker volume rm %s`: %w",
			id, got, owner, name, runtime.ErrConflict)
	}
	return nil
}

// Unscoped returns the ids of sandbox containers on the engine that carry
// no instance label: made by a server from before instance scoping. A
// scoped runtime never sees them; the server reports them so that an
// operator can remove them. It returns nothing when the runtime is not
// scoped.
func (r *Runtime) Unscoped(ctx context.Context) ([]string, error) {
	if r.opts.InstanceID == "" {
		return nil, nil
	}
	cs, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", labelID))})
	if err != nil {
		return nil, engineErr(err, "docker: list unscoped sandboxes")
	}
	var ids []string
	for _, c := range cs {
		id := c.Labels[labelID]
		if _, scoped := c.Labels[labelInstance]; scoped || id == "" || !slices.Contains(c.Names, "/"+containerName(id)) {
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// scoped reports whether an object with these labels carries every label
// that scopes this runtime (Options.Labels and the instance label).
func (r *Runtime) scoped(labels map[string]string) bool {
	for k, v := range r.opts.Labels {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// removeScopedSidecar removes the sidecar of sandbox id only if it is
// one of this runtime's: Delete uses it when the sandbox container is not
// (or no longer) there to prove that id is ours.
func (r *Runtime) removeScopedSidecar(ctx context.Context, id string) error {
	sc, err := r.cli.ContainerInspect(ctx, sidecarName(id))
	if classOf(err) == runtime.ErrNotFound {
		return nil
	}
	if err != nil {
		return engineErr(err, "docker: sandbox %s: inspect egress sidecar", id)
	}
	if sc.Config == nil || !r.scoped(sc.Config.Labels) {
		return nil
	}
	return r.removeSidecar(ctx, id)
}

// scopedFilter is a list filter of args narrowed to this runtime's
// objects (Options.Labels and the instance label).
func (r *Runtime) scopedFilter(args ...filters.KeyValuePair) filters.Args {
	f := filters.NewArgs(args...)
	for k, v := range r.opts.Labels {
		f.Add("label", k+"="+v)
	}
	return f
}
