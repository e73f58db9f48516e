package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// resolveImage returns the image reference spec starts from, pulling a
// user image the engine does not have, and the image's labels. It refuses
// a spec whose runtime version variables the image cannot satisfy.
func (r *Runtime) resolveImage(ctx context.Context, spec runtime.Spec) (string, map[string]string, error) {
	ref, labels, err := r.findImage(ctx, spec)
	if err != nil {
		return "", nil, err
	}
	if err := checkVersions(spec, ref, labels); err != nil {
		return "", nil, err
	}
	return ref, labels, nil
}

func (r *Runtime) findImage(ctx context.Context, spec runtime.Spec) (string, map[string]string, error) {
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
	var local *image.InspectResponse // the image is here, for another platform
	if err == nil {
		local = &img
	}
	if err := r.pull(ctx, spec, local); err != nil {
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

// pull fetches spec.Image, which is not here (local == nil) or is here only
// for another platform. Any failure is runtime.ErrImagePull carrying the
// engine's message (the reference or the credentials are wrong, or the
// registry cannot be reached) and naming the images that are here.
func (r *Runtime) pull(ctx context.Context, spec runtime.Spec, local *image.InspectResponse) error {
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
		return r.notPulled(ctx, spec, local, err)
	}
	defer rc.Close()
	if err := readPullStream(rc); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("docker: sandbox %s: pull image %s: %w", spec.ID, spec.Image, ctx.Err())
		}
		return r.notPulled(ctx, spec, local, err)
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

// localRepo is the repository images/build.sh tags its images under.
// Without a registry they are the images there are, so a failed pull
// names them.
const localRepo = "opensandbox"

// maxListedImages bounds the list a failed pull gives.
const maxListedImages = 20

// notPulled is the error of a failed pull: it says that the image is not
// here (or not for the platform asked), why the pull failed, and which
// local opensandbox images there are instead.
func (r *Runtime) notPulled(ctx context.Context, spec runtime.Spec, local *image.InspectResponse, pullErr error) error {
	what := "is not present locally"
	if local != nil && spec.Platform != nil {
		what = fmt.Sprintf("is present locally only for %s/%s, not %s", local.Os, local.Architecture, platformString(spec.Platform))
	}
	return fmt.Errorf("docker: sandbox %s: image %s %s and could not be pulled (%w); %s",
		spec.ID, spec.Image, what, runtime.Classify(runtime.ErrImagePull, pullErr), r.localImagesNote(ctx))
}

func platformString(p *runtime.Platform) string {
	if p.Arch == "" {
		return p.OS
	}
	return p.OS + "/" + p.Arch
}

// localImagesNote lists the local images of localRepo, for an error message.
func (r *Runtime) localImagesNote(ctx context.Context) string {
	if ctx.Err() != nil {
		ctx = context.WithoutCancel(ctx) // a listing is quick, and it is what explains the failure
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	imgs, err := r.cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", localRepo+"/*"))})
	if err != nil {
		return fmt.Sprintf("cannot list the local %s images: %v", localRepo, err)
	}
	refs := localRefs(imgs)
	if len(refs) == 0 {
		return fmt.Sprintf("there are no local %s images (`make images` builds them)", localRepo)
	}
	more := ""
	if len(refs) > maxListedImages {
		more = fmt.Sprintf(" and %d more", len(refs)-maxListedImages)
		refs = refs[:maxListedImages]
	}
	return fmt.Sprintf("local %s images: %s%s", localRepo, strings.Join(refs, ", "), more)
}

// localRefs returns the images of imgs in localRepo, one entry per image
// and repository with its other tags in brackets ("opensandbox/base:latest
// (also v1.0.1, v1.0.2)"), sorted, so that the aliases images/build.sh adds
// do not crowd other images out of a short list. It leaves out the tags
// images/build.sh keeps for itself: the recipe hash (the same image as a
// named tag) and build-<pid> (an image still being checked).
func localRefs(imgs []image.Summary) []string {
	seen := map[string]bool{}
	var out []string
	for _, img := range imgs {
		recipe := img.Labels[labelRecipe]
		byRepo := map[string][]string{}
		var repos []string
		for _, t := range img.RepoTags {
			repo, tag, ok := strings.Cut(t, ":")
			if !ok || !strings.HasPrefix(repo, localRepo+"/") || seen[t] {
				continue
			}
			if img.Labels[labelBuiltImage] != "" && (tag == recipe || isBuildTag(tag)) {
				continue
			}
			seen[t] = true
			if _, ok := byRepo[repo]; !ok {
				repos = append(repos, repo)
			}
			byRepo[repo] = append(byRepo[repo], tag)
		}
		for _, repo := range repos {
			tags := byRepo[repo]
			sort.Slice(tags, func(i, j int) bool {
				if (tags[i] == "latest") != (tags[j] == "latest") {
					return tags[i] == "latest"
				}
				return tags[i] < tags[j]
			})
			e := repo + ":" + tags[0]
			if len(tags) > 1 {
				e += " (also " + strings.Join(tags[1:], ", ") + ")"
			}
			out = append(out, e)
		}
	}
	sort.Strings(out)
	return out
}

func isBuildTag(tag string) bool {
	n, ok := strings.CutPrefix(tag, "build-")
	return ok && n != "" && strings.Trim(n, "0123456789") == ""
}

// Labels images/build.sh puts on the images it builds.
const (
	labelBuiltImage = "io.opensandbox.image"  // the image's name, e.g. code-interpreter
	labelRecipe     = "io.opensandbox.recipe" // its recipe hash, also one of its tags
)
