package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// ErrPoolEmpty is returned by Acquire on a FailFast pool with no idle sandbox.
var ErrPoolEmpty = errors.New("sandbox pool is empty")

// ErrPoolClosed is returned by Acquire and WaitReady once Close has been called.
var ErrPoolClosed = errors.New("sandbox pool is closed")

// Pool timings that are not options.
const (
	poolDefaultRefill         = 2
	poolDefaultMinRemaining   = time.Minute
	poolDefaultHealthInterval = 30 * time.Second
	// poolCheckTimeout bounds one health check of an idle sandbox, at
	// Acquire and in the health loop.
	poolCheckTimeout = 2 * time.Second
	// poolKillTimeout bounds one kill the pool makes on its own.
	poolKillTimeout = 30 * time.Second
	// poolParallel bounds concurrent health checks and kills.
	poolParallel = 8
	// Creation backoff: the first failure waits poolBackoffMin, each
	// further one twice as long up to poolBackoffMax; a success resets it.
	poolBackoffMin = time.Second
	poolBackoffMax = 30 * time.Second
)

// PoolOptions configures a Pool. Only Size is required.
type PoolOptions struct {
	// Size is the number of idle sandboxes kept ready. Required, at least 1.
	Size int
	// Create says how pool sandboxes are made; it is passed to
	// Client.Create unchanged, for refills and for Acquire's direct creates.
	Create CreateOptions
	// Refill is the most sandboxes created at the same time while
	// refilling. Default 2.
	Refill int
	// MinRemaining drops (kills) idle sandboxes that would expire sooner
	// than this, so a caller never receives one about to disappear.
	// Default 1m. Ignored with Create.ManualCleanup (no expiry).
	MinRemaining time.Duration
	// HealthInterval is how often idle sandboxes are checked (execd
	// /ping and expiry). Default 30s.
	HealthInterval time.Duration
	// FailFast makes Acquire return ErrPoolEmpty when no idle sandbox is
	// ready, instead of creating one directly.
	FailFast bool
	// Logger receives the pool's logs. Default slog.Default().
	Logger *slog.Logger
}

// PoolStats is a consistent snapshot of a pool.
type PoolStats struct {
	Idle     int // ready sandboxes waiting in the pool
	Creating int // background creates in flight (not Acquire's direct creates)
	Acquired int // sandboxes handed out by Acquire so far, direct creates included
	Failures int // background creates that failed so far
	// LastError is the most recent background create failure, "" if none.
	LastError string
}

// Pool keeps Size sandboxes created ahead of time, so that Acquire hands
// one out without waiting for a container to start. It lives in memory in
// this process; a sandbox handed out belongs to the caller, who kills it
// when done — the pool never touches it again. Safe for concurrent use.
type Pool struct {
	c    *Client
	opts PoolOptions
	log  *slog.Logger
	hook poolHooks

	ctx    context.Context // workers; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // workers, background creates and kills
	wake   chan struct{}  // buffered(1): the filler should look again

	mu       sync.Mutex
	idle     []pooled // oldest first
	creating int
	acquired int
	failures int
	lastErr  string
	backoff  time.Duration // current backoff step; 0 after a success
	pause    time.Duration // backoff the filler must sit out before creating again
	closed   bool
	changed  chan struct{} // closed and replaced whenever idle or closed change
	// closeErrs are the kills of idle sandboxes that failed during Close.
	closeErrs []error
}

// pooled is an idle sandbox, when its create started and when it
// expires (zero: never).
type pooled struct {
	sb        *Sandbox
	created   time.Time
	expiresAt time.Time
}

// poolHooks are the pool's clock, replaced by tests.
type poolHooks struct {
	now   func() time.Time
	after func(time.Duration) <-chan time.Time // backoff timer
}

// NewPool starts a pool of sandboxes made with opts.Create and returns at
// once; the pool fills in the background (see WaitReady). ctx supplies
// values only: the pool runs until Close, whatever becomes of ctx.
func (c *Client) NewPool(ctx context.Context, opts PoolOptions) (*Pool, error) {
	return c.newPool(ctx, opts, poolHooks{now: time.Now, after: time.After})
}

func (c *Client) newPool(ctx context.Context, opts PoolOptions, hook poolHooks) (*Pool, error) {
	if opts.Size < 1 {
		return nil, fmt.Errorf("opensandbox: pool size %d: must be at least 1", opts.Size)
	}
	if (opts.Create.Image == "") == (opts.Create.SnapshotID == "") {
		return nil, errors.New("opensandbox: pool options: exactly one of Create.Image and Create.SnapshotID is required")
	}
	if opts.Refill < 0 || opts.MinRemaining < 0 || opts.HealthInterval < 0 {
		return nil, errors.New("opensandbox: pool options: Refill, MinRemaining and HealthInterval must not be negative")
	}
	if opts.Refill == 0 {
		opts.Refill = poolDefaultRefill
	}
	if opts.MinRemaining == 0 {
		opts.MinRemaining = poolDefaultMinRemaining
	}
	if opts.HealthInterval == 0 {
		opts.HealthInterval = poolDefaultHealthInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if timeout := lifetime(opts.Create); !opts.Create.ManualCleanup && timeout <= opts.MinRemaining {
		// Every sandbox would be dropped as soon as it is made.
		return nil, fmt.Errorf("opensandbox: pool options: Create.Timeout %v must be longer than MinRemaining %v", timeout, opts.MinRemaining)
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &Pool{
		c: c, opts: opts, log: opts.Logger.With("component", "sandbox-pool"), hook: hook,
		ctx: wctx, cancel: cancel,
		wake:    make(chan struct{}, 1),
		changed: make(chan struct{}),
	}
	p.wg.Add(2)
	go p.fill()
	go p.healthLoop()
	return p, nil
}

// Acquire hands out a sandbox. It takes the oldest idle one that answers a
// quick health check and does not expire within MinRemaining (others are
// killed), and signals the pool to refill behind it. With none idle it
// creates one directly with Client.Create — or, with FailFast, returns
// ErrPoolEmpty. After Close it returns ErrPoolClosed. The sandbox belongs
// to the caller, who must kill it.
func (p *Pool) Acquire(ctx context.Context) (*Sandbox, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrPoolClosed
		}
		if len(p.idle) == 0 {
			p.mu.Unlock()
			break
		}
		e := p.idle[0]
		p.idle = p.idle[1:]
		p.notifyLocked()
		p.wg.Add(1) // Close waits for this check and whatever it kills
		p.mu.Unlock()
		p.signal()

		ok, err := p.check(ctx, e)
		p.wg.Done()
		if err != nil {
			return nil, err
		}
		if ok {
			p.log.DebugContext(ctx, "acquired pooled sandbox", "sandbox_id", e.sb.ID())
			return e.sb, nil
		}
	}
	if p.opts.FailFast {
		return nil, ErrPoolEmpty
	}
	sb, err := p.c.Create(ctx, p.opts.Create)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.acquired++
	p.mu.Unlock()
	p.log.DebugContext(ctx, "pool empty: created sandbox directly", "sandbox_id", sb.ID())
	return sb, nil
}

// check vets an idle sandbox taken by Acquire: ok means it is the
// caller's now; otherwise it was dropped, or put back when ctx ended (err).
func (p *Pool) check(ctx context.Context, e pooled) (ok bool, err error) {
	if !p.fresh(e) {
		p.drop(e, "expires too soon")
		return false, nil
	}
	cctx, cancel := context.WithTimeout(ctx, poolCheckTimeout)
	healthy := e.sb.Healthy(cctx)
	cancel()
	if err := ctx.Err(); err != nil {
		p.putBack(e) // the caller gave up; the sandbox is not at fault
		return false, err
	}
	if !healthy {
		p.drop(e, "health check failed")
		return false, nil
	}
	p.mu.Lock()
	p.acquired++
	p.mu.Unlock()
	return true, nil
}

// WaitReady blocks until Size sandboxes are idle, ctx ends (the error then
// names the last create failure, if any) or the pool is closed
// (ErrPoolClosed).
func (p *Pool) WaitReady(ctx context.Context) error {
	for {
		p.mu.Lock()
		closed, ready, ch, last := p.closed, len(p.idle) >= p.opts.Size, p.changed, p.lastErr
		p.mu.Unlock()
		switch {
		case closed:
			return ErrPoolClosed
		case ready:
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			if last != "" {
				return fmt.Errorf("%w (last create error: %s)", ctx.Err(), last)
			}
			return ctx.Err()
		}
	}
}

// Stats returns a consistent snapshot of the pool's counters.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PoolStats{Idle: len(p.idle), Creating: p.creating, Acquired: p.acquired, Failures: p.failures, LastError: p.lastErr}
}

// Close stops refilling and health checks, kills every idle sandbox (a few
// at a time), waits for creates in flight to finish and kills what they
// produce. Sandboxes already acquired are left alone. The kills do not
// depend on ctx: each has its own timeout, so an idle sandbox is killed
// even when ctx is already cancelled. ctx only bounds the wait: if it ends
// first, Close returns its error and the remaining work completes in the
// background. Calling Close again only waits again, and returns the kill
// failures of the first call.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	first := !p.closed
	idle := p.idle
	p.idle = nil
	p.closed = true
	p.notifyLocked()
	p.mu.Unlock()
	p.cancel()

	if first {
		p.wg.Add(1)
		go p.killAll(idle)
	}
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return errors.Join(p.closeErrs...)
}

// killAll kills the sandboxes that were idle when Close ran, poolParallel
// at a time, and records the failures for Close; the caller did wg.Add(1).
func (p *Pool) killAll(idle []pooled) {
	defer p.wg.Done()
	sem := make(chan struct{}, poolParallel)
	var kills sync.WaitGroup
	for _, e := range idle {
		sem <- struct{}{}
		kills.Go(func() {
			defer func() { <-sem }()
			if err := p.killNow(e); err != nil {
				p.mu.Lock()
				p.closeErrs = append(p.closeErrs, fmt.Errorf("kill %s: %w", e.sb.ID(), err))
				p.mu.Unlock()
			}
		})
	}
	kills.Wait()
}

// fill keeps Size sandboxes idle or in creation, at most Refill creating
// at once, and sits out the backoff after each failure.
func (p *Pool) fill() {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		pause := p.pause
		p.pause = 0
		if pause == 0 && !p.closed {
			for p.creating < p.opts.Refill && len(p.idle)+p.creating < p.opts.Size {
				p.creating++
				p.wg.Add(1)
				go p.createOne()
			}
		}
		p.mu.Unlock()
		if pause > 0 {
			p.log.Debug("pool create backoff", "wait", pause)
			select {
			case <-p.ctx.Done():
				return
			case <-p.hook.after(pause):
			}
			continue
		}
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		}
	}
}

// createOne makes one pool sandbox. It does not use the workers' context:
// a create cancelled half-way could leave a sandbox the pool never learns
// of, so Close waits for it instead and kills the result.
func (p *Pool) createOne() {
	defer p.wg.Done()
	defer p.signal()
	start := p.hook.now()
	sb, err := p.c.Create(context.WithoutCancel(p.ctx), p.opts.Create)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.creating--
	if err != nil {
		p.failures++
		p.lastErr = err.Error()
		p.backoff = min(max(2*p.backoff, poolBackoffMin), poolBackoffMax)
		p.pause = p.backoff
		p.notifyLocked()
		p.log.Warn("pool could not create a sandbox", "err", err, "failures", p.failures, "retry_in", p.backoff)
		return
	}
	p.backoff = 0
	e := pooled{sb: sb, created: start}
	if !p.opts.Create.ManualCleanup {
		// Measured from before the request, so never later than the
		// server's own deadline.
		e.expiresAt = start.Add(lifetime(p.opts.Create))
	}
	if p.closed {
		p.wg.Add(1)
		go p.kill(e, "pool closed")
		return
	}
	// Oldest first: concurrent creates may finish out of order.
	i := len(p.idle)
	for i > 0 && p.idle[i-1].created.After(e.created) {
		i--
	}
	p.idle = slices.Insert(p.idle, i, e)
	p.notifyLocked()
	p.log.Debug("pool sandbox ready", "sandbox_id", sb.ID(), "idle", len(p.idle))
}

// healthLoop checks the idle sandboxes every HealthInterval.
func (p *Pool) healthLoop() {
	defer p.wg.Done()
	t := time.NewTicker(p.opts.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
			p.checkIdle()
		}
	}
}

// checkIdle removes idle sandboxes that fail a health check or expire
// within MinRemaining, kills them and wakes the filler. Sandboxes are
// checked where they are, so Acquire may take one meanwhile; that one is
// the caller's and is left alone.
func (p *Pool) checkIdle() {
	p.mu.Lock()
	idle := append([]pooled(nil), p.idle...)
	p.mu.Unlock()

	bad := make([]bool, len(idle))
	sem := make(chan struct{}, poolParallel)
	var wg sync.WaitGroup
	for i, e := range idle {
		if !p.fresh(e) {
			bad[i] = true
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ctx, cancel := context.WithTimeout(p.ctx, poolCheckTimeout)
			defer cancel()
			bad[i] = !e.sb.Healthy(ctx) && p.ctx.Err() == nil
		}()
	}
	wg.Wait()

	var removed []pooled
	p.mu.Lock()
	for i, e := range idle {
		if !bad[i] {
			continue
		}
		for j, cur := range p.idle {
			if cur.sb == e.sb {
				p.idle = append(p.idle[:j:j], p.idle[j+1:]...)
				removed = append(removed, e)
				break
			}
		}
	}
	if len(removed) > 0 {
		p.notifyLocked()
	}
	p.mu.Unlock()
	for _, e := range removed {
		reason := "health check failed"
		if !p.fresh(e) {
			reason = "expires too soon"
		}
		p.drop(e, reason)
	}
	if len(removed) > 0 {
		p.signal()
	}
}

// lifetime is how long a sandbox made with o lives, as Create sends it.
func lifetime(o CreateOptions) time.Duration {
	if o.Timeout <= 0 {
		return defaultSandboxTimeout
	}
	return o.Timeout
}

// fresh reports whether e expires later than MinRemaining from now.
func (p *Pool) fresh(e pooled) bool {
	return e.expiresAt.IsZero() || e.expiresAt.Sub(p.hook.now()) > p.opts.MinRemaining
}

// drop kills an idle sandbox the pool no longer wants, in the background.
func (p *Pool) drop(e pooled, reason string) {
	p.wg.Add(1)
	go p.kill(e, reason)
}

// kill deletes a sandbox in the background; the caller did wg.Add(1).
func (p *Pool) kill(e pooled, reason string) {
	defer p.wg.Done()
	if err := p.killNow(e); err != nil {
		p.log.Warn("pool could not kill a sandbox", "sandbox_id", e.sb.ID(), "reason", reason, "err", err)
		return
	}
	p.log.Debug("pool killed a sandbox", "sandbox_id", e.sb.ID(), "reason", reason)
}

// killNow deletes a sandbox with its own timeout, independent of any
// caller's context; a sandbox that is already gone is not an error.
func (p *Pool) killNow(e pooled) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), poolKillTimeout)
	defer cancel()
	if err := e.sb.Kill(ctx); err != nil && !IsNotFound(err) {
		return err
	}
	return nil
}

// putBack returns a sandbox to the front of the idle list, or kills it if
// the pool closed meanwhile.
func (p *Pool) putBack(e pooled) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.wg.Add(1)
		go p.kill(e, "pool closed")
		return
	}
	p.idle = append([]pooled{e}, p.idle...)
	p.notifyLocked()
}

// signal wakes the filler without blocking.
func (p *Pool) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// notifyLocked wakes everyone waiting on p.changed. p.mu must be held.
func (p *Pool) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}
