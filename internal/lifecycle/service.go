package lifecycle

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/metrics"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// DefaultMinTimeout is the lowest sandbox timeout when Config.MinTimeout
// is zero.
const DefaultMinTimeout = 60 * time.Second

// DefaultSweepInterval is how often leftovers of interrupted work are
// looked for.
const DefaultSweepInterval = 10 * time.Minute

// Store is what the core keeps outside the runtime: snapshot records and
// per-sandbox overrides. internal/store implements it.
type Store interface {
	PutSnapshot(ctx context.Context, s sandbox.Snapshot) error
	// GetSnapshot fails with an error matching runtime.ErrNotFound when
	// there is no such snapshot.
	GetSnapshot(ctx context.Context, id string) (sandbox.Snapshot, error)
	ListSnapshots(ctx context.Context) ([]sandbox.Snapshot, error)
	DeleteSnapshot(ctx context.Context, id string) error
	// GetOverrides returns the zero Overrides when none are stored.
	GetOverrides(ctx context.Context, sandboxID string) (Overrides, error)
	PutOverrides(ctx context.Context, sandboxID string, o Overrides) error
	DeleteOverrides(ctx context.Context, sandboxID string) error
	CreateJournal
}

// OverridesUpdater is a Store whose overrides several servers may change
// at once (kubestore: the cluster is shared). UpdateOverrides applies
// change to the overrides as stored now, in one read-modify-write no
// other writer can interleave with (a conflict re-reads and re-applies
// change); an error from change aborts the update and is returned as is.
// Without it, a renew on one server and a metadata patch on another could
// each write back what they read, and the patch would undo the renew.
type OverridesUpdater interface {
	UpdateOverrides(ctx context.Context, sandboxID string, change func(*Overrides) error) error
}

// Overrides are the changes made to a sandbox after it was created, which
// the runtime keeps no record of.
type Overrides struct {
	// Metadata, when non-nil, is the sandbox's whole metadata after
	// patches; it replaces what the runtime reports. It has no omitempty
	// so that an empty map (every key deleted) survives a JSON round trip
	// instead of turning back into nil.
	Metadata map[string]string `json:"metadata"`
	// ExpiresAt, when non-nil, is the expiry after a renew; it replaces
	// what the runtime reports.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// Config is what a Service is built from. Runtime and Store are required.
type Config struct {
	Runtime runtime.Runtime
	Store   Store
	// MaxTimeout caps how far ahead a renew may set the expiry; 0 means
	// no cap. (Front ends apply it to create timeouts too.)
	MaxTimeout time.Duration
	// Logger receives the core's logs; nil means slog.Default().
	Logger *slog.Logger
	// LoggerFrom, when set, returns the logger of a call's context (a
	// front end's request logger, say) or nil to use Logger.
	LoggerFrom func(ctx context.Context) *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// SweepInterval is how often Run asks a runtime.Sweeper to remove
	// leftovers; 0 means DefaultSweepInterval.
	SweepInterval time.Duration
	// Metrics records create and delete latencies and expiry actions;
	// nil records nothing.
	Metrics *metrics.Metrics
}

// Service is the sandbox lifecycle. Build it with New and run Run for
// its background work; every method is safe for concurrent use.
type Service struct {
	cfg     Config
	metrics *metrics.Metrics // nil-safe
	rt      runtime.Runtime
	store   Store
	log     *slog.Logger
	now     func() time.Time

	// locks serialises the read-modify-write operations on one sandbox
	// (metadata patch, renew, delete, expiry).
	locks keyedMutex
	// expiry holds the deadlines of sandboxes that expire.
	expiry *expiry
	// tokens caches execd tokens.
	tokens tokenCache

	// bg is the context of background work started by calls (snapshot
	// workers); Run cancels it when it returns.
	bg       context.Context
	cancelBg context.CancelFunc
	workers  sync.WaitGroup
	// capturing holds the ids of snapshots this process is taking, so
	// that Run's recovery leaves them alone.
	capturing sync.Map
	// creates are the creates this process is running (journal.go).
	creates createJournal
	running atomic.Bool
}

// New checks cfg and builds a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("lifecycle: Config.Runtime is required")
	}
	if cfg.Store == nil {
		return nil, errors.New("lifecycle: Config.Store is required")
	}
	if cfg.MaxTimeout < 0 {
		return nil, errors.New("lifecycle: MaxTimeout must not be negative")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Service{cfg: cfg, rt: cfg.Runtime, store: cfg.Store, log: cfg.Logger, now: cfg.Now, expiry: newExpiry(), metrics: cfg.Metrics}
	s.bg, s.cancelBg = context.WithCancel(context.Background())
	return s, nil
}

// Runtime returns the runtime the service drives, for the calls that
// pass straight through (addresses, diagnostics).
func (s *Service) Runtime() runtime.Runtime { return s.rt }

// logFrom is the logger for a call made with ctx.
func (s *Service) logFrom(ctx context.Context) *slog.Logger {
	if s.cfg.LoggerFrom != nil {
		if l := s.cfg.LoggerFrom(ctx); l != nil {
			return l
		}
	}
	return s.log
}

// NewUUID is a random (version 4) UUID in its canonical 36-character
// form: the ids of sandboxes and snapshots.
func NewUUID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand panics instead)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// newToken is a fresh access token: 32 random bytes in hex.
func newToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}
