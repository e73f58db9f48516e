package pty

import (
	"github.com/coder/websocket"
)

// inputQueue is how many stdin, resize and signal requests of one client
// may wait while the process is not taking input.
const inputQueue = 32

// inputOp is a queued request acting on the process.
type inputOp func(p *process)

// handleFrame acts on one message from c. Pings are answered at once;
// stdin, resize and signal requests are queued in arrival order for
// inputLoop, so the read loop never waits on the process and keeps
// answering WebSocket pings. A malformed message is answered with
// INVALID_FRAME and otherwise ignored; the session carries on.
func (c *client) handleFrame(typ websocket.MessageType, b []byte) {
	s := c.s
	if _, ok := s.attached(c); !ok {
		return
	}
	op, err := decodeClientFrame(typ == websocket.MessageBinary, b)
	if err != nil {
		s.reply(c, errorFrame(codeInvalidFrame, "%v", err))
		return
	}
	switch op.kind {
	case msgStdin:
		c.enqueue(func(p *process) { s.writeStdin(c, p, op.data) })
	case msgResize:
		// A resize means nothing to a process on pipes; it is accepted and ignored.
		c.enqueue(func(p *process) {
			if err := p.resize(op.rows, op.cols); err != nil {
				s.reply(c, errorFrame(codeRuntimeError, "%v", err))
			}
		})
	case msgSignal:
		c.enqueue(func(p *process) {
			if err := p.signal(op.sig); err != nil {
				s.reply(c, errorFrame(codeRuntimeError, "%v", err))
			}
		})
	case msgPing:
		s.reply(c, pongFrame())
	}
}

// enqueue hands op to inputLoop, or reports STDIN_WRITE_FAILED when the
// queue is full because the process has stopped taking input.
func (c *client) enqueue(op inputOp) {
	select {
	case c.input <- op:
	default:
		c.s.reply(c, errorFrame(codeStdinWriteFailed, "input dropped: the process is not reading its input"))
	}
}

// inputLoop runs queued requests until the read loop closes the queue.
// Requests of a client that is no longer attached, or of a process that
// has exited, are dropped.
func (c *client) inputLoop() {
	for op := range c.input {
		if p, ok := c.s.attached(c); ok {
			op(p)
		}
	}
}

func (s *session) writeStdin(c *client, p *process, b []byte) {
	if len(b) == 0 {
		return
	}
	if err := p.writeStdin(b, s.m.opts.WriteTimeout); err != nil {
		s.reply(c, errorFrame(codeStdinWriteFailed, "%v", err))
	}
}
