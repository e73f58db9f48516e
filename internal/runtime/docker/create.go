package docker

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/go-connections/nat"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/opensandbox-go/opensandbox/internal/execd/readiness"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// cleanupTimeout bounds the removal of what a failed Create made; it runs
// even when the caller's context is gone.
const cleanupTimeout = 30 * time.Second

// Create creates sandbox spec.ID and returns once execd inside answers.
// A failed create leaves nothing behind: the container and the volumes
// it made are removed before the error is returned.
func (r *Runtime) Create(ctx context.Context, spec runtime.Spec) (runtime.Sandbox, error) {
	if err := validate(spec); err != nil {
		return runtime.Sandbox{}, err
	}
	if err := r.checkHost(spec); err != nil {
		return runtime.Sandbox{}, fmt.Errorf("docker: sandbox %s: %w", spec.ID, err)
	}
	vols, err := r.checkHostPaths(spec.Volumes)
	if err != nil {
		return runtime.Sandbox{}, fmt.Errorf("docker: sandbox %s: %w", spec.ID, err)
	}
	spec.Volumes = vols
	if spec.Egress != nil && r.network == networkHost {
		return runtime.Sandbox{}, fmt.Errorf("docker: network policies need network mode bridge or a user-defined bridge network (configured: %s): %w", r.opts.NetworkMode, runtime.ErrNotSupported)
	}
	if spec.Egress != nil && !kernelNetworking(r.opts.Runtime) {
		// gVisor and Kata move packets with their own network stacks or
		// at layer 2: the namespace's nftables would never see them.
		return runtime.Sandbox{}, fmt.Errorf("docker: network policies are enforced only for OCI runtimes that use the host kernel's network stack (runc, crun), not %q: %w", r.opts.Runtime, runtime.ErrNotSupported)
	}
	if spec.Resources.DiskBytes > 0 {
		if err := r.CheckDiskLimit(ctx); err != nil {
			return runtime.Sandbox{}, fmt.Errorf("docker: sandbox %s: disk limit: %w", spec.ID, err)
		}
	}
	r.creating.Store(spec.ID, struct{}{})
	defer r.creating.Delete(spec.ID)
	start := time.Now()
	phases := runtime.PhasesFrom(ctx)
	end := phases.Start("image")
	ref, imgLabels, err := r.resolveImage(ctx, spec)
	end()
	if err != nil {
		return runtime.Sandbox{}, err
	}
	end = phases.Start("volumes")
	plan, err := r.prepareVolumes(ctx, spec)
	end()
	if err != nil {
		return runtime.Sandbox{}, err
	}
	containerID, err := r.start(ctx, spec, ref, imgLabels, plan)
	var sb runtime.Sandbox
	if err == nil {
		end = phases.Start("inspect")
		sb, err = r.Get(ctx, spec.ID)
		end()
	}
	if err != nil {
		r.undoCreate(ctx, spec.ID, containerID, spec.Egress != nil, plan.created)
		return runtime.Sandbox{}, err
	}
	r.log.InfoContext(ctx, "sandbox created", "sandbox", spec.ID, "image", ref, "elapsed", time.Since(start).Round(time.Millisecond))
	return sb, nil
}

// start creates and starts the container and waits for execd. It returns
// the container's id once the engine made it, even with an error.
//
// With an egress policy the sidecar comes first: the sandbox container is
// only started, inside the sidecar's network namespace, once the sidecar
// has programmed its firewall.
func (r *Runtime) start(ctx context.Context, spec runtime.Spec, ref string, imgLabels map[string]string, plan volumePlan) (string, error) {
	cfg, hc, err := r.containerConfig(spec, ref, imgLabels, plan)
	if err != nil {
		return "", err
	}
	marker := newReadyMarker()
	cfg.Env = append(cfg.Env, readiness.MarkerEnv+"="+marker)
	var ca []byte
	var holder string // the network holder taken, if any
	phases := runtime.PhasesFrom(ctx)
	if spec.Egress != nil {
		end := phases.Start("sidecar")
		var sidecarID string
		sidecarID, ca, err = r.startSidecar(ctx, spec)
		end()
		if err != nil {
			return "", err
		}
		hc.NetworkMode = container.NetworkMode("container:" + sidecarID)
	} else {
		end := phases.Start("network")
		nw, err := r.checkNetwork(ctx)
		if err != nil {
			end()
			return "", err
		}
		hc.NetworkMode = container.NetworkMode(nw)
		if r.netns != nil {
			if hid, ok := r.netns.take(ctx, spec.ID, nw); ok {
				// The holder owns the namespace and the published ports.
				defer r.netns.done(hid)
				hc.NetworkMode = container.NetworkMode("container:" + hid)
				cfg.ExposedPorts, hc.PortBindings = nil, nil
				holder = hid
			}
		}
		end()
	}
	var platform *ocispec.Platform
	if p := spec.Platform; p != nil {
		platform = &ocispec.Platform{OS: p.OS, Architecture: p.Arch}
	}
	end := phases.Start("create")
	defer func() { end() }()
	created, err := r.cli.ContainerCreate(ctx, cfg, hc, nil, platform, containerName(spec.ID))
	if err != nil {
		if holder != "" {
			// Without a sandbox container undoCreate cannot find it.
			r.removeTakenHolder(ctx, spec.ID, holder)
		}
		return "", engineErr(err, "docker: sandbox %s: create container", spec.ID)
	}
	if r.opts.ExecdCopy {
		err := r.cli.CopyToContainer(ctx, created.ID, "/", bytes.NewReader(r.execdTar), container.CopyToContainerOptions{})
		if err != nil {
			return created.ID, engineErr(err, "docker: sandbox %s: copy execd into the container", spec.ID)
		}
	}
	if ca != nil {
		tarball, err := optArchive(path.Base(egressCAInSandbox), 0o644, ca)
		if err == nil {
			err = r.cli.CopyToContainer(ctx, created.ID, "/", bytes.NewReader(tarball), container.CopyToContainerOptions{})
		}
		if err != nil {
			return created.ID, engineErr(err, "docker: sandbox %s: copy the egress CA into the container", spec.ID)
		}
	}
	end()
	end = phases.Start("attach")
	watch := r.watchReady(ctx, created.ID, marker)
	defer watch.stop()
	end()
	end = phases.Start("start")
	if err := r.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return created.ID, engineErr(err, "docker: sandbox %s: start container", spec.ID)
	}
	end()
	end = phases.Start("ready")
	if err := r.waitExecd(ctx, spec.ID, spec.ExecdToken, watch); err != nil {
		if logs := r.lastLogs(context.WithoutCancel(ctx), created.ID, 20); logs != "" {
			return created.ID, fmt.Errorf("%w; last container logs:\n%s", err, logs)
		}
		return created.ID, err
	}
	return created.ID, nil
}

// undoCreate removes what a failed Create made, even when ctx is done.
func (r *Runtime) undoCreate(ctx context.Context, id, containerID string, sidecar bool, volumes []string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if sidecar {
		if err := r.removeSidecar(ctx, id); err != nil {
			r.log.ErrorContext(ctx, "remove the egress sidecar of a failed create", "sandbox", id, "err", err)
		}
	}
	if containerID != "" {
		holder := ""
		if c, err := r.cli.ContainerInspect(ctx, containerID); err == nil {
			holder = holderOf(c)
		}
		err := r.cli.ContainerRemove(ctx, containerID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && classOf(err) != runtime.ErrNotFound {
			r.log.ErrorContext(ctx, "remove the container of a failed create", "sandbox", id, "err", err)
		}
		if holder != "" {
			r.removeTakenHolder(ctx, id, holder)
		}
	}
	r.removeVolumes(ctx, id, volumes)
}

func validate(spec runtime.Spec) error {
	switch {
	case spec.ID == "":
		return fmt.Errorf("docker: create: empty sandbox id: %w", runtime.ErrInvalid)
	case spec.PoolRef != "":
		return fmt.Errorf("docker: sandbox %s: pools (extensions.poolRef): %w", spec.ID, runtime.ErrNotSupported)
	case strings.ContainsAny(spec.ID, "/ \t\n") || !validName(containerName(spec.ID)):
		return fmt.Errorf("docker: create: sandbox id %q cannot name a container: %w", spec.ID, runtime.ErrInvalid)
	case len(spec.Entrypoint) == 0 || spec.Entrypoint[0] == "":
		return fmt.Errorf("docker: sandbox %s: empty entrypoint: %w", spec.ID, runtime.ErrInvalid)
	case spec.Image == "" && spec.SnapshotID == "":
		return fmt.Errorf("docker: sandbox %s: no image and no snapshot: %w", spec.ID, runtime.ErrInvalid)
	case spec.Resources.NanoCPUs < 0 || spec.Resources.MemoryBytes < 0 || spec.Resources.GPUs < -1 || spec.Resources.DiskBytes < 0:
		return fmt.Errorf("docker: sandbox %s: negative resource limit: %w", spec.ID, runtime.ErrInvalid)
	case spec.Resources.DiskBytes > 0 && spec.Resources.DiskBytes < MinDiskBytes:
		return fmt.Errorf("docker: sandbox %s: disk limit %d bytes is below the minimum of %d: %w", spec.ID, spec.Resources.DiskBytes, MinDiskBytes, runtime.ErrInvalid)
	}
	return nil
}

// validName mirrors the engine's container name rule [a-zA-Z0-9][a-zA-Z0-9_.-]+.
func validName(s string) bool {
	for i, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && (c == '_' || c == '.' || c == '-')
		if !ok {
			return false
		}
	}
	return len(s) > 1
}

// containerConfig builds the container and host configuration of spec.
func (r *Runtime) containerConfig(spec runtime.Spec, ref string, imgLabels map[string]string, plan volumePlan) (*container.Config, *container.HostConfig, error) {
	entry := []string{execdInContainer}
	var execdPort string
	if r.opts.NetworkMode == networkHost {
		p, err := freePort(r.opts.HostIP)
		if err != nil {
			return nil, nil, err
		}
		execdPort = p
		entry = append(entry, "--port", p)
	}
	entry = append(entry, "--")

	labels := r.specLabels(spec, time.Now(), execdPort, plan.managed)
	if spec.Egress != nil {
		labels[labelEgressToken] = spec.Egress.Token
	}
	maskInherited(labels, imgLabels)

	env := make([]string, 0, len(spec.Env)+1)
	for k, v := range spec.Env {
		if k != execdTokenEnv && k != sandbox.IsolationBootstrapEnv && k != readiness.MarkerEnv {
			env = append(env, k+"="+v)
		}
	}
	sort.Strings(env)
	isolated, err := r.isolated(spec)
	if err != nil {
		return nil, nil, err
	}
	if isolated {
		env = append(env, sandbox.IsolationBootstrapEnv+"=1")
	}
	if spec.ExecdToken != "" {
		env = append(env, execdTokenEnv+"="+spec.ExecdToken)
	}
	if spec.Egress != nil && spec.Egress.CredentialProxy {
		// execd adds the CA to the image's trust stores at start and
		// exports the variables clients read (NODE_EXTRA_CA_CERTS, ...).
		env = append(env, "OPENSANDBOX_EGRESS_CA_FILE="+egressCAInSandbox)
	}

	cfg := &container.Config{
		Image:      ref,
		Entrypoint: entry,
		Cmd:        append([]string(nil), spec.Entrypoint...),
		Env:        env,
		Labels:     labels,
	}
	no := false
	hc := &container.HostConfig{
		NetworkMode: container.NetworkMode(r.network),
		CapDrop:     r.opts.DropCapabilities,
		SecurityOpt: r.securityOpt,
		Init:        &no, // execd is the init
		Runtime:     r.opts.Runtime,
		Mounts:      plan.mounts,
	}
	if isolated {
		// execd drops it at start, before any other process runs.
		hc.CapAdd = []string{"SYS_ADMIN"}
		hc.CapDrop = slices.DeleteFunc(slices.Clone(hc.CapDrop), func(c string) bool { return capName(c) == "SYS_ADMIN" })
	}
	if !r.opts.ExecdCopy {
		hc.Mounts = append([]mount.Mount{{Type: mount.TypeBind, Source: r.opts.ExecdPath, Target: execdInContainer, ReadOnly: true}}, hc.Mounts...)
	}
	if spec.Egress != nil {
		// The sidecar owns the network and publishes the ports. The
		// sandbox must never change the firewall (NET_ADMIN) nor get past
		// it: NET_RAW allows SO_MARK (the sidecar's bypass mark, since
		// Linux 5.17) and packet sockets that skip the IP hooks.
		hc.CapDrop = withDropped(hc.CapDrop, "NET_ADMIN", "NET_RAW")
	} else if r.network != networkHost {
		cfg.ExposedPorts = nat.PortSet{execdPortKey: {}, httpPortKey: {}}
		hc.PortBindings = nat.PortMap{
			execdPortKey: {{HostIP: r.opts.HostIP, HostPort: r.opts.PublishedPortRange}},
			httpPortKey:  {{HostIP: r.opts.HostIP, HostPort: r.opts.PublishedPortRange}},
		}
	}
	res := spec.Resources
	hc.NanoCPUs = res.NanoCPUs
	if res.MemoryBytes > 0 {
		hc.Memory = res.MemoryBytes
		hc.MemorySwap = res.MemoryBytes // no swap beyond the limit
	}
	if r.opts.PidsLimit > 0 {
		pids := r.opts.PidsLimit
		hc.PidsLimit = &pids
	}
	if res.DiskBytes > 0 {
		// A quota on the writable layer (see disk.go); Create has
		// checked that the engine enforces it.
		hc.StorageOpt = map[string]string{"size": strconv.FormatInt(res.DiskBytes, 10)}
	}
	if res.GPUs != 0 {
		hc.DeviceRequests = []container.DeviceRequest{{Count: res.GPUs, Capabilities: [][]string{{"gpu"}}}}
	}
	return cfg, hc, nil
}

// isolated reports whether sandbox spec gets isolated execution.
func (r *Runtime) isolated(spec runtime.Spec) (bool, error) {
	switch r.opts.IsolatedExecution {
	case IsolationAlways:
		return true, nil
	case IsolationOnRequest:
		return spec.IsolatedExecution, nil
	}
	if spec.IsolatedExecution {
		return false, fmt.Errorf("docker: sandbox %s: extensions.%s: isolated execution is not enabled on this server (docker.isolated_execution): %w",
			spec.ID, sandbox.ExtIsolatedExecution, runtime.ErrInvalid)
	}
	return false, nil
}

// withDropped returns drop plus the capabilities in must it lacks (none
// when it drops ALL).
func withDropped(drop []string, must ...string) []string {
	if slices.ContainsFunc(drop, func(c string) bool { return capName(c) == "ALL" }) {
		return drop
	}
	out := slices.Clone(drop)
	for _, m := range must {
		if !slices.ContainsFunc(drop, func(c string) bool { return capName(c) == m }) {
			out = append(out, m)
		}
	}
	return out
}

// capName normalises a capability name as the engine does ("cap_net_admin"
// and "NET_ADMIN" are the same).
func capName(c string) string {
	return strings.TrimPrefix(strings.ToUpper(c), "CAP_")
}
