// Command environments-bench measures how soon an environment image is
// usable after a create, through the real server on Docker, in one run:
//
//   - browser: create an opensandbox/chrome sandbox, start its browser
//     with /opt/opensandbox/chrome.sh (a background command), and poll
//     GET /json/version through the endpoint of port 9222 until the
//     DevTools protocol answers;
//   - desktop: create an opensandbox/desktop sandbox, start
//     /opt/opensandbox/desktop.sh, and fetch a first full frame over RFB
//     through websockify (port 6080) and the endpoint;
//   - baseline: create an opensandbox/base sandbox and run `echo hi`.
//
// Rounds are interleaved so that the machine's load falls on all three
// alike. It prints p50/p95 of each and the ratio of each environment's p50
// to the baseline's: what starting the environment costs over a bare
// sandbox. The issue sets no target; the lines are for regressions.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/opensandbox-go/opensandbox/bench/internal/benchkit"
	"github.com/opensandbox-go/opensandbox/internal/rfb"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

const key = "bench-key"

func main() {
	serverBin := flag.String("server", "bin/opensandbox-server", "server binary")
	execdBin := flag.String("execd", "bin/execd", "execd binary")
	n := flag.Int("n", 5, "rounds per kind")
	flag.Parse()
	if err := run(*serverBin, *execdBin, *n); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(serverBin, execdBin string, n int) error {
	addr, stop, err := benchkit.StartServer(serverBin, execdBin, key)
	if err != nil {
		return err
	}
	defer stop()
	c, err := sandbox.NewClient(sandbox.WithDomain(addr), sandbox.WithAPIKey(key))
	if err != nil {
		return err
	}
	ctx := context.Background()
	kinds := []struct {
		name string
		fn   func(context.Context, *sandbox.Client) (time.Duration, string, error)
	}{
		{"baseline", baseline},
		{"browser", browser},
		{"desktop", desktop},
	}
	// One untimed round of each warms the page cache with the images.
	for _, k := range kinds {
		if _, _, err := k.fn(ctx, c); err != nil {
			return fmt.Errorf("%s (warm-up): %w", k.name, err)
		}
	}
	times := map[string][]time.Duration{}
	detail := map[string]string{}
	for range n {
		for _, k := range kinds {
			d, info, err := k.fn(ctx, c)
			if err != nil {
				return fmt.Errorf("%s: %w", k.name, err)
			}
			times[k.name] = append(times[k.name], d)
			detail[k.name] = info
		}
	}
	p50 := func(k string) time.Duration { return benchkit.Percentile(times[k], 50) }
	p95 := func(k string) time.Duration { return benchkit.Percentile(times[k], 95) }
	base := p50("baseline")
	fmt.Printf("bare sandbox create -> first command (opensandbox/base, n=%d): p50 %v p95 %v\n",
		n, base.Round(time.Millisecond), p95("baseline").Round(time.Millisecond))
	fmt.Printf("browser create -> first DevTools answer (opensandbox/chrome, n=%d): p50 %v p95 %v | ratio to bare p50 %.2f | %s\n",
		n, p50("browser").Round(time.Millisecond), p95("browser").Round(time.Millisecond), ratio(p50("browser"), base), detail["browser"])
	fmt.Printf("desktop create -> first VNC frame (opensandbox/desktop via websockify, n=%d): p50 %v p95 %v | ratio to bare p50 %.2f | %s\n",
		n, p50("desktop").Round(time.Millisecond), p95("desktop").Round(time.Millisecond), ratio(p50("desktop"), base), detail["desktop"])
	return nil
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

func create(ctx context.Context, c *sandbox.Client, image string) (*sandbox.Sandbox, error) {
	return c.Create(ctx, sandbox.CreateOptions{
		Image:      image,
		Entrypoint: []string{"tail", "-f", "/dev/null"},
		Resources:  map[string]string{"cpu": "1", "memory": "2Gi"},
		Timeout:    10 * time.Minute,
	})
}

// kill deletes the sandbox outside the timed part.
func kill(sb *sandbox.Sandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sb.Kill(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "bench: kill %s: %v\n", sb.ID(), err)
	}
}

func baseline(ctx context.Context, c *sandbox.Client) (time.Duration, string, error) {
	t0 := time.Now()
	sb, err := create(ctx, c, "opensandbox/base:latest")
	if err != nil {
		return 0, "", err
	}
	defer kill(sb)
	ex, err := sb.Run(ctx, "echo hi", sandbox.RunOptions{})
	if err != nil {
		return 0, "", err
	}
	d := time.Since(t0)
	if ex.Text() != "hi" {
		return 0, "", fmt.Errorf("echo hi printed %q", ex.Text())
	}
	return d, "", nil
}

func browser(ctx context.Context, c *sandbox.Client) (time.Duration, string, error) {
	t0 := time.Now()
	sb, err := create(ctx, c, "opensandbox/chrome:latest")
	if err != nil {
		return 0, "", err
	}
	defer kill(sb)
	if _, err := sb.Run(ctx, "/opt/opensandbox/chrome.sh", sandbox.RunOptions{Background: true}); err != nil {
		return 0, "", err
	}
	ep, err := sb.Endpoint(ctx, 9222)
	if err != nil {
		return 0, "", err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		body, err := get(wctx, "http://"+ep.Endpoint+"/json/version", ep.Headers)
		if err == nil && strings.Contains(body, `"Browser"`) {
			d := time.Since(t0)
			_, version, _ := strings.Cut(body, `"Browser": "`)
			version, _, _ = strings.Cut(version, `"`)
			return d, version, nil
		}
		select {
		case <-wctx.Done():
			return 0, "", fmt.Errorf("sandbox %s: DevTools did not answer within a minute (last: %v)", sb.ID(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func get(ctx context.Context, url string, headers map[string]string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}

func desktop(ctx context.Context, c *sandbox.Client) (time.Duration, string, error) {
	t0 := time.Now()
	sb, err := create(ctx, c, "opensandbox/desktop:latest")
	if err != nil {
		return 0, "", err
	}
	defer kill(sb)
	if _, err := sb.Run(ctx, "/opt/opensandbox/desktop.sh", sandbox.RunOptions{Background: true}); err != nil {
		return 0, "", err
	}
	ep, err := sb.Endpoint(ctx, 6080)
	if err != nil {
		return 0, "", err
	}
	header := http.Header{}
	for k, v := range ep.Headers {
		header.Set(k, v)
	}
	dial := func(ctx context.Context) (io.ReadWriteCloser, error) {
		return rfb.DialWebSocket(ctx, "ws://"+ep.Endpoint+"/websockify", rfb.WebSocketOptions{Header: header})
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := rfb.WaitFrame(wctx, dial, rfb.Config{Password: "opensandbox"}, rfb.WaitOptions{Interval: 50 * time.Millisecond})
	if err != nil {
		return 0, "", fmt.Errorf("sandbox %s: %w", sb.ID(), err)
	}
	d := time.Since(t0)
	st := rfb.Stats(res.Frame)
	if st.Uniform() {
		// The first frame of a desktop that has not drawn yet counts
		// as a frame (the server answers), but say so.
		return d, "first frame uniform: " + st.String(), nil
	}
	return d, "first frame " + st.String(), nil
}
