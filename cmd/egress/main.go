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
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/opensandbox-go/opensandbox/internal/egress/egressenv"
	"github.com/opensandbox-go/opensandbox/internal/egress/sidecar"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help") {
		fmt.Println("usage: egress   (configured through OPENSANDBOX_EGRESS_* environment variables; see docs/egress.md)")
		return
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
