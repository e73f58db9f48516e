package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// CreateJournal is the part of the Store that remembers creates the service
// began and whose caller has not been answered yet. A create is recorded
// before the runtime is asked to make the sandbox and cleared once the
// front-end has answered (CreateAnswered),
// so an entry that outlives its process names a sandbox whose caller never
// learnt its id: nobody will use or delete it, so the service does.
// internal/store implements it.
type CreateJournal interface {
	RecordCreate(ctx context.Context, sandboxID string, at time.Time) error
	// ClearCreate removes the entry of sandboxID; none is not an error.
	ClearCreate(ctx context.Context, sandboxID string) error
	// PendingCreates returns every entry: when each create began, by id.
	PendingCreates(ctx context.Context) (map[string]time.Time, error)
}

// journalTimeout bounds the store and engine calls that settle a journal
// entry after its request is over (the request's context may be gone).
const journalTimeout = 30 * time.Second

// createJournal is this process's view of the journal: the creates it is
// running now, whose entries the reaper must leave alone. The store file
// is locked to one process, so every other entry is either a create a
// previous process never answered or one of ours whose failure left
// something it could not remove.
type createJournal struct {
	inflight sync.Map // sandbox id -> struct{}
}

// beginCreate journals the create of sandbox id; the create must not go
// ahead when it fails. Every successful beginCreate is followed by
// CreateAnswered or failedCreate.
func (s *Service) beginCreate(ctx context.Context, id string) error {
	s.creates.inflight.Store(id, struct{}{})
	if err := s.store.RecordCreate(ctx, id, s.now()); err != nil {
		s.creates.inflight.Delete(id)
		return fmt.Errorf("journal the create of sandbox %s: %w", id, err)
	}
	return nil
}

// CreateAnswered tells the service that the caller of Create now has the
// sandbox's id (the front-end has written its answer): the journal entry
// goes. A front-end calls it once for every successful Create; until it
// does, a restart deletes the sandbox as never answered.
func (s *Service) CreateAnswered(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), journalTimeout)
	defer cancel()
	if err := s.store.ClearCreate(ctx, id); err != nil {
		// The entry stays: the next start would delete a sandbox whose
		// caller has its id. Say so loudly.
		s.logFrom(ctx).Error("clearing the create journal entry failed; the sandbox will be deleted when the server restarts",
			"sandbox", id, "err", err)
	}
	s.creates.inflight.Delete(id)
}

// failedCreate settles the entry of a create that failed. The runtime
// removes what a failed create made; Delete makes sure nothing is left
// (the removal may itself have failed, say while the engine was away).
// The entry is cleared once nothing remains, and otherwise left for the
// reaper to retry.
func (s *Service) failedCreate(log *slog.Logger, id string) {
	defer s.creates.inflight.Delete(id)
	ctx, cancel := context.WithTimeout(context.Background(), journalTimeout)
	defer cancel()
	if err := s.reapCreate(ctx, log, id); err != nil {
		log.Warn("cleaning up after a failed create; retrying later", "err", err)
	}
}

// reapCreate deletes sandbox id, whose create was never answered, with
// everything the runtime made for it, and then clears its entry.
func (s *Service) reapCreate(ctx context.Context, log *slog.Logger, id string) error {
	unlock := s.locks.lock(id)
	err := s.rt.Delete(ctx, id)
	unlock()
	switch {
	case err == nil:
		s.forgetSandbox(ctx, id)
		log.Info("deleted the sandbox of a create that was never answered", "sandbox", id)
	case errors.Is(err, runtime.ErrNotFound):
		s.forgetSandbox(ctx, id) // nothing was left
	default:
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	if err := s.store.ClearCreate(ctx, id); err != nil {
		return err
	}
	return nil
}

// reapUnansweredCreates deletes the sandboxes of journaled creates that
// are not running in this process, at start and then every SweepInterval
// (every rebuildRetry while some could not be deleted), until ctx ends.
func (s *Service) reapUnansweredCreates(ctx context.Context) {
	every := s.cfg.SweepInterval
	if every <= 0 {
		every = DefaultSweepInterval
	}
	for {
		wait := every
		if !s.ReapUnanswered(ctx) {
			wait = min(rebuildRetry, every)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// ReapUnanswered runs one pass over the create journal (Run does it at
// start and periodically) and reports whether every entry
// not in flight here was settled.
func (s *Service) ReapUnanswered(ctx context.Context) bool {
	pending, err := s.store.PendingCreates(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("reading the create journal", "err", err)
		}
		return false
	}
	done := true
	for id, began := range pending {
		if _, mine := s.creates.inflight.Load(id); mine {
			continue
		}
		log := s.log.With("sandbox", id, "create_began", began)
		if err := s.reapCreate(ctx, log, id); err != nil {
			if ctx.Err() != nil {
				return false
			}
			log.Warn("deleting the sandbox of an unanswered create failed; retrying", "err", err)
			done = false
		}
	}
	return done
}
