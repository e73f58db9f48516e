package rfb

import (
	"context"
	"encoding/binary"
	"fmt"
	"image"
	"io"
)

// Encoding numbers (RFC 6143 §7.7).
const encodingRaw int32 = 0

// Client-to-server message types (RFC 6143 §7.5).
const (
	msgSetPixelFormat           = 0
	msgSetEncodings             = 2
	msgFramebufferUpdateRequest = 3
)

// Server-to-client message types (RFC 6143 §7.6).
const (
	msgFramebufferUpdate   = 0
	msgSetColourMapEntries = 1
	msgBell                = 2
	msgServerCutText       = 3
)

func setPixelFormatMsg(pf PixelFormat) []byte {
	return append([]byte{msgSetPixelFormat, 0, 0, 0}, pf.marshal()...)
}

func setEncodingsMsg(encodings ...int32) []byte {
	b := []byte{msgSetEncodings, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(len(encodings)))
	for _, e := range encodings {
		b = binary.BigEndian.AppendUint32(b, uint32(e))
	}
	return b
}

func updateRequestMsg(incremental bool, r image.Rectangle) []byte {
	b := []byte{msgFramebufferUpdateRequest, 0}
	if incremental {
		b[1] = 1
	}
	for _, v := range []int{r.Min.X, r.Min.Y, r.Dx(), r.Dy()} {
		b = binary.BigEndian.AppendUint16(b, uint16(v))
	}
	return b
}

// Frame asks the server for the whole desktop (a non-incremental
// FramebufferUpdateRequest) and reads updates until every pixel has been
// received, skipping the other server messages on the way. If an update
// leaves part of the desktop out, the client asks again. It returns a copy
// of the desktop that the caller owns; alpha is opaque everywhere.
//
// ctx bounds the whole exchange; without a deadline a server that never
// answers blocks Frame until ctx is cancelled.
func (c *Client) Frame(ctx context.Context) (*image.RGBA, error) {
	var img *image.RGBA
	err := c.io(ctx, func() error {
		clear(c.covered)
		c.ncover = 0
		full := c.fb.Rect
		if err := c.send(updateRequestMsg(false, full)); err != nil {
			return fmt.Errorf("rfb: send FramebufferUpdateRequest: %w", err)
		}
		for {
			updated, err := c.readMessage()
			if err != nil {
				return err
			}
			if !updated {
				continue
			}
			if c.ncover == len(c.covered) {
				break
			}
			if err := c.send(updateRequestMsg(false, full)); err != nil {
				return fmt.Errorf("rfb: send FramebufferUpdateRequest: %w", err)
			}
		}
		img = image.NewRGBA(c.fb.Rect)
		copy(img.Pix, c.fb.Pix)
		return nil
	})
	return img, err
}

// readMessage reads one server message; updated says whether it was a
// FramebufferUpdate.
func (c *Client) readMessage() (updated bool, err error) {
	typ, err := c.r.ReadByte()
	if err != nil {
		return false, fmt.Errorf("rfb: read server message: %w", err)
	}
	switch typ {
	case msgFramebufferUpdate:
		var hdr [3]byte // padding, number-of-rectangles
		if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
			return false, fmt.Errorf("rfb: read FramebufferUpdate: %w", err)
		}
		n := int(binary.BigEndian.Uint16(hdr[1:]))
		for i := range n {
			if err := c.readRect(); err != nil {
				return false, fmt.Errorf("rfb: FramebufferUpdate rectangle %d of %d: %w", i+1, n, err)
			}
		}
		return true, nil
	case msgSetColourMapEntries:
		// We asked for true colour, so the map is of no use; a server may
		// still send one.
		var hdr [5]byte // padding, first-colour, number-of-colours
		if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
			return false, fmt.Errorf("rfb: read SetColourMapEntries: %w", err)
		}
		n := int64(binary.BigEndian.Uint16(hdr[3:]))
		if _, err := io.CopyN(io.Discard, c.r, 6*n); err != nil {
			return false, fmt.Errorf("rfb: read SetColourMapEntries: %w", err)
		}
	case msgBell:
	case msgServerCutText:
		var hdr [7]byte // padding, length
		if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
			return false, fmt.Errorf("rfb: read ServerCutText: %w", err)
		}
		n := int64(binary.BigEndian.Uint32(hdr[3:]))
		if _, err := io.CopyN(io.Discard, c.r, n); err != nil {
			return false, fmt.Errorf("rfb: read ServerCutText: %w", err)
		}
	default:
		return false, fmt.Errorf("rfb: unknown server message type %d", typ)
	}
	return false, nil
}

// readRect reads one rectangle of a FramebufferUpdate into c.fb.
func (c *Client) readRect() error {
	var hdr [12]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return err
	}
	x := int(binary.BigEndian.Uint16(hdr[0:]))
	y := int(binary.BigEndian.Uint16(hdr[2:]))
	w := int(binary.BigEndian.Uint16(hdr[4:]))
	h := int(binary.BigEndian.Uint16(hdr[6:]))
	enc := int32(binary.BigEndian.Uint32(hdr[8:]))
	r := image.Rect(x, y, x+w, y+h)
	if enc != encodingRaw {
		return fmt.Errorf("%v: encoding %d, but the client asked for Raw (0) only", r, enc)
	}
	if !r.In(c.fb.Rect) {
		return fmt.Errorf("%v lies outside the %dx%d desktop", r, c.fb.Rect.Dx(), c.fb.Rect.Dy())
	}
	// The pixel format is rgba32: each pixel is blue, green, red, unused.
	row := make([]byte, 4*w)
	for j := y; j < y+h; j++ {
		if _, err := io.ReadFull(c.r, row); err != nil {
			return err
		}
		dst := c.fb.Pix[c.fb.PixOffset(x, j):]
		for i := range w {
			s, d := row[4*i:4*i+4], dst[4*i:4*i+4]
			d[0], d[1], d[2], d[3] = s[2], s[1], s[0], 0xff
		}
		cov := c.covered[j*c.fb.Rect.Dx()+x:][:w]
		for i, done := range cov {
			if !done {
				cov[i] = true
				c.ncover++
			}
		}
	}
	return nil
}
