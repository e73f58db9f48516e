// Command egress is the sandbox's egress sidecar: it owns the sandbox's
// network namespace, enforces the network policy with a filtering DNS proxy
// and nftables, serves the policy and credential-vault API on port 18080
// and, with the credential proxy on, injects vault credentials into the
// sandbox's outbound HTTPS requests. It is configured through environment
// variables; see docs/egress.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/egressenv"
	"github.com/opensandbox-go/opensandbox/internal/egress/sidecar"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help") {
		fmt.Println("usage: egress   (configured through OPENSANDBOX_EGRESS_* environment variables; see docs/egress.md)")
		fmt.Println("       egress healthcheck   (exit 0 when the sidecar of this network namespace answers /healthz on loopback)")
		return
	}
	if len(os.Args) == 2 && os.Args[1] == "healthcheck" {
		os.Exit(healthcheck())
	}
	if len(os.Args) > 1 {
		fmt.Fprintf(os.Stderr, "egress: unexpected arguments %q; configuration comes from the environment\n", os.Args[1:])
		os.Exit(2)
	}
	level := slog.LevelInfo
	if strings.EqualFold(os.Getenv(egressenv.VarLogLevel), "debug") {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg, err := sidecar.FromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "egress: bad configuration:", err)
		os.Exit(2)
	}
	cfg.Logger = log.With("sandbox", cfg.SandboxID)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := sidecar.Run(ctx, cfg); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("egress sidecar stopped", "err", err)
		os.Exit(1)
	}
}

// healthcheck asks the sidecar of this network namespace for /healthz over
// loopback, which its API guard always lets in (a kubelet's HTTP probe
// comes from the node, which the guard may not know): the exec probe of a
// pod's sidecar.
func healthcheck() int {
	listen := os.Getenv(egressenv.VarListen)
	if listen == "" {
		listen = sidecar.DefaultListen
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "egress healthcheck: %s=%q: %v\n", egressenv.VarListen, listen, err)
		return 2
	}
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Get("http://" + net.JoinHostPort("127.0.0.1", port) + "/healthz")
	if err != nil {
		fmt.Fprintln(os.Stderr, "egress healthcheck:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(os.Stderr, "egress healthcheck: /healthz answered %s %s\n", resp.Status, strings.TrimSpace(string(body)))
		return 1
	}
	return 0
}
