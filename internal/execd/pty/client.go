package pty

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// client is one attached WebSocket. The session queues frames in out; a
// writer goroutine alone writes data frames to conn, so a slow socket never
// holds the session lock.
type client struct {
	s    *session
	conn *websocket.Conn // set once, before serve
	out  *outbox
	// input carries stdin, resize and signal requests to inputLoop.
	input chan inputOp
	// ready is guarded by s.mu: set once the connected frame and replay
	// are queued, from which point live output is forwarded.
	ready bool
}

func newClient(s *session) *client {
	return &client{s: s, out: newOutbox(s.m.queueBytes), input: make(chan inputOp, inputQueue)}
}

// serve runs the connection until it closes. The calling goroutine reads
// client frames; a writer drains the outbox, an input goroutine applies
// client requests to the process and a pinger keeps the socket alive. All
// have ended when serve returns.
func (c *client) serve(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { c.writeLoop(ctx) })
	wg.Go(func() { c.pingLoop(ctx) })
	inputDone := make(chan struct{})
	wg.Go(func() {
		defer close(inputDone)
		c.inputLoop()
	})
	for {
		typ, data, err := c.conn.Read(ctx)
		if err != nil {
			c.s.m.log.Debug("pty client detached", slog.String("session", c.s.id), slog.Any("err", err))
			break
		}
		c.handleFrame(typ, data)
	}
	// Input sent just before the client left still reaches the process.
	close(c.input)
	<-inputDone
	c.s.release(c)
	cancel()
	c.conn.CloseNow()
	wg.Wait()
}

// writeLoop writes queued frames, each within the write timeout, and
// closes the socket as the outbox asks once the last frame is out.
func (c *client) writeLoop(ctx context.Context) {
	timeout := c.s.m.opts.WriteTimeout
	for {
		frames, cr, err := c.out.next(ctx)
		if err != nil {
			return
		}
		for _, f := range frames {
			wctx, cancel := context.WithTimeout(ctx, timeout)
			err := c.conn.Write(wctx, f.typ, f.data)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					c.s.m.log.Debug("pty client write failed", slog.String("session", c.s.id), slog.Any("err", err))
				}
				c.conn.CloseNow()
				return
			}
		}
		if cr != nil {
			c.conn.Close(cr.code, cr.reason)
			return
		}
	}
}

// pingLoop sends a WebSocket ping every PingInterval and drops the socket
// when the pong does not come back within WriteTimeout.
func (c *client) pingLoop(ctx context.Context) {
	t := time.NewTicker(c.s.m.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, c.s.m.opts.WriteTimeout)
		err := c.conn.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				c.s.m.log.Debug("pty client ping failed", slog.String("session", c.s.id), slog.Any("err", err))
				c.conn.CloseNow()
			}
			return
		}
	}
}
