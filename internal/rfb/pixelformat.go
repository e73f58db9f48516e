package rfb

import (
	"encoding/binary"
	"fmt"
)

// PixelFormat is how a pixel is laid out on the wire (RFC 6143 §7.4).
type PixelFormat struct {
	BitsPerPixel uint8 // 8, 16 or 32
	Depth        uint8
	BigEndian    bool
	TrueColour   bool
	RedMax       uint16
	GreenMax     uint16
	BlueMax      uint16
	RedShift     uint8
	GreenShift   uint8
	BlueShift    uint8
}

// rgba32 is the format the client asks every server for: 32 bits per
// pixel, 8 bits per channel, little-endian, so a pixel's bytes are blue,
// green, red, unused.
var rgba32 = PixelFormat{
	BitsPerPixel: 32, Depth: 24, BigEndian: false, TrueColour: true,
	RedMax: 255, GreenMax: 255, BlueMax: 255,
	RedShift: 16, GreenShift: 8, BlueShift: 0,
}

func (pf PixelFormat) String() string {
	if !pf.TrueColour {
		return fmt.Sprintf("%d bpp depth %d colour-mapped", pf.BitsPerPixel, pf.Depth)
	}
	end := "little-endian"
	if pf.BigEndian {
		end = "big-endian"
	}
	return fmt.Sprintf("%d bpp depth %d %s true colour (max %d/%d/%d shift %d/%d/%d)",
		pf.BitsPerPixel, pf.Depth, end, pf.RedMax, pf.GreenMax, pf.BlueMax,
		pf.RedShift, pf.GreenShift, pf.BlueShift)
}

func parsePixelFormat(b []byte) PixelFormat {
	return PixelFormat{
		BitsPerPixel: b[0],
		Depth:        b[1],
		BigEndian:    b[2] != 0,
		TrueColour:   b[3] != 0,
		RedMax:       binary.BigEndian.Uint16(b[4:]),
		GreenMax:     binary.BigEndian.Uint16(b[6:]),
		BlueMax:      binary.BigEndian.Uint16(b[8:]),
		RedShift:     b[10],
		GreenShift:   b[11],
		BlueShift:    b[12],
		// b[13:16] is padding
	}
}

func (pf PixelFormat) marshal() []byte {
	b := make([]byte, 16)
	b[0] = pf.BitsPerPixel
	b[1] = pf.Depth
	if pf.BigEndian {
		b[2] = 1
	}
	if pf.TrueColour {
		b[3] = 1
	}
	binary.BigEndian.PutUint16(b[4:], pf.RedMax)
	binary.BigEndian.PutUint16(b[6:], pf.GreenMax)
	binary.BigEndian.PutUint16(b[8:], pf.BlueMax)
	b[10] = pf.RedShift
	b[11] = pf.GreenShift
	b[12] = pf.BlueShift
	return b
}
