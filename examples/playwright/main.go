// Command playwright drives headless Chromium inside a sandbox: it creates
// a sandbox from the opensandbox/playwright image, writes a web page and a
// Playwright script into it through the files API, serves the page with
// python3 -m http.server in a background command, runs the script with
// Node.js (commands API) to scrape the page and take a full-page
// screenshot, downloads the PNG (files API), prints what was scraped and
// the screenshot's size, and kills the sandbox.
//
//	OPEN_SANDBOX_DOMAIN=localhost:8080 OPEN_SANDBOX_API_KEY=... go run ./examples/playwright [-out screenshot.png]
//
// EXAMPLE_IMAGE overrides the image (default opensandbox/playwright:latest;
// build it with images/build.sh playwright).
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/png"
	"log"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// The page and the script are files beside this one, shared with main.py.
var (
	//go:embed page.html
	pageHTML []byte
	//go:embed scrape.js
	scrapeJS []byte
)

const (
	siteDir    = "/workspace/site"
	scriptPath = "/workspace/scrape.js"
	shotPath   = "/workspace/screenshot.png"
	port       = 8000
)

// scraped is the line of JSON scrape.js prints.
type scraped struct {
	Title      string   `json:"title"`
	Heading    string   `json:"heading"`
	Tagline    string   `json:"tagline"`
	Items      []string `json:"items"`
	Chromium   string   `json:"chromium"`
	Playwright string   `json:"playwright"`
}

func main() {
	out := flag.String("out", "screenshot.png", "where to save the screenshot on this machine")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *out); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, out string) error {
	// NewClient reads OPEN_SANDBOX_DOMAIN (default localhost:8080) and
	// OPEN_SANDBOX_API_KEY from the environment.
	c, err := sandbox.NewClient()
	if err != nil {
		return err
	}
	image := os.Getenv("EXAMPLE_IMAGE")
	if image == "" {
		image = "opensandbox/playwright:latest"
	}
	start := time.Now()
	sb, err := c.Create(ctx, sandbox.CreateOptions{
		Image:      image,
		Entrypoint: []string{"tail", "-f", "/dev/null"},
		Timeout:    10 * time.Minute,
		Resources:  map[string]string{"cpu": "1", "memory": "2Gi"},
	})
	if err != nil {
		return fmt.Errorf("create a sandbox from %s: %w", image, err)
	}
	fmt.Printf("sandbox %s ready in %v\n", sb.ID(), time.Since(start).Round(time.Millisecond))
	defer func() {
		if err := sb.Kill(context.WithoutCancel(ctx)); err != nil {
			log.Printf("kill: %v", err)
		} else {
			fmt.Println("sandbox killed")
		}
	}()

	// The page and the script go in through the files API.
	if err := sb.WriteFile(ctx, siteDir+"/index.html", pageHTML, sandbox.WriteOptions{Mode: 644}); err != nil {
		return fmt.Errorf("write the page: %w", err)
	}
	if err := sb.WriteFile(ctx, scriptPath, scrapeJS, sandbox.WriteOptions{Mode: 644}); err != nil {
		return fmt.Errorf("write the script: %w", err)
	}

	// A web server inside the sandbox, in the background: it runs until
	// the sandbox is killed.
	srv, err := sb.Run(ctx, fmt.Sprintf("python3 -m http.server %d --bind 127.0.0.1 --directory %s", port, siteDir),
		sandbox.RunOptions{Background: true})
	if err != nil {
		return fmt.Errorf("start the web server: %w", err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	if err := waitServing(ctx, sb, url); err != nil {
		logs, _, _ := sb.CommandLogs(ctx, srv.ID, 0)
		return fmt.Errorf("%w; web server output:\n%s", err, logs)
	}
	fmt.Printf("web server (command %s) serving %s inside the sandbox\n", srv.ID, url)

	// The Playwright script, through the commands API. It finds
	// playwright-core through the image's NODE_PATH.
	ex, err := sb.Run(ctx, fmt.Sprintf("node %s %s %s", scriptPath, url, shotPath),
		sandbox.RunOptions{Cwd: "/workspace", Timeout: 2 * time.Minute})
	if err != nil {
		return fmt.Errorf("run the script: %w", err)
	}
	if ex.Error != nil {
		return fmt.Errorf("node %s exited %d:\n%s", scriptPath, ex.ExitCode, lines(ex.Stderr))
	}
	var res scraped
	if err := json.Unmarshal([]byte(lastLine(ex.Stdout)), &res); err != nil {
		return fmt.Errorf("the script printed no result (%w):\n%s", err, ex.Text())
	}
	fmt.Printf("scraped with playwright-core %s and Chromium %s in %v\n", res.Playwright, res.Chromium, ex.Elapsed.Round(time.Millisecond))
	fmt.Printf("  title:   %s\n", res.Title)
	fmt.Printf("  h1:      %s\n", res.Heading)
	fmt.Printf("  tagline: %s\n", res.Tagline)
	fmt.Printf("  items:   %s\n", strings.Join(res.Items, ", "))

	// The screenshot comes back through the files API.
	if err := download(ctx, sb, shotPath, out); err != nil {
		return err
	}
	f, err := os.Open(out)
	if err != nil {
		return err
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		return fmt.Errorf("%s is not a PNG: %w", out, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	fmt.Printf("screenshot %s: %dx%d PNG, %d bytes\n", out, cfg.Width, cfg.Height, fi.Size())
	return nil
}

// waitServing polls url from inside the sandbox until the server answers,
// for at most 10 s.
func waitServing(ctx context.Context, sb *sandbox.Sandbox, url string) error {
	ex, err := sb.Run(ctx, fmt.Sprintf(
		`for i in $(seq 100); do curl -fsS -o /dev/null %s 2>/dev/null && exit 0; sleep 0.1; done; echo "nothing answers at %s after 10 s" >&2; exit 1`,
		url, url), sandbox.RunOptions{Timeout: 30 * time.Second})
	if err != nil {
		return fmt.Errorf("wait for the web server: %w", err)
	}
	if ex.Error != nil {
		return errors.New(strings.TrimSpace(lines(ex.Stderr)))
	}
	return nil
}

// download copies the sandbox's file src to the local file dst.
func download(ctx context.Context, sb *sandbox.Sandbox, src, dst string) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := sb.Download(ctx, src, f); err != nil {
		f.Close()
		return fmt.Errorf("download the screenshot: %w", err)
	}
	return f.Close()
}

func lines(ls []sandbox.OutputLine) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

func lastLine(ls []sandbox.OutputLine) string {
	for i := len(ls) - 1; i >= 0; i-- {
		if t := strings.TrimSpace(ls[i].Text); t != "" {
			return t
		}
	}
	return ""
}
