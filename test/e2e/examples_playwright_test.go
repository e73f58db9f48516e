package e2e

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

const playwrightImage = "opensandbox/playwright:latest"

// TestExamplePlaywright runs examples/playwright against a real server: it
// serves a page inside a sandbox, scrapes it with Playwright and headless
// Chromium and downloads a full-page screenshot, which this test decodes
// and keeps as an artifact (playwright/screenshot.png).
func TestExamplePlaywright(t *testing.T) {
	image := requireImage(t, playwrightImage, "playwright")
	s := startServer(t, serverOpts{})
	c, err := sandbox.NewClient(sandbox.WithDomain(s.base), sandbox.WithAPIKey(testAPIKey))
	if err != nil {
		t.Fatal(err)
	}

	// What the example relies on: execd's commands see the image's
	// NODE_PATH and CHROMIUM_PATH, so playwright-core resolves from any
	// directory.
	t.Run("env", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sb, err := c.Create(ctx, sandbox.CreateOptions{Image: image, Entrypoint: []string{"tail", "-f", "/dev/null"}})
		if err != nil {
			t.Fatalf("Create %s: %v", image, err)
		}
		defer func() {
			if err := sb.Kill(context.WithoutCancel(ctx)); err != nil {
				t.Errorf("Kill: %v", err)
			}
		}()
		ex, err := sb.Run(ctx, `echo "$NODE_PATH $CHROMIUM_PATH $PWD"; node -p 'require("playwright-core/package.json").version'`,
			sandbox.RunOptions{Cwd: "/"})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if ex.Error != nil {
			t.Fatalf("Run: exit %d: %+v", ex.ExitCode, ex.Stderr)
		}
		if got, want := ex.Text(), "/usr/local/lib/node_modules /usr/bin/chromium /\n1.65.2"; got != want {
			t.Errorf("execd command output = %q, want %q", got, want)
		}
	})

	outDir := t.TempDir()
	shot := filepath.Join(outDir, "screenshot.png")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := osexec.CommandContext(ctx, "go", "run", "./examples/playwright", "-out", shot)
	cmd.Dir = openapitest.RepoPath(".")
	cmd.Env = append(os.Environ(),
		"OPEN_SANDBOX_DOMAIN="+strings.TrimPrefix(s.base, "http://"),
		"OPEN_SANDBOX_API_KEY="+testAPIKey,
		"EXAMPLE_IMAGE="+image)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("go run ./examples/playwright (%v):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("go run ./examples/playwright: %v", err)
	}
	for _, want := range []string{
		"scraped with playwright-core 1.65.2 and Chromium 156.",
		"title:   OpenSandbox Playwright demo",
		"h1:      Hello from inside a sandbox",
		"tagline: Served by python3 -m http.server, rendered by Chromium, driven by Playwright.",
		"items:   Commands API, Files API, Headless Chromium, Playwright for Node.js, Full-page screenshot",
		"sandbox killed",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the example's output lacks %q", want)
		}
	}

	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("the example saved no screenshot: %v", err)
	}
	saveArtifact(t, "playwright/screenshot.png", data)
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("png.Decode(%s): %v", shot, err)
	}
	b := img.Bounds()
	if b.Dx() != 800 || b.Dy() <= 600 {
		t.Errorf("screenshot is %dx%d, want 800 wide (the viewport) and taller than 600 (a full-page shot of a long page)", b.Dx(), b.Dy())
	}
	if want := fmt.Sprintf("%dx%d PNG, %d bytes", b.Dx(), b.Dy(), len(data)); !strings.Contains(string(out), want) {
		t.Errorf("the example's output lacks %q", want)
	}
	// Not blank: the page's solid fills are all there, each as a real
	// region of pixels.
	counts := colourCounts(img)
	if len(counts) < 8 {
		t.Errorf("screenshot has %d distinct colours, want at least 8", len(counts))
	}
	for name, rgb := range map[string][3]uint8{
		"header blue": {0x1f, 0x4e, 0x79},
		"red":         {0xc0, 0x39, 0x2b},
		"green":       {0x27, 0xae, 0x60},
		"yellow":      {0xf1, 0xc4, 0x0f},
		"purple":      {0x8e, 0x44, 0xad},
		"teal":        {0x16, 0xa0, 0x85},
		"background":  {0xf4, 0xf1, 0xea},
	} {
		if n := nearCount(counts, rgb); n < 1000 {
			t.Errorf("screenshot has %d pixels of the page's %s #%02x%02x%02x, want at least 1000", n, name, rgb[0], rgb[1], rgb[2])
		}
	}

	assertNoSandboxes(t, s)
}

// colourCounts counts the pixels of each opaque RGB colour in img.
func colourCounts(img image.Image) map[[3]uint8]int {
	counts := map[[3]uint8]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			counts[[3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)}]++
		}
	}
	return counts
}

// nearCount counts the pixels within 3 of rgb in every channel (colour
// conversion may move a fill by a step or two).
func nearCount(counts map[[3]uint8]int, rgb [3]uint8) int {
	n := 0
	for c, k := range counts {
		if near(c[0], rgb[0]) && near(c[1], rgb[1]) && near(c[2], rgb[2]) {
			n += k
		}
	}
	return n
}

func near(a, b uint8) bool { d := int(a) - int(b); return d >= -3 && d <= 3 }
