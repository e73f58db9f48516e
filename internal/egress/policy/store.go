package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrApply marks a failure of the apply hook; the store kept the previous
// policy.
var ErrApply = errors.New("apply egress policy")

// ApplyFunc enforces a policy before it becomes current (for example by
// reprogramming nftables). An error keeps the previous policy in place.
type ApplyFunc func(ctx context.Context, p *Policy) error

// Store holds the current policy, combined with the always-rules. Reads
// are lock-free; writes are serialized, so read-modify-write updates
// such as PATCH never lose each other's changes.
type Store struct {
	files AlwaysFiles

	mu     sync.Mutex // serializes writers and guards the fields below
	always *Always
	subs   map[int]func(*Policy)
	nextID int

	cur atomic.Pointer[Policy]
}

// NewStore loads the always-rule files and makes initial (combined with
// them) the current policy. initial must not be nil.
func NewStore(initial *Policy, files AlwaysFiles) (*Store, error) {
	always, err := LoadAlways(files)
	if err != nil {
		return nil, fmt.Errorf("load always-rules: %w", err)
	}
	s := &Store{files: files, always: always, subs: map[int]func(*Policy){}}
	s.cur.Store(initial.WithAlways(always))
	return s, nil
}

// Current returns the current policy.
func (s *Store) Current() *Policy { return s.cur.Load() }

// Subscribe registers fn to be called with every new current policy,
// after it is swapped in, in order. fn runs while the store's write lock
// is held: it must be quick and must not write to the store. The returned
// func unregisters fn.
func (s *Store) Subscribe(fn func(*Policy)) (cancel func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	s.subs[id] = fn
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.subs, id)
	}
}

// Update computes the next policy from the current one with change,
// combines it with the always-rules, runs apply (when not nil) and only
// then makes it current. An error from change is returned as is; one
// from apply is wrapped in ErrApply. Either way the current policy is
// unchanged.
func (s *Store) Update(ctx context.Context, change func(cur *Policy) (*Policy, error), apply ApplyFunc) (*Policy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next, err := change(s.cur.Load())
	if err != nil {
		return nil, err
	}
	return s.swapLocked(ctx, next.WithAlways(s.always), apply)
}

// Reload re-reads the always-rule files and, when they changed, re-applies
// the current user policy with them. On error the previous rules stay in
// force.
func (s *Store) Reload(ctx context.Context, apply ApplyFunc) error {
	always, err := LoadAlways(s.files)
	if err != nil {
		return fmt.Errorf("reload always-rules: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if always.Equal(s.always) {
		return nil
	}
	if _, err := s.swapLocked(ctx, s.cur.Load().WithAlways(always), apply); err != nil {
		return err
	}
	s.always = always
	return nil
}

func (s *Store) swapLocked(ctx context.Context, next *Policy, apply ApplyFunc) (*Policy, error) {
	if apply != nil {
		if err := apply(ctx, next); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrApply, err)
		}
	}
	s.cur.Store(next)
	for _, id := range s.sortedSubIDs() {
		s.subs[id](next)
	}
	return next, nil
}

// sortedSubIDs returns subscriber ids in registration order.
func (s *Store) sortedSubIDs() []int {
	ids := make([]int, 0, len(s.subs))
	for id := range s.subs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
