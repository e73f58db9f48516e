package proc

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// TestReadBufferedAfterDeadline: once a read deadline has passed, a read
// fails without looking at the pipe, even with output waiting there; that
// lost a command's output when its pump ran late on a loaded machine
// (TestConcurrentCommands saw a command with no stdout). ReadBuffered must
// still hand over what the pipe holds.
func TestReadBufferedAfterDeadline(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want := strings.Repeat("line\n", 10000) // 50 KB, under a pipe's capacity
	if _, err := w.WriteString(want); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r.SetReadDeadline(time.Now().Add(-time.Second))
	buf := make([]byte, 4096)
	if _, err := r.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline = %v; the premise of this test changed", err)
	}
	var got bytes.Buffer
	ReadBuffered(r, buf, func(b []byte) { got.Write(b) })
	if got.String() != want {
		t.Errorf("ReadBuffered took %d bytes, want %d", got.Len(), len(want))
	}
}

// TestReadBufferedEmpty: an empty pipe whose writer is still open answers
// at once, and a writer that never stops cannot hold the caller.
func TestReadBufferedEmpty(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	var got bytes.Buffer
	ReadBuffered(r, make([]byte, 4096), func(b []byte) { got.Write(b) })
	if got.Len() != 0 {
		t.Errorf("ReadBuffered of an empty pipe took %q", got.String())
	}

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		chunk := bytes.Repeat([]byte("x"), 4096)
		for {
			select {
			case <-stop:
				return
			default:
			}
			w.Write(chunk)
		}
	}()
	ReadBuffered(r, make([]byte, 4096), func([]byte) {})
	close(stop)
	r.Close() // unblocks a writer stuck on a full pipe
	<-done
}
