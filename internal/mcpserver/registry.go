package mcpserver

import (
	"context"
	"fmt"
	"sync"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// registry holds the sandboxes this process is connected to, by id. It is
// shared by every MCP session of the process.
type registry struct {
	client *sandbox.Client

	mu    sync.Mutex
	boxes map[string]*sandbox.Sandbox
}

func newRegistry(c *sandbox.Client) *registry {
	return &registry{client: c, boxes: make(map[string]*sandbox.Sandbox)}
}

func (r *registry) put(sb *sandbox.Sandbox) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.boxes[sb.ID()] = sb
}

func (r *registry) remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.boxes, id)
}

func (r *registry) has(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.boxes[id]
	return ok
}

// get returns the connected sandbox id. An unknown id is an error telling
// the model what to do, unless connectIfMissing is set, in which case it
// connects (with the SDK's default readiness wait) and remembers the handle.
func (r *registry) get(ctx context.Context, id string, connectIfMissing bool) (*sandbox.Sandbox, error) {
	if id == "" {
		return nil, errMissing("sandbox_id")
	}
	r.mu.Lock()
	sb, ok := r.boxes[id]
	r.mu.Unlock()
	if ok {
		return sb, nil
	}
	if !connectIfMissing {
		return nil, fmt.Errorf("sandbox %q is not connected in this MCP server: call sandbox_connect with this sandbox_id first, or pass connect_if_missing: true", id)
	}
	sb, err := r.client.Connect(ctx, id, sandbox.ConnectOptions{})
	if err != nil {
		return nil, err // the SDK names the call and the id
	}
	r.put(sb)
	return sb, nil
}
