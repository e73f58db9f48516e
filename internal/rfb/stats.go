package rfb

import (
	"bufio"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
)

// FrameStats summarises an image so a test can tell a desktop that shows
// something from a black or blank one.
type FrameStats struct {
	Width, Height int
	// DistinctColours counts the different RGB values (alpha ignored).
	DistinctColours int
	// NonBlack counts pixels whose red, green and blue are not all zero;
	// NonBlackFraction is NonBlack divided by the number of pixels.
	NonBlack         int
	NonBlackFraction float64
	// Dominant is the most frequent colour (opaque) and DominantFraction
	// the share of pixels that have it: 1 means a uniform image.
	Dominant         color.RGBA
	DominantFraction float64
}

// Uniform reports whether every pixel has the same colour (or there are no
// pixels).
func (s FrameStats) Uniform() bool { return s.DistinctColours <= 1 }

func (s FrameStats) String() string {
	return fmt.Sprintf("%dx%d, %d colours, %.1f%% non-black, dominant #%02x%02x%02x on %.1f%%",
		s.Width, s.Height, s.DistinctColours, 100*s.NonBlackFraction,
		s.Dominant.R, s.Dominant.G, s.Dominant.B, 100*s.DominantFraction)
}

// Stats computes FrameStats over img.
func Stats(img image.Image) FrameStats {
	b := img.Bounds()
	st := FrameStats{Width: b.Dx(), Height: b.Dy()}
	counts := make(map[uint32]int)
	add := func(r, g, bl uint8) {
		counts[uint32(r)<<16|uint32(g)<<8|uint32(bl)]++
		if r|g|bl != 0 {
			st.NonBlack++
		}
	}
	if rgba, ok := img.(*image.RGBA); ok {
		for y := b.Min.Y; y < b.Max.Y; y++ {
			p := rgba.Pix[rgba.PixOffset(b.Min.X, y):][:4*b.Dx()]
			for i := 0; i < len(p); i += 4 {
				add(p[i], p[i+1], p[i+2])
			}
		}
	} else {
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
				add(c.R, c.G, c.B)
			}
		}
	}
	st.DistinctColours = len(counts)
	n := st.Width * st.Height
	if n == 0 {
		return st
	}
	var best uint32
	bestN := -1
	for c, k := range counts {
		if k > bestN || (k == bestN && c < best) {
			best, bestN = c, k
		}
	}
	st.Dominant = color.RGBA{R: uint8(best >> 16), G: uint8(best >> 8), B: uint8(best), A: 0xff}
	st.DominantFraction = float64(bestN) / float64(n)
	st.NonBlackFraction = float64(st.NonBlack) / float64(n)
	return st
}

// EncodePNG writes img to w as PNG.
func EncodePNG(w io.Writer, img image.Image) error {
	if err := png.Encode(w, img); err != nil {
		return fmt.Errorf("rfb: encode PNG: %w", err)
	}
	return nil
}

// SavePNG writes img as a PNG file at path (created or truncated), for
// example a screenshot in a test's artifact directory.
func SavePNG(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("rfb: save PNG: %w", err)
	}
	bw := bufio.NewWriter(f)
	err = EncodePNG(bw, img)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("rfb: save PNG %s: %w", path, err)
	}
	return nil
}
