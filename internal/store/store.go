// Package store is the lifecycle server's embedded store: one bbolt file
// that keeps what has no home in the runtime — snapshot records, the
// metadata/expiry overrides of sandboxes and the journal of creates in
// progress. Sandboxes themselves are never
// stored here; the runtime is their source of truth.
//
// The file is opened by one process at a time: a second Open of the same
// file fails after a short wait with ErrLocked instead of hanging.
//
// Missing records are reported with runtime.ErrNotFound (wrapped), so the
// server maps them like every other not-found. Overrides are stored as
// JSON of whatever value the caller passes, which keeps this package free
// of the server's types: it must not import internal/server.
//
//	st, err := store.Open(store.Options{Path: "/var/lib/opensandbox/opensandbox.db"})
//	if err != nil { ... }
//	defer st.Close()
//	err = st.PutSnapshot(ctx, snap)
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// ErrLocked is returned (wrapped) by Open when another process holds the
// store file.
var ErrLocked = errors.New("store is locked by another process")

// DefaultLockTimeout is how long Open waits for another process to release
// the file when Options.LockTimeout is zero.
const DefaultLockTimeout = time.Second

// Bucket names.
var (
	snapshotsBucket = []byte("snapshots")
	overridesBucket = []byte("overrides")
	createsBucket   = []byte("creates") // see journal.go
)

// Options configure Open.
type Options struct {
	// Path is the store file; required. Its parent directory is created
	// with mode 0700 when missing, the file itself with mode 0600.
	Path string
	// LockTimeout is how long to wait for another process holding the
	// file before failing with ErrLocked; 0 means DefaultLockTimeout.
	LockTimeout time.Duration
}

// Store is an open store file. Its methods are safe for concurrent use.
type Store struct {
	db   *bolt.DB
	path string
}

// Open opens (creating when missing) the store file at opts.Path.
func Open(opts Options) (*Store, error) {
	if opts.Path == "" {
		return nil, fmt.Errorf("open store: %w: empty path", runtime.ErrInvalid)
	}
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	if err := os.MkdirAll(filepath.Dir(opts.Path), 0o700); err != nil {
		return nil, fmt.Errorf("open store: create directory: %w", err)
	}
	db, err := bolt.Open(opts.Path, 0o600, &bolt.Options{Timeout: timeout})
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, fmt.Errorf("open store %s: %w (is another opensandbox-server running?)", opts.Path, ErrLocked)
	case errors.Is(err, bolterrors.ErrInvalid), errors.Is(err, bolterrors.ErrVersionMismatch):
		return nil, fmt.Errorf("open store %s: not a bbolt store file (for example an upstream SQLite store); set [store] path to another file: %w", opts.Path, err)
	case err != nil:
		return nil, fmt.Errorf("open store %s: %w", opts.Path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{snapshotsBucket, overridesBucket, createsBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("create bucket %s: %w", b, err)
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", opts.Path, err)
	}
	return &Store{db: db, path: opts.Path}, nil
}

// Path returns the file the store was opened from.
func (s *Store) Path() string { return s.path }

// Close releases the file; the Store must not be used afterwards.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store %s: %w", s.path, err)
	}
	return nil
}

// PutSnapshot creates or replaces the record of snapshot snap.ID.
func (s *Store) PutSnapshot(ctx context.Context, snap sandbox.Snapshot) error {
	if snap.ID == "" {
		return fmt.Errorf("put snapshot: %w: empty id", runtime.ErrInvalid)
	}
	if err := s.put(ctx, snapshotsBucket, snap.ID, snap); err != nil {
		return fmt.Errorf("put snapshot %s: %w", snap.ID, err)
	}
	return nil
}

// GetSnapshot returns the record of snapshot id; runtime.ErrNotFound when
// there is none.
func (s *Store) GetSnapshot(ctx context.Context, id string) (sandbox.Snapshot, error) {
	var snap sandbox.Snapshot
	found, err := s.get(ctx, snapshotsBucket, id, &snap)
	if err != nil {
		return sandbox.Snapshot{}, fmt.Errorf("get snapshot %s: %w", id, err)
	}
	if !found {
		return sandbox.Snapshot{}, fmt.Errorf("snapshot %s: %w", id, runtime.ErrNotFound)
	}
	return snap, nil
}

// ListSnapshots returns every snapshot record, ordered by ID (byte-wise
// ascending). Callers that want another order sort the result.
func (s *Store) ListSnapshots(ctx context.Context) ([]sandbox.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var out []sandbox.Snapshot
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(snapshotsBucket).ForEach(func(k, v []byte) error {
			var snap sandbox.Snapshot
			if err := json.Unmarshal(v, &snap); err != nil {
				return fmt.Errorf("decode snapshot %s: %w", k, err)
			}
			out = append(out, snap)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	return out, nil
}

// DeleteSnapshot removes the record of snapshot id; runtime.ErrNotFound
// when there is none.
func (s *Store) DeleteSnapshot(ctx context.Context, id string) error {
	found, err := s.delete(ctx, snapshotsBucket, id)
	if err != nil {
		return fmt.Errorf("delete snapshot %s: %w", id, err)
	}
	if !found {
		return fmt.Errorf("snapshot %s: %w", id, runtime.ErrNotFound)
	}
	return nil
}

// GetOverrides decodes the overrides stored for sandboxID into v (a
// pointer, as for json.Unmarshal). found is false, and v untouched, when
// there are none.
func (s *Store) GetOverrides(ctx context.Context, sandboxID string, v any) (found bool, err error) {
	found, err = s.get(ctx, overridesBucket, sandboxID, v)
	if err != nil {
		return false, fmt.Errorf("get overrides of sandbox %s: %w", sandboxID, err)
	}
	return found, nil
}

// PutOverrides stores v, encoded as JSON, as the overrides of sandboxID,
// replacing any earlier value.
func (s *Store) PutOverrides(ctx context.Context, sandboxID string, v any) error {
	if sandboxID == "" {
		return fmt.Errorf("put overrides: %w: empty sandbox id", runtime.ErrInvalid)
	}
	if err := s.put(ctx, overridesBucket, sandboxID, v); err != nil {
		return fmt.Errorf("put overrides of sandbox %s: %w", sandboxID, err)
	}
	return nil
}

// DeleteOverrides removes the overrides of sandboxID; having none is not
// an error.
func (s *Store) DeleteOverrides(ctx context.Context, sandboxID string) error {
	if _, err := s.delete(ctx, overridesBucket, sandboxID); err != nil {
		return fmt.Errorf("delete overrides of sandbox %s: %w", sandboxID, err)
	}
	return nil
}

func (s *Store) put(ctx context.Context, bucket []byte, key string, v any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).Put([]byte(key), data)
	})
}

func (s *Store) get(ctx context.Context, bucket []byte, key string, v any) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if key == "" {
		return false, nil
	}
	var data []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		// The value is only valid inside the transaction: copy it.
		data = append([]byte(nil), tx.Bucket(bucket).Get([]byte(key))...)
		return nil
	})
	if err != nil {
		return false, err
	}
	if data == nil {
		return false, nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("decode: %w", err)
	}
	return true, nil
}

func (s *Store) delete(ctx context.Context, bucket []byte, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if key == "" {
		return false, nil
	}
	var found bool
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b.Get([]byte(key)) == nil {
			return nil
		}
		found = true
		return b.Delete([]byte(key))
	})
	return found, err
}
