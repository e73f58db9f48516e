package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// inspect returns the container of sandbox id, or ErrNotFound when there
// is none or it is not one of ours.
func (r *Runtime) inspect(ctx context.Context, id string) (container.InspectResponse, error) {
	if id == "" {
		return container.InspectResponse{}, fmt.Errorf("docker: empty sandbox id: %w", runtime.ErrInvalid)
	}
	if !validName(containerName(id)) {
		return container.InspectResponse{}, fmt.Errorf("docker: sandbox %q: no such sandbox: %w", id, runtime.ErrNotFound)
	}
	c, err := r.cli.ContainerInspect(ctx, containerName(id))
	if err != nil {
		return c, engineErr(err, "docker: sandbox %s", id)
	}
	if c.ContainerJSONBase == nil || c.Config == nil || !r.owns(c.Config.Labels, id) {
		return container.InspectResponse{}, fmt.Errorf("docker: sandbox %s: container %s is not a sandbox of this runtime: %w",
			id, containerName(id), runtime.ErrNotFound)
	}
	return c, nil
}

// Get returns sandbox id; runtime.ErrNotFound if there is none.
func (r *Runtime) Get(ctx context.Context, id string) (runtime.Sandbox, error) {
	c, err := r.inspect(ctx, id)
	if err != nil {
		return runtime.Sandbox{}, err
	}
	sb := sandboxFromInspect(c)
	if sb.State != sandbox.StateRunning {
		return sb, nil
	}
	if sb.EgressToken != "" {
		if _, err := r.liveSidecar(ctx, id, c); errors.Is(err, errSidecarDown) {
			markSidecarDown(&sb)
		} else if err != nil {
			return runtime.Sandbox{}, err
		}
	} else if holderOf(c) != "" {
		if _, err := r.liveHolder(ctx, id, c); errors.Is(err, errHolderDown) {
			markHolderDown(&sb)
		} else if err != nil {
			return runtime.Sandbox{}, err
		}
	}
	return sb, nil
}

// markHolderDown reports a running sandbox whose network holder is gone
// as failed: it has no network left.
func markHolderDown(sb *runtime.Sandbox) {
	sb.State, sb.Reason, sb.Message = sandbox.StateFailed, "NETWORK_HOLDER_DOWN", errHolderDown.Error()
}

// markSidecarDown reports a running sandbox whose sidecar is gone as
// failed: it has no network left.
func markSidecarDown(sb *runtime.Sandbox) {
	sb.State, sb.Reason, sb.Message = sandbox.StateFailed, "EGRESS_SIDECAR_DOWN", errSidecarDown.Error()
}

func sandboxFromInspect(c container.InspectResponse) runtime.Sandbox {
	sb := sandboxFromLabels(newLabelView(c.Config.Labels))
	if len(c.Config.Cmd) > 0 {
		sb.Entrypoint = append([]string(nil), c.Config.Cmd...)
	}
	created := engineTime(c.Created)
	if sb.CreatedAt.IsZero() {
		sb.CreatedAt = created
	}
	st := stateOf(c.State)
	if st.At.IsZero() {
		st.At = created
	}
	sb.State, sb.Reason, sb.Message, sb.LastTransitionAt = st.State, st.Reason, st.Message, st.At
	return sb
}

// List returns every sandbox of this runtime. It reads the engine's
// container list and inspects only containers that have exited (the
// list lacks their exit code). For live sandboxes LastTransitionAt is
// the creation time: the list has no start time.
func (r *Runtime) List(ctx context.Context) ([]runtime.Sandbox, error) {
	f := r.scopedFilter(filters.Arg("label", labelID))
	cs, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, engineErr(err, "docker: list sandboxes")
	}
	sidecarUp, err := r.runningSidecars(ctx)
	if err != nil {
		return nil, err
	}
	holderUp, err := r.runningHolders(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]runtime.Sandbox, 0, len(cs))
	for _, c := range cs {
		id := c.Labels[labelID]
		// A container made from a snapshot image by someone else
		// inherits our id label; only sandbox-<id> is the sandbox.
		if !r.owns(c.Labels, id) || !slices.Contains(c.Names, "/"+containerName(id)) {
			continue
		}
		sb := sandboxFromLabels(newLabelView(c.Labels))
		if sb.CreatedAt.IsZero() {
			sb.CreatedAt = time.Unix(c.Created, 0).UTC()
		}
		if st, ok := summaryState(c.State, sb.CreatedAt); ok {
			sb.State, sb.Reason, sb.Message, sb.LastTransitionAt = st.State, st.Reason, st.Message, st.At
			if sb.State == sandbox.StateRunning {
				nm := container.NetworkMode(c.HostConfig.NetworkMode)
				switch {
				case sb.EgressToken != "" && !sidecarUp[sb.ID]:
					markSidecarDown(&sb)
				case sb.EgressToken == "" && nm.IsContainer() && !holderUp[nm.ConnectedContainer()]:
					markHolderDown(&sb)
				}
			}
			out = append(out, sb)
			continue
		}
		full, err := r.cli.ContainerInspect(ctx, c.ID)
		if err != nil {
			if classOf(err) == runtime.ErrNotFound {
				continue // removed since the list was read
			}
			return nil, engineErr(err, "docker: list sandboxes: inspect %s", id)
		}
		out = append(out, sandboxFromInspect(full))
	}
	return out, nil
}

// runningSidecars returns the ids of the sandboxes whose egress sidecar runs.
func (r *Runtime) runningSidecars(ctx context.Context) (map[string]bool, error) {
	f := r.scopedFilter(filters.Arg("label", labelEgressOf), filters.Arg("status", "running"))
	cs, err := r.cli.ContainerList(ctx, container.ListOptions{Filters: f})
	if err != nil {
		return nil, engineErr(err, "docker: list egress sidecars")
	}
	up := make(map[string]bool, len(cs))
	for _, c := range cs {
		up[c.Labels[labelEgressOf]] = true
	}
	return up, nil
}
