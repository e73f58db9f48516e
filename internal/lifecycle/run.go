package lifecycle

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// rebuildRetry is how long Run waits before trying again to read the
// runtime's sandboxes when the engine did not answer at start.
const rebuildRetry = 10 * time.Second

// Run does the service's background work until ctx ends: it marks snapshots
// a previous process left unfinished as failed, rebuilds the expiry
// deadlines from the runtime and the store (deleting sandboxes that
// expired while the service was down), deletes sandboxes as they expire,
// deletes the sandboxes of creates that were never answered (journal.go),
// and owns the snapshot workers started by CreateSnapshot. It returns nil when
// ctx ends, after every background goroutine has finished.
func (s *Service) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("lifecycle: Run called twice")
	}
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		s.cancelBg()
		s.workers.Wait()
	}()
	stop := context.AfterFunc(ctx, s.cancelBg)
	defer stop()

	if err := s.recoverSnapshots(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("recovering unfinished snapshots", "err", err)
	}
	wg.Go(func() { s.rebuildUntilDone(ctx) })
	wg.Go(func() { s.reapUnansweredCreates(ctx) })
	if rn, ok := s.rt.(runtime.Runner); ok {
		wg.Go(func() { rn.Run(ctx) })
	}
	if sw, ok := s.rt.(runtime.Sweeper); ok {
		wg.Go(func() { s.sweepPeriodically(ctx, sw) })
	}
	s.runExpiry(ctx, &wg)
	return nil
}

// sweepPeriodically calls sw.Sweep every SweepInterval until ctx ends (the
// runtime sweeps once itself when it starts).
func (s *Service) sweepPeriodically(ctx context.Context, sw runtime.Sweeper) {
	every := s.cfg.SweepInterval
	if every <= 0 {
		every = DefaultSweepInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			sw.Sweep(ctx)
		}
	}
}

// rebuildUntilDone rebuilds the expiry deadlines, retrying while the
// runtime or the store fails, until it succeeds or ctx ends.
func (s *Service) rebuildUntilDone(ctx context.Context) {
	for {
		err := s.rebuildExpiry(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		s.log.Warn("rebuilding expiry timers failed; retrying", "err", err, "retry_in", rebuildRetry)
		select {
		case <-ctx.Done():
			return
		case <-time.After(rebuildRetry):
		}
	}
}

// recoverSnapshots marks as Failed the snapshots left in Creating by a
// previous process (their worker died with it).
func (s *Service) recoverSnapshots(ctx context.Context) error {
	snaps, err := s.store.ListSnapshots(ctx)
	if err != nil {
		return err
	}
	for _, snap := range snaps {
		if snap.Status.State != sandbox.SnapshotCreating {
			continue
		}
		if _, mine := s.capturing.Load(snap.ID); mine {
			continue
		}
		s.setSnapshotStatus(&snap, sandbox.SnapshotFailed, "server_restarted",
			"the server restarted while the snapshot was being taken")
		if err := s.store.PutSnapshot(ctx, snap); err != nil {
			return err
		}
		s.log.Info("snapshot marked failed after restart", "snapshot", snap.ID, "sandbox", snap.SandboxID)
	}
	return nil
}
