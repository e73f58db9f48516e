package docker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
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
	return sandboxFromInspect(c), nil
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
	f := filters.NewArgs(filters.Arg("label", labelID))
	for k, v := range r.opts.Labels {
		f.Add("label", k+"="+v)
	}
	cs, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, engineErr(err, "docker: list sandboxes")
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
