package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/go-connections/nat"

	"github.com/opensandbox-go/opensandbox/internal/egress/egressenv"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// The egress sidecar: a container from the egress image that owns the
// sandbox's network namespace (the sandbox container joins it with
// network mode container:<sidecar>), holds NET_ADMIN, programs the
// firewall and serves the egress API. Sandbox ports are published on it.
const (
	labelEgressToken = labelPrefix + "egress-auth-token" // on the sandbox
	labelEgressOf    = labelPrefix + "egress-of"         // on the sidecar: the sandbox id

	egressRepo         = "opensandbox/egress"
	egressCAInSidecar  = "/run/opensandbox/egress/ca.pem"
	egressStartMarker  = "/run/opensandbox/egress/started"
	egressCAInSandbox  = execdDir + "/egress-ca.pem"
	egressUpstreamCA   = "/etc/opensandbox/upstream-ca.pem"
	hostCABundle       = "/etc/ssl/certs/ca-certificates.crt"
	egressMemory       = 256 << 20
	egressPidsLimit    = 256
	egressReadyTimeout = 20 * time.Second
)

var egressPortKey = nat.Port(strconv.Itoa(sandbox.EgressPort) + "/tcp")

// sidecarName is the engine name of sandbox id's sidecar; like
// containerName it does not carry the id.
func sidecarName(id string) string { return "sandbox-egress-" + nameHash(id) }

// egressImage returns the sidecar image: Options.EgressImage, or one made
// from Options.EgressPath (the static egress binary and the host's CA
// bundle, imported as a local image tagged with their hash, so no
// registry is involved and a new binary gets a new image).
func (r *Runtime) egressImage(ctx context.Context) (string, error) {
	if r.opts.EgressImage != "" {
		return r.opts.EgressImage, nil
	}
	r.egressMu.Lock()
	defer r.egressMu.Unlock()
	if r.egressRef != "" {
		// Someone may have pruned it since (another server, an operator).
		if _, err := r.cli.ImageInspect(ctx, r.egressRef); err == nil {
			return r.egressRef, nil
		}
		r.egressRef = ""
	}
	if r.opts.EgressPath == "" {
		return "", fmt.Errorf("docker: network policies need the egress sidecar, but neither an egress image nor the egress binary is configured: %w", runtime.ErrNotSupported)
	}
	bin, err := os.ReadFile(r.opts.EgressPath)
	if err != nil {
		return "", fmt.Errorf("docker: read the egress binary: %w", err)
	}
	bundle, _ := os.ReadFile(hostCABundle) // origins are verified against it; absent is allowed
	sum := sha256.New()
	sum.Write(bin)
	sum.Write(bundle)
	ref := egressRepo + ":" + hex.EncodeToString(sum.Sum(nil))[:16]
	if _, err := r.cli.ImageInspect(ctx, ref); err == nil {
		r.egressRef = ref
		r.pruneImages(ctx, egressRepo, ref)
		return ref, nil
	}
	tarball, err := egressRootfs(bin, bundle)
	if err != nil {
		return "", err
	}
	if err := r.importImage(ctx, ref, tarball, `ENTRYPOINT ["/egress"]`, "LABEL io.opensandbox.image=egress"); err != nil {
		return "", err
	}
	r.log.InfoContext(ctx, "egress sidecar image built", "image", ref)
	r.egressRef = ref
	r.pruneImages(ctx, egressRepo, ref)
	return ref, nil
}

// importImage imports tarball as the local image ref with the Dockerfile
// changes given: no registry is involved.
func (r *Runtime) importImage(ctx context.Context, ref string, tarball []byte, changes ...string) error {
	rc, err := r.cli.ImageImport(ctx, image.ImportSource{Source: bytes.NewReader(tarball), SourceName: "-"}, ref, image.ImportOptions{Changes: changes})
	if err != nil {
		return engineErr(err, "docker: import the image %s", ref)
	}
	_, _ = io.Copy(io.Discard, rc)
	return rc.Close()
}

// pruneImages removes the images of repo other than keep (those of older
// binaries); the engine refuses to remove one a container still uses,
// which is fine. Only tags this driver makes (a hash) go: others, such as
// opensandbox/egress:latest of make kube-images, are someone else's.
func (r *Runtime) pruneImages(ctx context.Context, repo, keep string) {
	imgs, err := r.cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", repo))})
	if err != nil {
		return
	}
	for _, img := range imgs {
		for _, tag := range img.RepoTags {
			if tag != keep && hashTag(tag, repo) {
				_, _ = r.cli.ImageRemove(ctx, tag, image.RemoveOptions{PruneChildren: true})
			}
		}
	}
}

// hashTag reports whether tag is repo:<16 hex digits>, a tag of an image
// the driver built from a binary's hash.
func hashTag(tag, repo string) bool {
	h, ok := strings.CutPrefix(tag, repo+":")
	if !ok || len(h) != 16 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}

// egressRootfs is the sidecar's whole filesystem.
func egressRootfs(bin, bundle []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	for _, d := range []struct {
		name string
		mode int64
	}{{"etc/", 0o755}, {"etc/ssl/", 0o755}, {"etc/ssl/certs/", 0o755}, {"run/", 0o755}, {"run/opensandbox/", 0o755},
		{"run/opensandbox/egress/", 0o755}, {"tmp/", 0o1777}, {"var/", 0o755}, {"var/egress/", 0o755}, {"var/egress/rules/", 0o755}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d.name, Mode: d.mode, ModTime: now}); err != nil {
			return nil, err
		}
	}
	files := []struct {
		name string
		mode int64
		data []byte
	}{{"egress", 0o755, bin}}
	if len(bundle) > 0 {
		files = append(files, struct {
			name string
			mode int64
			data []byte
		}{strings.TrimPrefix(hostCABundle, "/"), 0o644, bundle})
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: now}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// startSidecar creates and starts the sidecar of spec, waits until its
// firewall is programmed and its API answers, and returns its container id
// and, with the credential proxy, the CA certificate the sandbox must
// trust. It returns the id as soon as the container exists, even on error.
func (r *Runtime) startSidecar(ctx context.Context, spec runtime.Spec) (string, []byte, error) {
	ref, err := r.egressImage(ctx)
	if err != nil {
		return "", nil, err
	}
	eg := spec.Egress
	env, err := r.sidecarEnv(spec)
	if err != nil {
		return "", nil, err
	}
	labels := map[string]string{labelEgressOf: spec.ID}
	for k, v := range r.opts.Labels {
		labels[k] = v
	}
	cfg := &container.Config{
		Image:  ref,
		Env:    env,
		Labels: labels,
		ExposedPorts: nat.PortSet{
			execdPortKey: {}, httpPortKey: {}, egressPortKey: {},
		},
	}
	no := false
	pids := int64(egressPidsLimit)
	hc := &container.HostConfig{
		NetworkMode: container.NetworkMode(r.network),
		CapDrop:     []string{"ALL"},
		CapAdd:      []string{"NET_ADMIN"},
		SecurityOpt: r.securityOpt,
		Init:        &no,
		Runtime:     "", // the sidecar is ours; the sandbox's OCI runtime may not allow NET_ADMIN
		PortBindings: nat.PortMap{
			execdPortKey:  {{HostIP: r.opts.HostIP, HostPort: r.opts.PublishedPortRange}},
			httpPortKey:   {{HostIP: r.opts.HostIP, HostPort: r.opts.PublishedPortRange}},
			egressPortKey: {{HostIP: r.opts.HostIP, HostPort: r.opts.PublishedPortRange}},
		},
		Resources: container.Resources{Memory: egressMemory, MemorySwap: egressMemory, PidsLimit: &pids},
	}
	if r.opts.EgressDisableIPv6 {
		hc.Sysctls = map[string]string{"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}
	}
	if r.opts.EgressUpstreamCAFile != "" {
		hc.Mounts = []mount.Mount{{Type: mount.TypeBind, Source: r.opts.EgressUpstreamCAFile, Target: egressUpstreamCA, ReadOnly: true}}
	}
	nw, err := r.checkNetwork(ctx)
	if err != nil {
		return "", nil, err
	}
	hc.NetworkMode = container.NetworkMode(nw)
	created, err := r.cli.ContainerCreate(ctx, cfg, hc, nil, nil, sidecarName(spec.ID))
	if err != nil {
		return "", nil, engineErr(err, "docker: sandbox %s: create egress sidecar", spec.ID)
	}
	if err := r.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return created.ID, nil, engineErr(err, "docker: sandbox %s: start egress sidecar", spec.ID)
	}
	if err := r.waitSidecar(ctx, spec.ID, created.ID); err != nil {
		if logs := r.lastLogs(context.WithoutCancel(ctx), created.ID, 20); logs != "" {
			return created.ID, nil, fmt.Errorf("%w; last sidecar logs:\n%s", err, logs)
		}
		return created.ID, nil, err
	}
	if !eg.CredentialProxy {
		return created.ID, nil, nil
	}
	ca, err := r.copyFileOut(ctx, created.ID, egressCAInSidecar)
	if err != nil {
		return created.ID, nil, fmt.Errorf("docker: sandbox %s: read the egress CA: %w", spec.ID, err)
	}
	return created.ID, ca, nil
}

// sidecarEnv is the sidecar's environment for spec (the contract of
// package egressenv).
func (r *Runtime) sidecarEnv(spec runtime.Spec) ([]string, error) {
	e := egressenv.Env{
		SandboxID:       spec.ID,
		Mode:            r.opts.EgressMode,
		Token:           spec.Egress.Token,
		Rules:           string(spec.Egress.Policy),
		CredentialProxy: spec.Egress.CredentialProxy,
		CAFile:          egressCAInSidecar,
		// A `docker restart` gives the sidecar a new network namespace
		// and leaves the sandbox in the old one: the sidecar then exits
		// at once, so List and Get both see it down.
		StartMarker:   egressStartMarker,
		DenyWebhook:   r.opts.EgressDenyWebhook,
		DNSUpstreams:  r.opts.EgressDNSUpstreams,
		AllowMetadata: r.opts.EgressAllowMetadata,
	}
	if r.opts.EgressBlockDoH {
		e.BlockDoH = true
		for _, s := range r.opts.EgressDoHBlocklist {
			p, err := parsePrefixOrAddr(s)
			if err != nil {
				return nil, fmt.Errorf("docker: egress DoH blocklist: %w: %w", err, runtime.ErrInvalid)
			}
			e.DoHBlocklist = append(e.DoHBlocklist, p)
		}
	}
	if r.opts.EgressUpstreamCAFile != "" {
		e.UpstreamCAFile = egressUpstreamCA
	}
	return e.Encode(), nil
}

// parsePrefixOrAddr reads a CIDR, or an IP as its one-address prefix.
func parsePrefixOrAddr(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP or CIDR", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// waitSidecar polls the sidecar's /healthz on its published port until it
// answers 200 (firewall programmed, DNS proxy listening), the container
// stops or the time is up.
func (r *Runtime) waitSidecar(ctx context.Context, id, containerID string) error {
	wctx, cancel := context.WithTimeout(ctx, egressReadyTimeout)
	defer cancel()
	delay := 5 * time.Millisecond
	var last error
	for wctx.Err() == nil {
		c, err := r.cli.ContainerInspect(wctx, containerID)
		if err != nil {
			return engineErr(err, "docker: sandbox %s: inspect egress sidecar", id)
		}
		if c.State == nil || !c.State.Running {
			return fmt.Errorf("docker: sandbox %s: egress sidecar stopped before it was ready (%s)", id, stateOf(c.State).Message)
		}
		if p, err := publishedPort(c, egressPortKey); err != nil {
			last = err
		} else if last = r.getOK(wctx, fmt.Sprintf("http://%s/healthz", net.JoinHostPort(r.opts.HostIP, strconv.Itoa(p)))); last == nil {
			return nil
		}
		select {
		case <-wctx.Done():
		case <-time.After(delay):
		}
		delay = min(delay*2, 200*time.Millisecond)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("docker: sandbox %s: egress sidecar not ready after %s: %v: %w", id, egressReadyTimeout, last, runtime.ErrUnavailable)
}

func (r *Runtime) getOK(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return nil
}

// copyFileOut reads one small regular file out of a container.
func (r *Runtime) copyFileOut(ctx context.Context, containerID, p string) ([]byte, error) {
	rc, _, err := r.cli.CopyFromContainer(ctx, containerID, p)
	if err != nil {
		return nil, engineErr(err, "docker: copy %s out of %s", p, containerID)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, fmt.Errorf("docker: %s: %w", p, err)
		}
		if h.Typeflag == tar.TypeReg && path.Base(h.Name) == path.Base(p) {
			return io.ReadAll(io.LimitReader(tr, 1<<20))
		}
	}
}

// removeSidecar force-removes the sidecar of sandbox id, if any.
func (r *Runtime) removeSidecar(ctx context.Context, id string) error {
	err := r.cli.ContainerRemove(ctx, sidecarName(id), container.RemoveOptions{Force: true})
	if removalInProgress(err) {
		err = r.waitRemoved(ctx, sidecarName(id))
	}
	if err != nil && classOf(err) != runtime.ErrNotFound {
		return engineErr(err, "docker: sandbox %s: remove egress sidecar", id)
	}
	return nil
}

// liveSidecar returns the inspected sidecar of sandbox c, or an error
// wrapping errSidecarDown and runtime.ErrConflict when it is gone, stopped
// or was restarted after the sandbox started (a restarted sidecar has a new
// network namespace; the sandbox is left in the old one, with loopback
// only). Such a sandbox has no network at all and is reported Failed.
func (r *Runtime) liveSidecar(ctx context.Context, id string, c container.InspectResponse) (container.InspectResponse, error) {
	sc, err := r.cli.ContainerInspect(ctx, sidecarName(id))
	if err != nil {
		if classOf(err) == runtime.ErrNotFound {
			return sc, fmt.Errorf("docker: sandbox %s: %w: %w", id, errSidecarDown, runtime.ErrConflict)
		}
		return sc, engineErr(err, "docker: sandbox %s: inspect egress sidecar", id)
	}
	if sc.State == nil || !sc.State.Running ||
		(c.State != nil && engineTime(sc.State.StartedAt).After(engineTime(c.State.StartedAt))) {
		return sc, fmt.Errorf("docker: sandbox %s: %w: %w", id, errSidecarDown, runtime.ErrConflict)
	}
	return sc, nil
}

// DefaultOrphanGrace is how old a sidecar without its sandbox must be
// before it counts as an orphan.
const DefaultOrphanGrace = 10 * time.Minute

var errSidecarDown = errors.New("the egress sidecar is not running; the sandbox has no network")

var _ runtime.Sweeper = (*Runtime)(nil)

// Sweep removes orphan egress sidecars (see removeOrphanSidecars) and
// network holders (see netPool.sweep); New removes orphan sidecars once,
// the server calls Sweep periodically.
func (r *Runtime) Sweep(ctx context.Context) {
	r.removeOrphanSidecars(ctx)
	if r.netns != nil {
		r.netns.sweep(ctx)
	}
}

// removeOrphanSidecars removes sidecars whose sandbox container is gone
// (removed behind the server's back, or a crash between the two removals
// of Delete, or between the two creates of Create). Failures are logged.
func (r *Runtime) removeOrphanSidecars(ctx context.Context) {
	f := r.scopedFilter(filters.Arg("label", labelEgressOf))
	cs, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		r.log.WarnContext(ctx, "list egress sidecars", "err", err)
		return
	}
	for _, c := range cs {
		id := c.Labels[labelEgressOf]
		// A sidecar of a create in progress here, or a young one that may
		// be another server's create in progress, gets its sandbox
		// container next.
		if _, busy := r.creating.Load(id); busy || time.Since(time.Unix(c.Created, 0)) < r.opts.OrphanGrace {
			continue
		}
		if _, err := r.cli.ContainerInspect(ctx, containerName(id)); classOf(err) != runtime.ErrNotFound {
			continue
		}
		if err := r.removeSidecar(ctx, id); err != nil {
			r.log.WarnContext(ctx, "remove orphan egress sidecar", "sandbox", id, "err", err)
			continue
		}
		r.log.InfoContext(ctx, "removed orphan egress sidecar", "sandbox", id)
	}
}

// kernelNetworking reports whether containers of the OCI runtime send their
// packets through the host kernel's stack (so nftables applies).
func kernelNetworking(ociRuntime string) bool {
	switch ociRuntime {
	case "", "runc", "crun", "io.containerd.runc.v2":
		return true
	}
	return false
}
