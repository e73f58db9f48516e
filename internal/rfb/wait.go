package rfb

import (
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"time"
)

// WaitOptions tunes WaitFrame. The zero value is usable.
type WaitOptions struct {
	// Interval is the pause between attempts; zero means 100 ms.
	Interval time.Duration
	// AttemptTimeout bounds one attempt (dial, handshake and frame), so
	// that a server that accepts but never answers does not use up the
	// whole wait; zero means 10 s.
	AttemptTimeout time.Duration
}

// WaitResult is what WaitFrame got.
type WaitResult struct {
	Frame      *image.RGBA
	ServerInit ServerInit
	// Attempts counts the connections tried, the successful one included.
	Attempts int
}

// WaitFrame fetches one frame from a VNC server that may still be
// starting: it dials, performs the handshake and fetches a frame, and
// tries again after a failure until one attempt succeeds or ctx is done.
// dial opens a fresh transport for each attempt (for example a
// DialWebSocket); the connection is closed before WaitFrame returns. An
// ErrSecurity failure ends the wait at once, since trying again would not
// help.
//
// It suits timing "create → first VNC frame"; what the frame shows is for
// the caller to judge (see Stats).
func WaitFrame(ctx context.Context, dial func(context.Context) (io.ReadWriteCloser, error), cfg Config, opts WaitOptions) (WaitResult, error) {
	interval := opts.Interval
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	perAttempt := opts.AttemptTimeout
	if perAttempt <= 0 {
		perAttempt = 10 * time.Second
	}
	var res WaitResult
	for {
		res.Attempts++
		frame, si, err := fetchOnce(ctx, dial, cfg, perAttempt)
		if err == nil {
			res.Frame, res.ServerInit = frame, si
			return res, nil
		}
		if errors.Is(err, ErrSecurity) {
			return res, err
		}
		if ctx.Err() != nil {
			return res, fmt.Errorf("rfb: no frame after %d attempts: %w (last attempt: %w)", res.Attempts, context.Cause(ctx), err)
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, fmt.Errorf("rfb: no frame after %d attempts: %w (last attempt: %w)", res.Attempts, context.Cause(ctx), err)
		case <-t.C:
		}
	}
}

func fetchOnce(ctx context.Context, dial func(context.Context) (io.ReadWriteCloser, error), cfg Config, timeout time.Duration) (*image.RGBA, ServerInit, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := dial(ctx)
	if err != nil {
		return nil, ServerInit{}, err
	}
	c, err := NewClient(ctx, conn, cfg)
	if err != nil {
		return nil, ServerInit{}, err
	}
	defer c.Close()
	img, err := c.Frame(ctx)
	return img, c.ServerInit(), err
}
