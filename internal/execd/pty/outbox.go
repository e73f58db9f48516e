package pty

import (
	"context"
	"sync"
)

// outbox is the bounded queue between a session and the goroutine writing
// to one client's socket. Producers never block: when the queued bytes
// would pass the limit, push fails and the session drops the client, which
// may come back with since= for what it missed. A finished outbox delivers
// its last frames, then tells the writer how to close the socket.
type outbox struct {
	limit int

	mu      sync.Mutex
	frames  []outFrame
	bytes   int
	closing *closeRequest
	wake    chan struct{}
}

func newOutbox(limit int) *outbox {
	return &outbox{limit: limit, wake: make(chan struct{}, 1)}
}

func (o *outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// push queues f and reports whether it fit. A frame always fits an empty
// queue; frames pushed after finish are dropped, and that is not a failure.
func (o *outbox) push(f outFrame) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing != nil {
		return true
	}
	if len(o.frames) > 0 && o.bytes+len(f.data) > o.limit {
		return false
	}
	o.frames = append(o.frames, f)
	o.bytes += len(f.data)
	o.signal()
	return true
}

// pushAll queues frames regardless of the limit; used for the bounded
// replay that opens a connection.
func (o *outbox) pushAll(frames []outFrame) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing != nil {
		return
	}
	for _, f := range frames {
		o.frames = append(o.frames, f)
		o.bytes += len(f.data)
	}
	o.signal()
}

// finish queues the final frames and the close; with discard, output
// frames still waiting are dropped first (control frames such as connected
// stay). Only the first finish counts.
func (o *outbox) finish(discard bool, cr closeRequest, final ...outFrame) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.finishLocked(discard, cr, final...)
}

func (o *outbox) finishLocked(discard bool, cr closeRequest, final ...outFrame) {
	if o.closing != nil {
		return
	}
	if discard {
		kept := o.frames[:0]
		o.bytes = 0
		for _, f := range o.frames {
			if f.off < 0 {
				kept = append(kept, f)
				o.bytes += len(f.data)
			}
		}
		clear(o.frames[len(kept):])
		o.frames = kept
	}
	o.frames = append(o.frames, final...)
	o.closing = &cr
	o.signal()
}

// overflow drops the queued output and finishes with the frame built by
// final, which learns the offset of the first output byte the client will
// not receive: that of the oldest dropped output frame, or off (the output
// that did not fit) when none was queued.
func (o *outbox) overflow(off int64, cr closeRequest, final func(resume int64) outFrame) {
	o.mu.Lock()
	defer o.mu.Unlock()
	resume := off
	for _, f := range o.frames {
		if f.off >= 0 {
			resume = f.off
			break
		}
	}
	o.finishLocked(true, cr, final(resume))
}

// next waits for work: queued frames first, then, once they are all taken,
// the close request. It fails only when ctx ends.
func (o *outbox) next(ctx context.Context) ([]outFrame, *closeRequest, error) {
	for {
		o.mu.Lock()
		if len(o.frames) > 0 {
			frames := o.frames
			o.frames, o.bytes = nil, 0
			o.mu.Unlock()
			return frames, nil, nil
		}
		cr := o.closing
		o.mu.Unlock()
		if cr != nil {
			return nil, cr, nil
		}
		select {
		case <-o.wake:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}
