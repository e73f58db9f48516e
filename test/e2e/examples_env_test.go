package e2e

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
	"github.com/opensandbox-go/opensandbox/internal/rfb"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// requireImage fails the test when image is not in the engine. It does not
// build it: the environment images take minutes to build, and make images
// (which make e2e runs first) builds them from recipe.
func requireImage(t *testing.T, image, recipe string) string {
	t.Helper()
	binPath(t, "opensandbox-server") // skips unless OSB_E2E=1
	out, err := osexec.Command("docker", "image", "inspect", "--format", "{{.Id}}", image).CombinedOutput()
	if err != nil {
		t.Fatalf("%s is not in the Docker engine (docker image inspect: %v: %s); "+
			"build it with `bash images/build.sh %s` (make images does)", image, err, bytes.TrimSpace(out), recipe)
	}
	return image
}

// runExample runs `go run ./examples/<dir>` against s with the given extra
// environment and returns its combined output; a non-zero exit fails the
// test.
func runExample(t *testing.T, s *serverProc, dir string, limit time.Duration, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := osexec.CommandContext(ctx, "go", "run", "./examples/"+dir)
	cmd.Dir = openapitest.RepoPath(".")
	cmd.Env = append(os.Environ(),
		"OPEN_SANDBOX_DOMAIN="+strings.TrimPrefix(s.base, "http://"),
		"OPEN_SANDBOX_API_KEY="+testAPIKey)
	cmd.Env = append(cmd.Env, env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("go run ./examples/%s (%v):\n%s", dir, time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("go run ./examples/%s: %v", dir, err)
	}
	return string(out)
}

// readPNG decodes the PNG at path, keeps it as an artifact and returns it
// with its statistics.
func readPNG(t *testing.T, path, artifact string) (image.Image, rfb.FrameStats) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the screenshot: %v", err)
	}
	saveArtifact(t, artifact, raw)
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	return img, rfb.Stats(img)
}

// TestExampleChrome runs examples/chrome: the sandbox's Chromium, driven
// from the host over DevTools through the endpoint, opens a page served
// inside the sandbox.
func TestExampleChrome(t *testing.T) {
	image := requireImage(t, "opensandbox/chrome:latest", "chrome")
	s := startServer(t, serverOpts{})
	shot := filepath.Join(t.TempDir(), "chrome.png")
	out := runExample(t, s, "chrome", 5*time.Minute, "EXAMPLE_IMAGE="+image, "CHROME_SCREENSHOT="+shot)
	for _, want := range []string{"DevTools answers at", "Chrome/", "title: Served inside the sandbox", "text: Hello from the sandbox's own web server"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	_, st := readPNG(t, shot, "chrome/chrome.png")
	// The page's background and its three coloured bars, at least.
	if st.DistinctColours < 4 || st.NonBlackFraction < 0.9 {
		t.Errorf("screenshot: %v; want the rendered page", st)
	}
	assertNoSandboxes(t, s)
}

// TestExampleDesktop runs examples/desktop: noVNC, served by the sandbox's
// websockify through a local forwarder, opens in the host's headless
// Chromium, connects, and shows the XFCE desktop.
func TestExampleDesktop(t *testing.T) {
	image := requireImage(t, "opensandbox/desktop:latest", "desktop")
	s := startServer(t, serverOpts{})
	shot := filepath.Join(t.TempDir(), "desktop.png")
	out := runExample(t, s, "desktop", 6*time.Minute, "EXAMPLE_IMAGE="+image, "DESKTOP_SCREENSHOT="+shot)
	if !strings.Contains(out, "noVNC connected and showing the desktop") {
		t.Errorf("output lacks the connected line")
	}
	_, st := readPNG(t, shot, "desktop/novnc.png")
	// A desktop has a panel, icons and a wallpaper: many colours, and no
	// single one (black included) covering nearly everything.
	if st.DistinctColours < 16 || st.DominantFraction > 0.9 || st.NonBlackFraction < 0.5 {
		t.Errorf("screenshot: %v; want a drawn desktop", st)
	}
	assertNoSandboxes(t, s)
}

// TestExampleVSCode runs examples/vscode: code-server's workbench loads
// through the forwarder in the host's headless Chromium and lists the file
// the example wrote into /workspace.
func TestExampleVSCode(t *testing.T) {
	image := requireImage(t, "opensandbox/vscode:latest", "vscode")
	s := startServer(t, serverOpts{})
	shot := filepath.Join(t.TempDir(), "vscode.png")
	out := runExample(t, s, "vscode", 8*time.Minute, "EXAMPLE_IMAGE="+image, "VSCODE_SCREENSHOT="+shot)
	if !strings.Contains(out, "VS Code loaded /workspace") {
		t.Errorf("output lacks the loaded line")
	}
	_, st := readPNG(t, shot, "vscode/workbench.png")
	if st.DistinctColours < 16 || st.DominantFraction > 0.95 {
		t.Errorf("screenshot: %v; want the workbench", st)
	}
	assertNoSandboxes(t, s)
}

// assertNoSandboxes fails the test when s still has a sandbox that is not
// gone: an example must kill what it created.
func assertNoSandboxes(t *testing.T, s *serverProc) {
	t.Helper()
	c, err := sandbox.NewClient(sandbox.WithDomain(s.base), sandbox.WithAPIKey(testAPIKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := c.List(ctx, sandbox.ListOptions{States: []string{sandbox.StatePending, sandbox.StateRunning, sandbox.StatePaused}})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, it := range list.Items {
		t.Errorf("sandbox %s (%s) is still there after the example", it.ID, it.Status.State)
	}
}
