package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// Disk limits are the engine's per-container storage option "size": a
// quota on the container's writable layer, enforced by the storage
// driver. Docker honours it with btrfs (a qgroup per container, see
// docs/server.md#disk-limits for why simple quotas), overlay2 on xfs
// mounted with prjquota, zfs and devicemapper, and refuses it elsewhere
// (overlay2 on ext4, the usual default). Whether it is honoured is asked
// of the engine once, by creating a container with the option from an
// empty image (the probe), because no API field says so.

// diskProbeRepo names the empty images the probe imports (one tag per
// probe, removed with it, so concurrent servers never share one).
const diskProbeRepo = "opensandbox-disk-probe"

// diskProbeSize is the size the probe asks for: MinDiskBytes, so every
// accepted limit is one the engine took.
const diskProbeSize = MinDiskBytes

// MinDiskBytes is the smallest disk limit accepted (16 MiB): room for
// execd when it is copied into the sandbox (docker.execd_copy) and for
// what an image's entrypoint writes at start.
const MinDiskBytes = 16 << 20

// labelDiskProbe marks the probe's container (removed once the probe
// is done; the label tells an operator what a leftover is).
const labelDiskProbe = labelPrefix + "disk-probe"

// CheckDiskLimit reports whether the engine enforces disk limits: nil
// when it does; an error of class runtime.ErrDiskLimitUnsupported, naming
// the storage driver and the engine's refusal, when it does not; another
// class when the engine could not be asked. Definite answers are
// remembered for the life of the Runtime (restart the server after
// changing the engine's storage); failed probes are tried again.
func (r *Runtime) CheckDiskLimit(ctx context.Context) error {
	r.diskMu.Lock()
	defer r.diskMu.Unlock()
	if r.diskChecked {
		return r.diskErr
	}
	err := r.probeDisk(ctx)
	if err == nil || errors.Is(err, runtime.ErrDiskLimitUnsupported) {
		r.diskChecked, r.diskErr = true, err
	}
	return err
}

// probeDisk creates (never starts) a container with the size option and
// removes it again.
func (r *Runtime) probeDisk(ctx context.Context) error {
	var buf bytes.Buffer
	if err := tar.NewWriter(&buf).Close(); err != nil { // an empty archive
		return fmt.Errorf("docker: disk limit probe: %w", err)
	}
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix)
	ref := diskProbeRepo + ":" + hex.EncodeToString(suffix)
	rc, err := r.cli.ImageImport(ctx, image.ImportSource{Source: &buf, SourceName: "-"}, ref, image.ImportOptions{
		Changes: []string{"LABEL io.opensandbox.image=disk-probe"},
	})
	if err != nil {
		return engineErr(err, "docker: disk limit probe: import an empty image")
	}
	_, _ = io.Copy(io.Discard, rc)
	rc.Close()
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if _, err := r.cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil && classOf(err) != runtime.ErrNotFound {
			r.log.WarnContext(ctx, "remove the disk limit probe image", "image", ref, "err", err)
		}
	}()

	labels := maps.Clone(r.opts.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[labelDiskProbe] = "true"
	cfg := &container.Config{Image: ref, Entrypoint: []string{"/probe"}, Labels: labels}
	hc := &container.HostConfig{
		NetworkMode: "none",
		StorageOpt:  map[string]string{"size": strconv.FormatInt(diskProbeSize, 10)},
	}
	created, err := r.cli.ContainerCreate(ctx, cfg, hc, nil, nil, "")
	if err != nil {
		switch classOf(err) {
		case runtime.ErrUnavailable, runtime.ErrNotFound:
			// The engine is down, or the image vanished under us
			// (a prune): no answer about the storage driver.
			return engineErr(err, "docker: disk limit probe: create a container")
		}
		if ctx.Err() != nil {
			return fmt.Errorf("docker: disk limit probe: %w", ctx.Err())
		}
		driver := "unknown"
		if info, ierr := r.cli.Info(ctx); ierr == nil {
			driver = info.Driver
			for _, kv := range info.DriverStatus {
				if kv[0] == "Backing Filesystem" {
					driver += " on " + kv[1]
				}
			}
		}
		return fmt.Errorf("docker: the engine's storage driver (%s) cannot limit a container's disk size (it refused the size storage option: %v): %w",
			driver, err, runtime.ErrDiskLimitUnsupported)
	}
	rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := r.cli.ContainerRemove(rmCtx, created.ID, container.RemoveOptions{Force: true}); err != nil && classOf(err) != runtime.ErrNotFound {
		r.log.WarnContext(ctx, "remove the disk limit probe container", "container", created.ID, "err", err)
	}
	return nil
}
