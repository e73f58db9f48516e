package docker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// engineEnforcesDisk says, from the engine's storage driver and backing
// filesystem, whether it should take the size option: true for btrfs
// (what scripts/ensure-deps.sh sets up), false for overlay2 on ext4 (the
// usual default); other set-ups skip, as the answer depends on mount
// options the API does not report.
func engineEnforcesDisk(t *testing.T) bool {
	t.Helper()
	info, err := env.cli.Info(testCtx(t))
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	backing := ""
	for _, kv := range info.DriverStatus {
		if kv[0] == "Backing Filesystem" {
			backing = kv[1]
		}
	}
	switch {
	case info.Driver == "btrfs":
		return true
	case info.Driver == "overlay2" && backing == "extfs":
		return false
	}
	t.Skipf("storage driver %s on %q: whether it enforces disk limits depends on its mount options", info.Driver, backing)
	return false
}

func TestCheckDiskLimit(t *testing.T) {
	r := newTestRuntime(t, nil)
	want := engineEnforcesDisk(t)
	err := r.CheckDiskLimit(testCtx(t))
	switch {
	case want && err != nil:
		t.Fatalf("CheckDiskLimit on a btrfs engine = %v, want nil", err)
	case !want && !errors.Is(err, runtime.ErrDiskLimitUnsupported):
		t.Fatalf("CheckDiskLimit on overlay2 over ext4 = %v, want ErrDiskLimitUnsupported", err)
	case !want && !errors.Is(err, runtime.ErrNotSupported):
		t.Errorf("CheckDiskLimit = %v, want it also of class ErrNotSupported", err)
	case !want && !strings.Contains(err.Error(), "overlay2 on extfs"):
		t.Errorf("CheckDiskLimit = %v, want the storage driver named", err)
	}
	// The answer is remembered, and the probe leaves nothing behind.
	if err2 := r.CheckDiskLimit(testCtx(t)); (err2 == nil) != (err == nil) {
		t.Errorf("second CheckDiskLimit = %v, first %v", err2, err)
	}
	if out := dockerOut("ps", "-aq", "--filter", "label="+labelDiskProbe); out != "" {
		t.Errorf("probe containers left: %s", out)
	}
	if out := dockerOut("images", "-q", diskProbeRepo); out != "" {
		t.Errorf("probe images left: %s", out)
	}
}

// TestCreateDiskLimit creates a sandbox with a 32 MiB disk limit: on an
// engine that enforces it, a write past it fails with EDQUOT or ENOSPC
// while execd goes on answering; on one that does not, the create fails
// with ErrDiskLimitUnsupported and leaves no container.
func TestCreateDiskLimit(t *testing.T) {
	r := newTestRuntime(t, nil)
	enforced := engineEnforcesDisk(t)
	spec := baseSpec(t)
	spec.Resources.DiskBytes = 32 << 20
	if !enforced {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := r.Create(ctx, spec)
		wantClass(t, "Create with a disk limit", err, runtime.ErrDiskLimitUnsupported)
		if containerExists(containerName(spec.ID)) {
			t.Errorf("container %s exists after a refused create", containerName(spec.ID))
		}
		return
	}
	sb := mustCreate(t, r, spec)
	if sb.Resources.DiskBytes != 32<<20 {
		t.Errorf("Create reports Resources %+v, want DiskBytes %d", sb.Resources, 32<<20)
	}
	if got := dockerOut("inspect", "-f", "{{.HostConfig.StorageOpt.size}}", containerName(spec.ID)); got != "33554432" {
		t.Errorf("StorageOpt size = %q, want 33554432", got)
	}
	res := run(t, r, spec.ID, spec.ExecdToken, "dd if=/dev/zero of=/fill bs=1M count=100 2>&1; echo rc=$?")
	out := strings.Join(res.stdout, "\n")
	if !strings.Contains(out, "Disk quota exceeded") && !strings.Contains(out, "No space left") || strings.Contains(out, "rc=0") {
		t.Fatalf("dd of 100 MiB under a 32 MiB limit said %q, want a quota or space error", out)
	}
	if res := run(t, r, spec.ID, spec.ExecdToken, "echo alive"); strings.Join(res.stdout, "") != "alive" {
		t.Errorf("execd after the failed write: stdout %q exit %s", res.stdout, res.exit)
	}
	list, err := r.List(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.ID == spec.ID && s.Resources.DiskBytes != 32<<20 {
			t.Errorf("List reports Resources %+v, want DiskBytes %d", s.Resources, 32<<20)
		}
	}
}
