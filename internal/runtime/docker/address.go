package docker

import (
	"context"
	"fmt"
	"strconv"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/go-connections/nat"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

var (
	execdPortKey = nat.Port(strconv.Itoa(sandbox.ExecdPort) + "/tcp")
	httpPortKey  = nat.Port(strconv.Itoa(sandbox.HTTPPort) + "/tcp")
)

// Address tells how to reach port of sandbox id. In bridge mode (and on
// a network) execd's port and the HTTP port are published on HostIP; the
// HTTP port is reached on its own published port and every other port,
// execd's included, through execd's published port under /proxy/<port>.
// Behind an egress sidecar its API port is the sidecar's own published
// port. In host mode ports are reached directly. ErrConflict when the
// sandbox is not running.
func (r *Runtime) Address(ctx context.Context, id string, port int) (runtime.Address, error) {
	if port < 1 || port > 65535 {
		return runtime.Address{}, fmt.Errorf("docker: sandbox %s: port %d outside 1..65535: %w", id, port, runtime.ErrInvalid)
	}
	c, err := r.inspect(ctx, id)
	if err != nil {
		return runtime.Address{}, err
	}
	if c.State == nil || !c.State.Running || c.State.Paused {
		st := stateOf(c.State)
		return runtime.Address{}, fmt.Errorf("docker: sandbox %s is not running (%s): %w", id, st.State, runtime.ErrConflict)
	}
	if err := r.useSidecarPorts(ctx, id, &c); err != nil {
		return runtime.Address{}, err
	}
	return r.addressOf(c, id, port)
}

// useSidecarPorts gives a sandbox in the network namespace of an egress
// sidecar or a network holder that container's network settings: its
// ports are published there. ErrConflict when it is not running.
func (r *Runtime) useSidecarPorts(ctx context.Context, id string, c *container.InspectResponse) error {
	if c.HostConfig == nil || !c.HostConfig.NetworkMode.IsContainer() {
		return nil
	}
	live := r.liveSidecar
	if holderOf(*c) != "" {
		live = r.liveHolder
	}
	sc, err := live(ctx, id, *c)
	if err != nil {
		return err
	}
	c.NetworkSettings = sc.NetworkSettings
	return nil
}

// addressOf computes the address of port from an inspected container.
func (r *Runtime) addressOf(c container.InspectResponse, id string, port int) (runtime.Address, error) {
	host := r.opts.HostIP
	if c.HostConfig != nil && c.HostConfig.NetworkMode.IsHost() {
		if port != sandbox.ExecdPort {
			return runtime.Address{Host: host, Port: port}, nil
		}
		p, err := strconv.Atoi(newLabelView(c.Config.Labels).str(labelExecdPort))
		if err != nil || p <= 0 {
			return runtime.Address{}, fmt.Errorf("docker: sandbox %s: host-network container has no valid %s label: %w", id, labelExecdPort, runtime.ErrUnavailable)
		}
		return runtime.Address{Host: host, Port: p}, nil
	}
	if port == sandbox.EgressPort && c.Config != nil && c.Config.Labels[labelEgressToken] != "" {
		// The sidecar's API is reached on its own published port, never
		// through execd: its token and vault secrets must not pass through
		// a process the sandbox could replace.
		p, err := publishedPort(c, egressPortKey)
		if err != nil {
			return runtime.Address{}, fmt.Errorf("docker: sandbox %s: %w", id, err)
		}
		return runtime.Address{Host: host, Port: p}, nil
	}
	if port == sandbox.HTTPPort {
		p, err := publishedPort(c, httpPortKey)
		if err != nil {
			return runtime.Address{}, fmt.Errorf("docker: sandbox %s: %w", id, err)
		}
		return runtime.Address{Host: host, Port: p}, nil
	}
	// Every other port, execd's own included, is execd's published port
	// under /proxy/{port}, the shape upstream's clients and suites expect;
	// execd serves /proxy/44772 itself, without a hop.
	p, err := publishedPort(c, execdPortKey)
	if err != nil {
		return runtime.Address{}, fmt.Errorf("docker: sandbox %s: %w", id, err)
	}
	return runtime.Address{Host: host, Port: p, PathPrefix: "/proxy/" + strconv.Itoa(port)}, nil
}

// publishedPort is the host port the engine published container port k on.
func publishedPort(c container.InspectResponse, k nat.Port) (int, error) {
	if c.NetworkSettings != nil {
		for _, b := range c.NetworkSettings.Ports[k] {
			if p, err := strconv.Atoi(b.HostPort); err == nil && p > 0 {
				return p, nil
			}
		}
	}
	return 0, fmt.Errorf("container port %s is not published: %w", k, runtime.ErrUnavailable)
}
