package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// pendingCreate is one entry of the create journal: a sandbox whose
// create the server began and has not yet answered.
type pendingCreate struct {
	StartedAt time.Time `json:"startedAt"`
}

// RecordCreate journals the create of sandboxID before the runtime is
// asked to make it. The entry is durable (bbolt syncs each update) so that
// a server killed during the create finds it when it starts again.
func (s *Store) RecordCreate(ctx context.Context, sandboxID string, at time.Time) error {
	if sandboxID == "" {
		return fmt.Errorf("record create: %w: empty sandbox id", runtime.ErrInvalid)
	}
	if err := s.put(ctx, createsBucket, sandboxID, pendingCreate{StartedAt: at.UTC()}); err != nil {
		return fmt.Errorf("record create of sandbox %s: %w", sandboxID, err)
	}
	return nil
}

// ClearCreate removes the journal entry of sandboxID; having none is not
// an error.
func (s *Store) ClearCreate(ctx context.Context, sandboxID string) error {
	if _, err := s.delete(ctx, createsBucket, sandboxID); err != nil {
		return fmt.Errorf("clear create of sandbox %s: %w", sandboxID, err)
	}
	return nil
}

// PendingCreates returns every journal entry: when each journaled create
// began, by sandbox id.
func (s *Store) PendingCreates(ctx context.Context) (map[string]time.Time, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list pending creates: %w", err)
	}
	out := map[string]time.Time{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(createsBucket).ForEach(func(k, v []byte) error {
			var p pendingCreate
			if err := json.Unmarshal(v, &p); err != nil {
				return fmt.Errorf("decode pending create %s: %w", k, err)
			}
			out[string(k)] = p.StartedAt
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list pending creates: %w", err)
	}
	return out, nil
}
