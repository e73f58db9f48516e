package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// metaBucket holds facts about the store itself.
var metaBucket = []byte("meta")

// storeIDKey is the key of the store's identity in metaBucket.
var storeIDKey = []byte("store-id")

// ID returns the store's identity: 16 lowercase hex digits generated the
// first time it is asked for and kept in the file from then on. Two store
// files never share one (unless a file is copied), so the server uses it
// as its default instance id: the label that scopes the sandboxes it may
// see on a shared engine.
func (s *Store) ID(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	var id string
	err := s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return fmt.Errorf("create bucket %s: %w", metaBucket, err)
		}
		if v := b.Get(storeIDKey); v != nil {
			id = string(v)
			return nil
		}
		raw := make([]byte, 8)
		rand.Read(raw) // never fails (crypto/rand panics instead)
		id = hex.EncodeToString(raw)
		return b.Put(storeIDKey, []byte(id))
	})
	if err != nil {
		return "", fmt.Errorf("store %s: read identity: %w", s.path, err)
	}
	return id, nil
}
