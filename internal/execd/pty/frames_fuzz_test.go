package pty

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzClientFrame feeds arbitrary client messages to the PTY frame decoder.
// It must never panic; a rejected frame is always an INVALID_FRAME error;
// an accepted one is valid (dimensions in range, a known signal) and says
// the same when encoded again as a client would send it. The seeds run
// with every `go test`; `go test -fuzz FuzzClientFrame` explores further.
func FuzzClientFrame(f *testing.F) {
	for _, s := range []struct {
		binary bool
		data   string
	}{
		{true, "\x00ls -l\r"},
		{true, "\x00"},
		{true, ""},
		{true, "\x01oops"},
		{false, `{"type":"stdin","data":"echo hi\n"}`},
		{false, `{"type":"stdin"}`},
		{false, `{"type":"resize","cols":80,"rows":24}`},
		{false, `{"type":"resize","cols":0,"rows":24}`},
		{false, `{"type":"resize","cols":65536,"rows":1}`},
		{false, `{"type":"resize","cols":-1,"rows":1e3}`},
		{false, `{"type":"signal","signal":"SIGINT"}`},
		{false, `{"type":"signal","signal":"  sigterm "}`},
		{false, `{"type":"signal","signal":"SIG"}`},
		{false, `{"type":"signal","signal":"SEGV"}`},
		{false, `{"type":"ping"}`},
		{false, `{"type":""}`},
		{false, `{"type":"exec","data":"x"}`},
		{false, `[1,2,3]`},
		{false, `{"type":"stdin","data":"\ud800"}`},
		{false, `{"type":"resize","cols":"80","rows":24}`},
		{false, `not json`},
		{false, ``},
	} {
		f.Add(s.binary, []byte(s.data))
	}
	f.Fuzz(func(t *testing.T, binaryFrame bool, b []byte) {
		op, err := decodeClientFrame(binaryFrame, b)
		if err != nil {
			if !errors.Is(err, errInvalidFrame) {
				t.Fatalf("decode(%v, %q) error %v does not wrap errInvalidFrame", binaryFrame, b, err)
			}
			if !strings.HasPrefix(err.Error(), errInvalidFrame.Error()) {
				t.Fatalf("error %q does not start with %q", err, errInvalidFrame)
			}
			return
		}
		var again []byte
		switch op.kind {
		case msgStdin:
			if binaryFrame && !bytes.Equal(op.data, b[1:]) {
				t.Fatalf("binary stdin = %q, want %q", op.data, b[1:])
			}
			again = append([]byte{chanStdin}, op.data...)
		case msgResize:
			if op.rows < 1 || op.cols < 1 {
				t.Fatalf("resize to %dx%d accepted", op.cols, op.rows)
			}
			again, _ = json.Marshal(map[string]any{"type": msgResize, "cols": op.cols, "rows": op.rows})
		case msgSignal:
			found := false
			for _, s := range signalNames {
				found = found || s == op.sig
			}
			if !found || op.sig == 0 {
				t.Fatalf("signal %v accepted", op.sig)
			}
			name := ""
			for n, s := range signalNames {
				if s == op.sig {
					name = n
				}
			}
			again, _ = json.Marshal(map[string]any{"type": msgSignal, "signal": "SIG" + name})
		case msgPing:
			again = []byte(`{"type":"ping"}`)
		default:
			t.Fatalf("decode(%v, %q) = unknown kind %q", binaryFrame, b, op.kind)
		}
		op2, err := decodeClientFrame(op.kind == msgStdin, again)
		if err != nil {
			t.Fatalf("re-encoded %q rejected: %v", again, err)
		}
		if op2.kind != op.kind || !bytes.Equal(op2.data, op.data) || op2.rows != op.rows || op2.cols != op.cols || op2.sig != op.sig {
			t.Fatalf("round trip %+v -> %q -> %+v", op, again, op2)
		}
	})
}

// FuzzReplayFrames: replayed output split into frames comes back whole, in
// order, each frame carrying the absolute offset of its first byte.
func FuzzReplayFrames(f *testing.F) {
	f.Add(int64(0), []byte("hello world"), 4)
	f.Add(int64(1<<40), []byte{}, 1)
	f.Add(int64(7), bytes.Repeat([]byte("x"), 100), 100)
	f.Fuzz(func(t *testing.T, off int64, p []byte, chunk int) {
		if off < 0 || chunk < 1 || chunk > 1<<16 {
			t.Skip()
		}
		var got []byte
		next := off
		for _, fr := range replayFrames(off, p, chunk) {
			if len(fr.data) < 9 || fr.data[0] != chanReplay || len(fr.data)-9 > chunk {
				t.Fatalf("bad frame %q", fr.data)
			}
			if o := int64(binary.BigEndian.Uint64(fr.data[1:9])); o != next || fr.off != next {
				t.Fatalf("frame offset %d (off %d), want %d", o, fr.off, next)
			}
			got = append(got, fr.data[9:]...)
			next += int64(len(fr.data) - 9)
		}
		if !bytes.Equal(got, p) {
			t.Fatalf("replayed %q, want %q", got, p)
		}
	})
}
