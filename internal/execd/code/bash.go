package code

import (
	"context"

	"github.com/opensandbox-go/opensandbox/internal/execd/eventstream"
	"github.com/opensandbox-go/opensandbox/internal/execd/session"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// bashRunner is a persistent shell: each cell is sourced into it, so the
// working directory and variables persist, and its exit status is
// reported as for a session run.
type bashRunner struct{ sh *session.Shell }

func startBash(_ context.Context, m *Manager, c *codeContext) (runner, error) {
	sh, err := session.StartShell(c.id, c.dir, session.Options{Env: m.opts.Env, Logger: m.log, RawOutput: true})
	if err != nil {
		return nil, err
	}
	return &bashRunner{sh: sh}, nil
}

func (b *bashRunner) run(ctx context.Context, sw *eventstream.Writer, code string) bool {
	b.sh.Run(ctx, sw, sandbox.RunInSessionRequest{Command: code})
	return b.alive()
}

func (b *bashRunner) interrupt() { b.sh.Interrupt("interrupted") }

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
