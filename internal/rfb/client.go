package rfb

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Config tunes a client. The zero value connects to a server that asks for
// no authentication.
type Config struct {
	// Password is the VNC Authentication password. Only its first eight
	// bytes count, as in every VNC implementation (the DES key is eight
	// bytes). Empty means the client only accepts servers that offer the
	// None security type.
	Password string

	// Exclusive asks the server to disconnect every other client
	// (ClientInit shared-flag 0). The default is to share the desktop.
	Exclusive bool
}

// SecurityType is an RFB security type number (RFC 6143 §7.1.2).
type SecurityType uint8

const (
	SecurityInvalid SecurityType = 0
	SecurityNone    SecurityType = 1
	SecurityVNCAuth SecurityType = 2
)

func (s SecurityType) String() string {
	switch s {
	case SecurityInvalid:
		return "Invalid"
	case SecurityNone:
		return "None"
	case SecurityVNCAuth:
		return "VNC Authentication"
	}
	return fmt.Sprintf("security type %d", uint8(s))
}

// ServerInit is what the server says about its desktop after the handshake.
type ServerInit struct {
	Width, Height int
	// PixelFormat is the server's own format; the client switches the
	// connection to 32-bit true colour right after the handshake.
	PixelFormat PixelFormat
	Name        string
}

// maxNameLen bounds the desktop name a server may send (it is read into
// memory); real names are a few dozen bytes.
const maxNameLen = 1 << 16

// maxReasonLen bounds a failure reason string for the same reason.
const maxReasonLen = 1 << 16

// maxPixels bounds the desktop size the client allocates an image for
// (256 MiB at 4 bytes a pixel).
const maxPixels = 8192 * 8192

// Client is one RFB connection after a successful handshake. Its methods
// must not be called concurrently, except Close, which also interrupts a
// blocked call.
type Client struct {
	conn    io.ReadWriteCloser
	r       *bufio.Reader
	version string
	sec     SecurityType
	init    ServerInit
	fb      *image.RGBA // the desktop as far as received
	// covered marks the pixels of fb some update has written; a frame is
	// complete when all are.
	covered []bool
	ncover  int
	// broken is the error that left the stream at an unknown point in a
	// message; every later call fails with it.
	broken error

	closeOnce sync.Once
	closeErr  error
}

// Dial opens a TCP connection to a VNC server at addr ("host:port") and
// performs the handshake. The context bounds both.
func Dial(ctx context.Context, addr string, cfg Config) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rfb: dial %s: %w", addr, err)
	}
	return NewClient(ctx, conn, cfg)
}

// NewClient performs the RFB handshake over conn: protocol version,
// security, ClientInit and ServerInit; then it switches the connection to
// 32-bit true colour and the Raw encoding. The client owns conn from then
// on, also on error (it is closed).
//
// ctx bounds the handshake. When conn has a SetDeadline method (net.Conn
// does) the context's deadline and cancellation are applied to it;
// otherwise a cancelled context closes conn.
func NewClient(ctx context.Context, conn io.ReadWriteCloser, cfg Config) (*Client, error) {
	c := &Client{conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
	if err := c.io(ctx, func() error { return c.handshake(cfg) }); err != nil {
		conn.Close() // also when ctx was done before any I/O
		return nil, err
	}
	return c, nil
}

// ProtocolVersion is the version both sides agreed on: "3.3", "3.7" or "3.8".
func (c *Client) ProtocolVersion() string { return c.version }

// SecurityType is the security type the handshake used.
func (c *Client) SecurityType() SecurityType { return c.sec }

// ServerInit is the server's description of its desktop.
func (c *Client) ServerInit() ServerInit { return c.init }

// Close closes the connection. It is safe to call more than once.
func (c *Client) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.conn.Close() })
	return c.closeErr
}

type deadliner interface {
	SetDeadline(time.Time) error
}

// longAgo is a deadline in the past: setting it makes blocked I/O return.
var longAgo = time.Unix(1, 0)

// io runs f, which does blocking I/O on c.conn, bounded by ctx, and turns
// an I/O error caused by ctx into one that wraps ctx's error. Any error
// from f closes the connection: the stream may have stopped in the middle
// of a message, so nothing after it could be parsed.
func (c *Client) io(ctx context.Context, f func() error) error {
	if c.broken != nil {
		return fmt.Errorf("rfb: connection closed after an earlier error: %w", c.broken)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("rfb: %w", err)
	}
	err := c.bounded(ctx, f)
	if err != nil {
		c.broken = err
		c.Close()
	}
	return err
}

func (c *Client) bounded(ctx context.Context, f func() error) error {
	var stop func() bool
	fired := make(chan struct{})
	if d, ok := c.conn.(deadliner); ok {
		dl, _ := ctx.Deadline()
		if err := d.SetDeadline(dl); err != nil {
			return fmt.Errorf("rfb: set deadline: %w", err)
		}
		stop = context.AfterFunc(ctx, func() {
			defer close(fired)
			d.SetDeadline(longAgo)
		})
		defer func() {
			if !stop() {
				<-fired // so the reset below is not overtaken
			}
			d.SetDeadline(time.Time{})
		}()
	} else {
		// Without deadlines the only way to interrupt a blocked read is to
		// close the transport; the client is unusable afterwards.
		stop = context.AfterFunc(ctx, func() { c.Close() })
		defer stop()
	}
	err := f()
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%w (%w)", err, ctxErr)
	}
	// The connection's deadline and the context's timer are set for the
	// same instant; the read can notice first.
	if dl, ok := ctx.Deadline(); ok && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(dl) {
		return fmt.Errorf("%w (%w)", err, context.DeadlineExceeded)
	}
	return err
}

func (c *Client) handshake(cfg Config) error {
	if err := c.negotiateVersion(); err != nil {
		return err
	}
	if err := c.negotiateSecurity(cfg); err != nil {
		return err
	}
	shared := byte(1)
	if cfg.Exclusive {
		shared = 0
	}
	if _, err := c.conn.Write([]byte{shared}); err != nil {
		return fmt.Errorf("rfb: send ClientInit: %w", err)
	}
	if err := c.readServerInit(); err != nil {
		return err
	}
	// Every update from now on comes in rgba32, which readRect decodes.
	if err := c.send(setPixelFormatMsg(rgba32)); err != nil {
		return fmt.Errorf("rfb: send SetPixelFormat: %w", err)
	}
	if err := c.send(setEncodingsMsg(encodingRaw)); err != nil {
		return fmt.Errorf("rfb: send SetEncodings: %w", err)
	}
	return nil
}

func (c *Client) send(msg []byte) error {
	_, err := c.conn.Write(msg)
	return err
}

// negotiateVersion reads the server's ProtocolVersion and answers with the
// highest version both speak (RFC 6143 §7.1.1).
func (c *Client) negotiateVersion() error {
	var buf [12]byte
	if _, err := io.ReadFull(c.r, buf[:]); err != nil {
		return fmt.Errorf("rfb: read protocol version: %w", err)
	}
	var major, minor int
	if n, err := fmt.Sscanf(string(buf[:]), "RFB %03d.%03d\n", &major, &minor); n != 2 || err != nil {
		return fmt.Errorf("rfb: not an RFB server: greeting %q", buf[:])
	}
	if major != 3 || minor < 3 {
		return fmt.Errorf("rfb: unsupported protocol version %d.%d", major, minor)
	}
	switch {
	case minor >= 8:
		c.version = "3.8"
	case minor == 7:
		c.version = "3.7"
	default: // 3.3 and the non-standard 3.4–3.6, which mean 3.3
		c.version = "3.3"
	}
	if _, err := fmt.Fprintf(c.conn, "RFB 003.00%c\n", c.version[2]); err != nil {
		return fmt.Errorf("rfb: send protocol version: %w", err)
	}
	return nil
}

func (c *Client) negotiateSecurity(cfg Config) error {
	if c.version == "3.3" {
		// The server decides alone and sends one 32-bit type.
		var t uint32
		if err := binary.Read(c.r, binary.BigEndian, &t); err != nil {
			return fmt.Errorf("rfb: security: read type: %w", err)
		}
		if t == 0 {
			return c.refused("security")
		}
		if t > 255 || (SecurityType(t) != SecurityNone && SecurityType(t) != SecurityVNCAuth) {
			return securityErr("rfb: security: server requires unsupported security type %d", t)
		}
		c.sec = SecurityType(t)
	} else {
		var n uint8
		if err := binary.Read(c.r, binary.BigEndian, &n); err != nil {
			return fmt.Errorf("rfb: security: read types: %w", err)
		}
		if n == 0 {
			return c.refused("security")
		}
		types := make([]byte, n)
		if _, err := io.ReadFull(c.r, types); err != nil {
			return fmt.Errorf("rfb: security: read types: %w", err)
		}
		t, err := chooseSecurity(types, cfg)
		if err != nil {
			return err
		}
		if _, err := c.conn.Write([]byte{byte(t)}); err != nil {
			return fmt.Errorf("rfb: security: send choice: %w", err)
		}
		c.sec = t
	}
	switch c.sec {
	case SecurityVNCAuth:
		if cfg.Password == "" {
			return securityErr("rfb: security: server requires VNC Authentication but no password is configured")
		}
		var challenge [16]byte
		if _, err := io.ReadFull(c.r, challenge[:]); err != nil {
			return fmt.Errorf("rfb: security: read VNC Authentication challenge: %w", err)
		}
		resp := vncAuthResponse(challenge, cfg.Password)
		if _, err := c.conn.Write(resp[:]); err != nil {
			return fmt.Errorf("rfb: security: send VNC Authentication response: %w", err)
		}
	case SecurityNone:
		if c.version != "3.8" {
			return nil // before 3.8 None has no SecurityResult
		}
	}
	var result uint32
	if err := binary.Read(c.r, binary.BigEndian, &result); err != nil {
		return fmt.Errorf("rfb: security: read result: %w", err)
	}
	switch result {
	case 0:
		return nil
	case 1:
		if c.version == "3.8" {
			return c.refused("security")
		}
		return securityErr("rfb: security: %s failed (server sent no reason)", c.sec)
	default:
		return securityErr("rfb: security: %s failed: result %d", c.sec, result)
	}
}

// chooseSecurity picks VNC Authentication when a password is configured
// and the server offers it, else None, else VNC Authentication (which then
// fails for want of a password, with a message that says so).
func chooseSecurity(offered []byte, cfg Config) (SecurityType, error) {
	has := func(t SecurityType) bool {
		for _, o := range offered {
			if SecurityType(o) == t {
				return true
			}
		}
		return false
	}
	switch {
	case cfg.Password != "" && has(SecurityVNCAuth):
		return SecurityVNCAuth, nil
	case has(SecurityNone):
		return SecurityNone, nil
	case has(SecurityVNCAuth):
		return 0, securityErr("rfb: security: server requires VNC Authentication but no password is configured")
	}
	return 0, securityErr("rfb: security: server offers only unsupported security types %v (supported: 1 None, 2 VNC Authentication)", offered)
}

// ErrSecurity is wrapped by the errors that mean the server turned the
// client away in the security handshake: it refused the connection (with
// its reason), rejected the password, or offered no security type the
// client supports (or only VNC Authentication with no password
// configured). Trying again will not help; errors.Is tells these apart
// from I/O failures.
var ErrSecurity = errors.New("rfb: security handshake failed")

// securityError is an ErrSecurity with its own message.
type securityError string

func securityErr(format string, args ...any) error {
	return securityError(fmt.Sprintf(format, args...))
}

func (e securityError) Error() string { return string(e) }
func (e securityError) Unwrap() error { return ErrSecurity }

// refused reads the reason string that follows a failure and returns it as
// an error.
func (c *Client) refused(stage string) error {
	reason, err := c.readString(maxReasonLen)
	if err != nil {
		return fmt.Errorf("rfb: %s: server refused, and reading its reason failed: %w", stage, err)
	}
	return securityErr("rfb: %s: server refused: %s", stage, reason)
}

// readString reads a 32-bit length and that many bytes.
func (c *Client) readString(limit uint32) (string, error) {
	var n uint32
	if err := binary.Read(c.r, binary.BigEndian, &n); err != nil {
		return "", err
	}
	if n > limit {
		return "", fmt.Errorf("string of %d bytes exceeds the limit of %d", n, limit)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c.r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

func (c *Client) readServerInit() error {
	var hdr [20]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return fmt.Errorf("rfb: read ServerInit: %w", err)
	}
	w := int(binary.BigEndian.Uint16(hdr[0:]))
	h := int(binary.BigEndian.Uint16(hdr[2:]))
	pf := parsePixelFormat(hdr[4:20])
	name, err := c.readString(maxNameLen)
	if err != nil {
		return fmt.Errorf("rfb: read ServerInit desktop name: %w", err)
	}
	if w == 0 || h == 0 {
		return fmt.Errorf("rfb: ServerInit: empty desktop %dx%d", w, h)
	}
	if w*h > maxPixels {
		return fmt.Errorf("rfb: ServerInit: desktop %dx%d is larger than the %d pixels this client handles", w, h, maxPixels)
	}
	c.init = ServerInit{Width: w, Height: h, PixelFormat: pf, Name: name}
	c.fb = image.NewRGBA(image.Rect(0, 0, w, h))
	c.covered = make([]bool, w*h)
	return nil
}
