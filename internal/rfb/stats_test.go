package rfb

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStats(t *testing.T) {
	black := image.NewRGBA(image.Rect(0, 0, 10, 10))
	for i := 3; i < len(black.Pix); i += 4 {
		black.Pix[i] = 0xff
	}

	// 100 pixels: 70 grey, 20 red, 10 black (one row).
	mixed := image.NewRGBA(image.Rect(0, 0, 10, 10))
	for y := range 10 {
		for x := range 10 {
			c := color.RGBA{0x80, 0x80, 0x80, 0xff}
			switch {
			case y == 0:
				c = color.RGBA{0, 0, 0, 0xff}
			case y <= 2:
				c = color.RGBA{0xff, 0, 0, 0xff}
			}
			mixed.SetRGBA(x, y, c)
		}
	}

	// A paletted image goes through the generic path.
	pal := image.NewPaletted(image.Rect(0, 0, 4, 1), color.Palette{color.Black, color.White})
	pal.Pix = []uint8{0, 1, 1, 1}

	for _, tc := range []struct {
		name    string
		img     image.Image
		want    FrameStats
		uniform bool
	}{
		{"black", black, FrameStats{Width: 10, Height: 10, DistinctColours: 1,
			Dominant: color.RGBA{0, 0, 0, 0xff}, DominantFraction: 1}, true},
		{"mixed", mixed, FrameStats{Width: 10, Height: 10, DistinctColours: 3, NonBlack: 90, NonBlackFraction: 0.9,
			Dominant: color.RGBA{0x80, 0x80, 0x80, 0xff}, DominantFraction: 0.7}, false},
		{"sub-image", mixed.SubImage(image.Rect(2, 1, 5, 3)), FrameStats{Width: 3, Height: 2, DistinctColours: 1,
			NonBlack: 6, NonBlackFraction: 1, Dominant: color.RGBA{0xff, 0, 0, 0xff}, DominantFraction: 1}, true},
		{"paletted", pal, FrameStats{Width: 4, Height: 1, DistinctColours: 2, NonBlack: 3, NonBlackFraction: 0.75,
			Dominant: color.RGBA{0xff, 0xff, 0xff, 0xff}, DominantFraction: 0.75}, false},
		{"empty", image.NewRGBA(image.Rectangle{}), FrameStats{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Stats(tc.img)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Stats mismatch (-want +got):\n%s", diff)
			}
			if got.Uniform() != tc.uniform {
				t.Errorf("Uniform() = %v, want %v", got.Uniform(), tc.uniform)
			}
		})
	}
}

func TestPNGRoundTrip(t *testing.T) {
	img := pattern(31, 17, 7)
	var buf bytes.Buffer
	if err := EncodePNG(&buf, img); err != nil {
		t.Fatalf("EncodePNG: %v", err)
	}
	decoded, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("png.Decode: %v", err)
	}
	rgba := image.NewRGBA(decoded.Bounds())
	for y := range 17 {
		for x := range 31 {
			rgba.Set(x, y, decoded.At(x, y))
		}
	}
	if d := diffImages(rgba, img); d != "" {
		t.Errorf("PNG round trip changed the image:\n%s", d)
	}

	path := filepath.Join(t.TempDir(), "frame.png")
	if err := SavePNG(path, img); err != nil {
		t.Fatalf("SavePNG: %v", err)
	}
	onDisk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	EncodePNG(&buf, img)
	if !bytes.Equal(onDisk, buf.Bytes()) {
		t.Errorf("SavePNG wrote %d bytes, EncodePNG %d", len(onDisk), buf.Len())
	}
	if err := SavePNG(filepath.Join(t.TempDir(), "missing", "x.png"), img); err == nil {
		t.Errorf("SavePNG into a missing directory succeeded")
	}
}
