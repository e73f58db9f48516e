package pty

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func TestOutboxOverflowKeepsControlFrames(t *testing.T) {
	o := newOutbox(64 << 10)
	o.push(connectedFrame("id", modePTY))
	o.pushAll(replayFrames(100, []byte("replayed"), 4))
	o.push(outputFrame(chanStdout, 108, []byte("live")))
	o.push(pongFrame())
	var resume int64 = -1
	o.overflow(112, closeRequest{websocket.StatusTryAgainLater, ""}, func(r int64) outFrame {
		resume = r
		return errorFrame(codeRuntimeError, "behind")
	})
	if resume != 100 {
		t.Errorf("overflow resume = %d, want 100 (the first dropped replay byte)", resume)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	frames, _, err := o.next(ctx)
	if err != nil {
		t.Fatalf("next(): %v", err)
	}
	var got []string
	for _, f := range frames {
		got = append(got, string(f.data))
	}
	want := []string{
		string(connectedFrame("id", modePTY).data),
		string(pongFrame().data),
		string(errorFrame(codeRuntimeError, "behind").data),
	}
	if len(got) != len(want) {
		t.Fatalf("frames after overflow = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("frame %d after overflow = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestOutbox(t *testing.T) {
	tests := []struct {
		name       string
		limit      int
		outputs    []string // pushed as live output at increasing offsets
		wantPushed int      // how many pushes succeed
		wantResume int64
	}{
		{"first frame always fits", 2, []string{"abcdef"}, 1, 0},
		{"within limit", 8, []string{"ab", "cd"}, 2, 0},
		{"nothing queued", 8, nil, 0, 0},
		{"over limit", 8, []string{"abcd", "efgh"}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newOutbox(tt.limit)
			var off int64
			pushed := 0
			var failedAt int64 = -1
			for _, s := range tt.outputs {
				if o.push(outputFrame(chanStdout, off, []byte(s))) {
					pushed++
				} else if failedAt < 0 {
					failedAt = off
				}
				off += int64(len(s))
			}
			if pushed != tt.wantPushed {
				t.Errorf("successful pushes = %d, want %d", pushed, tt.wantPushed)
			}
			if failedAt < 0 {
				failedAt = off
			}
			var resume int64 = -1
			o.overflow(failedAt, closeRequest{websocket.StatusTryAgainLater, ""}, func(r int64) outFrame {
				resume = r
				return errorFrame(codeRuntimeError, "behind")
			})
			if resume != tt.wantResume {
				t.Errorf("overflow resume = %d, want %d", resume, tt.wantResume)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			frames, cr, err := o.next(ctx)
			if err != nil || cr != nil || len(frames) != 1 || frames[0].off != -1 {
				t.Fatalf("next() after overflow = (%v, %v, %v), want just the error frame", frames, cr, err)
			}
			if _, cr, err := o.next(ctx); err != nil || cr == nil || cr.code != websocket.StatusTryAgainLater {
				t.Errorf("second next() = (%v, %v), want the close request", cr, err)
			}
			if !o.push(outputFrame(chanStdout, off, []byte("late"))) {
				t.Errorf("push after finish = false, want true (dropped silently)")
			}
		})
	}
}
