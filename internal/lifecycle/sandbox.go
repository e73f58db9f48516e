package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/grammar"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Create starts a sandbox from spec, which the front end validated: it
// gives it an id, execd and egress tokens and, with timeout > 0, an
// expiry timeout from now, and arms its expiry. With spec.SnapshotID the
// snapshot must exist (ErrSnapshotNotFound) and be Ready
// (ErrSnapshotNotReady). Runtime failures come back with their class.
func (s *Service) Create(ctx context.Context, spec runtime.Spec, timeout time.Duration) (runtime.Sandbox, error) {
	if spec.SnapshotID != "" {
		snap, err := s.store.GetSnapshot(ctx, spec.SnapshotID)
		if errors.Is(err, runtime.ErrNotFound) {
			return runtime.Sandbox{}, newError(ErrSnapshotNotFound, err, "snapshot %q not found", spec.SnapshotID)
		}
		if err != nil {
			return runtime.Sandbox{}, err
		}
		if snap.Status.State != sandbox.SnapshotReady {
			return runtime.Sandbox{}, newError(ErrSnapshotNotReady, nil,
				"snapshot %q is %s; only Ready snapshots can be restored", snap.ID, snap.Status.State)
		}
	}
	spec.ID = NewUUID()
	spec.ExecdToken = newToken()
	if spec.Egress != nil {
		spec.Egress.Token = newToken()
	}
	if timeout > 0 {
		at := s.now().Add(timeout).UTC()
		spec.ExpiresAt = &at
	}
	log := s.logFrom(ctx).With("sandbox", spec.ID)
	log.Info("creating sandbox", "image", spec.Image, "snapshot", spec.SnapshotID, "expires_at", spec.ExpiresAt)
	if err := s.beginCreate(ctx, spec.ID); err != nil {
		return runtime.Sandbox{}, err
	}
	started := time.Now()
	rs, err := s.rt.Create(ctx, spec)
	s.metrics.ObserveCreate(time.Since(started), err)
	if err != nil {
		s.failedCreate(log, spec.ID)
		return rs, err
	}
	if spec.ExpiresAt != nil {
		s.expiry.set(rs.ID, *spec.ExpiresAt)
	}
	log.Info("sandbox created", "state", rs.State)
	return rs, nil
}

// Effective is a runtime sandbox with its overrides applied: the patched
// metadata (nil when empty) and the renewed expiry.
func Effective(rs runtime.Sandbox, o Overrides) runtime.Sandbox {
	rs.Metadata = effectiveMetadata(rs, o)
	rs.ExpiresAt = effectiveExpiry(rs, o)
	return rs
}

// effectiveMetadata is the metadata a sandbox shows: the override when
// one was stored, else what it was created with; nil when empty.
func effectiveMetadata(rs runtime.Sandbox, o Overrides) map[string]string {
	m := rs.Metadata
	if o.Metadata != nil {
		m = o.Metadata
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// effectiveExpiry is when a sandbox expires: the renewed expiry when one
// was stored, else the one it was created with; nil for manual cleanup.
func effectiveExpiry(rs runtime.Sandbox, o Overrides) *time.Time {
	if o.ExpiresAt != nil {
		return o.ExpiresAt
	}
	return rs.ExpiresAt
}

// lookup reads a sandbox and its overrides.
func (s *Service) lookup(ctx context.Context, id string) (runtime.Sandbox, Overrides, error) {
	rs, err := s.rt.Get(ctx, id)
	if err != nil {
		return rs, Overrides{}, err
	}
	o, err := s.store.GetOverrides(ctx, id)
	if err != nil {
		return rs, Overrides{}, err
	}
	return rs, o, nil
}

// Get returns sandbox id with its overrides applied. One whose expiry
// has passed (the timer may not have fired yet, for instance right after
// a restart) is deleted now and reported missing, so callers never see
// it outlive its expiry.
func (s *Service) Get(ctx context.Context, id string) (runtime.Sandbox, error) {
	rs, o, err := s.lookup(ctx, id)
	if err != nil {
		return rs, err
	}
	if s.expired(rs, o) && s.expire(ctx, id) {
		return runtime.Sandbox{}, fmt.Errorf("sandbox %s expired: %w", id, runtime.ErrNotFound)
	}
	return Effective(rs, o), nil
}

// List returns every sandbox of the runtime with its overrides applied,
// in no particular order. Sandboxes whose expiry passed are left out and
// handed to the expiry loop at once.
func (s *Service) List(ctx context.Context) ([]runtime.Sandbox, error) {
	all, err := s.rt.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]runtime.Sandbox, 0, len(all))
	for _, rs := range all {
		o, err := s.store.GetOverrides(ctx, rs.ID)
		if err != nil {
			return nil, err
		}
		if s.expired(rs, o) {
			s.expiry.set(rs.ID, s.now())
			continue
		}
		out = append(out, Effective(rs, o))
	}
	return out, nil
}

// Delete deletes a sandbox and everything the core keeps about it:
// expiry deadline, overrides, cached token. reason goes to the log
// ("user_delete", say).
func (s *Service) Delete(ctx context.Context, id, reason string) error {
	defer s.locks.lock(id)()
	return s.removeLocked(ctx, id, reason)
}

// removeLocked is Delete for a caller holding id's lock.
func (s *Service) removeLocked(ctx context.Context, id, reason string) error {
	started := time.Now()
	err := s.rt.Delete(ctx, id)
	s.metrics.ObserveDelete(reason, time.Since(started), err)
	if err != nil && !errors.Is(err, runtime.ErrNotFound) {
		return err
	}
	// The sandbox is gone (or never was): forget it either way.
	s.expiry.cancel(id)
	s.tokens.forget(id)
	if serr := s.store.DeleteOverrides(ctx, id); serr != nil && !errors.Is(serr, runtime.ErrNotFound) {
		s.logFrom(ctx).Warn("deleting sandbox overrides", "sandbox", id, "err", serr)
	}
	if err != nil {
		return err
	}
	s.logFrom(ctx).Info("sandbox deleted", "sandbox", id, "reason", reason)
	return nil
}

// Pause freezes a running sandbox (runtime.ErrConflict unless running).
func (s *Service) Pause(ctx context.Context, id string) error { return s.rt.Pause(ctx, id) }

// Resume thaws a paused sandbox (runtime.ErrConflict unless paused).
func (s *Service) Resume(ctx context.Context, id string) error { return s.rt.Resume(ctx, id) }

// Renew moves a sandbox's expiry to at, which must lie in the future and
// within MaxTimeout from now (ErrInvalidExpiration); a sandbox without
// expiry cannot be renewed (ErrNotRenewable). It returns the new expiry.
func (s *Service) Renew(ctx context.Context, id string, at time.Time) (time.Time, error) {
	defer s.locks.lock(id)()
	rs, o, err := s.lookup(ctx, id)
	if err != nil {
		return time.Time{}, err
	}
	now := s.now()
	at = at.UTC()
	err = s.updateOverrides(ctx, id, o, func(o *Overrides) error {
		if effectiveExpiry(rs, *o) == nil {
			return newError(ErrNotRenewable, nil,
				"sandbox %q was created without a timeout and does not expire; it cannot be renewed", id)
		}
		if !at.After(now) {
			return newError(ErrInvalidExpiration, nil,
				"expiresAt %s is not in the future", at.Format(time.RFC3339))
		}
		if s.cfg.MaxTimeout > 0 && at.Sub(now) > s.cfg.MaxTimeout {
			return newError(ErrInvalidExpiration, nil,
				"expiresAt %s is more than the maximum timeout (%s) from now", at.Format(time.RFC3339), s.cfg.MaxTimeout)
		}
		o.ExpiresAt = &at
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	s.expiry.set(id, at)
	s.logFrom(ctx).Info("sandbox expiry renewed", "sandbox", id, "expires_at", at)
	return at, nil
}

// PatchMetadata applies a JSON Merge Patch (RFC 7396) to the sandbox's
// effective metadata: a string value sets a key, null deletes it, {}
// changes nothing; keys set must follow the label rules
// (ErrInvalidArgument). The result is stored as the metadata override and
// the updated sandbox returned.
func (s *Service) PatchMetadata(ctx context.Context, id string, patch map[string]json.RawMessage) (runtime.Sandbox, error) {
	defer s.locks.lock(id)()
	rs, o, err := s.lookup(ctx, id)
	if err != nil {
		return rs, err
	}
	var stored Overrides
	err = s.updateOverrides(ctx, id, o, func(o *Overrides) error {
		merged, err := mergePatch(effectiveMetadata(rs, *o), patch)
		if err != nil {
			return err
		}
		o.Metadata = merged
		stored = *o
		return nil
	})
	if err != nil {
		return rs, err
	}
	return Effective(rs, stored), nil
}

// updateOverrides applies change to sandbox id's overrides: as one
// conflict-checked read-modify-write when the store is shared
// (OverridesUpdater), else to read (the overrides lookup read, which the
// per-sandbox lock keeps current on a store of this server alone).
func (s *Service) updateOverrides(ctx context.Context, id string, read Overrides, change func(*Overrides) error) error {
	if u, ok := s.store.(OverridesUpdater); ok {
		return u.UpdateOverrides(ctx, id, change)
	}
	if err := change(&read); err != nil {
		return err
	}
	return s.store.PutOverrides(ctx, id, read)
}

// mergePatch returns a copy of current with patch applied. Values must be
// strings or null, and every key set must follow the label rules. The
// result is never nil, so an emptied map still overrides the runtime's.
func mergePatch(current map[string]string, patch map[string]json.RawMessage) (map[string]string, error) {
	out := maps.Clone(current)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range slices.Sorted(maps.Keys(patch)) {
		raw := bytes.TrimSpace(patch[k])
		if bytes.Equal(raw, []byte("null")) {
			delete(out, k)
			continue
		}
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, newError(ErrInvalidArgument, nil, "metadata %q: the value must be a string or null", k)
		}
		if err := grammar.CheckLabel(k, v); err != nil {
			return nil, newError(ErrInvalidArgument, err, "metadata: %v", err)
		}
		out[k] = v
	}
	return out, nil
}

// ExecdToken returns the execd access token of sandbox id, from a short
// cache (tokens never change during a sandbox's life).
func (s *Service) ExecdToken(ctx context.Context, id string) (string, error) {
	now := time.Now()
	if t, ok := s.tokens.get(id, now); ok {
		return t, nil
	}
	rs, err := s.rt.Get(ctx, id)
	if err != nil {
		return "", err
	}
	s.tokens.put(id, rs.ExecdToken, now)
	return rs.ExecdToken, nil
}

// TokenCached reports whether the execd token of id is cached (a deleted
// sandbox's never is).
func (s *Service) TokenCached(id string) bool {
	_, ok := s.tokens.get(id, time.Now())
	return ok
}

// Lookup returns sandbox id with its overrides applied, as it is: unlike
// Get it takes no action on a sandbox whose expiry passed (diagnostics
// want to see such a sandbox).
func (s *Service) Lookup(ctx context.Context, id string) (runtime.Sandbox, error) {
	rs, o, err := s.lookup(ctx, id)
	if err != nil {
		return rs, err
	}
	return Effective(rs, o), nil
}
