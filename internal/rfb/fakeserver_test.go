package rfb

import (
	"bufio"
	"bytes"
	"crypto/des"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
	"net"
	"testing"
	"time"
)

// serverConn is the server side of one connection to the client under
// test, as a test's fake RFB server script sees it. Like bufio.Writer its
// error is sticky: after the first failure every call does nothing, and
// the script's result is s.err.
type serverConn struct {
	c   net.Conn
	r   *bufio.Reader
	err error
}

func (s *serverConn) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf(format, args...)
	}
}

// write sends its arguments in order: uint8, uint16, uint32 and int32 in
// network byte order, []byte and string as they are.
func (s *serverConn) write(parts ...any) {
	if s.err != nil {
		return
	}
	var b []byte
	for _, p := range parts {
		switch v := p.(type) {
		case uint8:
			b = append(b, v)
		case uint16:
			b = binary.BigEndian.AppendUint16(b, v)
		case uint32:
			b = binary.BigEndian.AppendUint32(b, v)
		case int32:
			b = binary.BigEndian.AppendUint32(b, uint32(v))
		case []byte:
			b = append(b, v...)
		case string:
			b = append(b, v...)
		default:
			panic(fmt.Sprintf("serverConn.write: %T", p))
		}
	}
	if _, err := s.c.Write(b); err != nil {
		s.fail("write: %w", err)
	}
}

func (s *serverConn) read(what string, n int) []byte {
	b := make([]byte, n)
	if s.err != nil {
		return b
	}
	if _, err := io.ReadFull(s.r, b); err != nil {
		s.fail("read %s: %w", what, err)
	}
	return b
}

// expect reads len(want) bytes and fails unless they are want.
func (s *serverConn) expect(what string, want []byte) {
	got := s.read(what, len(want))
	if s.err == nil && !bytes.Equal(got, want) {
		s.fail("client sent %s % x, want % x", what, got, want)
	}
}

// waitClosed reads until the client closes the connection.
func (s *serverConn) waitClosed() {
	if s.err == nil {
		io.Copy(io.Discard, s.r)
	}
}

// serveConn runs script over conn and returns its error.
func serveConn(conn net.Conn, script func(s *serverConn)) error {
	defer conn.Close()
	// A generous bound so that a broken test fails instead of hanging.
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	s := &serverConn{c: conn, r: bufio.NewReader(conn)}
	script(s)
	return s.err
}

// serve starts a fake RFB server on loopback, returns its address, and
// runs one script per connection, for as many connections as scripts, one
// after the other. Cleanup waits for the scripts and reports their errors;
// close the client before that (register its cleanup later).
func serve(t *testing.T, scripts ...func(s *serverConn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var errs []error
		for i, script := range scripts {
			conn, err := ln.Accept()
			if err != nil {
				break // the test ended without connecting
			}
			if err := serveConn(conn, script); err != nil {
				errs = append(errs, fmt.Errorf("connection %d: %w", i+1, err))
			}
		}
		done <- errors.Join(errs...)
	}()
	t.Cleanup(func() {
		ln.Close()
		if err := <-done; err != nil {
			t.Errorf("fake server: %v", err)
		}
	})
	return ln.Addr().String()
}

// greet sends the server's version and expects the client's answer.
func (s *serverConn) greet(server, wantClient string) {
	s.write(server)
	s.expect("ProtocolVersion", []byte(wantClient))
}

// securityNone38 offers only None and confirms it (3.8).
func (s *serverConn) securityNone38() {
	s.write(uint8(1), uint8(SecurityNone))
	s.expect("security type", []byte{byte(SecurityNone)})
	s.write(uint32(0))
}

// serverFormat is the format the fake server announces in ServerInit:
// 16-bit big-endian 5-6-5, unlike what the client asks for.
var serverFormat = PixelFormat{
	BitsPerPixel: 16, Depth: 16, BigEndian: true, TrueColour: true,
	RedMax: 31, GreenMax: 63, BlueMax: 31, RedShift: 11, GreenShift: 5, BlueShift: 0,
}

// initDesktop expects a shared ClientInit, sends ServerInit for a w×h
// desktop called name, and expects the client's SetPixelFormat (32-bit
// little-endian true colour, red at bit 16) and SetEncodings (Raw only).
func (s *serverConn) initDesktop(w, h int, name string) {
	s.expect("ClientInit", []byte{1})
	s.write(uint16(w), uint16(h),
		[]byte{16, 16, 1, 1, 0, 31, 0, 63, 0, 31, 11, 5, 0, 0, 0, 0},
		uint32(len(name)), name)
	s.expect("SetPixelFormat", []byte{
		0, 0, 0, 0, // type, padding
		32, 24, 0, 1, // bpp, depth, big-endian, true colour
		0, 255, 0, 255, 0, 255, // maxima
		16, 8, 0, // shifts
		0, 0, 0, // padding
	})
	s.expect("SetEncodings", []byte{2, 0, 0, 1, 0, 0, 0, 0})
}

// expectFullRequest expects a non-incremental FramebufferUpdateRequest
// for the whole w×h desktop.
func (s *serverConn) expectFullRequest(w, h int) {
	s.expect("FramebufferUpdateRequest", []byte{3, 0, 0, 0, 0, 0, byte(w >> 8), byte(w), byte(h >> 8), byte(h)})
}

// sendUpdate sends one FramebufferUpdate holding the given rectangles of
// img in the Raw encoding and the client's pixel format.
func (s *serverConn) sendUpdate(img *image.RGBA, rects ...image.Rectangle) {
	s.write(uint8(0), uint8(0), uint16(len(rects)))
	for _, r := range rects {
		s.write(uint16(r.Min.X), uint16(r.Min.Y), uint16(r.Dx()), uint16(r.Dy()), int32(0))
		var px []byte
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				c := img.RGBAAt(x, y)
				px = append(px, c.B, c.G, c.R, 0x5a) // the unused byte is junk on purpose
			}
		}
		s.write(px)
	}
}

// pattern is a w×h image where every pixel differs from its neighbours in
// every channel, so a swapped channel or an off-by-one shows.
func pattern(w, h, seed int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetRGBA(x, y, color.RGBA{
				R: uint8(x*37 + y*5 + seed),
				G: uint8(y*53 + x*3 + 2*seed),
				B: uint8((x ^ y) * 29),
				A: 0xff,
			})
		}
	}
	return img
}

// vncAuthExpected computes the response to challenge for password the
// slow way, independently of the client's code: the key bytes are
// reversed bit by bit.
func vncAuthExpected(challenge [16]byte, password string) []byte {
	var key [8]byte
	copy(key[:], password)
	for i, b := range key {
		var r byte
		for bit := range 8 {
			if b&(1<<bit) != 0 {
				r |= 0x80 >> bit
			}
		}
		key[i] = r
	}
	block, err := des.NewCipher(key[:])
	if err != nil {
		panic(err)
	}
	out := make([]byte, 16)
	block.Encrypt(out[:8], challenge[:8])
	block.Encrypt(out[8:], challenge[8:])
	return out
}

// vncAuth sends a challenge, reads the response and answers with the
// SecurityResult a server of version v sends: OK when the response
// matches password, else failure (with a reason in 3.8).
func (s *serverConn) vncAuth(v, password string) (ok bool) {
	challenge := [16]byte{0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe, 1, 2, 3, 4, 5, 6, 7, 8}
	s.write(challenge[:])
	got := s.read("VNC Authentication response", 16)
	if s.err != nil {
		return false
	}
	if bytes.Equal(got, vncAuthExpected(challenge, password)) {
		s.write(uint32(0))
		return true
	}
	if v == "3.8" {
		s.write(uint32(1), uint32(len("Authentication failed")), "Authentication failed")
	} else {
		s.write(uint32(1))
	}
	return false
}
