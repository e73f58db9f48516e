package code

import (
	"context"
	"sync"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/execd/eventstream"
	"github.com/opensandbox-go/opensandbox/internal/execd/session"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// bashRunner is a persistent shell: each cell is sourced into it, so the
// working directory and variables persist, and its exit status is
// reported as for a session run.
type bashRunner struct {
	sh    *session.Shell
	grace time.Duration
}

func startBash(_ context.Context, m *Manager, c *codeContext) (runner, error) {
	sh, err := session.StartShell(c.id, c.dir, session.Options{Env: m.opts.Env, Logger: m.log, RawOutput: true, KillGrace: m.opts.InterruptGrace})
	if err != nil {
		return nil, err
	}
	return &bashRunner{sh: sh, grace: m.opts.InterruptGrace}, nil
}

// run sources the cell. An interrupt sends SIGTERM, then SIGKILL after the
// grace, to the shell's children; a cell that still runs after a second
// grace is a loop of the shell's own builtins, which only killing the
// shell ends (the context restarts it without its state).
func (b *bashRunner) run(ctx context.Context, sw *eventstream.Writer, code string, stop <-chan struct{}) bool {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-stop:
		case <-done:
			return
		}
		t := time.NewTimer(2 * b.grace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			b.sh.Close()
		}
	}()
	b.sh.RunStoppable(ctx, sw, sandbox.RunInSessionRequest{Command: code}, stop)
	close(done)
	wg.Wait()
	return b.alive()
}

func (b *bashRunner) alive() bool {
	select {
	case <-b.sh.Exited():
		return false
	default:
		return true
	}
}

func (b *bashRunner) close() {
	b.sh.Close()
	<-b.sh.Exited()
}
