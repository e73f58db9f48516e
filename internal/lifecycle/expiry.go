package lifecycle

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/metrics"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// expiryRetry is how long a failed expiry deletion waits before it is
// tried again.
const expiryRetry = time.Minute

// maxConcurrentExpiries bounds the deletions the expiry loop runs at once
// (a restart after a long outage may find many sandboxes due).
const maxConcurrentExpiries = 8

// expiry holds the deadlines of the sandboxes that expire. Handlers set
// and cancel deadlines; Run's loop waits for the earliest one and deletes
// the sandboxes whose deadline passed. It is safe for concurrent use.
type expiry struct {
	mu        sync.Mutex
	deadlines map[string]time.Time
	wake      chan struct{} // poked (non-blocking) when deadlines change
}

func newExpiry() *expiry {
	return &expiry{deadlines: map[string]time.Time{}, wake: make(chan struct{}, 1)}
}

// set arms (or re-arms) id to expire at t.
func (e *expiry) set(id string, t time.Time) {
	e.mu.Lock()
	e.deadlines[id] = t
	e.mu.Unlock()
	e.poke()
}

// setIfAbsent arms id unless it already has a deadline (which a handler
// set more recently than the caller read its data).
func (e *expiry) setIfAbsent(id string, t time.Time) {
	e.mu.Lock()
	_, ok := e.deadlines[id]
	if !ok {
		e.deadlines[id] = t
	}
	e.mu.Unlock()
	if !ok {
		e.poke()
	}
}

// cancel forgets id's deadline.
func (e *expiry) cancel(id string) {
	e.mu.Lock()
	delete(e.deadlines, id)
	e.mu.Unlock()
}

func (e *expiry) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// due removes and returns the ids whose deadline is not after now, and
// returns the earliest remaining deadline (zero when none).
func (e *expiry) due(now time.Time) (ids []string, next time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, t := range e.deadlines {
		if !t.After(now) {
			ids = append(ids, id)
			delete(e.deadlines, id)
			continue
		}
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return ids, next
}

// deadline reports id's deadline, for tests and logs.
func (e *expiry) deadline(id string) (time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.deadlines[id]
	return t, ok
}

// runExpiry deletes sandboxes as their deadlines pass until ctx ends.
// Deletions run in their own goroutines (tracked by wg) so one slow engine
// call does not hold up the others.
func (s *Service) runExpiry(ctx context.Context, wg *sync.WaitGroup) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	sem := make(chan struct{}, maxConcurrentExpiries)
	for {
		ids, next := s.expiry.due(s.now())
		for _, id := range ids {
			wg.Go(func() {
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					return
				}
				defer func() { <-sem }()
				s.expire(ctx, id)
			})
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(s.now()), 0)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-s.expiry.wake:
		}
	}
}

// expire deletes sandbox id if its effective expiry has passed, and
// reports whether the sandbox is gone afterwards. It reads the sandbox
// again under its lock, so a renew that raced with the timer wins and
// re-arms it instead. Failures re-arm a retry.
func (s *Service) expire(ctx context.Context, id string) (gone bool) {
	log := s.logFrom(ctx).With("sandbox", id)
	defer s.locks.lock(id)()
	retry := func(what string, err error) bool {
		if ctx.Err() == nil {
			s.metrics.ExpiryAction(metrics.ExpiryFailed)
			log.Warn("expiry: "+what+" failed; retrying later", "err", err)
			s.expiry.setIfAbsent(id, s.now().Add(expiryRetry))
		}
		return false
	}
	rs, err := s.rt.Get(ctx, id)
	if errors.Is(err, runtime.ErrNotFound) {
		s.metrics.ExpiryAction(metrics.ExpiryGone)
		s.forgetSandbox(ctx, id)
		return true
	}
	if err != nil {
		return retry("reading the sandbox", err)
	}
	o, err := s.store.GetOverrides(ctx, id)
	if err != nil {
		return retry("reading overrides", err)
	}
	at := effectiveExpiry(rs, o)
	switch {
	case at == nil:
		return false // manual cleanup: never deleted by the server
	case at.After(s.now()):
		s.expiry.setIfAbsent(id, *at)
		return false
	}
	if err := s.removeLocked(ctx, id, "ttl_expiry"); err != nil {
		return retry("deleting the sandbox", err)
	}
	s.metrics.ExpiryAction(metrics.ExpiryDeleted)
	return true
}

// expired reports whether a sandbox's effective expiry has passed.
func (s *Service) expired(rs runtime.Sandbox, o Overrides) bool {
	at := effectiveExpiry(rs, o)
	return at != nil && !at.After(s.now())
}

// forgetSandbox drops what the core keeps about a sandbox that no
// longer exists.
func (s *Service) forgetSandbox(ctx context.Context, id string) {
	s.expiry.cancel(id)
	s.tokens.forget(id)
	if err := s.store.DeleteOverrides(ctx, id); err != nil && !errors.Is(err, runtime.ErrNotFound) {
		s.log.Warn("deleting overrides of a vanished sandbox", "sandbox", id, "err", err)
	}
}

// rebuildExpiry arms a deadline for every sandbox of the runtime that
// expires; those whose time passed while the server was down fire at once.
func (s *Service) rebuildExpiry(ctx context.Context) error {
	all, err := s.rt.List(ctx)
	if err != nil {
		return err
	}
	armed := 0
	for _, rs := range all {
		o, err := s.store.GetOverrides(ctx, rs.ID)
		if err != nil {
			return err
		}
		if at := effectiveExpiry(rs, o); at != nil {
			s.expiry.setIfAbsent(rs.ID, *at)
			armed++
		}
	}
	s.log.Info("expiry timers rebuilt", "sandboxes", len(all), "expiring", armed)
	return nil
}

// Deadline reports when the expiry loop next looks at sandbox id, if it
// is armed.
func (s *Service) Deadline(id string) (time.Time, bool) { return s.expiry.deadline(id) }

// Schedule arms an expiry check of sandbox id at t. The check reads the
// sandbox again and deletes it only if its effective expiry has passed,
// so an early or stale t never removes a sandbox before its time (it is
// re-armed at the real expiry instead).
func (s *Service) Schedule(id string, t time.Time) { s.expiry.set(id, t) }
