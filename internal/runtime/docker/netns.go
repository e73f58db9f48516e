package docker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/go-connections/nat"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// Warm network namespaces.
//
// Most of a sandbox's start on Docker is its network: the engine makes a
// namespace, a veth pair on the bridge, the embedded resolver of a
// user-defined network and the published ports (with userland proxies)
// while it starts the container — about two thirds of `docker start`
// here. None of it depends on the sandbox: every bridge-mode sandbox
// without a network policy gets the same network and the same two
// published ports. So the driver keeps a few network holders started
// ahead of creates: small containers (execd in its hold mode, in an image
// of execd alone) that own a namespace on the sandbox network with the
// ports published. A create takes one, renames it after the sandbox and
// starts the sandbox container in its namespace (network mode
// container:<holder>), as a sandbox with a network policy joins its egress
// sidecar's; the pool then starts a replacement in the background. With
// none ready, the sandbox gets a namespace of its own as before.
//
// The holder is the sandbox's network for its whole life: it is removed
// with the sandbox, and a sandbox whose holder stopped is reported Failed
// (it has loopback only), like one whose egress sidecar stopped.
const (
	// labelNetnsHolder ("true") marks holders; an idle one is named
	// holderIdlePrefix + random, a taken one holderName(sandbox id).
	labelNetnsHolder = labelPrefix + "netns-holder"
	holderIdlePrefix = "sandbox-netns-idle-"
	netnsRepo        = "opensandbox/netns"
	holderMemory     = 16 << 20
	holderPidsLimit  = 16
	// DefaultWarmNetworks is how many holders are kept ready.
	DefaultWarmNetworks = 2
	// holderDrainTimeout bounds the removal of idle holders at shutdown.
	holderDrainTimeout = 15 * time.Second
	maxHolderBackoff   = 30 * time.Second
)

// holderName is the engine name of the holder sandbox id took; like
// containerName it does not carry the id.
func holderName(id string) string { return "sandbox-netns-" + nameHash(id) }

var errHolderDown = errors.New("the container that holds the sandbox's network namespace is not running; the sandbox has no network")

// holder is an idle network holder.
type holder struct {
	id      string
	network string // what checkNetwork answered when it was made
}

// netPool keeps Options.WarmNetworks idle holders. Its run loop, owned by
// Runtime.Run, starts them and removes discarded ones; Create takes them.
type netPool struct {
	r    *Runtime
	size int
	wake chan struct{}

	mu    sync.Mutex
	idle  []holder
	trash []string // holder container ids to remove

	imageMu  sync.Mutex
	imageRef string

	// taking holds the container ids of holders handed to creates that
	// have not made their sandbox container yet: never orphans.
	taking sync.Map
	// suspectMu guards suspects: holders no sandbox used at the last
	// sweep; still unused at the next one, they are removed.
	suspectMu sync.Mutex
	suspects  map[string]bool
}

func newNetPool(r *Runtime, size int) *netPool {
	return &netPool{r: r, size: size, wake: make(chan struct{}, 1), suspects: map[string]bool{}}
}

func (p *netPool) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run fills the pool until ctx ends, then removes the idle holders.
// After a failure it waits (1 s doubling to 30 s) before it tries again.
func (p *netPool) run(ctx context.Context) {
	p.adopt(ctx)
	var backoff time.Duration
	var notBefore time.Time
	for {
		if ctx.Err() != nil {
			p.drain(context.WithoutCancel(ctx))
			return
		}
		p.emptyTrash(ctx)
		var retry <-chan time.Time
		if p.short() {
			if wait := time.Until(notBefore); wait > 0 {
				retry = time.After(wait)
			} else if err := p.add(ctx); err == nil || ctx.Err() != nil {
				backoff = 0
				continue
			} else {
				backoff = min(max(2*backoff, time.Second), maxHolderBackoff)
				notBefore = time.Now().Add(backoff)
				retry = time.After(backoff)
				p.r.log.WarnContext(ctx, "starting a warm network holder failed; creates make their own network meanwhile", "err", err, "retry_in", backoff)
			}
		}
		select {
		case <-ctx.Done():
		case <-p.wake:
		case <-retry:
		}
	}
}

// short reports whether fewer than size holders are idle.
func (p *netPool) short() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle) < p.size
}

// add starts one idle holder on the sandbox network.
func (p *netPool) add(ctx context.Context) error {
	r := p.r
	ref, err := p.image(ctx)
	if err != nil {
		return err
	}
	nw, err := r.checkNetwork(ctx)
	if err != nil {
		return err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	labels := map[string]string{labelNetnsHolder: "true"}
	for k, v := range r.opts.Labels {
		labels[k] = v
	}
	no := false
	pids := int64(holderPidsLimit)
	cfg := &container.Config{
		Image:        ref,
		Labels:       labels,
		ExposedPorts: nat.PortSet{execdPortKey: {}, httpPortKey: {}},
	}
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(nw),
		CapDrop:        []string{"ALL"},
		SecurityOpt:    r.securityOpt,
		Init:           &no,
		ReadonlyRootfs: true,
		PortBindings: nat.PortMap{
			execdPortKey: {{HostIP: r.opts.HostIP, HostPort: r.opts.PublishedPortRange}},
			httpPortKey:  {{HostIP: r.opts.HostIP, HostPort: r.opts.PublishedPortRange}},
		},
		Resources: container.Resources{Memory: holderMemory, MemorySwap: holderMemory, PidsLimit: &pids},
	}
	created, err := r.cli.ContainerCreate(ctx, cfg, hc, nil, nil, holderIdlePrefix+hex.EncodeToString(rnd[:]))
	if err != nil {
		return engineErr(err, "docker: create a network holder")
	}
	if err := r.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		p.discard(created.ID)
		return engineErr(err, "docker: start a network holder")
	}
	p.mu.Lock()
	p.idle = append(p.idle, holder{id: created.ID, network: nw})
	p.mu.Unlock()
	return nil
}

// take hands an idle holder to the create of sandbox id, renamed after it,
// or returns false when none is ready on network nw (the network
// checkNetwork answered for this create). The caller calls done(holder)
// once its sandbox container exists or its create failed.
func (p *netPool) take(ctx context.Context, id, nw string) (string, bool) {
	defer p.signal()
	for {
		p.mu.Lock()
		if len(p.idle) == 0 {
			p.mu.Unlock()
			return "", false
		}
		h := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		p.mu.Unlock()
		if h.network != nw {
			p.discard(h.id) // made before the network was replaced
			continue
		}
		p.taking.Store(h.id, struct{}{})
		if err := p.r.cli.ContainerRename(ctx, h.id, holderName(id)); err != nil {
			// Gone, or taken by another server that adopted it too
			// (see adopt): forgotten, never removed, since it may be
			// another sandbox's network now.
			p.taking.Delete(h.id)
			p.r.log.WarnContext(ctx, "renaming a network holder failed; trying another", "sandbox", id, "holder", shortID(h.id), "err", err)
			if ctx.Err() != nil {
				return "", false
			}
			continue
		}
		c, err := p.r.cli.ContainerInspect(ctx, h.id)
		if err != nil || c.State == nil || !c.State.Running {
			p.taking.Delete(h.id)
			p.discard(h.id)
			if ctx.Err() != nil {
				return "", false
			}
			continue
		}
		return h.id, true
	}
}

// done ends the hand-over of holder hid to a create.
func (p *netPool) done(hid string) { p.taking.Delete(hid) }

// discard queues a holder for removal by the run loop.
func (p *netPool) discard(hid string) {
	p.mu.Lock()
	p.trash = append(p.trash, hid)
	p.mu.Unlock()
	p.signal()
}

func (p *netPool) emptyTrash(ctx context.Context) {
	p.mu.Lock()
	trash := p.trash
	p.trash = nil
	p.mu.Unlock()
	for _, hid := range trash {
		if err := p.r.removeContainer(ctx, hid); err != nil {
			p.r.log.WarnContext(ctx, "remove a discarded network holder", "holder", shortID(hid), "err", err)
		}
	}
}

// drain removes the idle and discarded holders when the runtime stops: a
// stopped server leaves only its sandboxes behind.
func (p *netPool) drain(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, holderDrainTimeout)
	defer cancel()
	p.mu.Lock()
	for _, h := range p.idle {
		p.trash = append(p.trash, h.id)
	}
	p.idle = nil
	p.mu.Unlock()
	p.emptyTrash(ctx)
}

// adopt takes over the idle holders a previous process of this instance
// left (one that did not stop cleanly) that still run on the sandbox
// network, up to size, and removes the others.
func (p *netPool) adopt(ctx context.Context) {
	hs, err := p.r.listHolders(ctx, false)
	if err != nil {
		p.r.log.WarnContext(ctx, "list network holders", "err", err)
		return
	}
	nw, err := p.r.checkNetwork(ctx)
	if err != nil {
		return
	}
	for _, c := range hs {
		if !isIdleHolder(c) {
			continue // taken: the sweep decides
		}
		p.mu.Lock()
		keep := c.State == container.StateRunning && holderNetwork(c) == nw && len(p.idle) < p.size
		if keep {
			p.idle = append(p.idle, holder{id: c.ID, network: nw})
		}
		p.mu.Unlock()
		if !keep {
			p.discard(c.ID)
		}
	}
}

// sweep removes taken holders that no sandbox container uses at two
// sweeps in a row (a create interrupted between the rename and the
// sandbox container; a failed create removes its holder itself).
func (p *netPool) sweep(ctx context.Context) {
	hs, err := p.r.listHolders(ctx, false)
	if err != nil {
		p.r.log.WarnContext(ctx, "list network holders", "err", err)
		return
	}
	used, err := p.r.usedNetworkOwners(ctx)
	if err != nil {
		p.r.log.WarnContext(ctx, "list sandboxes for the network holder sweep", "err", err)
		return
	}
	p.suspectMu.Lock()
	defer p.suspectMu.Unlock()
	next := map[string]bool{}
	for _, c := range hs {
		if isIdleHolder(c) || used[c.ID] {
			continue
		}
		if _, busy := p.taking.Load(c.ID); busy {
			continue
		}
		if !p.suspects[c.ID] {
			next[c.ID] = true
			continue
		}
		if err := p.r.removeContainer(ctx, c.ID); err != nil {
			p.r.log.WarnContext(ctx, "remove an orphan network holder", "holder", shortID(c.ID), "err", err)
			next[c.ID] = true
			continue
		}
		p.r.log.InfoContext(ctx, "removed an orphan network holder", "holder", shortID(c.ID))
	}
	p.suspects = next
}

// image returns the holder image: execd alone, tagged with its hash and
// imported on first use (no registry involved).
func (p *netPool) image(ctx context.Context) (string, error) {
	p.imageMu.Lock()
	defer p.imageMu.Unlock()
	if p.imageRef != "" {
		if _, err := p.r.cli.ImageInspect(ctx, p.imageRef); err == nil {
			return p.imageRef, nil
		}
		p.imageRef = "" // pruned since
	}
	bin, err := os.ReadFile(p.r.opts.ExecdPath)
	if err != nil {
		return "", fmt.Errorf("docker: read execd for the network holder image: %w", err)
	}
	sum := sha256.Sum256(bin)
	ref := netnsRepo + ":" + hex.EncodeToString(sum[:])[:16]
	if _, err := p.r.cli.ImageInspect(ctx, ref); err != nil {
		tarball, err := fileArchive(nil, "execd", 0o755, bin)
		if err != nil {
			return "", err
		}
		if err := p.r.importImage(ctx, ref, tarball, `ENTRYPOINT ["/execd", "hold"]`, "LABEL io.opensandbox.image=netns"); err != nil {
			return "", err
		}
		p.r.log.InfoContext(ctx, "network holder image built", "image", ref)
	}
	p.imageRef = ref
	p.r.pruneImages(ctx, netnsRepo, ref)
	return ref, nil
}

func isIdleHolder(c container.Summary) bool {
	for _, n := range c.Names {
		if strings.HasPrefix(n, "/"+holderIdlePrefix) {
			return true
		}
	}
	return false
}

// holderNetwork is the network a listed holder was started on, as
// checkNetwork names it (the id of a user-defined network, else "bridge").
func holderNetwork(c container.Summary) string {
	if c.HostConfig.NetworkMode == networkBridge || c.HostConfig.NetworkMode == "default" {
		return networkBridge
	}
	if c.NetworkSettings != nil {
		for _, ep := range c.NetworkSettings.Networks {
			if ep != nil {
				return ep.NetworkID
			}
		}
	}
	return ""
}

// listHolders lists this runtime's network holders (running ones only
// when running is set).
func (r *Runtime) listHolders(ctx context.Context, running bool) ([]container.Summary, error) {
	f := r.scopedFilter(filters.Arg("label", labelNetnsHolder+"=true"))
	if running {
		f.Add("status", "running")
	}
	cs, err := r.cli.ContainerList(ctx, container.ListOptions{All: !running, Filters: f})
	if err != nil {
		return nil, engineErr(err, "docker: list network holders")
	}
	return cs, nil
}

// usedNetworkOwners returns the ids of the containers whose network
// namespace this runtime's sandbox containers share.
func (r *Runtime) usedNetworkOwners(ctx context.Context) (map[string]bool, error) {
	f := r.scopedFilter(filters.Arg("label", labelID))
	cs, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, engineErr(err, "docker: list sandboxes")
	}
	used := make(map[string]bool, len(cs))
	for _, c := range cs {
		if nm := container.NetworkMode(c.HostConfig.NetworkMode); nm.IsContainer() {
			used[nm.ConnectedContainer()] = true
		}
	}
	return used, nil
}

// liveHolder returns the inspected holder of sandbox c, or an error
// wrapping errHolderDown and runtime.ErrConflict when it is gone, stopped,
// or was restarted after the sandbox started (a new namespace the sandbox
// is not in).
func (r *Runtime) liveHolder(ctx context.Context, id string, c container.InspectResponse) (container.InspectResponse, error) {
	hc, err := r.cli.ContainerInspect(ctx, c.HostConfig.NetworkMode.ConnectedContainer())
	if err != nil {
		if classOf(err) == runtime.ErrNotFound {
			return hc, fmt.Errorf("docker: sandbox %s: %w: %w", id, errHolderDown, runtime.ErrConflict)
		}
		return hc, engineErr(err, "docker: sandbox %s: inspect its network holder", id)
	}
	if hc.State == nil || !hc.State.Running ||
		(c.State != nil && engineTime(hc.State.StartedAt).After(engineTime(c.State.StartedAt))) {
		return hc, fmt.Errorf("docker: sandbox %s: %w: %w", id, errHolderDown, runtime.ErrConflict)
	}
	return hc, nil
}

// removeHolder removes the holder sandbox id took, if any; with scoped
// set only when it carries this runtime's labels (the sandbox container
// is gone, so the id may be another instance's).
func (r *Runtime) removeHolder(ctx context.Context, id string, scoped bool) error {
	if scoped {
		hc, err := r.cli.ContainerInspect(ctx, holderName(id))
		if classOf(err) == runtime.ErrNotFound {
			return nil
		}
		if err != nil {
			return engineErr(err, "docker: sandbox %s: inspect its network holder", id)
		}
		if hc.Config == nil || hc.Config.Labels[labelNetnsHolder] != "true" || !r.scoped(hc.Config.Labels) {
			return nil
		}
	}
	if err := r.removeContainer(ctx, holderName(id)); err != nil {
		return fmt.Errorf("docker: sandbox %s: remove its network holder: %w", id, err)
	}
	return nil
}

// removeContainer force-removes a container by id or name; one already
// gone, or being removed by someone else, is not an error.
func (r *Runtime) removeContainer(ctx context.Context, ref string) error {
	err := r.cli.ContainerRemove(ctx, ref, container.RemoveOptions{Force: true})
	if removalInProgress(err) {
		err = r.waitRemoved(ctx, ref)
	}
	if err != nil && classOf(err) != runtime.ErrNotFound {
		return engineErr(err, "docker: remove container %s", ref)
	}
	return nil
}

var _ runtime.Runner = (*Runtime)(nil)

// Run keeps the warm network holders (Options.WarmNetworks) until ctx
// ends and removes the idle ones before it returns. Without Run, every
// sandbox gets a network namespace of its own at create.
func (r *Runtime) Run(ctx context.Context) {
	if r.netns != nil {
		r.netns.run(ctx)
	}
}

// removeTakenHolder removes holder hid that the failed create of sandbox
// id took, even when ctx is done.
func (r *Runtime) removeTakenHolder(ctx context.Context, id, hid string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := r.removeContainer(ctx, hid); err != nil {
		r.log.ErrorContext(ctx, "remove the network holder of a failed create", "sandbox", id, "holder", shortID(hid), "err", err)
	}
}

// holderOf returns the id of the network holder whose namespace sandbox
// container c shares, or "" (its own namespace, or its egress sidecar's).
func holderOf(c container.InspectResponse) string {
	if c.HostConfig == nil || !c.HostConfig.NetworkMode.IsContainer() || c.Config == nil || c.Config.Labels[labelEgressToken] != "" {
		return ""
	}
	return c.HostConfig.NetworkMode.ConnectedContainer()
}

// runningHolders returns the container ids of the running network holders.
func (r *Runtime) runningHolders(ctx context.Context) (map[string]bool, error) {
	hs, err := r.listHolders(ctx, true)
	if err != nil {
		return nil, err
	}
	up := make(map[string]bool, len(hs))
	for _, h := range hs {
		up[h.ID] = true
	}
	return up, nil
}
