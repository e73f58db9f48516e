package rfb

import (
	"context"
	"errors"
	"image"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func tcpDialer(addr string, attempts *int) func(context.Context) (io.ReadWriteCloser, error) {
	return func(ctx context.Context) (io.ReadWriteCloser, error) {
		*attempts++
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

func TestWaitFrame(t *testing.T) {
	const w, h = 6, 3
	want := pattern(w, h, 9)
	starting := func(s *serverConn) { s.c.Close() }  // like websockify before its target listens
	silent := func(s *serverConn) { s.waitClosed() } // accepts but never greets
	ready := func(s *serverConn) {
		s.greet("RFB 003.008\n", "RFB 003.008\n")
		s.securityNone38()
		s.initDesktop(w, h, "ready")
		s.expectFullRequest(w, h)
		s.sendUpdate(want, image.Rect(0, 0, w, h))
		s.waitClosed()
	}
	addr := serve(t, starting, starting, silent, ready)
	var dials int
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := WaitFrame(ctx, tcpDialer(addr, &dials), Config{}, WaitOptions{
		Interval: 10 * time.Millisecond, AttemptTimeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("WaitFrame: %v", err)
	}
	if res.Attempts != 4 || dials != 4 {
		t.Errorf("WaitFrame: Attempts = %d after %d dials, want 4 and 4", res.Attempts, dials)
	}
	if res.ServerInit.Name != "ready" {
		t.Errorf("WaitFrame: ServerInit.Name = %q, want %q", res.ServerInit.Name, "ready")
	}
	if d := diffImages(res.Frame, want); d != "" {
		t.Errorf("WaitFrame frame differs from what the server sent:\n%s", d)
	}
}

func TestWaitFrameStopsOnSecurityError(t *testing.T) {
	addr := serve(t, func(s *serverConn) {
		s.greet("RFB 003.008\n", "RFB 003.008\n")
		s.write(uint8(1), uint8(SecurityVNCAuth))
		s.expect("security type", []byte{2})
		s.vncAuth("3.8", "right")
		s.waitClosed()
	})
	var dials int
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	res, err := WaitFrame(ctx, tcpDialer(addr, &dials), Config{Password: "wrong"}, WaitOptions{Interval: time.Millisecond})
	if !errors.Is(err, ErrSecurity) {
		t.Fatalf("WaitFrame error = %v, want one wrapping ErrSecurity", err)
	}
	if res.Attempts != 1 || dials != 1 {
		t.Errorf("WaitFrame: Attempts = %d after %d dials, want 1 and 1", res.Attempts, dials)
	}
}

func TestWaitFrameDeadline(t *testing.T) {
	// A port with nothing behind it: every dial is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var dials int
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := WaitFrame(ctx, tcpDialer(addr, &dials), Config{}, WaitOptions{Interval: 20 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFrame error = %v, want one wrapping context.DeadlineExceeded", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("WaitFrame returned after %v, want about 300ms", el)
	}
	if res.Attempts < 2 || res.Attempts != dials {
		t.Errorf("WaitFrame: Attempts = %d after %d dials, want several and equal", res.Attempts, dials)
	}
	// Usually "connection refused"; "i/o timeout" when the deadline cut
	// the last dial short.
	if !strings.Contains(err.Error(), "(last attempt: dial tcp "+addr+": ") {
		t.Errorf("WaitFrame error = %q, want it to carry the last attempt's error", err)
	}
}
