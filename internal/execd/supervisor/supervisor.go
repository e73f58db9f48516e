package supervisor

import (
	"context"
	"errors"
	"sync/atomic"
)

// ErrNoEntrypoint is returned by Run when Config.Entrypoint is empty: without
// an entrypoint execd serves directly and needs no supervisor.
var ErrNoEntrypoint = errors.New("supervisor: no entrypoint to supervise")

// Supervisor runs one supervision session; see Run.
type Supervisor struct {
	cfg      Config
	restarts atomic.Int64
	ran      atomic.Bool
}

// New returns a supervisor for cfg. It starts nothing until Run.
func New(cfg Config) *Supervisor {
	return &Supervisor{cfg: cfg}
}

// Restarts reports how many times the server has been restarted after dying
// while the entrypoint ran. It is safe to call concurrently with Run.
func (s *Supervisor) Restarts() int {
	return int(s.restarts.Load())
}

// Run is New(cfg).Run(ctx).
func Run(ctx context.Context, cfg Config) (exitCode int, err error) {
	return New(cfg).Run(ctx)
}
