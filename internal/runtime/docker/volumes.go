package docker

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// volumePlan is the result of preparing the volumes of a spec.
type volumePlan struct {
	mounts []mount.Mount
	// created are the named volumes this Create made (removed again if
	// the create fails).
	created []string
	// managed are the volumes to remove with the sandbox.
	managed []string
}

// prepareVolumes turns spec.Volumes into mounts, creating named volumes
// where asked. On error the volumes it created are already removed.
func (r *Runtime) prepareVolumes(ctx context.Context, spec runtime.Spec) (plan volumePlan, err error) {
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			r.removeVolumes(cctx, spec.ID, plan.created)
			plan = volumePlan{}
		}
	}()
	for _, v := range spec.Volumes {
		if !path.IsAbs(v.MountPath) {
			return plan, fmt.Errorf("docker: sandbox %s: volume %q: mount path %q is not absolute: %w", spec.ID, v.Name, v.MountPath, runtime.ErrInvalid)
		}
		sub, err := cleanSubPath(v.SubPath)
		if err != nil {
			return plan, fmt.Errorf("docker: sandbox %s: volume %q: %w", spec.ID, v.Name, err)
		}
		switch {
		case v.HostPath != "" && v.ClaimName != "":
			return plan, fmt.Errorf("docker: sandbox %s: volume %q has both a host path and a claim: %w", spec.ID, v.Name, runtime.ErrInvalid)
		case v.HostPath != "":
			src, err := hostSource(v.HostPath, sub)
			if err != nil {
				return plan, fmt.Errorf("docker: sandbox %s: volume %q: %w", spec.ID, v.Name, err)
			}
			plan.mounts = append(plan.mounts, mount.Mount{Type: mount.TypeBind, Source: src, Target: v.MountPath, ReadOnly: v.ReadOnly})
		case v.ClaimName != "":
			m, err := r.namedVolume(ctx, spec.ID, v, sub, &plan)
			if err != nil {
				return plan, err
			}
			plan.mounts = append(plan.mounts, m)
		default:
			return plan, fmt.Errorf("docker: sandbox %s: volume %q has no host path and no claim: %w", spec.ID, v.Name, runtime.ErrNotSupported)
		}
	}
	return plan, nil
}

// cleanSubPath checks that sub is relative and stays inside its volume.
func cleanSubPath(sub string) (string, error) {
	if sub == "" {
		return "", nil
	}
	c := path.Clean(sub)
	if path.IsAbs(sub) || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("subPath %q leaves the volume: %w", sub, runtime.ErrInvalid)
	}
	if c == "." {
		return "", nil
	}
	return c, nil
}

// hostSource is the bind source for host path p with subPath sub. When p
// exists on this machine (a local engine) symlinks are resolved, so a
// link planted inside p cannot point the mount outside it.
func hostSource(p, sub string) (string, error) {
	if !path.IsAbs(p) {
		return "", fmt.Errorf("host path %q is not absolute: %w", p, runtime.ErrInvalid)
	}
	p = path.Clean(p)
	if sub == "" {
		return p, nil
	}
	if _, err := os.Stat(p); err != nil {
		return path.Join(p, sub), nil // remote engine: lexical check only
	}
	return resolveInside(p, sub, false)
}

// resolveInside joins root and sub, optionally creating the directory,
// resolves symlinks and checks the result is still inside root.
func resolveInside(root, sub string, create bool) (string, error) {
	full := filepath.Join(root, sub)
	if create {
		if err := os.MkdirAll(full, 0o755); err != nil {
			return "", fmt.Errorf("create subPath %q: %w", sub, err)
		}
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", root, err)
	}
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		if os.IsNotExist(err) {
			return "", fmt.Errorf("subPath %q does not exist in %s: %w", sub, root, runtime.ErrNotFound)
		}
		return "", fmt.Errorf("resolve subPath %q: %w", sub, err)
	}
	if real != realRoot && !strings.HasPrefix(real, realRoot+string(filepath.Separator)) {
		return "", fmt.Errorf("subPath %q resolves outside %s: %w", sub, root, runtime.ErrInvalid)
	}
	return real, nil
}

// namedVolume returns the mount of claim v, creating the volume if asked.
func (r *Runtime) namedVolume(ctx context.Context, id string, v runtime.Volume, sub string, plan *volumePlan) (mount.Mount, error) {
	vol, err := r.cli.VolumeInspect(ctx, v.ClaimName)
	switch {
	case err == nil:
	case classOf(err) == runtime.ErrNotFound && v.CreateIfNotExists:
		labels := map[string]string{labelManagedBy: id}
		for k, val := range r.opts.Labels {
			labels[k] = val
		}
		if v.DeleteOnTermination {
			labels[labelDeleteWithSandbox] = "true"
		}
		vol, err = r.cli.VolumeCreate(ctx, volume.CreateOptions{Name: v.ClaimName, Driver: "local", Labels: labels})
		if err != nil {
			return mount.Mount{}, engineErr(err, "docker: sandbox %s: create volume %s", id, v.ClaimName)
		}
		r.log.InfoContext(ctx, "created volume", "sandbox", id, "volume", v.ClaimName)
		plan.created = append(plan.created, v.ClaimName)
		if v.DeleteOnTermination {
			plan.managed = append(plan.managed, v.ClaimName)
		}
	case classOf(err) == runtime.ErrNotFound:
		return mount.Mount{}, engineErr(err, "docker: sandbox %s: volume %s does not exist and createIfNotExists is off", id, v.ClaimName)
	default:
		return mount.Mount{}, engineErr(err, "docker: sandbox %s: inspect volume %s", id, v.ClaimName)
	}
	if sub == "" {
		return mount.Mount{Type: mount.TypeVolume, Source: v.ClaimName, Target: v.MountPath, ReadOnly: v.ReadOnly}, nil
	}
	// The engine (API 1.41) cannot mount part of a volume; bind-mount the
	// subdirectory of a plain local volume instead, which needs the
	// volume's directory on this machine.
	if vol.Driver != "local" || len(vol.Options) > 0 {
		return mount.Mount{}, fmt.Errorf("docker: sandbox %s: volume %s: subPath needs a plain volume of the local driver (driver %q, options %v): %w",
			id, v.ClaimName, vol.Driver, vol.Options, runtime.ErrNotSupported)
	}
	if fi, err := os.Stat(vol.Mountpoint); err != nil || !fi.IsDir() {
		return mount.Mount{}, fmt.Errorf("docker: sandbox %s: volume %s: subPath needs the engine on this machine (%s is not visible here): %w",
			id, v.ClaimName, vol.Mountpoint, runtime.ErrNotSupported)
	}
	src, err := resolveInside(vol.Mountpoint, sub, true)
	if err != nil {
		return mount.Mount{}, fmt.Errorf("docker: sandbox %s: volume %s: %w", id, v.ClaimName, err)
	}
	return mount.Mount{Type: mount.TypeBind, Source: src, Target: v.MountPath, ReadOnly: v.ReadOnly}, nil
}

// removeVolumes removes named volumes and returns the first failure; a
// missing volume is fine and one another container still uses is left
// in place with a warning.
func (r *Runtime) removeVolumes(ctx context.Context, id string, names []string) error {
	var first error
	for _, name := range names {
		err := r.cli.VolumeRemove(ctx, name, false)
		switch c := classOf(err); {
		case err == nil:
			r.log.InfoContext(ctx, "removed volume", "sandbox", id, "volume", name)
		case c == runtime.ErrNotFound:
		case c == runtime.ErrConflict:
			r.log.WarnContext(ctx, "volume still in use; left in place", "sandbox", id, "volume", name, "err", err)
		default:
			r.log.ErrorContext(ctx, "remove volume", "sandbox", id, "volume", name, "err", err)
			if first == nil {
				first = engineErr(err, "docker: sandbox %s: remove volume %s", id, name)
			}
		}
	}
	return first
}

// leftoverVolumes lists volumes created for sandbox id that must go with
// it (found by label, so a half-finished delete can be completed).
func (r *Runtime) leftoverVolumes(ctx context.Context, id string) ([]string, error) {
	f := filters.NewArgs(filters.Arg("label", labelManagedBy+"="+id), filters.Arg("label", labelDeleteWithSandbox+"=true"))
	for k, v := range r.opts.Labels {
		f.Add("label", k+"="+v)
	}
	resp, err := r.cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return nil, engineErr(err, "docker: sandbox %s: list volumes", id)
	}
	names := make([]string, 0, len(resp.Volumes))
	for _, v := range resp.Volumes {
		names = append(names, v.Name)
	}
	return names, nil
}
