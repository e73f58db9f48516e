package runtime

import (
	"context"
	"encoding/json"
	"time"
)

// Pools is implemented by runtimes that keep warm pools of sandboxes the
// engine itself refills (the Kubernetes driver, on the Pool resource that
// the operator serves). The server serves the /pools routes through it and
// answers them with "not supported" on a runtime without it.
//
// Errors are of the runtime classes: ErrNotFound for a pool that does not
// exist, ErrConflict for a create whose name is taken, ErrInvalid (with a
// message naming the offending field) for a pool the engine would refuse,
// ErrUnavailable when the engine cannot be reached.
type Pools interface {
	// CreatePool creates the pool p (Status and CreatedAt are ignored)
	// and returns it as stored.
	CreatePool(ctx context.Context, p Pool) (Pool, error)
	// ListPools returns every pool, in no particular order.
	ListPools(ctx context.Context) ([]Pool, error)
	// GetPool returns the pool called name.
	GetPool(ctx context.Context, name string) (Pool, error)
	// UpdatePoolCapacity replaces the capacity of the pool called name,
	// leaving the rest of it alone, and returns the pool as stored. It
	// does not lose a concurrent change to other fields.
	UpdatePoolCapacity(ctx context.Context, name string, c PoolCapacity) (Pool, error)
	// DeletePool deletes the pool called name; the engine removes its idle
	// sandboxes.
	DeletePool(ctx context.Context, name string) error
}

// Pool is a warm pool as the runtime sees it.
type Pool struct {
	Name string
	// Template is the pool's pod template as JSON: a Kubernetes
	// PodTemplateSpec ({"metadata": ..., "spec": {"containers": [...]}}).
	Template json.RawMessage
	// CapacitySpec bounds the pool's size.
	CapacitySpec PoolCapacity
	// Status is what the engine last observed; zero until it has.
	Status PoolStatus
	// CreatedAt is when the pool was created.
	CreatedAt time.Time
}

// PoolCapacity bounds a pool: its idle sandboxes stay within [BufferMin,
// BufferMax] and all of them, idle and allocated, within [PoolMin,
// PoolMax]. Every number is at least 0, BufferMin ≤ BufferMax and PoolMin
// ≤ PoolMax.
type PoolCapacity struct {
	BufferMax int32
	BufferMin int32
	PoolMax   int32
	PoolMin   int32
}

// PoolStatus is the observed state of a pool.
type PoolStatus struct {
	// Total is how many sandboxes the pool has.
	Total int32
	// Allocated is how many of them are in use.
	Allocated int32
	// Available is how many are idle and ready to be claimed.
	Available int32
	// Revision names the pool's current template ("" until observed).
	Revision string
}
