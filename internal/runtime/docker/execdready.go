package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/opensandbox-go/opensandbox/internal/execd/readiness"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// readyWatch reads a created container's standard error, attached before
// the container starts, for execd's readiness line (see package
// readiness): Create waits for that line instead of polling execd.
type readyWatch struct {
	hr   types.HijackedResponse
	done chan struct{}
	// err is readiness.ErrSeen once the line was read; otherwise why the
	// stream ended (io.EOF or nil: the container's output closed, it
	// exited). Written before done is closed.
	err error
}

// newReadyMarker is a fresh marker for one container.
func newReadyMarker() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}

// watchReady attaches to containerID's standard error and watches it for
// the line of marker. It returns nil when the engine refuses the attach:
// Create then probes execd until it answers.
func (r *Runtime) watchReady(ctx context.Context, containerID, marker string) *readyWatch {
	// A hijacked request bypasses the client's transport, where engine
	// requests are counted (CountEngineRequests): count it here.
	runtime.PhasesFrom(ctx).EngineRequest()
	hr, err := r.cli.ContainerAttach(ctx, containerID, container.AttachOptions{Stream: true, Stderr: true})
	if err != nil {
		r.log.WarnContext(ctx, "cannot attach to the container to wait for execd's readiness line; probing execd instead",
			"container", shortID(containerID), "err", err)
		return nil
	}
	w := &readyWatch{hr: hr, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		// Only stderr is attached; stdout, were it sent, is not execd's.
		_, w.err = stdcopy.StdCopy(io.Discard, readiness.NewMatcher(marker), hr.Reader)
	}()
	return w
}

// wait returns true once the line was read, false when the container's
// output ended without it or ctx ended first. It detaches: the watch is
// over either way.
func (w *readyWatch) wait(ctx context.Context) bool {
	select {
	case <-w.done:
	case <-ctx.Done():
	}
	w.stop()
	return errors.Is(w.err, readiness.ErrSeen)
}

// stop detaches and waits for the reader; it may be called more than once.
func (w *readyWatch) stop() {
	if w == nil {
		return
	}
	w.hr.Close()
	<-w.done
}
