// Package runtime is the contract between the lifecycle server and the
// engines that run sandboxes (Docker today, Kubernetes later). The server
// drives a Runtime; each driver lives in a subpackage and implements it.
// The engine is the source of truth for sandboxes: a driver keeps what it
// needs to answer Get and List in the engine itself (labels, objects), so
// a restarted server loses nothing.
//
// Drivers report failures with the error classes below (wrapped with
// context); the server maps the classes, never message text, to HTTP
// statuses.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Error classes.
var (
	ErrNotFound     = errors.New("not found")
	ErrInvalid      = errors.New("invalid request")
	ErrConflict     = errors.New("conflict with the current state")
	ErrNotSupported = errors.New("not supported by this runtime")
	ErrUnavailable  = errors.New("engine unavailable")

	// ErrImagePull marks a create that failed because the image could not
	// be pulled (bad reference, credentials or registry); it is also an
	// ErrInvalid.
	ErrImagePull = fmt.Errorf("image pull failed: %w", ErrInvalid)

	// ErrDiskLimitUnsupported marks a create with Resources.DiskBytes on an
	// engine that cannot enforce a disk size: the sandbox is not created
	// rather than run without the limit. It is also an ErrNotSupported.
	ErrDiskLimitUnsupported = fmt.Errorf("disk limits are not enforced by this engine: %w", ErrNotSupported)

	// ErrHostPathNotAllowed marks a create refused because a host volume
	// (or its subPath) does not lie under a host path the driver was
	// configured to allow; it is also an ErrInvalid.
	ErrHostPathNotAllowed = fmt.Errorf("host path not allowed: %w", ErrInvalid)
)

// Classify tags err, an engine's own error, with class (one of the
// classes above): errors.Is finds both, and the message is err's. Drivers
// wrap what their engine returns with it.
func Classify(class, err error) error { return &classified{class: class, err: err} }

type classified struct {
	class error
	err   error
}

func (c *classified) Error() string   { return c.err.Error() }
func (c *classified) Unwrap() []error { return []error{c.class, c.err} }

// Spec is everything needed to create a sandbox. The server validates and
// normalises the request before building it.
type Spec struct {
	ID string
	// Image is the image reference to start from; empty when SnapshotID
	// is set.
	Image     string
	ImageAuth *RegistryAuth
	// SnapshotID starts the sandbox from a snapshot the runtime made.
	SnapshotID string
	// Entrypoint is the user's command (never empty); it is reported back
	// unchanged by Get and List.
	Entrypoint []string
	Env        map[string]string
	// Metadata is the user's metadata, returned by Get and List.
	Metadata map[string]string
	// ExpiresAt is when the sandbox expires; nil means manual cleanup.
	ExpiresAt *time.Time
	Resources Resources
	// Requests is what a scheduler reserves (cpu, memory, disk; zero =
	// the limit). Kubernetes makes it the pod's requests; Docker has no
	// scheduler and ignores it.
	Requests Resources
	Volumes  []Volume
	Platform *Platform
	// ExecdToken is the access token execd inside the sandbox requires.
	ExecdToken string
	// Egress, when set, puts the sandbox behind an egress sidecar that
	// owns its network and enforces the policy.
	Egress *Egress
	// IsolatedExecution asks for execd's isolated sessions in this
	// sandbox (create extension sandbox.ExtIsolatedExecution). The Docker
	// driver grants it when configured to and fails the create with
	// ErrInvalid otherwise; a driver without support ignores it, and
	// execd in the sandbox then reports isolation unavailable.
	IsolatedExecution bool
	// Extensions are the create request's extensions, opaque strings;
	// a driver uses the keys it knows (Kubernetes: those prefixed
	// "opensandbox.extensions." become pod annotations).
	Extensions map[string]string
	// PoolRef, when set, allocates the sandbox from a warm pool of that
	// name ("*": any pool whose template fits) instead of starting a pod
	// of its own (create extension "poolRef"). The pool's template decides
	// what runs; Image and Entrypoint are only reported back. Drivers
	// without pools fail the create with ErrNotSupported.
	PoolRef string
}

// Egress configures a sandbox's egress sidecar.
type Egress struct {
	// Policy is the NetworkPolicy as JSON, already validated.
	Policy []byte
	// Token guards the sidecar's API (OPENSANDBOX-EGRESS-AUTH).
	Token string
	// CredentialProxy turns on the credential vault's TLS proxy; the
	// sandbox then trusts the sidecar's per-sandbox CA.
	CredentialProxy bool
}

// RegistryAuth is credentials for pulling an image.
type RegistryAuth struct {
	Username, Password string
}

// Resources are the limits of a sandbox; zero means no limit.
type Resources struct {
	NanoCPUs    int64 // 1e9 = one core
	MemoryBytes int64
	GPUs        int // number of GPUs; -1 = all
	// DiskBytes caps what the sandbox may write to its own filesystem
	// (Kubernetes' ephemeral-storage): the image's files are not counted,
	// volumes are not part of it. A driver that cannot enforce it fails
	// the create with ErrDiskLimitUnsupported, never ignores it.
	DiskBytes int64
}

// DiskLimitChecker is implemented by drivers that can tell, before any
// create, whether their engine enforces Resources.DiskBytes: nil when it
// does, an error of class ErrDiskLimitUnsupported when it cannot, another
// class (ErrUnavailable) when the engine could not be asked.
type DiskLimitChecker interface {
	CheckDiskLimit(ctx context.Context) error
}

// Volume is a mount of a host path or of a named volume.
type Volume struct {
	Name      string
	MountPath string
	ReadOnly  bool
	SubPath   string
	// HostPath is set for host bind mounts: an absolute path on the
	// engine's host. The driver resolves it and checks it against its
	// allow-list (ErrHostPathNotAllowed).
	HostPath string
	// ClaimName is set for named volumes.
	ClaimName string
	// CreateIfNotExists creates a missing named volume; DeleteOnTermination
	// removes a volume the runtime created when the sandbox is deleted.
	CreateIfNotExists   bool
	DeleteOnTermination bool
	// StorageClass, Storage (a quantity such as "10Gi") and AccessModes
	// (comma-separated: "ReadWriteOnce,ReadOnlyMany"; a string so that a
	// Volume stays comparable) describe a claim the runtime creates;
	// engines without such notions (Docker) ignore them.
	StorageClass string
	Storage      string
	AccessModes  string
}

// Platform is an operating system and CPU architecture.
type Platform struct {
	OS, Arch string
}

// Sandbox is a sandbox as the runtime sees it.
type Sandbox struct {
	ID         string
	Image      string // the image it was created from ("" for snapshots)
	SnapshotID string
	Entrypoint []string
	Metadata   map[string]string
	Platform   *Platform
	State      string // one of the sandbox.State* values
	Reason     string
	Message    string
	// LastTransitionAt is when State was entered, when known.
	LastTransitionAt time.Time
	CreatedAt        time.Time
	// ExpiresAt is the expiry given at creation; nil means manual cleanup.
	ExpiresAt  *time.Time
	ExecdToken string
	// EgressToken is the sidecar's API token; "" when the sandbox has no
	// egress sidecar.
	EgressToken string
	// Resources are the limits the sandbox was created with (zero: none).
	Resources Resources
}

// Address is where the server reaches a port of a sandbox over HTTP:
// http://Host:Port + PathPrefix + path.
type Address struct {
	Host       string
	Port       int
	PathPrefix string // e.g. "/proxy/3000" when the port is reached through execd
}

// LogOptions select container logs.
type LogOptions struct {
	Tail  int           // last N lines; 0 = all
	Since time.Duration // only newer than now-Since; 0 = all
}

// Event is a lifecycle event of a sandbox reported by the engine.
type Event struct {
	Time    time.Time
	Action  string
	Message string
}

// Runtime runs sandboxes. All methods are safe for concurrent use.
type Runtime interface {
	// Create creates and starts a sandbox; it returns once the sandbox
	// runs (or has failed).
	Create(ctx context.Context, spec Spec) (Sandbox, error)
	Get(ctx context.Context, id string) (Sandbox, error)
	// List returns every sandbox of this runtime, in no particular order.
	List(ctx context.Context) ([]Sandbox, error)
	// Delete removes the sandbox and everything it created.
	Delete(ctx context.Context, id string) error
	// Pause freezes every process of the sandbox; ErrConflict unless running.
	Pause(ctx context.Context, id string) error
	// Resume thaws a paused sandbox; ErrConflict unless paused.
	Resume(ctx context.Context, id string) error
	// Address tells how the server reaches port inside the sandbox.
	Address(ctx context.Context, id string, port int) (Address, error)

	Snapshotter
	Diagnostics
}

// Snapshotter saves sandboxes' filesystems so new sandboxes can start from them.
type Snapshotter interface {
	// CommitSnapshot saves the filesystem of sandbox sandboxID as
	// snapshot snapshotID; it blocks until the snapshot is complete.
	CommitSnapshot(ctx context.Context, sandboxID, snapshotID string) error
	// DeleteSnapshot removes what CommitSnapshot stored; ErrNotFound if
	// there is nothing.
	DeleteSnapshot(ctx context.Context, snapshotID string) error
}

// SandboxNetworks is implemented by runtimes whose sandboxes reach the
// host from addresses of their own: the server uses it to tell a request
// made from inside a sandbox, which must then carry the API key even on
// routes that are open to everyone else.
type SandboxNetworks interface {
	// SandboxSubnets returns the address ranges sandbox traffic comes
	// from, and the addresses in them that are the host's own (gateways).
	SandboxSubnets(ctx context.Context) (subnets []netip.Prefix, host []netip.Addr, err error)
}

// Sweeper is implemented by runtimes that can leave pieces behind when work
// is interrupted (a server that died between two steps of a create): Sweep
// removes what no sandbox owns any more. The server calls it periodically;
// failures are the runtime's to log.
type Sweeper interface {
	Sweep(ctx context.Context)
}

// Runner is implemented by runtimes with background work of their own (the
// Docker driver keeps network namespaces ready ahead of creates). The
// server calls Run once; it returns when ctx ends, after that work has
// stopped and what it kept for later creates is released.
type Runner interface {
	Run(ctx context.Context)
}

// Diagnostics reads what the engine knows about a sandbox.
type Diagnostics interface {
	Logs(ctx context.Context, id string, opts LogOptions) ([]byte, error)
	// Inspect returns the engine's description of the sandbox as JSON.
	Inspect(ctx context.Context, id string) ([]byte, error)
	Events(ctx context.Context, id string, limit int) ([]Event, error)
}
