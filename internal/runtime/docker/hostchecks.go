package docker

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// MinMemoryBytes is the smallest memory limit a sandbox may have: the
// engine refuses less, and execd needs some room.
const MinMemoryBytes = 6 << 20

// engineArch maps the engine's architecture names (uname -m) to the
// platform names of the API.
var engineArch = map[string]string{
	"x86_64":  "amd64",
	"amd64":   "amd64",
	"aarch64": "arm64",
	"arm64":   "arm64",
}

// readEngineArch records the CPU architecture of the engine's host.
func (r *Runtime) readEngineArch(ctx context.Context) error {
	info, err := r.cli.Info(ctx)
	if err != nil {
		return engineErr(err, "docker: read engine info")
	}
	r.arch = engineArch[info.Architecture]
	if r.arch == "" {
		r.arch = info.Architecture
	}
	return nil
}

// checkHost applies the rules that depend on the engine's host: the
// platform must be the host's architecture and memory at least
// MinMemoryBytes. Violations are runtime.ErrInvalid.
func (r *Runtime) checkHost(spec runtime.Spec) error {
	if p := spec.Platform; p != nil && r.arch != "" && p.Arch != r.arch {
		return fmt.Errorf("platform.arch %q cannot be satisfied: this engine runs %s sandboxes: %w", p.Arch, r.arch, runtime.ErrInvalid)
	}
	if m := spec.Resources.MemoryBytes; m > 0 && m < MinMemoryBytes {
		return fmt.Errorf("resourceLimits.memory of %d bytes is below the minimum of 6Mi: %w", m, runtime.ErrInvalid)
	}
	return nil
}

// checkHostPaths applies the host-path allow-list (Options.AllowedHostPaths)
// to the host volumes of vols. A host path is cleaned and, as far as it
// exists on this machine, its symlinks are resolved before the check, and
// so is the path joined with the volume's subPath, so neither ".." nor a
// planted link leads outside. It returns a copy of vols whose host paths
// are the resolved ones, so the engine mounts what was checked. Refusals
// are runtime.ErrHostPathNotAllowed, malformed paths runtime.ErrInvalid.
func (r *Runtime) checkHostPaths(vols []runtime.Volume) ([]runtime.Volume, error) {
	out := slices.Clone(vols)
	for i := range out {
		v := &out[i]
		if v.HostPath == "" {
			continue
		}
		if !filepath.IsAbs(v.HostPath) {
			return nil, fmt.Errorf("volume %q: host path %q is not absolute: %w", v.Name, v.HostPath, runtime.ErrInvalid)
		}
		if len(r.opts.AllowedHostPaths) == 0 {
			return nil, fmt.Errorf("volume %q: host path %q: this server allows no host volumes: %w",
				v.Name, v.HostPath, runtime.ErrHostPathNotAllowed)
		}
		sub, err := cleanSubPath(v.SubPath)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		resolved := resolveExisting(filepath.Clean(v.HostPath))
		if !r.hostPathAllowed(resolved) {
			return nil, fmt.Errorf("volume %q: host path %q is not under a host path this server allows: %w",
				v.Name, v.HostPath, runtime.ErrHostPathNotAllowed)
		}
		if sub != "" && !r.hostPathAllowed(resolveExisting(filepath.Join(resolved, sub))) {
			return nil, fmt.Errorf("volume %q: subPath %q leads outside the host paths this server allows: %w",
				v.Name, v.SubPath, runtime.ErrHostPathNotAllowed)
		}
		v.HostPath = resolved
	}
	return out, nil
}

// hostPathAllowed reports whether the resolved path p lies under one of
// the allowed host paths (each resolved as far as it exists).
func (r *Runtime) hostPathAllowed(p string) bool {
	for _, root := range r.opts.AllowedHostPaths {
		if pathWithin(p, resolveExisting(root)) {
			return true
		}
	}
	return false
}

// resolveExisting resolves the symlinks of the longest existing prefix of
// the clean absolute path p and appends the rest unchanged.
func resolveExisting(p string) string {
	cur, rest := p, ""
	for {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(real, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// pathWithin reports whether the clean absolute path p is root or lies
// below it.
func pathWithin(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}
