// Command desktop starts the XFCE desktop of an opensandbox/desktop sandbox
// and shows it in a browser through noVNC: it forwards a local port to the
// sandbox's websockify (6080), which serves noVNC and relays VNC (5900).
//
//	OPEN_SANDBOX_DOMAIN=localhost:8080 OPEN_SANDBOX_API_KEY=... go run ./examples/desktop
//
// It prints the noVNC address to open in your browser and keeps the
// sandbox until Ctrl+C. With DESKTOP_SCREENSHOT=desktop.png it instead opens
// noVNC in a headless Chromium on this machine, waits until the desktop is
// drawn, saves a screenshot and exits. VNC_PASSWORD sets the VNC password
// (default opensandbox), EXAMPLE_IMAGE the image.
package main

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"time"

	"github.com/opensandbox-go/opensandbox/examples/internal/hostbrowser"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// drawn is true once noVNC is connected and its canvas shows more than a
// few colours (a black or empty frame has one).
const drawn = `(() => {
  if (!document.documentElement.classList.contains('noVNC_connected')) return false;
  const c = document.querySelector('#noVNC_container canvas');
  if (!c || !c.width || !c.height) return false;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const seen = new Set();
  for (let i = 0; i < d.length; i += 4 * 31) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
  return seen.size > 16;
})()`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	image := envOr("EXAMPLE_IMAGE", "opensandbox/desktop:latest")
	password := envOr("VNC_PASSWORD", "opensandbox")

	c, err := sandbox.NewClient()
	if err != nil {
		return err
	}
	sb, err := c.Create(ctx, sandbox.CreateOptions{
		Image:      image,
		Entrypoint: []string{"tail", "-f", "/dev/null"},
		Timeout:    10 * time.Minute,
		Resources:  map[string]string{"cpu": "1", "memory": "2Gi"},
		Metadata:   map[string]string{"example": "desktop"},
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

	// Xvfb, the XFCE session, x11vnc on 5900 and websockify with noVNC on
	// 6080, started as upstream's example starts them: a command.
	if _, err := sb.Run(ctx, "/opt/opensandbox/desktop.sh", sandbox.RunOptions{
		Background: true,
		Env:        map[string]string{"VNC_PASSWORD": password},
	}); err != nil {
		return fmt.Errorf("start the desktop: %w", err)
	}

	// A browser cannot send the endpoint's access token, so a local
	// forwarder adds it; the browser talks to 127.0.0.1 only.
	fw, err := sb.Forward(ctx, 6080, sandbox.ForwardOptions{})
	if err != nil {
		return fmt.Errorf("forward 6080: %w", err)
	}
	defer fw.Close()
	q := url.Values{"autoconnect": {"true"}, "resize": {"scale"}, "password": {password}}
	novnc := fw.URL() + "/vnc.html?" + q.Encode()

	if err := hostbrowser.WaitHTTP(ctx, fw.URL()+"/vnc.html", 2*time.Minute); err != nil {
		return err
	}
	shot := os.Getenv("DESKTOP_SCREENSHOT")
	if shot == "" {
		fmt.Printf("noVNC: %s\n(Ctrl+C to stop and kill the sandbox)\n", novnc)
		<-ctx.Done()
		return nil
	}
	png, err := hostbrowser.Screenshot(ctx, novnc, hostbrowser.Options{Ready: drawn, Timeout: 2 * time.Minute})
	if err != nil {
		return err
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		return err
	}
	fmt.Printf("noVNC connected and showing the desktop; screenshot: %s (%d bytes)\n", shot, len(png))
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
