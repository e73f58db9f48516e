package osbcli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// forwardInfo is what `sandbox forward` prints once it listens.
type forwardInfo struct {
	URL       string `json:"url"`
	SandboxID string `json:"sandboxId"`
	Port      int    `json:"port"`
	Target    string `json:"target"`
}

func (a *app) sandboxForwardCommand() *cobra.Command {
	var (
		port        int
		listen      string
		allowRemote bool
		origins     []string
	)
	cmd := &cobra.Command{
		Use:   "forward <sandbox-id>",
		Short: "Serve a port of a sandbox on a local address a browser can open",
		Long: `forward listens on a local address (loopback by default) and forwards every
request to a port inside the sandbox, WebSockets and streams included,
adding the headers the sandbox's endpoint needs (execd's access token, or
the API key with --use-server-proxy). A browser can then open noVNC, VS Code
or any web service of the sandbox at the printed URL.

It prints one line once it listens and serves until interrupted (Ctrl-C,
SIGTERM). Anyone who can reach the listener acts with your credentials on
that sandbox port: it refuses addresses other than loopback unless
--allow-remote is given.`,
		Example: `  osb sandbox forward 3f2c9a1e-... -p 6080             # noVNC: open <url>/vnc.html
  osb sandbox forward 3f2c9a1e-... -p 8443 --listen 127.0.0.1:8443
  osb sandbox forward 3f2c9a1e-... -p 8000 -o json     # {"url": ..., "port": 8000, ...}`,
		Args: exactArgs(1, "<sandbox-id>"),
	}
	cmd.Flags().IntVarP(&port, "port", "p", 0, "port inside the sandbox (required)")
	cmd.Flags().StringVar(&listen, "listen", sandbox.DefaultForwardListen, "local host:port to listen on (port 0: a free one)")
	cmd.Flags().BoolVar(&allowRemote, "allow-remote", false, "allow a --listen address other than loopback (anyone reaching it reaches the sandbox)")
	cmd.Flags().StringSliceVar(&origins, "trusted-origin", nil, "browser origin (scheme://host[:port]) whose pages may call the forwarded port cross-origin; repeatable")
	_ = cmd.MarkFlagRequired("port")
	return a.streams(cmd, formatTable, func(cmd *cobra.Command, args []string, format string) error {
		if port < 1 || port > 65535 {
			return usagef("--port %d: want 1-65535", port)
		}
		c, err := a.sdk()
		if err != nil {
			return err
		}
		level := slog.LevelWarn
		if a.verbose {
			level = slog.LevelDebug
		}
		ctx := cmd.Context()
		f, err := c.Forward(ctx, args[0], port, sandbox.ForwardOptions{
			Listen:         listen,
			AllowRemote:    allowRemote,
			TrustedOrigins: origins,
			Logger:         slog.New(slog.NewTextHandler(a.io.err, &slog.HandlerOptions{Level: level})),
		})
		if errors.Is(err, sandbox.ErrNotLoopback) {
			return usageError{withHint(err, "listen on 127.0.0.1, or pass --allow-remote if everyone who can reach that address may use the sandbox")}
		}
		if err != nil {
			return notFoundHint(err, args[0])
		}
		info := forwardInfo{URL: f.URL(), SandboxID: f.SandboxID(), Port: f.Port(), Target: f.Target()}
		v := view{data: info, text: func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "forwarding %s -> sandbox %s port %d\n", info.URL, info.SandboxID, info.Port)
			return err
		}}
		if format == formatJSON {
			format = formatRaw // one line, ready as soon as it is printed
		}
		if err := render(a.io.out, format, v); err != nil {
			return errors.Join(err, f.Close())
		}
		select {
		case <-ctx.Done(): // interrupted: the normal end
		case <-f.Done(): // the listener failed; Close says why
		}
		return f.Close()
	})
}
