//go:build linux

package pty

import (
	"errors"
	"syscall"
	"testing"
)

func TestParseSignal(t *testing.T) {
	tests := []struct {
		in      string
		want    syscall.Signal
		wantErr bool
	}{
		{"SIGINT", syscall.SIGINT, false},
		{"INT", syscall.SIGINT, false},
		{"sigterm", syscall.SIGTERM, false},
		{" SIGKILL ", syscall.SIGKILL, false},
		{"HUP", syscall.SIGHUP, false},
		{"SIGQUIT", syscall.SIGQUIT, false},
		{"USR1", sigUSR1, false},
		{"SIGUSR2", sigUSR2, false},
		{"SIGWINCH", sigWINCH, false},
		{"", 0, true},
		{"SIG", 0, true},
		{"9", 0, true},
		{"SIGNOPE", 0, true},
	}
	for _, tt := range tests {
		got, err := parseSignal(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseSignal(%q) = (%v, %v), want (%v, error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !errors.Is(err, errInvalidFrame) {
			t.Errorf("parseSignal(%q) error %v does not wrap errInvalidFrame", tt.in, err)
		}
	}
}

func TestReplayFrames(t *testing.T) {
	frames := replayFrames(1<<40, []byte("abcdefg"), 3)
	want := []struct {
		off  uint64
		data string
	}{{1 << 40, "abc"}, {1<<40 + 3, "def"}, {1<<40 + 6, "g"}}
	if len(frames) != len(want) {
		t.Fatalf("replayFrames gave %d frames, want %d", len(frames), len(want))
	}
	for i, f := range frames {
		b := f.data
		var off uint64
		for _, c := range b[1:9] {
			off = off<<8 | uint64(c)
		}
		if b[0] != chanReplay || off != want[i].off || string(b[9:]) != want[i].data {
			t.Errorf("frame %d = %#x@%d %q, want 0x03@%d %q", i, b[0], off, b[9:], want[i].off, want[i].data)
		}
	}
}
