// Command image-committer commits running containers' root filesystems to
// images and pushes them to a registry, through containerd's API on the node
// it runs on. The controller runs it as a Job on a sandbox pod's node when a
// SandboxSnapshot is taken (docs/kubernetes.md, "Pause, resume and
// snapshots").
//
// For each --container NAME=CONTAINER-ID=IMAGE-REF it freezes the
// container (unless --pause=false), diffs its root filesystem snapshot
// against its image's top layer into a new gzip layer in the content store,
// writes a config (the image's own, plus the layer) and an OCI manifest, and
// pushes it (naming it IMAGE-REF in containerd too with --keep-image). The result, or the
// reason for a failure, goes to --result-file as JSON (committer.Result),
// which Kubernetes reads as the container's termination message.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/diff"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/rootfs"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/opensandbox-go/opensandbox/internal/committer"
)

type targetsFlag []committer.Target

func (t *targetsFlag) String() string {
	s := make([]string, len(*t))
	for i, x := range *t {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}

func (t *targetsFlag) Set(v string) error {
	x, err := committer.ParseTarget(v)
	if err != nil {
		return err
	}
	*t = append(*t, x)
	return nil
}

type options struct {
	address        string
	namespace      string
	targets        targetsFlag
	registryConfig string
	plainHTTP      bool
	pause          bool
	keepImage      bool
	timeout        time.Duration
	resultFile     string
}

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	var o options
	fs := flag.NewFlagSet("image-committer", flag.ContinueOnError)
	fs.StringVar(&o.address, "containerd-socket", "/run/containerd/containerd.sock", "containerd's socket")
	fs.StringVar(&o.namespace, "namespace", "k8s.io", "containerd namespace of the containers (k8s.io for Kubernetes)")
	fs.Var(&o.targets, "container", "NAME=CONTAINER-ID=IMAGE-REF to commit (repeat for several)")
	fs.StringVar(&o.registryConfig, "registry-config", "", "docker config.json with the registry's credentials (default: anonymous)")
	fs.BoolVar(&o.plainHTTP, "plain-http", false, "talk plain HTTP to the registry (a local test registry)")
	fs.BoolVar(&o.pause, "pause", true, "freeze each container while its root filesystem is diffed")
	fs.BoolVar(&o.keepImage, "keep-image", false, "also name the image in the node's containerd (by default its content is left to containerd's garbage collector once pushed)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	fs.StringVar(&o.resultFile, "result-file", "/dev/termination-log", "where the JSON result is written")
	err := fs.Parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err == nil && (len(o.targets) == 0 || fs.NArg() > 0) {
		err = errors.New("want one or more --container NAME=CONTAINER-ID=IMAGE-REF and no arguments")
	}
	if err != nil {
		// The controller reads why from the result, as for any failure.
		_ = os.WriteFile(o.resultFile, committer.Result{Error: "usage: " + err.Error()}.Encode(), 0o644)
		fmt.Fprintln(os.Stderr, "image-committer:", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	res, err := run(ctx, o, logger)
	cancel()
	stop()
	if err != nil {
		res = committer.Result{Error: err.Error()}
	}
	if werr := os.WriteFile(o.resultFile, res.Encode(), 0o644); werr != nil {
		logger.Error("writing the result", "file", o.resultFile, "error", werr.Error())
	}
	if err != nil {
		logger.Error("commit failed", "error", err.Error())
		fmt.Fprintln(os.Stderr, "image-committer:", err)
		os.Exit(1)
	}
	logger.Info("committed", "containers", len(res.Containers))
}

func run(ctx context.Context, o options, logger *slog.Logger) (committer.Result, error) {
	var res committer.Result
	creds := committer.DockerConfig{}
	if o.registryConfig != "" {
		data, err := os.ReadFile(o.registryConfig)
		if err != nil {
			return res, fmt.Errorf("reading the registry credentials: %w", err)
		}
		if creds, err = committer.ParseDockerConfig(data); err != nil {
			return res, err
		}
	}
	c, err := containerd.New(o.address, containerd.WithDefaultNamespace(o.namespace), containerd.WithTimeout(30*time.Second))
	if err != nil {
		return res, fmt.Errorf("connecting to containerd at %s: %w", o.address, err)
	}
	defer c.Close()
	ctx = namespaces.WithNamespace(ctx, o.namespace)
	if _, err := c.Version(ctx); err != nil {
		return res, fmt.Errorf("connecting to containerd at %s: %w", o.address, err)
	}
	// The lease keeps the new layer, config and manifest from containerd's
	// garbage collector until the image record refers to them.
	ctx, done, err := c.WithLease(ctx)
	if err != nil {
		return res, fmt.Errorf("taking a containerd lease: %w", err)
	}
	defer done(context.WithoutCancel(ctx))

	plain := docker.MatchLocalhost
	if o.plainHTTP {
		plain = docker.MatchAllHosts
	}
	resolver := docker.NewResolver(docker.ResolverOptions{Hosts: docker.ConfigureDefaultRegistries(
		docker.WithPlainHTTP(plain),
		docker.WithAuthorizer(docker.NewDockerAuthorizer(docker.WithAuthCreds(creds.Credentials))),
	)})

	for _, t := range o.targets {
		start := time.Now()
		r, err := commit(ctx, c, t, o.pause, o.keepImage)
		if err != nil {
			return res, fmt.Errorf("container %s (%s): %w", t.Name, t.ContainerID, err)
		}
		committed := time.Since(start)
		desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.Digest(r.ImageDigest), Size: r.manifestSize}
		if err := c.Push(ctx, t.Ref, desc, containerd.WithResolver(resolver)); err != nil {
			return res, fmt.Errorf("container %s: pushing %s: %w", t.Name, t.Ref, err)
		}
		logger.Info("committed and pushed", "container", t.Name, "image", t.Ref, "digest", r.ImageDigest,
			"layerBytes", r.LayerSize, "commit", committed.String(), "total", time.Since(start).String())
		res.Containers = append(res.Containers, r.ContainerResult)
	}
	return res, nil
}

type commitResult struct {
	committer.ContainerResult
	manifestSize int64
}

// commit makes the image of t's container in containerd's content store,
// and names it t.Ref there when keep is set.
func commit(ctx context.Context, c *containerd.Client, t committer.Target, pause, keep bool) (commitResult, error) {
	var out commitResult
	ctr, err := c.LoadContainer(ctx, t.ContainerID)
	if err != nil {
		return out, fmt.Errorf("loading the container: %w", err)
	}
	info, err := ctr.Info(ctx)
	if err != nil {
		return out, fmt.Errorf("reading the container: %w", err)
	}
	if info.SnapshotKey == "" || info.Snapshotter == "" {
		return out, errors.New("the container has no root filesystem snapshot")
	}
	cs := c.ContentStore()
	baseManifest, err := baseImageManifest(ctx, c, info.Image)
	if err != nil {
		return out, err
	}
	cfgBytes, err := content.ReadBlob(ctx, cs, baseManifest.Config)
	if err != nil {
		return out, fmt.Errorf("reading the config of image %s: %w", info.Image, err)
	}
	var baseConfig ocispec.Image
	if err := json.Unmarshal(cfgBytes, &baseConfig); err != nil {
		return out, fmt.Errorf("decoding the config of image %s: %w", info.Image, err)
	}

	layer, err := diffRootfs(ctx, c, ctr, info.Snapshotter, info.SnapshotKey, pause)
	if err != nil {
		return out, err
	}
	layerInfo, err := cs.Info(ctx, layer.Digest)
	if err != nil {
		return out, fmt.Errorf("reading the new layer's record: %w", err)
	}
	diffID, err := digest.Parse(layerInfo.Labels["containerd.io/uncompressed"])
	if err != nil {
		return out, fmt.Errorf("the new layer has no uncompressed digest: %w", err)
	}

	now := time.Now().UTC()
	cfg := committer.CommitConfig(baseConfig, diffID, now, "root filesystem of container "+t.Name)
	cfgDesc, err := writeJSON(ctx, cs, ocispec.MediaTypeImageConfig, cfg, nil)
	if err != nil {
		return out, fmt.Errorf("writing the image config: %w", err)
	}
	manifest := committer.CommitManifest(baseManifest, cfgDesc, layer)
	mDesc, err := writeJSON(ctx, cs, ocispec.MediaTypeImageManifest, manifest, committer.GCLabels(manifest))
	if err != nil {
		return out, fmt.Errorf("writing the image manifest: %w", err)
	}

	if keep {
		img := images.Image{Name: t.Ref, Target: mDesc}
		if _, err := c.ImageService().Create(ctx, img); err != nil {
			if !errdefs.IsAlreadyExists(err) {
				return out, fmt.Errorf("naming the image %s: %w", t.Ref, err)
			}
			if _, err := c.ImageService().Update(ctx, img, "target"); err != nil {
				return out, fmt.Errorf("renaming the image %s: %w", t.Ref, err)
			}
		}
	}
	out.ContainerName = t.Name
	out.ImageURI = t.Ref
	out.ImageDigest = mDesc.Digest.String()
	out.LayerSize = layer.Size
	out.manifestSize = mDesc.Size
	return out, nil
}

// baseImageManifest is the manifest of the container's image, name, whose
// layers are all in the content store: they are pushed with the commit.
// containerd does not always keep them: when it pulls an image whose layers
// are already unpacked (the same image under another name, say
// REGISTRY/opensandbox/base next to an imported opensandbox/base), it
// stores the manifest and config but fetches no layer, and the kubelet may
// name the container's image by either. Then another image of the same
// config (the same image) whose layers are present serves instead.
func baseImageManifest(ctx context.Context, c *containerd.Client, name string) (ocispec.Manifest, error) {
	cs := c.ContentStore()
	platform := platforms.Default()
	img, err := c.ImageService().Get(ctx, name)
	if err != nil {
		return ocispec.Manifest{}, fmt.Errorf("finding its image %q: %w", name, err)
	}
	m, err := images.Manifest(ctx, cs, img.Target, platform)
	if err != nil {
		return ocispec.Manifest{}, fmt.Errorf("reading the manifest of image %s: %w", name, err)
	}
	missing := missingLayer(ctx, cs, m)
	if missing == "" {
		return m, nil
	}
	all, err := c.ImageService().List(ctx)
	if err != nil {
		return ocispec.Manifest{}, fmt.Errorf("listing images for one like %s with its layers: %w", name, err)
	}
	for _, other := range all {
		if other.Name == name {
			continue
		}
		om, err := images.Manifest(ctx, cs, other.Target, platform)
		if err != nil || om.Config.Digest != m.Config.Digest {
			continue
		}
		if missingLayer(ctx, cs, om) == "" {
			slog.Info("the container's image lacks layer content; using the same image under another name",
				"image", name, "missing", missing.String(), "using", other.Name)
			return om, nil
		}
	}
	return ocispec.Manifest{}, fmt.Errorf("layer %s of image %s is not in the node's content store, and no other image of the same config has all its layers", missing, name)
}

// missingLayer is the first layer of m whose content is not in cs, or "".
func missingLayer(ctx context.Context, cs content.Store, m ocispec.Manifest) digest.Digest {
	for _, l := range m.Layers {
		if _, err := cs.Info(ctx, l.Digest); err != nil {
			return l.Digest
		}
	}
	return ""
}

// diffRootfs writes the difference between the container's snapshot and its
// parent (the image's top layer) to the content store as a gzip layer,
// freezing the container meanwhile when pause is set and it runs.
func diffRootfs(ctx context.Context, c *containerd.Client, ctr containerd.Container, snapshotter, key string, pause bool) (ocispec.Descriptor, error) {
	if pause {
		task, err := ctr.Task(ctx, nil)
		switch {
		case errdefs.IsNotFound(err):
			// Not running: nothing changes under the diff.
		case err != nil:
			return ocispec.Descriptor{}, fmt.Errorf("finding the container's task: %w", err)
		default:
			st, err := task.Status(ctx)
			if err != nil {
				return ocispec.Descriptor{}, fmt.Errorf("reading the container's task: %w", err)
			}
			if st.Status == containerd.Running {
				if err := task.Pause(ctx); err != nil {
					return ocispec.Descriptor{}, fmt.Errorf("freezing the container: %w", err)
				}
				defer func() {
					if err := task.Resume(context.WithoutCancel(ctx)); err != nil {
						slog.Warn("thawing the container", "error", err.Error())
					}
				}()
			}
		}
	}
	desc, err := rootfs.CreateDiff(ctx, key, c.SnapshotService(snapshotter), c.DiffService(),
		diff.WithMediaType(ocispec.MediaTypeImageLayerGzip),
		diff.WithReference(fmt.Sprintf("image-committer-%s-%d", ctr.ID(), time.Now().UnixNano())),
	)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("diffing the root filesystem: %w", err)
	}
	return desc, nil
}

// writeJSON stores v in the content store and returns its descriptor.
func writeJSON(ctx context.Context, cs content.Store, mediaType string, v any, labels map[string]string) (ocispec.Descriptor, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
	var opts []content.Opt
	if labels != nil {
		opts = append(opts, content.WithLabels(labels))
	}
	if err := content.WriteBlob(ctx, cs, "image-committer-"+desc.Digest.String(), bytes.NewReader(b), desc, opts...); err != nil {
		return ocispec.Descriptor{}, err
	}
	return desc, nil
}
