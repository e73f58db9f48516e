// Command chrome drives the Chromium of an opensandbox/chrome sandbox from
// this machine over the DevTools protocol, through the sandbox's endpoint
// for port 9222: it opens a page served inside the sandbox, reads its title
// and text, and saves a screenshot.
//
//	OPEN_SANDBOX_DOMAIN=localhost:8080 OPEN_SANDBOX_API_KEY=... go run ./examples/chrome
//
// CHROME_SCREENSHOT names the PNG to write (default chrome.png);
// EXAMPLE_IMAGE overrides the image (default opensandbox/chrome:latest).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// page is served inside the sandbox and opened by the sandbox's browser.
const page = `<!doctype html>
<html><head><title>Served inside the sandbox</title>
<style>body{font:24px sans-serif;background:#f4f1e8;margin:40px}
.bar{height:60px;margin:8px 0}</style></head>
<body><h1 id="msg">Hello from the sandbox's own web server</h1>
<div class="bar" style="background:#c0392b;width:60%"></div>
<div class="bar" style="background:#2980b9;width:80%"></div>
<div class="bar" style="background:#27ae60;width:40%"></div>
</body></html>`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	image := envOr("EXAMPLE_IMAGE", "opensandbox/chrome:latest")
	shot := envOr("CHROME_SCREENSHOT", "chrome.png")

	c, err := sandbox.NewClient()
	if err != nil {
		return err
	}
	sb, err := c.Create(ctx, sandbox.CreateOptions{
		Image:      image,
		Entrypoint: []string{"tail", "-f", "/dev/null"},
		Timeout:    10 * time.Minute,
		Resources:  map[string]string{"cpu": "1", "memory": "2Gi"},
		Metadata:   map[string]string{"example": "chrome"},
	})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	fmt.Printf("sandbox %s\n", sb.ID())
	defer func() {
		if err := sb.Kill(context.WithoutCancel(ctx)); err != nil {
			log.Printf("kill: %v", err)
		}
	}()

	// A page for the browser to open, served inside the sandbox.
	if err := sb.WriteFile(ctx, "/tmp/site/index.html", []byte(page), sandbox.WriteOptions{Mode: 644}); err != nil {
		return fmt.Errorf("write page: %w", err)
	}
	for _, cmd := range []string{
		"python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp/site",
		"/opt/opensandbox/chrome.sh", // Xvfb, x11vnc on 5901, Chromium with DevTools on 9222
	} {
		if _, err := sb.Run(ctx, cmd, sandbox.RunOptions{Background: true}); err != nil {
			return fmt.Errorf("start %q: %w", cmd, err)
		}
	}

	ep, err := sb.Endpoint(ctx, 9222)
	if err != nil {
		return fmt.Errorf("endpoint 9222: %w", err)
	}
	header := http.Header{}
	for k, v := range ep.Headers {
		header.Set(k, v)
	}
	base := ep.Endpoint
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	version, err := waitDevTools(ctx, base, header, 60*time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("DevTools answers at %s: %s, protocol %s\n", base, version.Browser, version.ProtocolVersion)
	if vnc, err := sb.Endpoint(ctx, 5901); err == nil {
		fmt.Printf("VNC view of the browser: %s (RFB on port 5901 in the sandbox)\n", vnc.Endpoint)
	}

	// The browser's WebSocket path, re-rooted under the endpoint: the
	// address Chromium reports (ws://127.0.0.1:9222/...) is only right
	// inside the sandbox.
	wsPath, err := url.Parse(version.WebSocketDebuggerURL)
	if err != nil {
		return fmt.Errorf("webSocketDebuggerUrl %q: %w", version.WebSocketDebuggerURL, err)
	}
	wsURL := "ws" + strings.TrimPrefix(base, "http") + wsPath.Path
	actx, cancel := remote.NewAllocator(ctx, wsURL, remote.NoModifyURL, remote.WithDialHTTPHeader(header))
	defer cancel()
	tab, cancel := chromedp.NewContext(actx) // a new tab in the sandbox's browser
	defer cancel()

	if err := chromedp.Do(tab, chromedp.Navigate("http://127.0.0.1:8000/")); err != nil {
		return fmt.Errorf("navigate: %w", err)
	}
	title, err := chromedp.Run(tab, chromedp.Title())
	if err != nil {
		return fmt.Errorf("title: %w", err)
	}
	text, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#msg")))
	if err != nil {
		return fmt.Errorf("text: %w", err)
	}
	png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		return err
	}
	fmt.Printf("title: %s\ntext: %s\nscreenshot: %s (%d bytes)\n", title, text, shot, len(png))
	return nil
}

// devToolsVersion is the part of GET /json/version this program reads.
type devToolsVersion struct {
	Browser              string `json:"Browser"`
	ProtocolVersion      string `json:"Protocol-Version"`
	WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
}

// waitDevTools polls GET {base}/json/version until the browser answers.
func waitDevTools(ctx context.Context, base string, header http.Header, limit time.Duration) (devToolsVersion, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		v, err := getVersion(ctx, base, header)
		if err == nil {
			return v, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return devToolsVersion{}, fmt.Errorf("DevTools did not answer within %v: %w", limit, last)
		case <-tick.C:
		}
	}
}

func getVersion(ctx context.Context, base string, header http.Header) (devToolsVersion, error) {
	var v devToolsVersion
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/json/version", nil)
	if err != nil {
		return v, err
	}
	req.Header = header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("GET /json/version: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return v, fmt.Errorf("GET /json/version: %w", err)
	}
	if v.WebSocketDebuggerURL == "" {
		return v, fmt.Errorf("GET /json/version: no webSocketDebuggerUrl")
	}
	return v, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
