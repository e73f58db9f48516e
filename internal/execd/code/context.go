package code

import (
	"context"
	"fmt"
	"sync"

	"github.com/opensandbox-go/opensandbox/internal/execd/eventstream"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// runner is one interpreter process of a context: a Jupyter kernel, the
// JavaScript driver or a bash shell.
type runner interface {
	// run executes code and writes the whole stream to sw, init first,
	// and closes it. It returns false when the interpreter did not survive
	// the run (it died or was killed) and must be replaced.
	//
	// stop is closed when the run is to be interrupted (DELETE /code, or
	// the client left). It is a level, not an edge: a runner looks at it
	// at every step, so an interrupt that comes before the interpreter
	// has even received the cell is not lost. After stop closes, the
	// stream must end within the context's interrupt grace (plus the time
	// to kill the interpreter).
	run(ctx context.Context, sw *eventstream.Writer, code string, stop <-chan struct{}) bool
	// alive reports whether the interpreter process still runs.
	alive() bool
	// close kills the interpreter and everything it started.
	close()
}

// startFunc starts a context's interpreter.
type startFunc func(ctx context.Context, c *codeContext) (runner, error)

// codeContext is one stateful interpreter: its runs are queued one at a
// time; different contexts run concurrently.
type codeContext struct {
	id       string
	language string
	cwd      string // as requested, for the API
	dir      string // resolved working directory
	start    startFunc

	sem chan struct{} // held by the run in progress (or a restart)

	mu     sync.Mutex
	r      runner
	stop   func() // interrupts the run in progress; nil when idle
	closed bool
}

func (c *codeContext) info() sandbox.CodeContext {
	return sandbox.CodeContext{ID: c.id, Language: c.language, Cwd: c.cwd}
}

// ensure starts the interpreter if it is missing or dead; the caller holds
// sem.
func (c *codeContext) ensure(ctx context.Context) (runner, error) {
	c.mu.Lock()
	r, closed := c.r, c.closed
	c.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("context %s was deleted", c.id)
	}
	if r != nil && r.alive() {
		return r, nil
	}
	if r != nil {
		r.close()
	}
	r, err := c.start(ctx, c)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		r.close()
		return nil, fmt.Errorf("context %s was deleted", c.id)
	}
	c.r = r
	return r, nil
}

// run queues behind earlier runs, then executes code. A run that kills the
// interpreter hands the queue to a restart, so the next run finds a fresh
// interpreter with the same context id.
func (c *codeContext) run(ctx context.Context, sw *eventstream.Writer, code string) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	release := func() { <-c.sem }
	r, err := c.ensure(context.WithoutCancel(ctx))
	if err != nil {
		release()
		failStream(sw, c.id, "KernelStartError", err.Error())
		return
	}
	stop := make(chan struct{})
	interrupt := sync.OnceFunc(func() { close(stop) })
	c.mu.Lock()
	c.stop = interrupt
	c.mu.Unlock()
	// A client that leaves interrupts its run: nobody reads the stream,
	// and the queue must move on.
	unhook := context.AfterFunc(ctx, interrupt)
	ok := r.run(ctx, sw, code, stop)
	unhook()
	c.mu.Lock()
	c.stop = nil
	c.mu.Unlock()
	if ok && r.alive() {
		release()
		return
	}
	go func() {
		defer release()
		if _, err := c.ensure(context.Background()); err != nil {
			// The next run tries again and reports the reason.
			return
		}
	}()
}

// interrupt stops the run in progress; it does nothing when idle.
func (c *codeContext) interrupt() {
	c.mu.Lock()
	stop := c.stop
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// stopped reports whether stop is closed.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// close kills the interpreter; the context cannot be used afterwards.
func (c *codeContext) close() {
	c.mu.Lock()
	c.closed = true
	r := c.r
	c.mu.Unlock()
	if r != nil {
		r.close()
	}
}

// failStream reports a run that could not start as init plus error.
func failStream(sw *eventstream.Writer, id, ename, msg string) {
	sw.Send(sandbox.StreamEvent{Type: sandbox.EventInit, Text: id})
	sw.Send(sandbox.StreamEvent{Type: sandbox.EventError, Error: &sandbox.StreamError{
		Name: ename, Value: msg, Traceback: []string{msg},
	}})
	sw.Close()
}
