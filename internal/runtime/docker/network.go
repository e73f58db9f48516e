package docker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// DefaultBridgeNetwork is the network bridge-mode sandboxes join when
// Options.IsolateSandboxes is on and Options.BridgeNetwork is empty.
const DefaultBridgeNetwork = "opensandbox"

const (
	// bridgeDriver is the engine's driver of bridge networks.
	bridgeDriver = "bridge"
	// iccOption is the bridge driver's switch for traffic between the
	// containers of one network (inter-container communication).
	iccOption = "com.docker.network.bridge.enable_icc"
)

// hostResolvConfs are read, in order, for the resolvers of egress
// sidecars on a user-defined network (see sidecarResolvers).
var hostResolvConfs = []string{"/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"}

// userNetworkName reports whether s can name a user-defined network: not
// one of the engine's own networks nor another container's namespace.
func userNetworkName(s string) bool {
	switch s {
	case networkBridge, networkHost, "none", "default":
		return false
	}
	return validName(s)
}

// setupNetwork decides what sandboxes and egress sidecars join and checks
// it with the engine. In bridge mode with isolation that is the managed
// network, created here when missing with inter-container communication
// off; a user-defined network named by NetworkMode must exist. Neither is
// ever removed: other servers, and sandboxes of this one, use them (only
// duplicates that racing creates made are, see managedNetwork).
func (r *Runtime) setupNetwork(ctx context.Context) error {
	o := &r.opts
	name := o.NetworkMode
	switch {
	case name == networkHost:
		r.network = name
		return nil
	case name == networkBridge && !*o.IsolateSandboxes:
		r.network = name
		nw, err := r.cli.NetworkInspect(ctx, networkBridge, network.InspectOptions{})
		if err != nil {
			return engineErr(err, "docker: inspect the default bridge network")
		}
		r.guardMetadata(ctx, nw)
		return nil
	case name == networkBridge:
		name = o.BridgeNetwork
	}
	nw, err := r.validatedNetwork(ctx, name)
	if err != nil {
		return err
	}
	// The name is what is configured; checkNetwork resolves it again to
	// a validated id before each create.
	r.network = nw.Name
	r.netMu.Lock()
	r.networkID = nw.ID
	r.netMu.Unlock()
	r.log.InfoContext(ctx, "sandbox network ready", "network", nw.Name, "id", shortID(nw.ID), "icc", iccOn(nw))
	r.guardMetadata(ctx, nw)
	if len(o.EgressDNSUpstreams) == 0 && (o.EgressPath != "" || o.EgressImage != "") {
		o.EgressDNSUpstreams = r.sidecarResolvers(ctx, nw.Name)
	}
	return nil
}

// checkNetwork runs before every sandbox or sidecar container is created
// and returns what the container's network mode must name: the id of the
// validated network (so a network swapped in after the check is not the
// one joined), or "host" / "bridge". The network behind the configured
// name may have changed since setupNetwork validated it —
// `docker network prune` removes it while no container uses it, and
// anyone may then create another of that name (with inter-container
// communication on, the engine's default). One inspect by name tells: the
// same id goes on. Otherwise the network is set up again as at start: a
// missing managed network is created, another network of the name is
// validated (managed: a bridge with inter-container communication off;
// user-defined: an existing bridge) and refused with the same error as at
// start, so the create fails before any container exists.
func (r *Runtime) checkNetwork(ctx context.Context) (string, error) {
	if r.network == networkHost || r.network == networkBridge {
		return r.network, nil
	}
	if nw, err := r.cli.NetworkInspect(ctx, r.network, network.InspectOptions{}); err == nil {
		r.netMu.Lock()
		same := nw.ID == r.networkID
		r.netMu.Unlock()
		if same {
			return nw.ID, nil
		}
	}
	// Gone, replaced, ambiguous or the engine failed: validate again, one
	// create at a time, so that concurrent creates create it only once.
	r.netMu.Lock()
	defer r.netMu.Unlock()
	nw, err := r.validatedNetwork(ctx, r.network)
	if err != nil {
		return "", err
	}
	if nw.ID != r.networkID {
		r.log.WarnContext(ctx, "the sandbox network was removed or replaced since it was last checked; the new one passed the checks",
			"network", nw.Name, "previous", shortID(r.networkID), "id", shortID(nw.ID), "icc", iccOn(nw))
		r.guardMetadata(ctx, nw)
		r.networkID = nw.ID
	}
	return nw.ID, nil
}

// validatedNetwork returns the network of that name once it passes the
// checks of the configured mode: the managed network in bridge mode
// (created when missing), else the operator's own network.
func (r *Runtime) validatedNetwork(ctx context.Context, name string) (network.Inspect, error) {
	if r.opts.NetworkMode == networkBridge {
		return r.managedNetwork(ctx, name)
	}
	return r.customNetwork(ctx, name)
}

// managedNetwork returns the isolated network of that name, creating it
// when missing. An existing one must have the bridge driver and
// inter-container communication off.
//
// Engines before API 1.44 do not serialise creates by name: servers that
// start together can each create one, and then the name is ambiguous and
// no container can start on it. The oldest is kept (every server picks
// the same one), the others are removed (see removeDuplicates).
func (r *Runtime) managedNetwork(ctx context.Context, name string) (network.Inspect, error) {
	nets, err := r.networksNamed(ctx, name)
	if err != nil {
		return network.Inspect{}, err
	}
	if len(nets) == 0 {
		_, createErr := r.cli.NetworkCreate(ctx, name, network.CreateOptions{
			Driver:  bridgeDriver,
			Options: map[string]string{iccOption: "false"},
			Labels:  map[string]string{labelManagedNetwork: "true"},
		})
		switch {
		case createErr == nil:
			r.log.InfoContext(ctx, "created the sandbox network", "network", name)
		case cerrdefs.IsConflict(createErr) || cerrdefs.IsAlreadyExists(createErr):
			// Another server created it meanwhile: check that one.
		default:
			return network.Inspect{}, engineErr(createErr, "docker: create sandbox network %s", name)
		}
		if nets, err = r.networksNamed(ctx, name); err != nil {
			return network.Inspect{}, err
		}
		if len(nets) == 0 && createErr != nil {
			return network.Inspect{}, fmt.Errorf("docker: create sandbox network %s: the engine says it exists (%w) but lists no network of that name: %w",
				name, createErr, runtime.ErrUnavailable)
		}
		if len(nets) == 0 {
			return network.Inspect{}, fmt.Errorf("docker: sandbox network %s is gone right after its creation: %w", name, runtime.ErrUnavailable)
		}
	}
	if len(nets) > 1 {
		if err := r.removeDuplicates(ctx, nets); err != nil {
			return network.Inspect{}, err
		}
	}
	nw, err := r.cli.NetworkInspect(ctx, nets[0].ID, network.InspectOptions{})
	if err != nil {
		return network.Inspect{}, engineErr(err, "docker: inspect sandbox network %s", name)
	}
	if nw.Driver != bridgeDriver || iccOn(nw) {
		return network.Inspect{}, fmt.Errorf("docker: network %s exists but is not isolated (driver %q, %s=%q; want driver bridge and %s=false): "+
			"remove it (docker network rm %s) and the server creates it isolated, or turn isolation off ([docker] isolate_sandboxes = false): %w",
			name, nw.Driver, iccOption, nw.Options[iccOption], iccOption, name, runtime.ErrInvalid)
	}
	return nw, nil
}

// removeDuplicates removes every network of nets but the first (the
// oldest), all of one name, that carries the managed label: those are
// what racing creates made. A network without it is someone else's and
// is never removed, nor is one a container is on (the engine refuses,
// and that is never forced). Either leaves the name ambiguous, so that no
// container can start on it: that is an error naming the networks left
// and the command that fixes it.
func (r *Runtime) removeDuplicates(ctx context.Context, nets []network.Summary) error {
	keep := nets[0]
	var (
		left []string
		errs []error
	)
	for _, n := range nets[1:] {
		if n.Labels[labelManagedNetwork] != "true" {
			left = append(left, shortID(n.ID))
			errs = append(errs, fmt.Errorf("%s has no %s label: not made by a server", shortID(n.ID), labelManagedNetwork))
			continue
		}
		err := r.cli.NetworkRemove(ctx, n.ID)
		switch {
		case err == nil:
			r.log.InfoContext(ctx, "removed a duplicate of the sandbox network made by a concurrent start",
				"network", n.Name, "removed", shortID(n.ID), "kept", shortID(keep.ID))
		case cerrdefs.IsNotFound(err):
			// Another server removed it.
		default:
			left = append(left, shortID(n.ID))
			errs = append(errs, fmt.Errorf("remove %s: %w", shortID(n.ID), err))
		}
	}
	if len(left) == 0 {
		return nil
	}
	return fmt.Errorf("docker: %d networks are named %s, so no container can start on it; the oldest, %s, is kept, and %s cannot be removed here (%w): "+
		"remove them (docker network rm %s): %w",
		len(nets), keep.Name, shortID(keep.ID), strings.Join(left, ", "), errors.Join(errs...), strings.Join(left, " "), runtime.ErrInvalid)
}

// customNetwork returns the user-defined network sandboxes were told to
// join: it must exist and have the bridge driver. Its containers may
// reach each other: that is the operator's choice, logged as a warning.
func (r *Runtime) customNetwork(ctx context.Context, name string) (network.Inspect, error) {
	nw, err := r.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return network.Inspect{}, fmt.Errorf("docker: network %s (network mode) does not exist: create it (docker network create --driver bridge %s) or use network mode bridge: %w",
			name, name, runtime.ErrInvalid)
	}
	if err != nil {
		return network.Inspect{}, engineErr(err, "docker: inspect network %s", name)
	}
	if nw.Driver != bridgeDriver {
		return network.Inspect{}, fmt.Errorf("docker: network %s has driver %q; sandboxes need a bridge network: %w", name, nw.Driver, runtime.ErrInvalid)
	}
	if iccOn(nw) {
		r.log.WarnContext(ctx, "sandboxes on this network can reach each other: create it with -o "+iccOption+"=false to prevent it",
			"network", name)
	}
	return nw, nil
}

// networksNamed lists the networks called exactly name, oldest first.
func (r *Runtime) networksNamed(ctx context.Context, name string) ([]network.Summary, error) {
	// The engine's name filter matches substrings.
	all, err := r.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return nil, engineErr(err, "docker: list networks named %s", name)
	}
	nets := slices.DeleteFunc(all, func(n network.Summary) bool { return n.Name != name })
	slices.SortFunc(nets, func(a, b network.Summary) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return nets, nil
}

// iccOn reports whether containers of nw may reach each other; the
// engine's default, when the option is absent, is yes.
func iccOn(nw network.Inspect) bool {
	on, err := strconv.ParseBool(nw.Options[iccOption])
	return err != nil || on
}

// sidecarResolvers returns the resolvers egress sidecars on the
// user-defined network nw forward allowed names to. There the engine
// gives containers only its embedded resolver (nameserver 127.0.0.11),
// which the sidecar cannot use: port 53 is redirected to the sidecar
// itself. So it gets what the engine gives containers on its default
// bridge: the host's non-loopback nameservers (those of systemd-resolved
// when /etc/resolv.conf names only its local stub). Only a local engine
// shares this host's resolvers; otherwise nothing is returned and
// [egress] dns_upstream must be set.
func (r *Runtime) sidecarResolvers(ctx context.Context, nw string) []string {
	if !strings.HasPrefix(r.cli.DaemonHost(), "unix://") {
		r.log.WarnContext(ctx, "the engine is remote: set the egress DNS upstreams ([egress] dns_upstream), or sidecars on this network find no resolver",
			"network", nw, "engine", r.cli.DaemonHost())
		return nil
	}
	for _, path := range hostResolvConfs {
		if ns := nameservers(path); len(ns) > 0 {
			r.log.DebugContext(ctx, "egress sidecars use the host's resolvers", "network", nw, "from", path, "resolvers", ns)
			return ns
		}
	}
	r.log.WarnContext(ctx, "no non-loopback nameserver on this host: set the egress DNS upstreams ([egress] dns_upstream), or sidecars on this network find no resolver",
		"network", nw, "read", hostResolvConfs)
	return nil
}

// nameservers returns the non-loopback nameserver addresses of a
// resolv.conf file; none when it cannot be read.
func nameservers(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(f[1])
		if err != nil || a.IsLoopback() || a.Zone() != "" {
			continue
		}
		out = append(out, a.String())
	}
	return out
}

// shortID is the 12-character form of an engine id.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
