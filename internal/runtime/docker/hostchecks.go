package docker

import (
	"context"
	"fmt"

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
