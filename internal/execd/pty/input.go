package pty

import (
	"github.com/coder/websocket"
)

// handleFrame acts on one message from c: stdin bytes, resize, signal or
// ping. A malformed message is answered with INVALID_FRAME and otherwise
// ignored; the session carries on.
func (s *session) handleFrame(c *client, typ websocket.MessageType, b []byte) {
	p, ok := s.attached(c)
	if !ok {
		return
	}
	if typ == websocket.MessageBinary {
		if len(b) == 0 || b[0] != chanStdin {
			s.reply(c, errorFrame(codeInvalidFrame, "binary frames from the client must start with 0x00 (stdin)"))
			return
		}
		s.writeStdin(c, p, b[1:])
		return
	}
	msg, err := parseClientMessage(b)
	if err != nil {
		s.reply(c, errorFrame(codeInvalidFrame, "%v", err))
		return
	}
	switch msg.Type {
	case msgStdin:
		s.writeStdin(c, p, []byte(*msg.Data))
	case msgResize:
		// A resize means nothing to a process on pipes; it is accepted and ignored.
		if err := p.resize(uint16(*msg.Rows), uint16(*msg.Cols)); err != nil {
			s.reply(c, errorFrame(codeRuntimeError, "%v", err))
		}
	case msgSignal:
		sig, _ := parseSignal(msg.Signal) // validated by parseClientMessage
		if err := p.signal(sig); err != nil {
			s.reply(c, errorFrame(codeRuntimeError, "%v", err))
		}
	case msgPing:
		s.reply(c, pongFrame())
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
