package rfb

import (
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func dialT(t *testing.T, addr string, cfg Config) (*Client, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, cfg)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func TestVersionNegotiation(t *testing.T) {
	for _, tc := range []struct {
		server, client, version string
	}{
		{"RFB 003.008\n", "RFB 003.008\n", "3.8"},
		{"RFB 003.007\n", "RFB 003.007\n", "3.7"},
		{"RFB 003.003\n", "RFB 003.003\n", "3.3"},
		{"RFB 003.005\n", "RFB 003.003\n", "3.3"}, // RFC 6143 §7.1.1: treat 3.5 as 3.3
		{"RFB 003.889\n", "RFB 003.008\n", "3.8"}, // a newer minor gets our highest
	} {
		t.Run(tc.version+"/"+strings.TrimSpace(tc.server), func(t *testing.T) {
			addr := serve(t, func(s *serverConn) {
				s.greet(tc.server, tc.client)
				switch tc.version {
				case "3.8":
					s.securityNone38()
				case "3.7":
					s.write(uint8(1), uint8(SecurityNone))
					s.expect("security type", []byte{1}) // and no SecurityResult
				case "3.3":
					s.write(uint32(SecurityNone))
				}
				s.initDesktop(640, 480, "test desktop ✓")
				s.waitClosed()
			})
			c, err := dialT(t, addr, Config{})
			if err != nil {
				t.Fatalf("Dial: %v", err)
			}
			if got := c.ProtocolVersion(); got != tc.version {
				t.Errorf("ProtocolVersion() = %q, want %q", got, tc.version)
			}
			if got := c.SecurityType(); got != SecurityNone {
				t.Errorf("SecurityType() = %v, want None", got)
			}
			want := ServerInit{Width: 640, Height: 480, PixelFormat: serverFormat, Name: "test desktop ✓"}
			if diff := cmp.Diff(want, c.ServerInit()); diff != "" {
				t.Errorf("ServerInit() mismatch (-want +got):\n%s", diff)
			}
			c.Close()
		})
	}
}

func TestBadServerInit(t *testing.T) {
	for _, tc := range []struct {
		w, h int
		want string
	}{
		{0, 480, "rfb: ServerInit: empty desktop 0x480"},
		{65535, 65535, "rfb: ServerInit: desktop 65535x65535 is larger than the 67108864 pixels this client handles"},
	} {
		addr := serve(t, func(s *serverConn) {
			s.greet("RFB 003.008\n", "RFB 003.008\n")
			s.securityNone38()
			s.expect("ClientInit", []byte{1})
			s.write(uint16(tc.w), uint16(tc.h), rgba32.marshal(), uint32(1), "x")
			s.waitClosed()
		})
		_, err := dialT(t, addr, Config{})
		if err == nil || err.Error() != tc.want {
			t.Errorf("Dial to a %dx%d desktop: error = %v, want %q", tc.w, tc.h, err, tc.want)
		}
	}
}

func TestBadGreeting(t *testing.T) {
	for _, tc := range []struct{ greeting, want string }{
		{"SSH-2.0-Open", "not an RFB server"},
		{"RFB 004.000\n", "unsupported protocol version 4.0"},
		{"RFB 003.002\n", "unsupported protocol version 3.2"},
	} {
		t.Run(tc.greeting, func(t *testing.T) {
			addr := serve(t, func(s *serverConn) {
				s.write(tc.greeting)
				s.waitClosed()
			})
			_, err := dialT(t, addr, Config{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Dial error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestVNCAuthentication(t *testing.T) {
	for _, tc := range []struct {
		name     string
		version  string // server's version
		offered  []byte // 3.7/3.8 security types; 3.3 always sends type 2
		password string // the server's
		client   string // the client's
		wantErr  string // "" means success
	}{
		{name: "3.8 right password", version: "3.8", offered: []byte{2}, password: "s3cret", client: "s3cret"},
		{name: "3.8 prefers VNC auth when a password is set", version: "3.8", offered: []byte{1, 2}, password: "pw", client: "pw"},
		{name: "3.7 right password", version: "3.7", offered: []byte{2}, password: "s3cret", client: "s3cret"},
		{name: "3.3 right password", version: "3.3", password: "s3cret", client: "s3cret"},
		{name: "only eight bytes count", version: "3.8", offered: []byte{2}, password: "12345678", client: "12345678 and more"},
		{name: "3.8 wrong password", version: "3.8", offered: []byte{2}, password: "s3cret", client: "guess",
			wantErr: "rfb: security: server refused: Authentication failed"},
		{name: "3.7 wrong password", version: "3.7", offered: []byte{2}, password: "s3cret", client: "guess",
			wantErr: "rfb: security: VNC Authentication failed (server sent no reason)"},
		{name: "3.3 wrong password", version: "3.3", password: "s3cret", client: "guess",
			wantErr: "rfb: security: VNC Authentication failed (server sent no reason)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wire := "RFB 003.00" + tc.version[2:] + "\n"
			addr := serve(t, func(s *serverConn) {
				s.greet(wire, wire)
				if tc.version == "3.3" {
					s.write(uint32(SecurityVNCAuth))
				} else {
					s.write(uint8(len(tc.offered)), tc.offered)
					s.expect("security type", []byte{byte(SecurityVNCAuth)})
				}
				if !s.vncAuth(tc.version, tc.password) {
					s.waitClosed()
					return
				}
				s.initDesktop(8, 8, "auth")
				s.waitClosed()
			})
			c, err := dialT(t, addr, Config{Password: tc.client})
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Dial error = %v, want %q", err, tc.wantErr)
				}
				if !errors.Is(err, ErrSecurity) {
					t.Errorf("Dial error %q does not wrap ErrSecurity", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Dial: %v", err)
			}
			if got := c.SecurityType(); got != SecurityVNCAuth {
				t.Errorf("SecurityType() = %v, want VNC Authentication", got)
			}
			c.Close()
		})
	}
}

func TestSecurityFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  func(s *serverConn)
		cfg     Config
		wantErr string
		io      bool // an I/O failure, not ErrSecurity
	}{
		{
			name: "3.8 no types, with reason",
			script: func(s *serverConn) {
				s.greet("RFB 003.008\n", "RFB 003.008\n")
				s.write(uint8(0), uint32(len("too many clients")), "too many clients")
			},
			wantErr: "rfb: security: server refused: too many clients",
		},
		{
			name: "3.3 invalid type, with reason",
			script: func(s *serverConn) {
				s.greet("RFB 003.003\n", "RFB 003.003\n")
				s.write(uint32(0), uint32(len("blacklisted")), "blacklisted")
			},
			wantErr: "rfb: security: server refused: blacklisted",
		},
		{
			name: "only unsupported types",
			script: func(s *serverConn) {
				s.greet("RFB 003.008\n", "RFB 003.008\n")
				s.write(uint8(2), []byte{16, 19}) // Tight, VeNCrypt
			},
			wantErr: "rfb: security: server offers only unsupported security types [16 19] (supported: 1 None, 2 VNC Authentication)",
		},
		{
			name: "VNC auth without a password",
			script: func(s *serverConn) {
				s.greet("RFB 003.008\n", "RFB 003.008\n")
				s.write(uint8(1), []byte{2})
			},
			wantErr: "rfb: security: server requires VNC Authentication but no password is configured",
		},
		{
			name: "3.3 VNC auth without a password",
			script: func(s *serverConn) {
				s.greet("RFB 003.003\n", "RFB 003.003\n")
				s.write(uint32(2))
			},
			wantErr: "rfb: security: server requires VNC Authentication but no password is configured",
		},
		{
			name: "3.8 None refused",
			script: func(s *serverConn) {
				s.greet("RFB 003.008\n", "RFB 003.008\n")
				s.write(uint8(1), []byte{1})
				s.expect("security type", []byte{1})
				s.write(uint32(1), uint32(4), "nope")
			},
			wantErr: "rfb: security: server refused: nope",
		},
		{
			name: "oversized reason",
			script: func(s *serverConn) {
				s.greet("RFB 003.008\n", "RFB 003.008\n")
				s.write(uint8(0), uint32(1<<30))
			},
			wantErr: "rfb: security: server refused, and reading its reason failed: string of 1073741824 bytes exceeds the limit of 65536",
			io:      true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := serve(t, func(s *serverConn) {
				tc.script(s)
				s.waitClosed()
			})
			_, err := dialT(t, addr, tc.cfg)
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("Dial error = %v, want %q", err, tc.wantErr)
			}
			if got := errors.Is(err, ErrSecurity); got == tc.io {
				t.Errorf("errors.Is(%q, ErrSecurity) = %v, want %v", err, got, !tc.io)
			}
		})
	}
}

// diffImages describes the first few pixels where got and want differ.
func diffImages(got, want *image.RGBA) string {
	if got.Rect != want.Rect {
		return fmt.Sprintf("bounds %v, want %v", got.Rect, want.Rect)
	}
	var b strings.Builder
	n := 0
	for y := want.Rect.Min.Y; y < want.Rect.Max.Y; y++ {
		for x := want.Rect.Min.X; x < want.Rect.Max.X; x++ {
			if g, w := got.RGBAAt(x, y), want.RGBAAt(x, y); g != w {
				if n < 5 {
					fmt.Fprintf(&b, "(%d,%d): got %v, want %v\n", x, y, g, w)
				}
				n++
			}
		}
	}
	if n > 0 {
		fmt.Fprintf(&b, "%d pixels differ", n)
	}
	return b.String()
}

func TestFrameRaw(t *testing.T) {
	const w, h = 13, 7 // odd sizes catch stride mistakes
	first, second := pattern(w, h, 0), pattern(w, h, 100)
	addr := serve(t, func(s *serverConn) {
		s.greet("RFB 003.008\n", "RFB 003.008\n")
		s.securityNone38()
		s.initDesktop(w, h, "raw")

		// First frame: messages to skip around an update of four
		// rectangles that tile the desktop unevenly, one of them empty.
		s.expectFullRequest(w, h)
		s.write(uint8(msgBell))
		s.write(uint8(msgSetColourMapEntries), uint8(0), uint16(0), uint16(2),
			[]byte{0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0})
		s.write(uint8(msgServerCutText), []byte{0, 0, 0}, uint32(11), "hello world")
		s.sendUpdate(first,
			image.Rect(0, 0, w, 2),
			image.Rect(0, 2, 5, h),
			image.Rect(5, 2, 5, 2), // zero width
			image.Rect(5, 2, w, h))
		s.write(uint8(msgBell))

		// Second frame, split over two updates with a cut text between:
		// the client must ask again for what the first one left out.
		s.expectFullRequest(w, h)
		s.sendUpdate(second, image.Rect(0, 0, w, 3))
		s.expectFullRequest(w, h)
		s.write(uint8(msgServerCutText), []byte{0, 0, 0}, uint32(0))
		s.sendUpdate(second, image.Rect(0, 2, w, h)) // overlaps row 2
		s.waitClosed()
	})
	c, err := dialT(t, addr, Config{})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for i, want := range []*image.RGBA{first, second} {
		got, err := c.Frame(ctx)
		if err != nil {
			t.Fatalf("Frame %d: %v", i+1, err)
		}
		if d := diffImages(got, want); d != "" {
			t.Errorf("Frame %d differs from what the server sent:\n%s", i+1, d)
		}
	}
	c.Close()
}

func TestFrameErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		send    func(s *serverConn)
		wantErr string
	}{
		{
			name: "rectangle outside the desktop",
			send: func(s *serverConn) {
				s.write(uint8(0), uint8(0), uint16(1), uint16(2), uint16(0), uint16(4), uint16(1), int32(0))
			},
			wantErr: "rfb: FramebufferUpdate rectangle 1 of 1: (2,0)-(6,1) lies outside the 4x4 desktop",
		},
		{
			name: "encoding not asked for",
			send: func(s *serverConn) {
				s.write(uint8(0), uint8(0), uint16(1), uint16(0), uint16(0), uint16(4), uint16(4), int32(5))
			},
			wantErr: "rfb: FramebufferUpdate rectangle 1 of 1: (0,0)-(4,4): encoding 5, but the client asked for Raw (0) only",
		},
		{
			name:    "unknown message",
			send:    func(s *serverConn) { s.write(uint8(150)) },
			wantErr: "rfb: unknown server message type 150",
		},
		{
			name:    "connection closed mid-update",
			send:    func(s *serverConn) { s.write(uint8(0), uint8(0), uint16(1), uint16(0)); s.c.Close() },
			wantErr: "rfb: FramebufferUpdate rectangle 1 of 1: unexpected EOF",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := serve(t, func(s *serverConn) {
				s.greet("RFB 003.008\n", "RFB 003.008\n")
				s.securityNone38()
				s.initDesktop(4, 4, "bad")
				s.expectFullRequest(4, 4)
				tc.send(s)
				s.waitClosed()
			})
			c, err := dialT(t, addr, Config{})
			if err != nil {
				t.Fatalf("Dial: %v", err)
			}
			_, err = c.Frame(t.Context())
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("Frame error = %v, want %q", err, tc.wantErr)
			}
			c.Close()
		})
	}
}

// noDeadlines hides a net.Conn's SetDeadline, as a transport without
// deadlines would.
type noDeadlines struct{ io.ReadWriteCloser }

func TestContextBoundsIO(t *testing.T) {
	// started tells the test that the server has read what it waits on and
	// is now silent.
	silentAfterHandshake := func(started chan<- struct{}) func(s *serverConn) {
		return func(s *serverConn) {
			s.greet("RFB 003.008\n", "RFB 003.008\n")
			s.securityNone38()
			s.initDesktop(4, 4, "silent")
			s.expectFullRequest(4, 4)
			close(started)
			s.waitClosed()
		}
	}
	const timeout = 200 * time.Millisecond

	t.Run("handshake deadline", func(t *testing.T) {
		addr := serve(t, func(s *serverConn) { s.waitClosed() }) // never greets
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		start := time.Now()
		_, err := Dial(ctx, addr, Config{})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Dial error = %v, want one wrapping context.DeadlineExceeded", err)
		}
		if el := time.Since(start); el > timeout+2*time.Second {
			t.Errorf("Dial returned after %v, want about %v", el, timeout)
		}
		if !strings.HasPrefix(err.Error(), "rfb: read protocol version: ") {
			t.Errorf("Dial error = %q, want it to name the step", err)
		}
	})

	t.Run("frame deadline", func(t *testing.T) {
		started := make(chan struct{})
		addr := serve(t, silentAfterHandshake(started))
		c, err := dialT(t, addr, Config{})
		if err != nil {
			t.Fatalf("Dial: %v", err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		start := time.Now()
		_, err = c.Frame(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Frame error = %v, want one wrapping context.DeadlineExceeded", err)
		}
		if el := time.Since(start); el > timeout+2*time.Second {
			t.Errorf("Frame returned after %v, want about %v", el, timeout)
		}
		// The stream may have stopped mid-message: the client is done.
		_, err2 := c.Frame(t.Context())
		if !errors.Is(err2, context.DeadlineExceeded) || !strings.Contains(err2.Error(), "closed after an earlier error") {
			t.Errorf("Frame after a failed Frame: error = %v, want the earlier error", err2)
		}
		c.Close()
	})

	for _, wrap := range []struct {
		name string
		f    func(net.Conn) io.ReadWriteCloser
	}{
		{"net.Conn", func(c net.Conn) io.ReadWriteCloser { return c }},
		{"no deadlines", func(c net.Conn) io.ReadWriteCloser { return noDeadlines{c} }},
	} {
		t.Run("cancel/"+wrap.name, func(t *testing.T) {
			started := make(chan struct{})
			addr := serve(t, silentAfterHandshake(started))
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			c, err := NewClient(t.Context(), wrap.f(conn), Config{})
			if err != nil {
				t.Fatalf("NewClient: %v", err)
			}
			t.Cleanup(func() { c.Close() })
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := c.Frame(ctx)
				errc <- err
			}()
			<-started
			cancel()
			select {
			case err := <-errc:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Frame error = %v, want one wrapping context.Canceled", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Frame did not return within 5s of cancel")
			}
		})
	}

	t.Run("already cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		a, b := net.Pipe()
		defer b.Close()
		_, err := NewClient(ctx, a, Config{})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("NewClient error = %v, want one wrapping context.Canceled", err)
		}
	})
}

func TestExclusive(t *testing.T) {
	addr := serve(t, func(s *serverConn) {
		s.greet("RFB 003.008\n", "RFB 003.008\n")
		s.securityNone38()
		s.expect("ClientInit", []byte{0}) // shared-flag 0: others are disconnected
		s.write(uint16(2), uint16(2), rgba32.marshal(), uint32(0))
		s.read("SetPixelFormat and SetEncodings", 20+8)
		s.waitClosed()
	})
	c, err := dialT(t, addr, Config{Exclusive: true})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	c.Close()
}
