// Package hostbrowser drives a headless Chromium on the machine that runs
// an example (not in a sandbox): the examples open a sandbox's web UI
// (noVNC, VS Code) in it through a local forwarder, as a user would in
// their own browser, and capture what it shows.
package hostbrowser

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/chromedp/chromedp"
)

// Options says which browser to run and what to wait for.
type Options struct {
	// ExecPath is the browser binary; default $CHROMIUM_PATH, else the first
	// of chromium, chromium-browser, google-chrome on PATH.
	ExecPath string
	// Width and Height are the window size; default 1280x800.
	Width, Height int
	// Ready is a JavaScript expression polled in the page until it is
	// truthy (e.g. an element exists, a connection is up).
	Ready string
	// Timeout bounds the wait for Ready; default 60s.
	Timeout time.Duration
}

// FindChromium returns the browser binary Options.ExecPath defaults to.
func FindChromium() (string, error) {
	if p := os.Getenv("CHROMIUM_PATH"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no Chromium found on PATH (install Debian's chromium, or set CHROMIUM_PATH)")
}

// Screenshot opens url in a new headless browser, waits until o.Ready is
// truthy, and returns a PNG of the viewport.
func Screenshot(ctx context.Context, url string, o Options) ([]byte, error) {
	if o.ExecPath == "" {
		p, err := FindChromium()
		if err != nil {
			return nil, err
		}
		o.ExecPath = p
	}
	if o.Width == 0 || o.Height == 0 {
		o.Width, o.Height = 1280, 800
	}
	if o.Timeout == 0 {
		o.Timeout = 60 * time.Second
	}
	profile, err := os.MkdirTemp("", "hostbrowser-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(profile)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(o.ExecPath),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(o.Width, o.Height),
		chromedp.Flag("disable-gpu", true),
		// A throw-away profile on a closed network: no sync, updates or
		// field trials reaching out.
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	)
	if os.Geteuid() == 0 {
		// Chromium refuses to run as root with its own sandbox.
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancel := chromedp.NewExecAllocator(ctx, opts...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()

	// The viewport, not the window: a headless window's size is not the
	// page's.
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(int64(o.Width), int64(o.Height)), chromedp.Navigate(url)); err != nil {
		return nil, fmt.Errorf("open %s: %w", url, err)
	}
	if o.Ready != "" {
		if _, err := chromedp.Run(bctx, chromedp.Poll[chromedp.Void](o.Ready,
			chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(o.Timeout))); err != nil {
			// What the page shows helps more than "timeout".
			text, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 300) : ""`))
			return nil, fmt.Errorf("waiting for %s in %s: %w (page text: %q)", o.Ready, url, err, text)
		}
	}
	png, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
	if err != nil {
		return nil, fmt.Errorf("screenshot of %s: %w", url, err)
	}
	return png, nil
}

// WaitHTTP polls GET url until it answers 200 OK or limit passes: a
// service started in a sandbox by a background command takes a moment to
// listen, and a browser opened before that shows an error page for good.
func WaitHTTP(ctx context.Context, url string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := errors.New("no answer yet")
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer 200 within %v: %w", url, limit, last)
		case <-tick.C:
		}
	}
}
