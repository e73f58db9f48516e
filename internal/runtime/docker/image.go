package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// resolveImage returns the image reference spec starts from, pulling a
// user image the engine does not have, and the image's labels.
func (r *Runtime) resolveImage(ctx context.Context, spec runtime.Spec) (string, map[string]string, error) {
	if spec.SnapshotID != "" {
		ref := snapshotRef(spec.SnapshotID)
		img, err := r.cli.ImageInspect(ctx, ref)
		if err != nil {
			return "", nil, engineErr(err, "docker: sandbox %s: snapshot %s", spec.ID, spec.SnapshotID)
		}
		return ref, imageLabels(img), nil
	}
	if spec.Image == "" {
		return "", nil, fmt.Errorf("docker: sandbox %s: no image and no snapshot: %w", spec.ID, runtime.ErrInvalid)
	}
	img, err := r.cli.ImageInspect(ctx, spec.Image)
	if err == nil && platformMatches(img, spec.Platform) {
		return spec.Image, imageLabels(img), nil
	}
	if err != nil && classOf(err) != runtime.ErrNotFound {
		return "", nil, engineErr(err, "docker: sandbox %s: inspect image %s", spec.ID, spec.Image)
	}
	if err := r.pull(ctx, spec); err != nil {
		return "", nil, err
	}
	img, err = r.cli.ImageInspect(ctx, spec.Image)
	if err != nil {
		return "", nil, engineErr(err, "docker: sandbox %s: inspect pulled image %s", spec.ID, spec.Image)
	}
	return spec.Image, imageLabels(img), nil
}

func imageLabels(img image.InspectResponse) map[string]string {
	if img.Config == nil {
		return nil
	}
	return img.Config.Labels
}

func platformMatches(img image.InspectResponse, p *runtime.Platform) bool {
	if p == nil {
		return true
	}
	return (p.OS == "" || p.OS == img.Os) && (p.Arch == "" || p.Arch == img.Architecture)
}

// pull fetches spec.Image; any failure is runtime.ErrImagePull carrying the
// engine's message (the reference or the credentials are wrong, or the
// registry cannot be reached).
func (r *Runtime) pull(ctx context.Context, spec runtime.Spec) error {
	opts := image.PullOptions{}
	if a := spec.ImageAuth; a != nil {
		auth, err := registry.EncodeAuthConfig(registry.AuthConfig{Username: a.Username, Password: a.Password})
		if err != nil {
			return fmt.Errorf("docker: sandbox %s: encode registry credentials: %w", spec.ID, err)
		}
		opts.RegistryAuth = auth
	}
	if p := spec.Platform; p != nil && p.OS != "" {
		opts.Platform = p.OS
		if p.Arch != "" {
			opts.Platform += "/" + p.Arch
		}
	}
	r.log.InfoContext(ctx, "pulling image", "sandbox", spec.ID, "image", spec.Image, "platform", opts.Platform)
	rc, err := r.cli.ImagePull(ctx, spec.Image, opts)
	if err != nil {
		if c := classOf(err); c == runtime.ErrUnavailable || ctx.Err() != nil {
			return engineErr(err, "docker: sandbox %s: pull image %s", spec.ID, spec.Image)
		}
		return classErr(runtime.ErrImagePull, err, "docker: sandbox %s: pull image %s", spec.ID, spec.Image)
	}
	defer rc.Close()
	if err := readPullStream(rc); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("docker: sandbox %s: pull image %s: %w", spec.ID, spec.Image, ctx.Err())
		}
		return classErr(runtime.ErrImagePull, err, "docker: sandbox %s: pull image %s", spec.ID, spec.Image)
	}
	return nil
}

// readPullStream reads the engine's progress messages to the end and
// returns the first error one of them reports.
func readPullStream(rc io.Reader) error {
	dec := json.NewDecoder(rc)
	for {
		var m struct {
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return errors.New(m.ErrorDetail.Message)
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
	}
}
